// End to end with the real Qwen3 tokenizer and a Qwen3-sized vocabulary (151936 rows, as in
// Qwen3's config.json, 267 more than the tokenizer has ids) on a tiny random model.
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CpuRefBackend } from '../../src/engine/cpu/ref';
import { buildQwen3 } from '../../src/model/weights';
import { randomWeights } from '../../src/model/random';
import { generate } from '../../src/model/generate';
import { logprobs } from '../../src/model/score';
import { checkTokenizerFits, Tokenizer } from '../../src/model/tokenizer';
import { QWEN3_TOKENIZER_DIR, tinyConfig } from '../fixtures/tiny-model';

describe('Qwen3 vocabulary end to end', () => {
  it('renders a chat prompt with tools, generates with sampling, and scores the result', async () => {
    const read = (f: string) => JSON.parse(readFileSync(join(QWEN3_TOKENIZER_DIR, f), 'utf8'));
    const tok = Tokenizer.fromJSON(read('tokenizer.json'), read('tokenizer_config.json'));
    const cfg = tinyConfig({ vocabSize: 151936, hiddenSize: 16, intermediateSize: 32, numLayers: 1, numHeads: 2, numKvHeads: 1, headDim: 8, maxPositionEmbeddings: 512 });
    checkTokenizerFits(tok, cfg.vocabSize);
    const { model } = await buildQwen3(new CpuRefBackend(), cfg, randomWeights(cfg, 3, 'f32'), { format: 'f32' });
    const tools = [{ type: 'function', function: { name: 'get_order', description: 'Look up an order', parameters: { type: 'object', properties: { order_id: { type: 'string' } } } } }];
    const prompt = tok.chat([{ role: 'user', content: 'Where is order #W1?' }], { tools });
    const [r] = await generate(model, tok, [{ prompt, maxNewTokens: 3, stopTokens: [], sampling: { temperature: 1, topP: 0.9, seed: 1 } }]);
    expect(r.promptTokens[0]).toBe(tok.tokenId('<|im_start|>'));
    expect(r.tokens).toHaveLength(3);
    for (const t of r.tokens) expect(t >= 0 && t < cfg.vocabSize).toBe(true);
    // A random model spreads mass over all 151936 rows: log-probs near -log(151936) = -11.9.
    for (const lp of r.logprobs) expect(lp).toBeLessThan(-5);
    const [scored] = await logprobs(model, [{ tokens: [...r.promptTokens, ...r.tokens], start: r.promptTokens.length }]);
    scored.forEach((lp, i) => expect(lp).toBeCloseTo(r.logprobs[i], 4));
  });
});
