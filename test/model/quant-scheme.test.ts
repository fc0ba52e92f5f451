// The q4 scheme: embedding and LM head stay q8 by default (selectable), and that lowers the logit error.
import { describe, expect, it } from 'vitest';
import { CpuRefBackend } from '../../src/engine/cpu/ref';
import { defaultEmbedFormat } from '../../src/engine/quant';
import { buildQwen3 } from '../../src/model/weights';
import { randomWeights } from '../../src/model/random';
import { forward, KvCache, type Qwen3Model } from '../../src/model/qwen3';
import { tinyConfig } from '../fixtures/tiny-model';
import type { WeightFormat } from '../../src/model/qwen3';

const relErr = (a: Float32Array, b: Float32Array) => {
  let num = 0;
  let den = 0;
  for (let i = 0; i < a.length; i++) ((num += (a[i] - b[i]) ** 2), (den += b[i] ** 2));
  return Math.sqrt(num / den);
};

async function logits(m: Qwen3Model, ids: Int32Array): Promise<Float32Array> {
  const r = forward(m, new KvCache(m, 1, ids.length), { ids, slot: new Int32Array(ids.length), pos: Int32Array.from(ids, (_, i) => i) });
  return (await m.backend.read(r.logits)) as Float32Array;
}

describe('q4 scheme', () => {
  it('keeps the embedding and the LM head at q8 by default; embedFormat selects q4 or f32', async () => {
    expect(defaultEmbedFormat('q4')).toBe('q8');
    expect(defaultEmbedFormat('q8')).toBe('q8');
    expect(defaultEmbedFormat('f32')).toBe('f32');
    for (const tie of [true, false]) {
      const c = tinyConfig({ tieWordEmbeddings: tie });
      const build = (embedFormat?: WeightFormat) => buildQwen3(new CpuRefBackend(), c, randomWeights(c, 3, 'f32'), { format: 'q4', embedFormat, keepHost: true });
      const kinds = async (e?: WeightFormat) => {
        const { host } = await build(e);
        return [host!.get('model.embed_tokens.weight')!.kind, host!.get('lm_head.weight')?.kind, host!.get('model.layers.0.mlp.up_proj.weight')!.kind];
      };
      expect(await kinds()).toEqual(['q8', tie ? undefined : 'q8', 'q4']);
      expect(await kinds('q4')).toEqual(['q4', tie ? undefined : 'q4', 'q4']);
      expect(await kinds('f32')).toEqual(['f32', tie ? undefined : 'f32', 'q4']);
    }
  });

  it('the default q4 scheme has a lower logit error than all-q4 on at least 11 of 12 random tiny models', async () => {
    const c = tinyConfig();
    const ids = Int32Array.from({ length: 12 }, (_, i) => (i * 37 + 5) % c.vocabSize);
    let worse = 0;
    for (let seed = 1; seed <= 12; seed++) {
      const m = (format: WeightFormat, embedFormat?: WeightFormat) => buildQwen3(new CpuRefBackend(), c, randomWeights(c, seed, 'f32'), { format, embedFormat }).then((r) => r.model);
      const f = await logits(await m('f32'), ids);
      const eDefault = relErr(await logits(await m('q4'), ids), f);
      const eAll = relErr(await logits(await m('q4', 'q4'), ids), f);
      if (eDefault >= eAll) worse++;
    }
    expect(worse).toBeLessThanOrEqual(1);
  });
});
