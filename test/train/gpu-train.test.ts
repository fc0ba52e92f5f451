// End to end on a tiny random model: the same training steps on WebGPU and on the CPU reference give
// the same losses (relative 1e-4) and parameters (1e-4 of their scale) — LoRA on a q4 base, full-parameter
// SFT, and a GRPO step with clipping and KL.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Backend } from '../../src/engine/backend';
import { Rng } from '../../src/util/rng';
import type { WebGpuBackend } from '../../src/engine/webgpu/backend';
import { createLoraAdapter } from '../../src/model/lora';
import { randomWeights } from '../../src/model/random';
import { buildQwen3 } from '../../src/model/weights';
import { packBatch, type TrainSequence } from '../../src/train/batch';
import { Trainer, type TrainerOptions } from '../../src/train/trainer';
import { cpu, expectCloseToScale, gpuBackend } from '../engine/webgpu-helpers';
import { tinyConfig } from '../fixtures/tiny-model';
import { gpuAvailable } from '../helpers/gpu';

const run = await gpuAvailable();
const cfg = tinyConfig({ vocabSize: 50, hiddenSize: 32, intermediateSize: 40, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 8 });
const rng = new Rng(21);
const seqs: TrainSequence[] = [
  { tokens: Array.from({ length: 9 }, () => rng.int(50)), mask: [0, 0, 0, 1, 1, 1, 1, 1, 1] },
  { tokens: Array.from({ length: 6 }, () => rng.int(50)), mask: [0, 0, 1, 1, 1, 1] },
];

async function runSteps(b: Backend, format: 'f32' | 'q4', opts: Omit<TrainerOptions, 'adapter'>, seqList: TrainSequence[], steps: number) {
  const { model } = await buildQwen3(b, cfg, randomWeights(cfg, 4, format), { format });
  const adapter = opts.mode === 'lora' ? createLoraAdapter(b, cfg, { name: 'a', rank: 4, alpha: 8, seed: 5 }) : undefined;
  const tr = new Trainer(model, { ...opts, adapter });
  const reports = [];
  for (let i = 0; i < steps; i++) reports.push(await tr.trainStep([packBatch(seqList, 'seq-mean-token-mean')]));
  const params = await Promise.all(tr.params.params.map((p) => b.read(p.param) as Promise<Float32Array>));
  return { reports, params };
}

const close = (got: Float32Array[], want: Float32Array[], tol: number) => expectCloseToScale(got, want, tol, 'parameter', 1e-6);

describe.skipIf(!run)('training on WebGPU matches the CPU reference', () => {
  let gpu: WebGpuBackend;
  beforeAll(async () => {
    gpu = await gpuBackend();
  });
  afterAll(() => gpu?.dispose());

  it('LoRA SFT on a q4 base, 3 steps, recomputation on', async () => {
    const opts = { mode: 'lora' as const, recompute: true, weightDecay: 0.01, schedule: { kind: 'constant' as const, lr: 1e-2 }, loss: { kind: 'ce' as const } };
    const c = await runSteps(cpu, 'q4', opts, seqs, 3);
    const g = await runSteps(gpu, 'q4', opts, seqs, 3);
    g.reports.forEach((r, i) => {
      expect(r.applied).toBe(true);
      expect(Math.abs(r.loss - c.reports[i].loss) / c.reports[i].loss).toBeLessThan(1e-4);
      expect(r.gradNorm).toBeCloseTo(c.reports[i].gradNorm, 3);
    });
    close(g.params, c.params, 1e-4);
  });

  it('full-parameter SFT (f32, tied embedding), 3 steps, head in chunks', async () => {
    const opts = { mode: 'full' as const, headChunk: 5, schedule: { kind: 'warmup-cosine' as const, lr: 1e-2, warmupSteps: 1, totalSteps: 3 }, loss: { kind: 'ce' as const } };
    const c = await runSteps(cpu, 'f32', opts, seqs, 3);
    const g = await runSteps(gpu, 'f32', opts, seqs, 3);
    g.reports.forEach((r, i) => expect(Math.abs(r.loss - c.reports[i].loss) / c.reports[i].loss).toBeLessThan(1e-4));
    close(g.params, c.params, 1e-4);
  });

  it('GRPO step with clipping and KL: same loss, clip fraction, KL and entropy', async () => {
    const r2 = new Rng(3);
    const grpoSeqs = seqs.map((s, i) => ({
      ...s,
      advantage: i ? -0.7 : 0.5,
      oldLogp: Array.from(s.tokens, () => -4 + r2.normal()),
      refLogp: Array.from(s.tokens, () => -4 + r2.normal()),
    }));
    const opts = { mode: 'lora' as const, schedule: { kind: 'constant' as const, lr: 1e-2 }, loss: { kind: 'grpo' as const, clipEps: 0.2, dualClip: 3, klCoef: 0.1 } };
    const c = await runSteps(cpu, 'q4', opts, grpoSeqs, 2);
    const g = await runSteps(gpu, 'q4', opts, grpoSeqs, 2);
    g.reports.forEach((r, i) => {
      const w = c.reports[i];
      expect(Math.abs(r.loss - w.loss)).toBeLessThan(1e-4 * Math.max(1, Math.abs(w.loss)));
      expect(r.clipFrac).toBeCloseTo(w.clipFrac, 6);
      expect(r.kl).toBeCloseTo(w.kl, 4);
      expect(r.entropy).toBeCloseTo(w.entropy, 4);
    });
    expect(c.reports[0].clipFrac).toBeGreaterThan(0);
    close(g.params, c.params, 1e-4);
  });
});
