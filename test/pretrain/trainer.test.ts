// The pretraining step: analytic gradients of the whole model against central finite differences,
// a loss that falls on a tiny run, and bit-identical weights from two runs with the same seed.
import { describe, expect, it } from 'vitest';
import type { Backend } from '../../src/engine/backend';
import { createBackend } from '../../src/engine/index';
import type { Qwen3Config } from '../../src/model/config';
import { toSafetensors } from '../../src/model/weights';
import type { Encoded } from '../../src/pretrain/data';
import { DEFAULT_HYPER, Pretrainer } from '../../src/pretrain/trainer';

const tiny: Qwen3Config = { hiddenSize: 16, intermediateSize: 32, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 8, rmsNormEps: 1e-6, ropeTheta: 10000, vocabSize: 40, tieWordEmbeddings: true, maxPositionEmbeddings: 64 };
const seqs: Encoded[] = [0, 1, 2].map((s) => ({ role: 'act', ids: Int32Array.from({ length: 12 + 3 * s }, (_, i) => (i * 7 + s * 3) % 40), promptLen: 6 + s }));
const hyper = { ...DEFAULT_HYPER, schedule: { kind: 'constant' as const, lr: 1e-2 } };

describe('pretraining step (cpu-ref)', () => {
  it('gradients of every kind of weight match finite differences', async () => {
    const b = await createBackend('cpu-ref');
    // Larger init than the real one so that every gradient is well above f32 noise.
    const tr = await Pretrainer.create(b, tiny, 5, hyper);
    for (const p of tr.pairs) if (p.w.shape.length === 2) b.write(p.w, ((await b.read(p.w)) as Float32Array).map((x) => x * 10));
    for (const p of tr.pairs) if (p.w.shape.length === 1) b.write(p.w, ((await b.read(p.w)) as Float32Array).map((x, i) => x + 0.1 * Math.sin(i + 1)));
    await tr.accumulateGrads(seqs);
    // Snapshot: every later loss evaluation accumulates into the gradients again.
    const grads = new Map<string, Float32Array>();
    for (const p of tr.pairs) grads.set(p.name, Float32Array.from((await b.read(p.g)) as Float32Array));
    const checks = ['embed', 'layers.0.q', 'layers.0.k', 'layers.1.v', 'layers.1.o', 'layers.0.qNorm', 'layers.1.kNorm', 'layers.0.inputNorm', 'layers.1.gate', 'layers.0.up', 'layers.1.down', 'layers.1.postNorm', 'finalNorm'];
    for (const name of checks) {
      const p = tr.pairs.find((x) => x.name === name)!;
      const g = grads.get(name)!;
      let i = 0;
      for (let j = 0; j < g.length; j++) if (Math.abs(g[j]) > Math.abs(g[i])) i = j;
      const w = Float32Array.from((await b.read(p.w)) as Float32Array);
      const h = 1e-2;
      const lossAt = async (x: number) => {
        const w2 = w.slice();
        w2[i] = x;
        b.write(p.w, w2);
        const { loss } = await tr.accumulateGrads(seqs);
        return loss;
      };
      const fd = ((await lossAt(w[i] + h)) - (await lossAt(w[i] - h))) / (2 * h);
      b.write(p.w, w);
      expect(Math.abs(fd - g[i]), `${name}[${i}]: analytic ${g[i]} vs fd ${fd}`).toBeLessThan(0.03 * Math.abs(g[i]) + 2e-4);
    }
  });

  it('the loss falls over a few steps', async () => {
    const tr = await Pretrainer.create(await createBackend('cpu-ref'), tiny, 1, hyper);
    const losses: number[] = [];
    for (let i = 0; i < 12; i++) losses.push((await tr.trainStep(seqs)).loss);
    expect(losses[11]).toBeLessThan(0.8 * losses[0]);
  });
});

describe('reproducibility (cpu-fast)', () => {
  const run = async (b: Backend, seed: number) => {
    const tr = await Pretrainer.create(b, tiny, seed, hyper);
    for (let i = 0; i < 3; i++) await tr.trainStep(seqs);
    return toSafetensors(tiny, await tr.hostWeights());
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
