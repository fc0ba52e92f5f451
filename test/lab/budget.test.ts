// Token budgets from data (src/rollout/budget.ts, used by the lab and by grpo-config's defaultLimits): the
// Rehearse budget is the p99 token length of the world's real observations as the Rehearse role must write
// them (tags included), measured under the tokenizer in use.
import { describe, expect, it } from 'vitest';
import { formatObservation } from '../../src/env/toolcall';
import { loadWorldDomain } from '../../src/env/retail/node';
import { DEFAULT_LIMITS, defaultLimits } from '../../src/rl/grpo-config';
import { MIN_ACT_TOKENS, quantile, tokenBudgets } from '../../src/rollout/budget';
import { DirSource } from '../../src/model/source-node';
import { Tokenizer } from '../../src/model/tokenizer';

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
    // The Act budget is the p99 of the expert's Act turns, never below MIN_ACT_TOKENS (what every CLI run uses):
    // character-level, the mini world's p99 is above it; the bundled tokenizer's (52) is below.
    expect(b.act).toBe(Math.max(MIN_ACT_TOKENS, b.acts.atQuantile));
    expect(b.acts.atQuantile).toBeGreaterThan(MIN_ACT_TOKENS);
  });

  it('with the bundled tokenizer the Act budget is MIN_ACT_TOKENS, not the smaller p99: the lab and the CLIs cut the same turns', async () => {
    const tok = await Tokenizer.load(new DirSource('models/default'));
    const b = tokenBudgets(loadWorldDomain('mini'), tok, { tasks: 100 });
    expect(b.acts.atQuantile).toBeLessThan(MIN_ACT_TOKENS);
    expect(b.act).toBe(MIN_ACT_TOKENS);
    expect(DEFAULT_LIMITS.maxActTokens).toBe(MIN_ACT_TOKENS);
  });

  it('conversations: the Act budget is measured on the expert\'s turns in conversations with the scripted user', async () => {
    const d = loadWorldDomain('mini');
    const tok = await Tokenizer.load(new DirSource('models/default'));
    const one = tokenBudgets(d, tok, { tasks: 100 });
    const conv = tokenBudgets(d, tok, { tasks: 100, conversations: true });
    // Greetings, questions and proposals are turns too, and a proposal that lists the items runs longer.
    expect(conv.acts.count).toBeGreaterThan(one.acts.count);
    expect(conv.acts.max).toBeGreaterThan(one.acts.max);
    expect(conv.act).toBe(Math.max(MIN_ACT_TOKENS, conv.acts.atQuantile));
    expect(() => tokenBudgets({ ...d, expertConversation: undefined }, tok, { conversations: true })).toThrow(/no expert conversations/);
  });

  it('defaultLimits keeps DEFAULT_LIMITS and measures the Rehearse budget', () => {
    const mini = defaultLimits(loadWorldDomain('mini'), chars);
    expect(mini).toMatchObject({ maxTurns: DEFAULT_LIMITS.maxTurns, maxActTokens: DEFAULT_LIMITS.maxActTokens });
    expect(mini.maxRehearseTokens).toBe(tokenBudgets(loadWorldDomain('mini'), chars).rehearse);
  });
});
