// Trainer on the CPU reference: overfitting (LoRA and full-parameter), GRPO with zero advantage,
// the NaN guard, gradient accumulation, optimizer-state and PEFT adapter round trips.
import { describe, expect, it } from 'vitest';
import { CpuRefBackend } from '../../src/engine/cpu/ref';
import { Rng } from '../../src/util/rng';
import { createLoraAdapter } from '../../src/model/lora';
import { loadPeftAdapter, adapterToPeftFiles } from '../../src/model/peft';
import { forward, KvCache } from '../../src/model/qwen3';
import { randomWeights } from '../../src/model/random';
import { MemorySource } from '../../src/model/source';
import { buildQwen3 } from '../../src/model/weights';
import { packBatch, type TrainSequence } from '../../src/train/batch';
import { Trainer, type TrainerOptions } from '../../src/train/trainer';
import { loadPeftAdapterDir, savePeftAdapter } from '../../src/train/peft-node';
import { sequenceLogprobs, withReferenceLogprobs } from '../../src/train/reference';
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tinyConfig } from '../fixtures/tiny-model';

const be = new CpuRefBackend();
const cfg = tinyConfig({ vocabSize: 50, hiddenSize: 32, intermediateSize: 48, numLayers: 2 });
const rng = new Rng(11);
const seqs: TrainSequence[] = [
  { tokens: Array.from({ length: 10 }, () => rng.int(50)), mask: [0, 0, 0, 1, 1, 1, 1, 1, 1, 1] },
  { tokens: Array.from({ length: 7 }, () => rng.int(50)), mask: [0, 0, 1, 1, 1, 1, 1] },
];
const model = async (format: 'f32' | 'q8' | 'q4', seed = 2) => (await buildQwen3(be, cfg, randomWeights(cfg, seed, format), { format })).model;
const readAll = (ts: { param: unknown }[]) => Promise.all(ts.map((p) => be.read(p.param as never) as Promise<Float32Array>));

describe('Trainer (CPU reference)', () => {
  it('overfits a tiny batch with LoRA on a q4 base', async () => {
    // The frozen norm and tied embedding bound the logits (|logit| <= |normed x| |e|), so the loss floor
    // falls with the hidden size: about 0.34 here at d = 32, about 0.04 at d = 64.
    const wide = tinyConfig({ vocabSize: 50, hiddenSize: 64, intermediateSize: 64, numLayers: 2 });
    const m = (await buildQwen3(be, wide, randomWeights(wide, 2, 'q4'), { format: 'q4' })).model;
    const adapter = createLoraAdapter(be, wide, { name: 'a', rank: 8, alpha: 32, seed: 1 });
    const tr = new Trainer(m, { mode: 'lora', adapter, schedule: { kind: 'constant', lr: 1e-2 }, loss: { kind: 'ce' } });
    const b = packBatch(seqs);
    const first = await tr.trainStep([b]);
    let last = first;
    for (let i = 0; i < 30; i++) {
      last = await tr.trainStep([b]);
      if (process.env.TRAIN_DEBUG) console.log(i, last.loss);
    }
    expect(first.loss).toBeGreaterThan(3);
    expect(last.loss).toBeLessThan(0.1);
    expect(last.applied).toBe(true);
    expect(tr.step).toBe(31);
  });

  it('overfits a tiny batch with full-parameter training, warmup + cosine, recomputation on', async () => {
    const m = await model('f32');
    const tr = new Trainer(m, {
      mode: 'full', recompute: true, weightDecay: 0.01,
      schedule: { kind: 'warmup-cosine', lr: 1e-2, warmupSteps: 5, totalSteps: 60, minLr: 1e-3 }, loss: { kind: 'ce' },
    });
    const b = packBatch(seqs);
    let last;
    for (let i = 0; i < 60; i++) last = await tr.trainStep([b]);
    expect(last!.loss).toBeLessThan(0.05);
  });

  it('GRPO with zero advantage leaves the adapter unchanged except for weight decay', async () => {
    const m = await model('q8');
    const adapter = createLoraAdapter(be, cfg, { name: 'a', rank: 4, alpha: 8, seed: 3 });
    // make B non-zero so the decay is visible on both matrices
    for (const [n, t] of adapter.parameters()) if (n.includes('lora_B')) be.write(t, Float32Array.from({ length: t.shape[0] * t.shape[1] }, () => rng.normal()));
    const opts: TrainerOptions = { mode: 'lora', adapter, weightDecay: 0.1, schedule: { kind: 'constant', lr: 1e-2 }, loss: { kind: 'grpo', clipEps: 0.2, dualClip: 3, klCoef: 0 } };
    const tr = new Trainer(m, opts);
    const before = await readAll(tr.params.params);
    const grpoSeqs = seqs.map((s) => ({ ...s, advantage: 0, oldLogp: Array.from(s.tokens, () => -2) }));
    const r = await tr.trainStep([packBatch(grpoSeqs, 'seq-mean-token-mean')]);
    expect(r.applied).toBe(true);
    expect(r.gradNorm).toBe(0);
    const after = await readAll(tr.params.params);
    after.forEach((a, i) => expect(Array.from(a)).toEqual(Array.from(before[i], (x) => Math.fround(x * (1 - 1e-2 * 0.1)))));
  });

  it('GRPO with the KL reference = adapter off: a fresh adapter (B = 0) has KL 0, ratio 1 and no clipping', async () => {
    const m = await model('q8');
    const adapter = createLoraAdapter(be, cfg, { name: 'a', rank: 4, alpha: 8, seed: 3 });
    const old = await sequenceLogprobs(m, seqs, adapter);
    const withRef = await withReferenceLogprobs(m, seqs.map((s, i) => ({ ...s, advantage: i ? -1 : 1, oldLogp: old[i] })));
    const tr = new Trainer(m, { mode: 'lora', adapter, schedule: { kind: 'constant', lr: 1e-2 }, loss: { kind: 'grpo', clipEps: 0.2, dualClip: 3, klCoef: 0.1 } });
    const r = await tr.trainStep([packBatch(withRef, 'seq-mean-token-mean')]);
    expect(r.kl).toBeCloseTo(0, 6);
    expect(r.clipFrac).toBe(0);
    // ratio 1: the surrogate is -mean(A) over sequences = -(1 - 1) / 2 = 0
    expect(r.loss).toBeCloseTo(0, 5);
    expect(r.gradNorm).toBeGreaterThan(0);
    // after the step the policy moved away from the reference: KL > 0
    const r2 = await tr.trainStep([packBatch(withRef, 'seq-mean-token-mean')]);
    expect(r2.kl).toBeGreaterThan(0);
  });

  it('refuses a step whose loss is NaN: weights, moments and step count untouched', async () => {
    const m = await model('q8');
    const adapter = createLoraAdapter(be, cfg, { name: 'a', rank: 4, alpha: 8, seed: 5 });
    const tr = new Trainer(m, { mode: 'lora', adapter, schedule: { kind: 'constant', lr: 1e-2 }, loss: { kind: 'ce' } });
    const good = packBatch(seqs);
    await tr.trainStep([good]);
    const before = await readAll(tr.params.params);
    const moments = await Promise.all(tr.params.params.map((p) => be.read(p.m)));
    const bad = packBatch(seqs);
    bad.weight[4] = NaN;
    const r = await tr.trainStep([bad]);
    expect(r.applied).toBe(false);
    expect(r.refused).toMatch(/loss is NaN/);
    expect(tr.step).toBe(1);
    const after = await readAll(tr.params.params);
    after.forEach((a, i) => expect(Array.from(a)).toEqual(Array.from(before[i])));
    const mAfter = await Promise.all(tr.params.params.map((p) => be.read(p.m)));
    mAfter.forEach((a, i) => expect(Array.from(a)).toEqual(Array.from(moments[i])));
    expect((await tr.trainStep([good])).applied).toBe(true);
  });

  it('gradient accumulation over two micro-batches equals one batch of both', async () => {
    const m = await model('f32');
    const one = new Trainer(m, { mode: 'full', schedule: { kind: 'constant', lr: 0 }, loss: { kind: 'ce' } });
    const r1 = await one.trainStep([packBatch(seqs, 'seq-mean-token-mean')]);
    const g1 = await Promise.all(one.params.params.map((p) => be.read(p.grad)));
    const two = new Trainer(m, { mode: 'full', schedule: { kind: 'constant', lr: 0 }, loss: { kind: 'ce' } });
    const r2 = await two.trainStep([packBatch([seqs[0]], 'seq-mean-token-mean', 0.5), packBatch([seqs[1]], 'seq-mean-token-mean', 0.5)]);
    expect(r2.loss).toBeCloseTo(r1.loss, 5);
    const g2 = await Promise.all(two.params.params.map((p) => be.read(p.grad)));
    g1.forEach((g, i) => g.forEach((x, j) => expect(g2[i][j]).toBeCloseTo(x, 6)));
  });

  it('optimizer state and PEFT adapter round trips: a resumed run continues bit-exactly; logits match', async () => {
    const m = await model('q8');
    const mk = (adapter: ReturnType<typeof createLoraAdapter>) =>
      new Trainer(m, { mode: 'lora', adapter, weightDecay: 0.05, schedule: { kind: 'warmup-cosine', lr: 1e-2, warmupSteps: 2, totalSteps: 10 }, loss: { kind: 'ce' } });
    const a = createLoraAdapter(be, cfg, { name: 'a', rank: 4, alpha: 8, seed: 7 });
    const t1 = mk(a);
    const b = packBatch(seqs);
    for (let i = 0; i < 3; i++) await t1.trainStep([b]);
    const files = await adapterToPeftFiles(be, a, { baseModel: 'tiny' });
    const config = JSON.parse(new TextDecoder().decode(files.get('adapter_config.json')!));
    expect(config).toMatchObject({ peft_type: 'LORA', r: 4, lora_alpha: 8, target_modules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] });
    const state = await t1.saveOptimizerState();
    const loaded = await loadPeftAdapter(be, cfg, new MemorySource(files), 'b');
    // bit-exact tensors, same names
    const pa = [...a.parameters()];
    const pb = [...loaded.parameters()];
    expect(pb.map(([n]) => n)).toEqual(pa.map(([n]) => n));
    expect(pb[0][0]).toBe('base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight');
    for (let i = 0; i < pa.length; i++) expect(Array.from(await be.read(pb[i][1]))).toEqual(Array.from(await be.read(pa[i][1])));
    // same logits with either adapter
    const logits = async (ad: typeof a) => be.read(forward(m, new KvCache(m, b.slots, b.maxT), b, { adapter: ad }).logits);
    expect(Array.from(await logits(loaded))).toEqual(Array.from(await logits(a)));
    // resume: same next steps
    const t2 = mk(loaded);
    t2.loadOptimizerState(state);
    expect(t2.step).toBe(3);
    for (let i = 0; i < 2; i++) {
      const r1 = await t1.trainStep([b]);
      const r2 = await t2.trainStep([b]);
      expect(r2.loss).toBe(r1.loss);
    }
    const p1 = await readAll(t1.params.params);
    const p2 = await readAll(t2.params.params);
    p1.forEach((x, i) => expect(Array.from(p2[i])).toEqual(Array.from(x)));
  });

  it('one adapter per role: two trainers on one base model train only their own adapter; PEFT folders on disk', async () => {
    const m = await model('q8');
    const act = createLoraAdapter(be, cfg, { name: 'act', rank: 2, alpha: 4, seed: 1 });
    const reh = createLoraAdapter(be, cfg, { name: 'rehearse', rank: 2, alpha: 4, seed: 2 });
    const tAct = new Trainer(m, { mode: 'lora', adapter: act, schedule: { kind: 'constant', lr: 1e-2 }, loss: { kind: 'ce' } });
    const tReh = new Trainer(m, { mode: 'lora', adapter: reh, schedule: { kind: 'constant', lr: 1e-2 }, loss: { kind: 'ce' } });
    const rehBefore = await readAll(tReh.params.params);
    await tAct.trainStep([packBatch([seqs[0]])]);
    (await readAll(tReh.params.params)).forEach((a, i) => expect(Array.from(a)).toEqual(Array.from(rehBefore[i])));
    await tReh.trainStep([packBatch([seqs[1]])]);
    const dir = mkdtempSync(join(tmpdir(), 'peft-'));
    await savePeftAdapter(be, reh, join(dir, 'rehearse'), { baseModel: 'tiny' });
    expect(readdirSync(join(dir, 'rehearse')).sort()).toEqual(['adapter_config.json', 'adapter_model.safetensors']);
    const back = await loadPeftAdapterDir(be, cfg, join(dir, 'rehearse'));
    const pa = [...reh.parameters()];
    const pb = [...back.parameters()];
    for (let i = 0; i < pa.length; i++) expect(Array.from(await be.read(pb[i][1]))).toEqual(Array.from(await be.read(pa[i][1])));
  });

  it('refuses bad adapters and bad batches with typed errors', async () => {
    const m = await model('q8');
    const a = createLoraAdapter(be, cfg, { name: 'a', rank: 2, alpha: 4, seed: 1, targets: ['q', 'v'] });
    const files = await adapterToPeftFiles(be, a);
    const cfgText = (o: object) => new TextEncoder().encode(JSON.stringify(o));
    const base = JSON.parse(new TextDecoder().decode(files.get('adapter_config.json')!));
    const withCfg = (o: object) => new MemorySource(new Map([...files, ['adapter_config.json', cfgText({ ...base, ...o })]]));
    await expect(loadPeftAdapter(be, cfg, withCfg({ use_rslora: true }))).rejects.toThrow(/rslora/);
    await expect(loadPeftAdapter(be, cfg, withCfg({ r: 3 }))).rejects.toThrow(/shape/);
    await expect(loadPeftAdapter(be, cfg, withCfg({ target_modules: ['q_proj', 'lm_head'] }))).rejects.toThrow(/lm_head/);
    await expect(loadPeftAdapter(be, cfg, withCfg({ target_modules: ['q_proj'] }))).rejects.toThrow(/unexpected tensors/);
    expect((await loadPeftAdapter(be, cfg, new MemorySource(files))).targets).toEqual(['q', 'v']);
    expect(() => new Trainer(m, { mode: 'full', schedule: { kind: 'constant', lr: 1 }, loss: { kind: 'ce' } })).toThrow(/f32 model/);
    const tr = new Trainer(m, { mode: 'lora', adapter: a, schedule: { kind: 'constant', lr: 1 }, loss: { kind: 'ce' } });
    const bad = packBatch(seqs);
    bad.ids[0] = 999;
    await expect(tr.trainStep([bad])).rejects.toThrow(/vocabulary/);
    const empty = await tr.trainStep([packBatch(seqs.map((x) => ({ ...x, mask: Array.from(x.mask, () => 0) })))]);
    expect(empty.applied).toBe(false);
    expect(empty.refused).toMatch(/no token/);
    const tg = new Trainer(m, { mode: 'lora', adapter: a, schedule: { kind: 'constant', lr: 1 }, loss: { kind: 'grpo', clipEps: 0.2, dualClip: 3, klCoef: 0.1 } });
    const noRef = packBatch(seqs.map((x) => ({ ...x, advantage: 1, oldLogp: Array.from(x.tokens, () => -1) })));
    await expect(tg.trainStep([noRef])).rejects.toThrow(/refLogp/);
  });
});
