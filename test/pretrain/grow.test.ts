// Depth growth keeps the function: a grown checkpoint's logits equal the original's exactly, its new layers
// start with zero residual outputs (and random everything else, so training can move them), and anything
// but a larger layer count is refused.
import { describe, expect, it } from 'vitest';
import { CpuRefBackend } from '../../src/engine/cpu/ref';
import { buildQwen3 } from '../../src/model/weights';
import { randomWeights } from '../../src/model/random';
import { forward, KvCache, type Qwen3Model } from '../../src/model/qwen3';
import { GrowError, grownWeights } from '../../src/pretrain/grow';
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
  });
});
