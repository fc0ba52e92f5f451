// The attention probe's forward pass against the engine, and the probe against a model that copies
// (the bundled retail policy) and the same shape at its pretraining initialisation (which cannot).
import { describe, expect, it } from 'vitest';
import { CpuRefBackend } from '../../src/engine/cpu/ref';
import { logprobs } from '../../src/model/score';
import { MemorySource } from '../../src/model/source';
import { DirSource } from '../../src/model/source-node';
import { Tokenizer } from '../../src/model/tokenizer';
import { buildQwen3, loadQwen3 } from '../../src/model/weights';
import { attentionProbe, PlainQwen3 } from '../../research/pretrain/attention-probe';
import { initWeights } from '../../research/pretrain/trainer';
import { tinyConfig, tinyModelFiles } from '../fixtures/tiny-model';

describe('attention probe', () => {
  it.each([
    ['tied embeddings, GQA', tinyConfig()],
    ['lm_head, wider heads', tinyConfig({ tieWordEmbeddings: false, numKvHeads: 4, headDim: 16 })],
  ])('its plain forward gives the engine\'s log-probabilities (%s), within 2e-4', async (_, config) => {
    const { model, host } = await loadQwen3(new MemorySource(await tinyModelFiles(config, 3)), new CpuRefBackend(), { format: 'f32', keepHost: true });
    const plain = new PlainQwen3(config, host!);
    const ids = Array.from({ length: 40 }, (_, i) => (i * 37 + 11) % config.vocabSize);
    const ref = (await logprobs(model, [{ tokens: ids, start: 1 }]))[0];
    const tr = plain.forward(ids);
    let worst = 0;
    for (let t = 1; t < ids.length; t++) worst = Math.max(worst, Math.abs(tr.logprobs[t - 1][ids[t]] - ref[t - 1]));
    expect(worst).toBeLessThan(2e-4);
    // Every attention row is a distribution over the positions up to the query.
    for (const layer of tr.probs) for (const head of layer) head.forEach((row, t) => {
      expect(row.length).toBe(t + 1);
      expect(Math.abs(row.reduce((a, b) => a + b, 0) - 1)).toBeLessThan(1e-5);
    });
  });

  it('finds copy heads in the bundled retail policy and none at its initialisation', async () => {
    const dir = 'models/retail';
    const src = new DirSource(dir);
    const tok = await Tokenizer.load(src);
    const loaded = await loadQwen3(src, new CpuRefBackend(), { format: 'f32', keepHost: true });
    const config = loaded.model.config;
    const filler = ['Hi, I need help with my order.', 'Could you check something for me please?'];
    const o = { drills: 12, seed: 1, filler };
    const trained = attentionProbe(new PlainQwen3(config, loaded.host!), tok, o);
    const { host } = await buildQwen3(new CpuRefBackend(), config, initWeights(config, 0), { format: 'f32', keepHost: true });
    const init = attentionProbe(new PlainQwen3(config, host!), tok, o);
    expect(trained.positions).toBeGreaterThan(100);
    expect(init.positions).toBe(trained.positions);
    const best = (p: typeof trained) => Math.max(...p.heads.map((h) => h.sourceMass));
    expect(best(trained)).toBeGreaterThan(0.5);
    expect(best(init)).toBeLessThan(4 * init.chance + 0.05);
    expect(Math.max(...trained.heads.map((h) => h.top1))).toBeGreaterThan(0.8);
  }, 120_000);
});
