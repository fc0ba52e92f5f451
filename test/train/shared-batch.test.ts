// Prefix-shared training batches (src/train/batch.ts packShared): GRPO rows of one task share the system
// prompt, the request and the turns before they branch, so the trie of their tokens is fed once. The loss
// and every gradient must equal packBatch's on the same sequences (float summation order aside), on every
// backend, with LoRA and full-parameter training, recomputation, a head in chunks and micro-batches.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Backend } from '../../src/engine/backend';
import { createCpuFastBackend, type CpuFastBackend } from '../../src/engine/cpu/fast/backend';
import { CpuRefBackend } from '../../src/engine/cpu/ref';
import { EngineError } from '../../src/engine/errors';
import type { WebGpuBackend } from '../../src/engine/webgpu/backend';
import { createLoraAdapter } from '../../src/model/lora';
import { randomWeights } from '../../src/model/random';
import { buildQwen3 } from '../../src/model/weights';
import { microBatches } from '../../src/rl/grpo';
import { packBatch, packShared, sortForSharing, type TrainBatch, type TrainSequence } from '../../src/train/batch';
import { headChunks, Trainer, type TrainerOptions } from '../../src/train/trainer';
import { Rng } from '../../src/util/rng';
import { expectCloseToScale, gpuBackend } from '../engine/webgpu-helpers';
import { tinyConfig } from '../fixtures/tiny-model';
import { gpuAvailable } from '../helpers/gpu';

const cfg = tinyConfig({ vocabSize: 40, hiddenSize: 32, intermediateSize: 40, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 8 });

/**
 * Rows as a GRPO step makes them: two tasks with a common system prompt; per task K rollouts whose turns
 * extend one another (a turn's prompt ends its previous turn's context), some rollouts writing the same
 * first response tokens (shared loss-carrying tokens with different advantages), and one row repeated whole.
 */
function stepRows(seed: number): TrainSequence[] {
  const r = new Rng(seed);
  const toks = (n: number) => Array.from({ length: n }, () => r.int(40));
  const system = toks(9);
  const out: TrainSequence[] = [];
  for (let task = 0; task < 2; task++) {
    const request = toks(4);
    const common = toks(3); // the first response tokens every rollout of this task writes
    for (let k = 0; k < 3; k++) {
      const advantage = r.normal();
      let context = [...system, ...request];
      for (let turn = 0; turn < 2; turn++) {
        const response = turn === 0 && k < 2 ? [...common, ...toks(2)] : toks(3 + k);
        const tokens = [...context, ...response];
        const mask = tokens.map((_, i) => (i >= context.length ? 1 : 0));
        out.push({ tokens, mask, advantage, oldLogp: tokens.map(() => -2 - r.next()) });
        context = [...tokens, ...toks(3)]; // the observation after the call
      }
    }
  }
  out.push({ ...out[1], advantage: -0.3 });
  return out;
}

const sum = (a: ArrayLike<number>) => Array.from(a).reduce((s, x) => s + x, 0);

describe('packShared', () => {
  const rows = stepRows(1);

  it('feeds each trie node once and reads one loss row per (sequence, loss token), weighted as packBatch', () => {
    const plain = packBatch(rows, 'seq-mean-token-mean');
    const shared = packShared(rows, 'seq-mean-token-mean');
    const total = rows.reduce((n, s) => n + s.tokens.length, 0);
    // Unique (prefix) nodes: sort and count what each sequence does not share with the one before.
    const sorted = sortForSharing(rows);
    let nodes = 0;
    sorted.forEach((s, i) => {
      let c = 0;
      if (i > 0) while (c < s.tokens.length && c < sorted[i - 1].tokens.length && s.tokens[c] === sorted[i - 1].tokens[c]) c++;
      nodes += s.tokens.length - c;
    });
    expect(shared.ids.length).toBe(nodes);
    expect(shared.ids.length).toBeLessThan(total / 2);
    // Every token of every sequence is written to its own slot once: fed there or copied there.
    expect(shared.ids.length + shared.share!.copies.src.length).toBe(total);
    // Loss rows: the non-zero weights of packBatch, same values in the same (sequence, position) order.
    const nz = Array.from(plain.weight).filter((w) => w !== 0);
    expect(Array.from(shared.weight)).toEqual(nz);
    expect(sum(shared.weight)).toBeCloseTo(1, 6);
    const plainTargets = Array.from(plain.targets).filter((_, t) => plain.weight[t] !== 0);
    expect(Array.from(shared.targets)).toEqual(plainTargets);
    // Each loss row reads the node of its context's last token: same id, same position as in packBatch.
    const plainAt = Array.from(plain.weight.keys()).filter((t) => plain.weight[t] !== 0);
    shared.share!.at.forEach((node, r) => {
      expect(shared.ids[node]).toBe(plain.ids[plainAt[r]]);
      expect(shared.pos[node]).toBe(plain.pos[plainAt[r]]);
    });
    // A copy goes to another slot at its token's position; a round never copies a token twice.
    const cp = shared.share!.copies;
    for (let i = 0; i < cp.src.length; i++) {
      expect(cp.pos[i]).toBe(shared.pos[cp.src[i]]);
      expect(cp.slot[i]).not.toBe(shared.slot[cp.src[i]]);
    }
    for (let q = 0; q + 1 < cp.roundStart.length; q++) {
      const src = Array.from(cp.src.subarray(cp.roundStart[q], cp.roundStart[q + 1]));
      expect(new Set(src).size).toBe(src.length);
    }
  });

  it('splits the loss rows of a shared token over head chunks with distinct tokens', () => {
    const at = Int32Array.from([0, 0, 1, 0, 2, 1]);
    const chunks = headChunks([0, 1, 2, 3, 4, 5], at, 2);
    expect(chunks.flat().sort()).toEqual([0, 1, 2, 3, 4, 5]);
    for (const c of chunks) {
      expect(c.length).toBeLessThanOrEqual(2);
      expect(new Set(c.map((r) => at[r])).size).toBe(c.length);
    }
    // Without `at` (packBatch) the chunks are the rows in order, as before.
    expect(headChunks([3, 4, 5, 6, 7], undefined, 2)).toEqual([[3, 4], [5, 6], [7]]);
  });

  it('micro-batches count the tokens they feed: fewer batches than whole rows under the same budget', () => {
    const plain = microBatches(rows, 60, 'seq-mean-token-mean', false);
    const shared = microBatches(rows, 60, 'seq-mean-token-mean', true);
    expect(shared.length).toBeLessThan(plain.length);
    for (const b of shared) expect(b.ids.length).toBeLessThanOrEqual(Math.max(60, ...rows.map((s) => s.tokens.length)));
    expect(sum(shared.flatMap((b) => Array.from(b.weight)))).toBeCloseTo(1, 5);
  });
});

async function gradients(b: Backend, format: 'f32' | 'q4', opts: Omit<TrainerOptions, 'adapter'>, micro: TrainBatch[]) {
  const { model } = await buildQwen3(b, cfg, randomWeights(cfg, 4, format), { format });
  const adapter = opts.mode === 'lora' ? createLoraAdapter(b, cfg, { name: 'a', rank: 4, alpha: 8, seed: 5 }) : undefined;
  if (adapter) {
    // A trained-looking adapter (B != 0), so that the LoRA path changes the keys/values being copied.
    for (const [, p] of adapter.parameters()) b.write(p, Float32Array.from((await b.read(p)) as Float32Array, (x, i) => x + 0.05 * Math.sin(i)));
  }
  const tr = new Trainer(model, { ...opts, adapter });
  const report = await tr.trainStep(micro);
  const grads = await Promise.all(tr.params.params.map((p) => b.read(p.grad) as Promise<Float32Array>));
  tr.free();
  return { report, grads };
}

const expectSameGrads = (got: Float32Array[], want: Float32Array[], tol: number) => expectCloseToScale(got, want, tol, 'gradient', 1e-8);

const GRPO = { kind: 'grpo' as const, clipEps: 0.2, dualClip: 3, klCoef: 0 };
const cases: { name: string; format: 'f32' | 'q4'; opts: Omit<TrainerOptions, 'adapter'> }[] = [
  { name: 'LoRA GRPO on a q4 base', format: 'q4', opts: { mode: 'lora', schedule: { kind: 'constant', lr: 1e-3 }, loss: GRPO } },
  { name: 'LoRA GRPO, recomputation on, head in chunks of 3', format: 'f32', opts: { mode: 'lora', recompute: true, headChunk: 3, schedule: { kind: 'constant', lr: 1e-3 }, loss: GRPO } },
  { name: 'full-parameter cross-entropy (tied embedding)', format: 'f32', opts: { mode: 'full', schedule: { kind: 'constant', lr: 1e-3 }, loss: { kind: 'ce' } } },
];

function sameAsPlain(backend: () => Backend) {
  const rows = stepRows(7);
  for (const c of cases) {
    it(`${c.name}: packShared's loss and gradients equal packBatch's`, async () => {
      const want = await gradients(backend(), c.format, c.opts, [packBatch(rows, 'seq-mean-token-mean')]);
      const got = await gradients(backend(), c.format, c.opts, [packShared(rows, 'seq-mean-token-mean')]);
      expect(got.report.applied).toBe(true);
      expect(got.report.tokens).toBe(want.report.tokens);
      expect(Math.abs(got.report.loss - want.report.loss)).toBeLessThan(1e-5 * Math.max(1, Math.abs(want.report.loss)));
      expect(got.report.gradNorm).toBeGreaterThan(0);
      expectSameGrads(got.grads, want.grads, 2e-5);
    });
  }
  it('micro-batches of shared tries under a small budget equal one plain batch of everything', async () => {
    const opts = cases[0].opts;
    const want = await gradients(backend(), 'f32', opts, [packBatch(rows, 'seq-mean-token-mean')]);
    const micro = microBatches(rows, 40, 'seq-mean-token-mean', true);
    expect(micro.length).toBeGreaterThan(1);
    const got = await gradients(backend(), 'f32', opts, micro);
    expect(Math.abs(got.report.loss - want.report.loss)).toBeLessThan(1e-5 * Math.max(1, Math.abs(want.report.loss)));
    expectSameGrads(got.grads, want.grads, 2e-5);
  });
}

describe('prefix-shared training on the CPU reference', () => {
  const be = new CpuRefBackend();
  sameAsPlain(() => be);

  it('refuses a malformed shared batch with a typed error, before any work', async () => {
    const { model } = await buildQwen3(be, cfg, randomWeights(cfg, 4, 'f32'), { format: 'f32' });
    const tr = new Trainer(model, { mode: 'full', schedule: { kind: 'constant', lr: 1e-3 }, loss: { kind: 'ce' } });
    const good = packShared(stepRows(2), 'token-mean');
    const bad = (edit: (b: TrainBatch) => void) => {
      const b = structuredClone(good);
      edit(b);
      return b;
    };
    for (const b of [
      bad((x) => (x.share!.at[0] = x.ids.length)), // a loss row reading no token
      bad((x) => (x.share!.copies.pos[0] += 1)), // a copy to another position than its token's
      bad((x) => (x.share!.copies.slot[0] = x.slots)), // a copy to a slot outside the cache
      bad((x) => {
        // a token copied twice in one round (to its own position, so only the round is wrong)
        const c = x.share!.copies;
        c.src[1] = c.src[0];
        c.pos[1] = c.pos[0];
      }),
      bad((x) => (x.targets = x.targets.slice(1))), // fewer targets than loss rows
    ]) {
      await expect(tr.trainStep([b])).rejects.toThrow(EngineError);
    }
    expect(tr.step).toBe(0);
    expect((await tr.trainStep([good])).applied).toBe(true);
  });
});

describe('prefix-shared training on the CPU fast path', () => {
  let fast: CpuFastBackend;
  beforeAll(async () => {
    fast = await createCpuFastBackend({ threads: 2, parallelMinWork: 0 });
  });
  afterAll(() => fast?.dispose());
  sameAsPlain(() => fast);
});

const gpuRun = await gpuAvailable();
describe.skipIf(!gpuRun)('prefix-shared training on WebGPU', () => {
  let gpu: WebGpuBackend;
  beforeAll(async () => {
    gpu = await gpuBackend();
  });
  afterAll(() => gpu?.dispose());
  sameAsPlain(() => gpu);
});
