// Whole-model properties on the CPU reference backend.
import { describe, expect, it } from 'vitest';
import { CpuRefBackend } from '../../src/engine/cpu/ref';
import { buildQwen3 } from '../../src/model/weights';
import { randomWeights } from '../../src/model/random';
import { forward, KvCache, trunk, type Qwen3Model } from '../../src/model/qwen3';
import { createLoraAdapter } from '../../src/model/lora';
import { tinyConfig } from '../fixtures/tiny-model';
import { Rng } from '../../src/util/rng';
import type { Qwen3Config } from '../../src/model/config';

const cfg = tinyConfig();

async function model(format: 'f32' | 'q8' | 'q4', c: Qwen3Config = cfg, seed = 11): Promise<Qwen3Model> {
  return (await buildQwen3(new CpuRefBackend(), c, randomWeights(c, seed, 'f32'), { format })).model;
}

function tokens(n: number, seed: number, V = cfg.vocabSize): Int32Array {
  const r = new Rng(seed);
  return Int32Array.from({ length: n }, () => r.int(V));
}

/** Logits (T,V) of a full-sequence prefill in slot 0. */
async function prefillLogits(m: Qwen3Model, ids: Int32Array, adapter: Parameters<typeof forward>[3] = {}): Promise<Float32Array> {
  const cache = new KvCache(m, 1, 64);
  const T = ids.length;
  const r = forward(m, cache, { ids, slot: new Int32Array(T), pos: Int32Array.from({ length: T }, (_, i) => i) }, adapter);
  return (await m.backend.read(r.logits)) as Float32Array;
}

function relErr(a: Float32Array, b: Float32Array): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < a.length; i++) ((num += (a[i] - b[i]) ** 2), (den += b[i] ** 2));
  return Math.sqrt(num / den);
}

describe('Qwen3 forward (CPU reference)', () => {
  it('KV-cache decode, one token at a time and batched over slots, equals full recomputation', async () => {
    const m = await model('f32');
    const V = cfg.vocabSize;
    const a = tokens(9, 1);
    const bIds = tokens(5, 2);
    const fullA = await prefillLogits(m, a);
    const fullB = await prefillLogits(m, bIds);
    // Slot 2 gets sequence a, slot 0 gets b: prefill 4 tokens of a and 2 of b in ONE batch, then decode
    // both one token per step together (b finishes first).
    const cache = new KvCache(m, 3, 16);
    const first = forward(m, cache, {
      ids: Int32Array.from([...a.subarray(0, 4), ...bIds.subarray(0, 2)]),
      slot: Int32Array.from([2, 2, 2, 2, 0, 0]),
      pos: Int32Array.from([0, 1, 2, 3, 0, 1]),
    });
    const got = (await m.backend.read(first.logits)) as Float32Array;
    let maxDiff = 0;
    const cmp = (row: Float32Array, full: Float32Array, p: number) => {
      for (let v = 0; v < V; v++) maxDiff = Math.max(maxDiff, Math.abs(row[v] - full[p * V + v]));
    };
    for (let t = 0; t < 4; t++) cmp(got.subarray(t * V, (t + 1) * V), fullA, t);
    for (let t = 0; t < 2; t++) cmp(got.subarray((4 + t) * V, (5 + t) * V), fullB, t);
    for (let p = 4; p < 9; p++) {
      const live = p < 5 ? [2, 0] : [2];
      const ids = live.map((s) => (s === 2 ? a[p] : bIds[p - 2]));
      const pos = live.map((s) => (s === 2 ? p : p - 2));
      const r = forward(m, cache, { ids: Int32Array.from(ids), slot: Int32Array.from(live), pos: Int32Array.from(pos), }, { logitRows: Int32Array.from(live.map((_, i) => i)) });
      const l = (await m.backend.read(r.logits)) as Float32Array;
      cmp(l.subarray(0, V), fullA, p);
      if (live.length > 1) cmp(l.subarray(V, 2 * V), fullB, p - 2);
    }
    expect(maxDiff).toBeLessThanOrEqual(1e-5);
  });

  it('the logits depend on earlier tokens (the cache is really read) and not on other slots', async () => {
    const m = await model('f32');
    const x = tokens(6, 3);
    const y = Int32Array.from(x);
    y[0] = (y[0] + 1) % cfg.vocabSize;
    const lx = await prefillLogits(m, x);
    const ly = await prefillLogits(m, y);
    const V = cfg.vocabSize;
    expect(relErr(lx.subarray(5 * V), ly.subarray(5 * V))).toBeGreaterThan(1e-3);
  });

  it('an untouched LoRA adapter changes nothing, bit for bit; a trained one does; null = base model', async () => {
    const m = await model('f32');
    const ids = tokens(7, 4);
    const base = await prefillLogits(m, ids);
    const adapter = createLoraAdapter(m.backend, cfg, { name: 'act', rank: 4, alpha: 8, seed: 9 });
    expect(adapter.scaling).toBe(2);
    const withFresh = await prefillLogits(m, ids, { adapter });
    expect(Array.from(withFresh)).toEqual(Array.from(base));
    // Give every B some values: the output must move; adapter null must give the base model back.
    const r = new Rng(5);
    for (const [name, t] of adapter.parameters()) if (name.includes('lora_B')) m.backend.write(t, Float32Array.from({ length: t.shape[0] * t.shape[1] }, () => 0.05 * r.normal()));
    const trained = await prefillLogits(m, ids, { adapter });
    expect(relErr(trained, base)).toBeGreaterThan(1e-3);
    expect(Array.from(await prefillLogits(m, ids, { adapter: null }))).toEqual(Array.from(base));
    // A second named adapter (per-role mode) is independent of the first.
    const other = createLoraAdapter(m.backend, cfg, { name: 'rehearse', rank: 2, alpha: 2, seed: 10, targets: ['q', 'v'] });
    expect(Array.from(await prefillLogits(m, ids, { adapter: other }))).toEqual(Array.from(base));
    expect([...other.parameters()].map(([n]) => n).slice(0, 2)).toEqual([
      'base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight',
      'base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight',
    ]);
  });

  // Stated bounds. Per weight, rounding error is uniform within half a step: rms = step/sqrt(12). With
  // Gaussian rows of 32 values absmax is ~2.5 sigma, so q8 (step absmax/127) errs ~0.6% of sigma per
  // weight and q4 (step absmax/7) ~10%; through 2 layers of 7 maps plus the tied embedding/lm_head
  // (quantized too) the logits measured 1.3-3.1% (q8) and 22-46% (q4) over seeds 1-12.
  it('q8 and q4 logits stay close to f32 (relative L2 error <= 0.05 and <= 0.6)', async () => {
    const ids = tokens(8, 6);
    const f = await prefillLogits(await model('f32'), ids);
    const e8 = relErr(await prefillLogits(await model('q8'), ids), f);
    const e4 = relErr(await prefillLogits(await model('q4'), ids), f);
    console.log(`tiny model logits, relative L2 error vs f32: q8 ${e8.toExponential(2)}, q4 ${e4.toExponential(2)}`);
    expect(e8).toBeGreaterThan(0);
    expect(e8).toBeLessThanOrEqual(0.05);
    expect(e4).toBeLessThanOrEqual(0.6);
    expect(e4).toBeGreaterThan(e8);
  });

  it("untied lm_head; the trunk in 'blocks' mode keeps every activation", async () => {
    const c = tinyConfig({ tieWordEmbeddings: false });
    const m = await model('f32', c);
    expect(m.weights.lmHead).not.toBe(m.weights.embed);
    const ids = tokens(3, 7);
    const batch = { ids, slot: new Int32Array(3), pos: Int32Array.from([0, 1, 2]) };
    const layout = { slot: m.backend.tensor(batch.slot, [3]), pos: m.backend.tensor(batch.pos, [3]) };
    const s = trunk(m, new KvCache(m, 1, 8), layout, ids, null, 'blocks');
    expect(s.layers).toHaveLength(c.numLayers);
    expect(s.inputs).toHaveLength(c.numLayers);
    expect(s.layers[0]!.attention.qr.shape).toEqual([3, c.numHeads, c.headDim]);
    expect(s.layers[0]!.attention.attn.shape).toEqual([3, c.numHeads * c.headDim]);
    expect(s.layers[1]!.mlp.act.shape).toEqual([3, c.intermediateSize]);
    // The saved residual stream chains: the mlp input of a layer is its attention block output.
    expect(s.layers[1]!.mlp.x).toBe(s.layers[1]!.attention.out);
    expect(s.layers[1]!.attention.x).toBe(s.layers[0]!.mlp.out);
    expect(s.last).toBe(s.layers[c.numLayers - 1]!.mlp.out);
    const r = forward(m, new KvCache(m, 1, 8), batch, { logitRows: Int32Array.from([2]) });
    const full = await prefillLogits(m, ids);
    const last = (await m.backend.read(r.logits)) as Float32Array;
    expect(Array.from(last)).toEqual(Array.from(full.subarray(2 * c.vocabSize)));
  });

  it('refuses token ids and positions outside the vocabulary / cache with a typed error', async () => {
    const m = await model('f32');
    const cache = new KvCache(m, 1, 4);
    expect(() => forward(m, cache, { ids: Int32Array.from([cfg.vocabSize]), slot: new Int32Array(1), pos: new Int32Array(1) })).toThrow(/outside the vocabulary/);
    expect(() => forward(m, cache, { ids: Int32Array.from([1]), slot: new Int32Array(1), pos: Int32Array.from([4]) })).toThrow(/outside the KV cache/);
  });
});
