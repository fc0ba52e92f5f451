// GRPO at a sampling temperature T ≠ 1: the rollouts' old log-probs are log softmax(logits / T), so the update must
// score the same tempered policy (src/train/trainer.ts LossSpec.temperature, scoringScale). Checked: scoring with the
// scale reproduces the sampled log-probs; the first epoch's ratio is then 1 (no token clipped), where scoring at
// T = 1 clips; and a bad temperature is refused before any step.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Backend } from '../../src/engine/backend';
import type { Task } from '../../src/env/domain';
import { createLoraAdapter } from '../../src/model/lora';
import type { Qwen3Model } from '../../src/model/qwen3';
import { logprobs } from '../../src/model/score';
import type { Tokenizer } from '../../src/model/tokenizer';
import { grpoUpdate } from '../../src/rl/grpo';
import { runRollouts } from '../../src/rollout/rollout';
import { scoringScale, Trainer } from '../../src/train/trainer';
import { calculateOnlyDomain } from '../fixtures/domains';
import { loadTinyPolicy } from '../fixtures/tiny-model';

const T = 0.25;
const tasks: Task[] = ['2+2?', '3+4?'].map((m, i) => ({ id: `t${i}`, userMessages: [m], referenceActions: [], facts: [], checklist: [] }));

let backend: Backend;
let model: Qwen3Model;
let tok: Tokenizer;
beforeAll(async () => {
  ({ backend, model, tok } = await loadTinyPolicy(8));
});
afterAll(() => backend?.dispose());

const sample = () =>
  runRollouts({ model, tokenizer: tok, adapter: null }, calculateOnlyDomain, tasks, {
    mode: 'real', k: 3, seed: 4, temperature: T, limits: { maxTurns: 1, maxActTokens: 12, maxRehearseTokens: 8 },
    // Rewards that differ inside each group, so every row carries an advantage.
    reward: (ep) => (ep.rolloutId.endsWith(':0') ? 1 : 0),
  });

const trainer = (temperature?: number) => {
  const adapter = createLoraAdapter(backend, model.config, { name: 'act', rank: 2, alpha: 4, seed: 1 });
  return new Trainer(model, { mode: 'lora', adapter, schedule: { kind: 'constant', lr: 1e-3 }, loss: { kind: 'grpo', clipEps: 0.2, dualClip: 3, klCoef: 0, ...(temperature !== undefined ? { temperature } : {}) } });
};

describe('GRPO at a sampling temperature', () => {
  it("scoring logits / T gives the sampler's log-probs; at T = 1 the same tokens score otherwise", async () => {
    const batch = await sample();
    const rows = batch.rows.filter((r) => r.responseTokens.length > 0);
    expect(rows.length).toBeGreaterThan(0);
    const seqs = rows.map((r) => ({ tokens: [...r.promptTokens, ...r.responseTokens], start: r.promptTokens.length }));
    const tempered = await logprobs(model, seqs, { scale: scoringScale(T) });
    const plain = await logprobs(model, seqs);
    let worstTempered = 0;
    let worstPlain = 0;
    rows.forEach((r, i) => r.responseTokens.forEach((_, j) => {
      if (r.responseMask[j] !== 1) return;
      worstTempered = Math.max(worstTempered, Math.abs(tempered[i][j] - r.oldLogprobs[j]));
      worstPlain = Math.max(worstPlain, Math.abs(plain[i][j] - r.oldLogprobs[j]));
    }));
    expect(worstTempered).toBeLessThan(1e-3);
    expect(worstPlain).toBeGreaterThan(0.2);
  });

  it('the first epoch clips nothing when the head scores the sampling temperature, and clips when it scores T = 1', async () => {
    const clipped = async (temperature?: number) => {
      const t = trainer(temperature);
      const report = await grpoUpdate({ act: t }, await sample(), 'real', { groups: 'standard' });
      t.free();
      return report.steps[0].report.clipFrac;
    };
    expect(await clipped(T)).toBe(0);
    expect(await clipped()).toBeGreaterThan(0.05);
  });

  it('refuses a temperature that is not a finite number >= 0; T = 0 (greedy) and 1 score plain logits', () => {
    for (const bad of [-1, Number.NaN, Infinity]) expect(() => trainer(bad)).toThrow(RangeError);
    expect([scoringScale(0), scoringScale(1), scoringScale(undefined), scoringScale(0.5)]).toEqual([1, 1, 1, 2]);
  });
});
