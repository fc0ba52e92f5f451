// Role-Wise GRPO updates on rows from real rollouts of a tiny random-weight model (CPU fast path).
// The rollouts' reward is a test-chosen function (the first rollout of each prompt wins), so that groups
// have non-zero advantages; everything else (rows, old log-probs, packing, the loss head, AdamW) is real.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Backend } from '../../src/engine/backend';
import { Rng } from '../../src/util/rng';
import type { Task } from '../../src/env/domain';
import { formatCall } from '../../src/env/toolcall';
import { logprobs } from '../../src/model/score';
import { createLoraAdapter, type LoraAdapter } from '../../src/model/lora';
import type { Qwen3Model } from '../../src/model/qwen3';
import type { Tokenizer } from '../../src/model/tokenizer';
import { packBatch } from '../../src/train/batch';
import { Trainer } from '../../src/train/trainer';
import { MODES } from '../../src/method/modes';
import { GrpoError, grpoUpdate, microBatches, rowToSequence } from '../../src/rl/grpo';
import { makeRow, type TrainingRow } from '../../src/rollout/rows';
import { runRollouts, type RolloutBatch, type RolloutConfig, type RolloutDomain } from '../../src/rollout/rollout';
import { calculateOnlyDomain } from '../fixtures/domains';
import { loadTinyPolicy } from '../fixtures/tiny-model';

const domain: RolloutDomain = calculateOnlyDomain;
const calc = { name: 'calculate', arguments: { expression: '2+2' } };
const tasks: Task[] = [
  { id: 'a', userMessages: ['Hi.'], referenceActions: [calc], facts: [], checklist: [] },
  { id: 'b', userMessages: ['2+2?'], referenceActions: [calc], facts: [], checklist: [] },
];
// Task a: the policy acts; task b: a scripted call that the policy rehearses.
const script = (t: Task, turn: number) => (t.id === 'b' && turn === 0 ? formatCall(calc) : undefined);
const firstWins = (ep: { rolloutId: string }) => (ep.rolloutId.endsWith(':0') ? 1 : 0);

let backend: Backend;
let model: Qwen3Model;
let tok: Tokenizer;

function adapter(seed: number, randomB: boolean): LoraAdapter {
  const a = createLoraAdapter(backend, model.config, { name: `a${seed}`, rank: 2, alpha: 4, seed });
  if (randomB) {
    const rng = new Rng(seed + 1);
    for (const [n, t] of a.parameters())
      if (n.endsWith('lora_B.weight')) backend.write(t, Float32Array.from({ length: t.shape[0] * t.shape[1] }, () => 0.3 * rng.normal()));
  }
  return a;
}
const read = async (a: LoraAdapter) => Promise.all([...a.parameters()].map(async ([, t]) => Array.from((await backend.read(t)) as Float32Array)));
const trainer = (a: LoraAdapter, klCoef = 0) =>
  new Trainer(model, { mode: 'lora', adapter: a, schedule: { kind: 'constant', lr: 1e-2 }, loss: { kind: 'grpo', clipEps: 0.2, dualClip: 3, klCoef } });
const meanLogp = async (rows: TrainingRow[], a: LoraAdapter | null) =>
  (await logprobs(model, rows.map((r) => ({ tokens: [...r.promptTokens, ...r.responseTokens], start: r.promptTokens.length })), { adapter: a })).map(
    (lp) => lp.reduce((s, x) => s + x, 0) / lp.length,
  );

beforeAll(async () => {
  ({ backend, model, tok } = await loadTinyPolicy(9));
});
afterAll(() => backend?.dispose());

async function rollouts(mode: RolloutConfig['mode'], act: LoraAdapter, reh?: LoraAdapter): Promise<RolloutBatch> {
  const policy = { model, tokenizer: tok, adapter: act, ...(reh ? { rehearseAdapter: reh } : {}) };
  return runRollouts(policy, domain, tasks, {
    mode, k: 2, seed: 3, limits: { maxTurns: 2, maxActTokens: 10, maxRehearseTokens: 10 },
    rehearsePrompt: { maxGroundingChars: 200, maxHistoryChars: 200 }, actScript: script, reward: firstWins,
  });
}

describe('GRPO update', () => {
  it('sequences and micro-batches keep tokens, masks and old log-probs aligned', () => {
    const row = makeRow({ role: 'act', promptId: 'p', rolloutId: 'r', turn: 0, promptTokens: [1, 2, 3], generated: { tokens: [4, 5], logprobs: [-0.5, -1.5] }, appended: [6] });
    const s = rowToSequence(row, 0.25);
    expect(Array.from(s.tokens)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(Array.from(s.mask)).toEqual([0, 0, 0, 1, 1, 0]);
    expect(Array.from(s.oldLogp!)).toEqual([0, 0, 0, -0.5, -1.5, 0]);
    const mb = microBatches([s, s, s], 13, 'token-mean', false);
    expect(mb.map((b) => b.ids.length)).toEqual([12, 6]);
    // Shared (the default): three copies of one row are one trie of 6 tokens with three loss rows per target.
    const sh = microBatches([s, s, s], 13, 'token-mean');
    expect(sh.map((b) => b.ids.length)).toEqual([6]);
    expect(sh[0].targets.length).toBe(3 * 2);
    // Split or not, every token carries the weight it has in one batch of everything.
    const short = rowToSequence(makeRow({ role: 'act', promptId: 'p', rolloutId: 'q', turn: 0, promptTokens: [1], generated: { tokens: [7], logprobs: [-1] } }), -0.5);
    for (const agg of ['token-mean', 'seq-mean-token-mean', 'seq-mean-token-sum'] as const) {
      const seqs = [s, short, s, s]; // budget 8: [s, short], [s], [s] (uneven sequence counts)
      const whole = packBatch(seqs, agg).weight;
      const parts = microBatches(seqs, 8, agg, false);
      expect(parts.map((b) => b.slots)).toEqual([2, 1, 1]);
      const joined = parts.flatMap((b) => Array.from(b.weight));
      joined.forEach((w, i) => expect(w, agg).toBeCloseTo(whole[i], 7));
    }
    // packBatch puts the old log-prob of token i+1 on row i, next to its target.
    expect(Array.from(mb[0].grpo!.oldLogp.slice(0, 6))).toEqual([0, 0, -0.5, -1.5, 0, 0]);
    expect(Array.from(mb[0].targets.slice(0, 6))).toEqual([2, 3, 4, 5, 6, -1]);
    expect(MODES['per-role'].routes.map((r) => r.target)).toEqual(['act', 'rehearse']);
    expect(() => microBatches([s], 0, 'token-mean')).toThrow(GrpoError);
  });

  it('EnvACE (shared adapter): both roles in one step; exact old log-probs (no clipping); the surrogate improves', async () => {
    const a = adapter(1, true);
    const batch = await rollouts('rehearse', a);
    expect(new Set(batch.rows.map((r) => r.role))).toEqual(new Set(['act', 'rehearse']));
    const before = await meanLogp(batch.rows, a);
    const tr = trainer(a);
    const rep = await grpoUpdate({ act: tr }, batch, 'rehearse');
    expect(rep.groups).toBe('role-wise');
    expect(rep.steps).toHaveLength(1);
    const [st] = rep.steps;
    expect(st.target).toBe('shared');
    expect(st.rows).toBe(batch.rows.length);
    expect(st.report.applied).toBe(true);
    // The rows' old log-probs are the sampling policy's own, so every ratio starts at 1.
    expect(st.report.clipFrac).toBe(0);
    expect(st.report.tokens).toBe(batch.rows.reduce((n, r) => n + r.responseTokens.length, 0));
    // First-order ascent: sum_i A_i * (change of row i's mean log-prob) > 0.
    const after = await meanLogp(batch.rows, a);
    const gain = batch.rows.reduce((s, r, i) => s + r.advantage! * (after[i] - before[i]), 0);
    expect(gain).toBeGreaterThan(0);
  });

  it('epochs: later optimizer steps on the same rollouts start from the moved adapter, clipped against the sampler', async () => {
    const a = adapter(4, true);
    const batch = await rollouts('rehearse', a);
    await expect(grpoUpdate({ act: trainer(a) }, batch, 'rehearse', { epochs: 0 })).rejects.toThrow(GrpoError);
    const rep = await grpoUpdate({ act: trainer(a) }, batch, 'rehearse', { epochs: 3 });
    const [st] = rep.steps;
    expect(st.epochs).toHaveLength(3);
    expect(st.report).toBe(st.epochs[2]);
    expect(st.epochs.map((e) => e.step)).toEqual([1, 2, 3]);
    // The first epoch's ratios are all 1; after two steps the policy has moved, so the loss differs.
    expect(st.epochs[0].clipFrac).toBe(0);
    expect(st.epochs[2].loss).not.toBe(st.epochs[0].loss);
  });

  it('per-role trains two adapters on their own rows; frozen-simulator trains only Act', async () => {
    const [a, b] = [adapter(2, true), adapter(3, true)];
    const batch = await rollouts('per-role', a, b);
    const [ta, tb] = [trainer(a), trainer(b)];
    await expect(grpoUpdate({ act: ta }, batch, 'per-role')).rejects.toThrow(GrpoError);
    const rep = await grpoUpdate({ act: ta, rehearse: tb }, batch, 'per-role');
    expect(rep.steps.map((s) => [s.target, s.rows])).toEqual([
      ['act', batch.rows.filter((r) => r.role === 'act').length],
      ['rehearse', batch.rows.filter((r) => r.role === 'rehearse').length],
    ]);
    expect([ta.step, tb.step]).toEqual([1, 1]);
    expect(rep.steps.every((s) => s.report.clipFrac === 0)).toBe(true);

    const c = adapter(4, true);
    const fb = await rollouts('frozen-simulator', c);
    const tc = trainer(c);
    const fr = await grpoUpdate({ act: tc }, fb, 'frozen-simulator', { groups: 'pooled' });
    expect(fr.groups).toBe('standard');
    expect(fr.steps.map((s) => [s.target, s.rows])).toEqual([['act', fb.rows.filter((r) => r.role === 'act').length]]);
    expect(fb.rows.filter((r) => r.role === 'rehearse').every((r) => r.advantage === null)).toBe(true);
  });

  it('rows with advantage 0 are left out of the passes, and the weights move as they do with every row fed', async () => {
    const batch = await rollouts('rehearse', adapter(7, true));
    // Task a's rollouts all score alike (every row of that group has advantage 0); task b's first rollout wins.
    const zeroBatch = structuredClone(batch);
    for (const b of [batch, zeroBatch]) for (const r of b.rows) r.reward = (r.rolloutId.split(':')[1] === 'a' ? 0.5 : firstWins(r));
    for (const r of zeroBatch.rows) r.reward = 0.25; // a step where every advantage is 0
    const [fed, skipped] = [adapter(8, true), adapter(8, true)];
    const [tf, ts] = [trainer(fed), trainer(skipped)];
    const all = await grpoUpdate({ act: tf }, batch, 'rehearse', { skipZeroAdvantage: false });
    const some = await grpoUpdate({ act: ts }, batch, 'rehearse');
    const adv = some.advantages.advantage;
    expect(adv.some((v) => v === 0)).toBe(true);
    expect(adv.some((v) => v !== null && v !== 0)).toBe(true);
    // Fewer tokens through the passes, the same loss, gradient and weights (up to the sums' rounding).
    expect(some.steps[0].report.tokens).toBeLessThan(all.steps[0].report.tokens);
    expect(some.steps[0].report.loss).toBeCloseTo(all.steps[0].report.loss, 6);
    expect(some.steps[0].report.gradNorm).toBeCloseTo(all.steps[0].report.gradNorm, 6);
    const close = async () => {
      const [x, y] = [(await read(fed)).flat(), (await read(skipped)).flat()];
      const scale = Math.max(...x.map(Math.abs));
      x.forEach((v, i) => expect(Math.abs(v - y[i])).toBeLessThan(1e-5 * scale));
    };
    await close();
    // An all-zero step still takes its optimizer step: AdamW's momentum moves the weights in both.
    const before = (await read(skipped)).flat();
    const z1 = await grpoUpdate({ act: tf }, zeroBatch, 'rehearse', { skipZeroAdvantage: false });
    const z2 = await grpoUpdate({ act: ts }, zeroBatch, 'rehearse');
    expect([z1.steps[0].report.applied, z2.steps[0].report.applied]).toEqual([true, true]);
    expect(z2.steps[0].report.gradNorm).toBe(0);
    expect((await read(skipped)).flat()).not.toEqual(before);
    await close();
  });

  it('zero advantages change nothing; the KL to the base model is zero for an untouched adapter', async () => {
    const a = adapter(5, false); // B = 0: the adapter is the base model
    const batch = await rollouts('rehearse', a);
    for (const r of batch.rows) r.reward = 0.5; // one reward everywhere: every advantage is 0
    const before = await read(a);
    const rep = await grpoUpdate({ act: trainer(a) }, batch, 'rehearse');
    expect(rep.advantages.advantage.every((v) => v === 0)).toBe(true);
    expect(rep.steps[0].report.applied).toBe(true);
    expect(await read(a)).toEqual(before);
    // With the KL term: the reference (adapter off) equals this policy, so the KL is 0.
    const withKl = await grpoUpdate({ act: trainer(a, 1e-4) }, batch, 'rehearse', { withReference: true });
    expect(withKl.steps[0].report.kl).toBeCloseTo(0, 6);
    // A trained-looking adapter is away from the base: positive KL (measured on the same rows).
    const b = adapter(6, true);
    const rk = await grpoUpdate({ act: trainer(b, 1e-4) }, batch, 'rehearse', { withReference: true });
    expect(rk.steps[0].report.kl).toBeGreaterThan(1e-4);
  });
});
