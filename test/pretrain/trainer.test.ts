// Pretraining runs on the one training engine (src/train, whose gradients are checked against finite
// differences in test/train); here: its loss weighting, that the loss falls on a tiny run, and
// bit-identical weights from two runs with the same seed.
import { describe, expect, it } from 'vitest';
import type { Backend } from '../../src/engine/backend';
import { createBackend } from '../../src/engine/index';
import type { Qwen3Config } from '../../src/model/config';
import { buildQwen3, toSafetensors } from '../../src/model/weights';
import type { Encoded } from '../../research/pretrain/data';
import { DEFAULT_HYPER, initWeights, pretrainBatch, pretrainer } from '../../research/pretrain/trainer';
import { Rng } from '../../src/util/rng';
import { packBatch } from '../../src/train/batch';
import { hostWeights } from '../../src/train/params';

const tiny: Qwen3Config = { hiddenSize: 16, intermediateSize: 32, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 8, rmsNormEps: 1e-6, ropeTheta: 10000, vocabSize: 40, tieWordEmbeddings: true, maxPositionEmbeddings: 64 };
const seqs: Encoded[] = [0, 1, 2].map((s) => ({ role: 'act', ids: Int32Array.from({ length: 12 + 3 * s }, (_, i) => (i * 7 + s * 3) % 40), promptLen: 6 + s }));
const hyper = { ...DEFAULT_HYPER, schedule: { kind: 'constant' as const, lr: 1e-2 } };

describe('pretraining loss weights', () => {
  it('responses weigh 1, every third prompt target weighs promptLossWeight, normalised to sum 1', () => {
    const b = pretrainBatch(seqs, 0.25);
    // Hand count: sequence s has n = 12+3s tokens, promptLen p = 6+s; response targets n-p; prompt targets
    // t in [1, p) with (t-1) % 3 == 0.
    let sum = 0;
    for (const [s, e] of seqs.entries()) {
      const n = e.ids.length;
      const p = 6 + s;
      let prompt = 0;
      for (let t = 1; t < p; t++) if ((t - 1) % 3 === 0) prompt++;
      sum += n - p + 0.25 * prompt;
    }
    let o = 0;
    for (const [s, e] of seqs.entries()) {
      for (let r = 0; r < e.ids.length; r++) {
        const t = r + 1; // row r predicts token t
        const want = t >= e.ids.length ? 0 : t >= 6 + s ? 1 / sum : (t - 1) % 3 === 0 ? 0.25 / sum : 0;
        expect(b.weight[o + r]).toBeCloseTo(want, 7);
      }
      o += e.ids.length;
    }
    expect(b.weight.reduce((a, w) => a + w, 0)).toBeCloseTo(1, 6);
    // Without the prompt share only response targets carry loss.
    expect(pretrainBatch(seqs, 0).weight.filter((w) => w > 0).length).toBe(seqs.reduce((a, e, s) => a + e.ids.length - (6 + s), 0));
  });
});

const model = async (b: Backend, seed: number) => (await buildQwen3(b, tiny, initWeights(tiny, seed), { format: 'f32' })).model;

describe('pretraining step (cpu-ref)', () => {
  it('the loss falls over a few steps', async () => {
    const tr = pretrainer(await model(await createBackend('cpu-ref'), 1), hyper);
    const losses: number[] = [];
    for (let i = 0; i < 12; i++) losses.push((await tr.trainStep([pretrainBatch(seqs, 0.25)])).loss);
    expect(losses[11]).toBeLessThan(0.8 * losses[0]);
  });

  it('norm gains are not decayed, matrices are', async () => {
    // AdamW's first step: m^ = gs, v^ = (gs)^2 (s = the clip factor), so w1 = w0 - lr gs/(|gs| + eps) - lr wd w0
    // with decay, without the last term for gains. The trainer leaves the step's gradients in place.
    const lr = 1e-2;
    const wd = 0.5;
    const tr = pretrainer(await model(await createBackend('cpu-ref'), 2), { ...hyper, weightDecay: wd });
    const b = tr.model.backend;
    const snap = async (pick: 'param' | 'grad') =>
      new Map(await Promise.all(tr.params.params.map(async (p) => [p.name, Float32Array.from((await b.read(p[pick])) as Float32Array)] as const)));
    const before = await snap('param');
    const rep = await tr.trainStep([pretrainBatch(seqs, 0.25)]);
    expect(rep.applied).toBe(true);
    const after = await snap('param');
    const grads = await snap('grad');
    const s = Math.min(1, 1 / rep.gradNorm);
    let gains = 0;
    for (const [name, w0] of before) {
      const decayed = w0.length !== tiny.hiddenSize && w0.length !== tiny.headDim;
      if (!decayed) gains++;
      const g = grads.get(name)!;
      const w1 = after.get(name)!;
      for (let i = 0; i < w0.length; i++) {
        const want = w0[i] - (lr * g[i] * s) / (Math.abs(g[i] * s) + hyper.eps) - (decayed ? lr * wd * w0[i] : 0);
        expect(Math.abs(w1[i] - want), `${name}[${i}]`).toBeLessThan(1e-6);
      }
    }
    expect(gains).toBe(2 * 4 + 1);
  });
});

describe('learning to copy (cpu-fast)', () => {
  it('a 2-layer model learns to repeat a random 20-token sequence within 150 steps (attention learns to look back)', async () => {
    // The skill the bundled policy lacks (models/default/README.md): this shows the training path can learn it.
    const b = await createBackend('cpu-fast', { threads: 2 });
    try {
      const c: Qwen3Config = { hiddenSize: 64, intermediateSize: 128, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 16, rmsNormEps: 1e-6, ropeTheta: 10000, vocabSize: 64, tieWordEmbeddings: true, maxPositionEmbeddings: 64 };
      const tr = pretrainer((await buildQwen3(b, c, initWeights(c, 1), { format: 'f32' })).model, { ...DEFAULT_HYPER, schedule: { kind: 'warmup-cosine', lr: 3e-3, warmupSteps: 20, totalSteps: 150, minLr: 3e-4 } });
      const rng = new Rng(5);
      let last = Infinity;
      for (let step = 1; step <= 150; step++) {
        const seqs = Array.from({ length: 8 }, () => {
          const a = Array.from({ length: 20 }, () => 2 + rng.int(60));
          const tokens = [1, ...a, 0, ...a];
          return { tokens, mask: tokens.map((_, i) => (i > 21 ? 1 : 0)) };
        });
        last = (await tr.trainStep([packBatch(seqs)])).loss;
      }
      // Uniform guessing costs ln 62 = 4.13 nats per copied token.
      expect(last).toBeLessThan(0.3);
    } finally {
      b.dispose();
    }
  }, 120_000);
});

describe('reproducibility (cpu-fast)', () => {
  const run = async (b: Backend, seed: number) => {
    const tr = pretrainer(await model(b, seed), hyper);
    for (let i = 0; i < 3; i++) await tr.trainStep([pretrainBatch(seqs, 0.25)]);
    return toSafetensors(tiny, await hostWeights(tr.params));
  };
  it('the same seed gives the same safetensors bytes; another seed does not', async () => {
    const b = await createBackend('cpu-fast', { threads: 2 });
    try {
      const a = await run(b, 7);
      const a2 = await run(b, 7);
      const c = await run(b, 8);
      expect(Buffer.from(a).equals(Buffer.from(a2))).toBe(true);
      expect(Buffer.from(a).equals(Buffer.from(c))).toBe(false);
    } finally {
      b.dispose();
    }
  });
});
