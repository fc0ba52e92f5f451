// Whole-model gradients on a tiny random Qwen3 (CPU reference) against finite differences of the
// model's own forward (src/model/qwen3.ts) + cross-entropy: LoRA A/B and full-parameter weights.
// Tolerance: worst |fd - analytic| <= 2e-3 x the largest gradient entry of the tensor (f32 forward, h = 1e-2;
// the measured floor is <= 1e-3).
import { describe, expect, it } from 'vitest';
import type { Tensor } from '../../src/engine/backend';
import { CpuRefBackend } from '../../src/engine/cpu/ref';
import { Rng } from '../../src/util/rng';
import { createLoraAdapter, type LoraAdapter } from '../../src/model/lora';
import { forward, KvCache, type Qwen3Model } from '../../src/model/qwen3';
import { randomWeights } from '../../src/model/random';
import { buildQwen3 } from '../../src/model/weights';
import { packBatch, type TrainBatch } from '../../src/train/batch';
import { Trainer } from '../../src/train/trainer';
import { tinyConfig } from '../fixtures/tiny-model';

const be = new CpuRefBackend();
const cfg = tinyConfig({ vocabSize: 61, hiddenSize: 16, intermediateSize: 24, numHeads: 4, numKvHeads: 2, headDim: 6 });

function batch(): TrainBatch {
  const rng = new Rng(5);
  const seq = (n: number, prompt: number) => ({
    tokens: Array.from({ length: n }, () => rng.int(cfg.vocabSize)),
    mask: Array.from({ length: n }, (_, i) => (i >= prompt ? 1 : 0)),
  });
  return packBatch([seq(7, 3), seq(4, 1)], 'seq-mean-token-mean');
}

/** Loss of the model's plain forward pass, as the trainer defines it. */
function lossOf(m: Qwen3Model, b: TrainBatch, adapter: LoraAdapter | null): number {
  const cache = new KvCache(m, b.slots, b.maxT);
  const { logits } = forward(m, cache, { ids: b.ids, slot: b.slot, pos: b.pos }, { adapter });
  const tg = Int32Array.from(b.targets, (t) => Math.max(t, 0));
  const res = be.train.crossEntropy(logits, be.tensor(tg, [tg.length]), be.tensor(b.weight, [b.weight.length]));
  return (res.metrics as unknown as { data: Float32Array }).data[0];
}

/** Central differences on `count` random entries of tensor t vs the analytic gradient g. */
async function check(t: Tensor, g: Tensor, loss: () => number, rng: Rng, count = 6, h = 1e-2): Promise<number> {
  const data = (t as unknown as { data: Float32Array }).data;
  const grad = (await be.read(g)) as Float32Array;
  let worst = 0;
  let scale = 1e-4;
  for (let i = 0; i < grad.length; i++) scale = Math.max(scale, Math.abs(grad[i]));
  for (let c = 0; c < count; c++) {
    const i = rng.int(data.length);
    const x0 = data[i];
    data[i] = x0 + h;
    const lp = loss();
    data[i] = x0 - h;
    const lm = loss();
    data[i] = x0;
    worst = Math.max(worst, Math.abs((lp - lm) / (2 * h) - grad[i]));
  }
  return worst / scale;
}

describe('model backward vs finite differences (CPU reference)', () => {
  it('LoRA A/B gradients on every target of every layer (q8 base)', async () => {
    const { model } = await buildQwen3(be, cfg, randomWeights(cfg, 3, 'q8'), { format: 'q8' });
    const adapter = createLoraAdapter(be, cfg, { name: 'a', rank: 3, alpha: 6, seed: 4 });
    // B = 0 would make every A gradient zero: start from a random B so both are checked
    const rng = new Rng(6);
    for (const [name, t] of adapter.parameters())
      if (name.endsWith('lora_B.weight')) be.write(t, Float32Array.from({ length: t.shape[0] * t.shape[1] }, () => 0.3 * rng.normal()));
    const b = batch();
    const tr = new Trainer(model, { mode: 'lora', adapter, schedule: { kind: 'constant', lr: 0 }, loss: { kind: 'ce' } });
    tr.lossAndGrad(b);
    const loss = () => lossOf(model, b, adapter);
    let worst = 0;
    for (const p of tr.params.params) worst = Math.max(worst, await check(p.param, p.grad, loss, rng, 3));
    expect(worst).toBeLessThan(2e-3);
  });

  it('full-parameter gradients (embedding tied with lm_head, norms, projections)', async () => {
    const { model } = await buildQwen3(be, cfg, randomWeights(cfg, 7, 'f32'), { format: 'f32' });
    const b = batch();
    const tr = new Trainer(model, { mode: 'full', schedule: { kind: 'constant', lr: 0 }, loss: { kind: 'ce' } });
    tr.lossAndGrad(b);
    const loss = () => lossOf(model, b, null);
    const rng = new Rng(8);
    const errs: Record<string, number> = {};
    for (const p of tr.params.params) errs[p.name] = await check(p.param, p.grad, loss, rng, 3);
    const worst = Math.max(...Object.values(errs));
    expect(worst, JSON.stringify(errs)).toBeLessThan(2e-3);
  });

  it('recomputation and head chunking give the same gradients', async () => {
    const { model } = await buildQwen3(be, cfg, randomWeights(cfg, 9, 'f32'), { format: 'f32' });
    const b = batch();
    const grads = async (recompute: boolean, headChunk: number) => {
      const tr = new Trainer(model, { mode: 'full', schedule: { kind: 'constant', lr: 0 }, loss: { kind: 'ce' }, recompute, headChunk });
      tr.lossAndGrad(b);
      return Promise.all(tr.params.params.map((p) => be.read(p.grad)));
    };
    const base = await grads(false, 256);
    const rec = await grads(true, 256);
    const chunked = await grads(false, 2);
    base.forEach((g, i) => {
      expect(Array.from(rec[i])).toEqual(Array.from(g));
      for (let j = 0; j < g.length; j++) expect(chunked[i][j]).toBeCloseTo(g[j], 6);
    });
  });
});
