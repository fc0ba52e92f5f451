// Depth growth keeps the function: a grown checkpoint's logits equal the original's exactly, its new layers
// start with zero residual outputs (and random everything else, so training can move them), and anything
// but a larger layer count is refused.
import { describe, expect, it } from 'vitest';
import { CpuRefBackend } from '../../src/engine/cpu/ref';
import { buildQwen3 } from '../../src/model/weights';
import { randomWeights } from '../../src/model/random';
import { forward, KvCache, type Qwen3Model } from '../../src/model/qwen3';
import { GrowError, grownWeights } from '../../research/pretrain/grow';
import { tinyConfig } from '../fixtures/tiny-model';
import { Rng } from '../../src/util/rng';

const small = tinyConfig({ numLayers: 2 });

async function logits(m: Qwen3Model, ids: Int32Array): Promise<Float32Array> {
  const cache = new KvCache(m, 1, ids.length);
  const r = forward(m, cache, { ids, slot: new Int32Array(ids.length), pos: Int32Array.from(ids.keys()) });
  const out = (await m.backend.read(r.logits)) as Float32Array;
  m.backend.free(r.logits);
  cache.free();
  return out;
}

describe('grownWeights', () => {
  it('appends identity layers: same logits bit for bit, zero residual outputs, random new inputs', async () => {
    const b = new CpuRefBackend();
    const { model, host } = await buildQwen3(b, small, randomWeights(small, 7, 'f32'), { format: 'f32', keepHost: true });
    const big = { ...small, numLayers: 4 };
    const grown = await buildQwen3(b, big, grownWeights(small, host!, big, 3), { format: 'f32', keepHost: true });
    const rng = new Rng(5);
    const ids = Int32Array.from({ length: 13 }, () => rng.int(small.vocabSize));
    expect(grown.model.config.numLayers).toBe(4);
    expect(await logits(grown.model, ids)).toEqual(await logits(model, ids));
    const dense = (n: string) => grown.host!.get(n)!.data as Float32Array;
    for (const l of [2, 3]) {
      expect(dense(`model.layers.${l}.self_attn.o_proj.weight`).every((x) => x === 0)).toBe(true);
      expect(dense(`model.layers.${l}.mlp.down_proj.weight`).every((x) => x === 0)).toBe(true);
      expect(dense(`model.layers.${l}.self_attn.q_proj.weight`).some((x) => x !== 0)).toBe(true);
      expect(dense(`model.layers.${l}.mlp.up_proj.weight`).some((x) => x !== 0)).toBe(true);
    }
    // The old layers are the original tensors.
    expect(dense('model.layers.1.mlp.down_proj.weight')).toEqual(host!.get('model.layers.1.mlp.down_proj.weight')!.data);
  });

  it('refuses to shrink or to change anything but the layer count', async () => {
    const { host } = await buildQwen3(new CpuRefBackend(), small, randomWeights(small, 7, 'f32'), { format: 'f32', keepHost: true });
    expect(() => grownWeights(small, host!, { ...small, numLayers: 1 }, 0)).toThrow(GrowError);
    expect(() => grownWeights(small, host!, { ...small, numLayers: 3, hiddenSize: small.hiddenSize * 2 }, 0)).toThrow(/hiddenSize/);
    expect(() => grownWeights(small, host!, { ...small, headDim: small.headDim * 2 }, 0)).toThrow(/headDim/);
    expect(() => grownWeights(small, host!, { ...small, hiddenSize: small.hiddenSize * 3 / 2, intermediateSize: small.intermediateSize * 3 / 2, numHeads: small.numHeads * 3 / 2, numKvHeads: small.numKvHeads * 3 / 2 }, 0)).toThrow(GrowError);
  });

  for (const tie of [true, false])
    it(`widens by an integer factor with the same logits up to rounding, copies that differ (tied embeddings: ${tie})`, async () => {
      const b = new CpuRefBackend();
      const c = { ...small, tieWordEmbeddings: tie };
      const { model, host } = await buildQwen3(b, c, randomWeights(c, 7, 'f32'), { format: 'f32', keepHost: true });
      const f = 2;
      const wide = { ...c, hiddenSize: c.hiddenSize * f, intermediateSize: c.intermediateSize * f, numHeads: c.numHeads * f, numKvHeads: c.numKvHeads * f, numLayers: 3 };
      const grown = await buildQwen3(b, wide, grownWeights(c, host!, wide, 3), { format: 'f32', keepHost: true });
      const rng = new Rng(5);
      const ids = Int32Array.from({ length: 13 }, () => rng.int(c.vocabSize));
      const a = await logits(model, ids);
      const g = await logits(grown.model, ids);
      let worst = 0;
      let scale = 0;
      for (let i = 0; i < a.length; i++) ((worst = Math.max(worst, Math.abs(a[i] - g[i]))), (scale = Math.max(scale, Math.abs(a[i]))));
      expect(worst / scale).toBeLessThan(1e-5);
      expect(scale).toBeGreaterThan(0);
      // The two copies of a residual unit's row differ (noise), so training can pull them apart.
      const q = grown.host!.get('model.layers.0.mlp.up_proj.weight')!.data as Float32Array;
      const cols = wide.hiddenSize;
      const half = c.intermediateSize * cols;
      expect(Array.from(q.subarray(0, cols))).not.toEqual(Array.from(q.subarray(half, half + cols)));
      // …and the new top layer is an identity start.
      expect((grown.host!.get('model.layers.2.self_attn.o_proj.weight')!.data as Float32Array).every((x) => x === 0)).toBe(true);
    });
});
