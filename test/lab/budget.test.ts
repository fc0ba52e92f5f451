// Token budgets from data (src/rollout/budget.ts, used by the lab and by grpo-config's defaultLimits): the
// Rehearse budget is the p99 token length of the world's real observations as the Rehearse role must write
// them (tags included), measured under the tokenizer in use.
import { describe, expect, it } from 'vitest';
import { formatObservation } from '../../src/env/toolcall';
import { loadWorldDomain } from '../../src/env/retail/node';
import { DEFAULT_LIMITS, defaultLimits } from '../../src/rl/grpo-config';
import { quantile, tokenBudgets } from '../../src/rollout/budget';

/** One token per character: lengths are easy to check by hand. */
const chars = { encode: (t: string) => [...t].map((c) => c.codePointAt(0)!) };

describe('token budgets measured on the domain', () => {
  it('nearest-rank quantiles', () => {
    const xs = Array.from({ length: 100 }, (_, i) => i + 1);
    expect(quantile(xs, 0.99)).toBe(99);
    expect(quantile(xs, 0.5)).toBe(50);
    expect(quantile([7], 0.99)).toBe(7);
    expect(quantile([3, 1, 2], 1)).toBe(3);
    expect(() => quantile([], 0.5)).toThrow();
  });

  it('the Rehearse budget is the p99 length of the formatted real observations of the expert trajectories', () => {
    const d = loadWorldDomain('mini');
    const b = tokenBudgets(d, chars, { tasks: 30 });
    const lens = d.tasks.generate({ split: 'train', count: 30, seed: 0 }).flatMap((t) =>
      d.expert(t, d.createEnv()).steps.flatMap((s) => (s.kind === 'call' ? [formatObservation(s.observation).length] : [])),
    );
    expect(b.observations.count).toBe(lens.length);
    expect(b.rehearse).toBe(quantile(lens, 0.99));
    expect(b.observations.max).toBe(Math.max(...lens));
    // The tags are part of what the role writes: every budget exceeds the bare JSON of the shortest observation.
    expect(b.observations.p50).toBeGreaterThan('<execution_result>\n\n</execution_result>'.length);
    expect(b.act).toBeGreaterThan(0);
  });

  it('defaultLimits keeps DEFAULT_LIMITS and measures the Rehearse budget', () => {
    const mini = defaultLimits(loadWorldDomain('mini'), chars);
    expect(mini).toMatchObject({ maxTurns: DEFAULT_LIMITS.maxTurns, maxActTokens: DEFAULT_LIMITS.maxActTokens });
    expect(mini.maxRehearseTokens).toBe(tokenBudgets(loadWorldDomain('mini'), chars).rehearse);
  });
});
