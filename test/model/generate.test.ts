import { beforeAll, describe, expect, it } from 'vitest';
import { CpuRefBackend } from '../../src/engine/cpu/ref';
import { loadQwen3 } from '../../src/model/weights';
import { MemorySource } from '../../src/model/source';
import { Tokenizer } from '../../src/model/tokenizer';
import { generate, PrefixCache, type GenerateRequest } from '../../src/model/generate';
import type { TokenConstraint } from '../../src/model/token-constraint';
import { logprobs } from '../../src/model/score';
import type { Qwen3Model } from '../../src/model/qwen3';
import { tinyConfig, tinyModelFiles } from '../fixtures/tiny-model';
import { createLoraAdapter } from '../../src/model/lora';
import { Rng } from '../../src/util/rng';

let model: Qwen3Model;
let tok: Tokenizer;

beforeAll(async () => {
  const src = new MemorySource(await tinyModelFiles(tinyConfig(), 21));
  model = (await loadQwen3(src, new CpuRefBackend(), { format: 'f32' })).model;
  tok = await Tokenizer.load(src);
});

const prompts = ['<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n', 'x', 'The quick brown fox jumps', '{"name": "find_user"'];

describe('generate', () => {
  it('batched sequences of different prompt lengths give the same tokens as each alone (greedy and sampled)', async () => {
    const reqs: GenerateRequest[] = prompts.flatMap((p, i) => [
      { prompt: p, maxNewTokens: 10, stopTokens: [] },
      { prompt: p, maxNewTokens: 7 + i, stopTokens: [], sampling: { temperature: 0.9, topP: 0.8, seed: 100 + i } },
    ]);
    const batched = await generate(model, tok, reqs);
    // maxConcurrent 3: slots are freed and reused by waiting requests.
    const reused = await generate(model, tok, reqs, { maxConcurrent: 3, maxBatchTokens: 8 });
    for (let i = 0; i < reqs.length; i++) {
      const [alone] = await generate(model, tok, [reqs[i]]);
      expect(batched[i].tokens).toEqual(alone.tokens);
      expect(reused[i].tokens).toEqual(alone.tokens);
      expect(batched[i].logprobs).toEqual(alone.logprobs);
      expect(alone.tokens).toHaveLength(reqs[i].maxNewTokens);
      expect(alone.finishReason).toBe('length');
      expect(alone.text).toBe(tok.decode(alone.tokens));
      expect(alone.promptTokens).toEqual(tok.encode(prompts[i >> 1]));
    }
    // The chat prompt's special tokens were parsed into single ids.
    expect(batched[0].promptTokens.filter((t) => t === tok.tokenId('<|im_start|>'))).toHaveLength(2);
  });

  it('seeds are reproducible and matter; greedy logprobs are the max log-softmax', async () => {
    const req = (seed: number): GenerateRequest => ({ prompt: 'abc', maxNewTokens: 16, stopTokens: [], sampling: { temperature: 1, topP: 1, seed } });
    const [a, b, c] = await generate(model, tok, [req(1), req(1), req(2)]);
    expect(a.tokens).toEqual(b.tokens);
    expect(a.tokens).not.toEqual(c.tokens);
    // Sampling at temperature 1 reports the model's own log-probabilities: the scoring helper agrees.
    const prompt = tok.encode('abc');
    const [scored] = await logprobs(model, [{ tokens: [...prompt, ...a.tokens], start: prompt.length }]);
    expect(scored).toHaveLength(a.tokens.length);
    scored.forEach((lp, i) => expect(lp).toBeCloseTo(a.logprobs[i], 5));
    const [g] = await generate(model, tok, [{ prompt: 'abc', maxNewTokens: 4, stopTokens: [] }]);
    const [gs] = await logprobs(model, [{ tokens: [...prompt, ...g.tokens], start: prompt.length }]);
    gs.forEach((lp, i) => expect(lp).toBeCloseTo(g.logprobs[i], 5));
  });

  it('a constraint masks tokens: greedy takes the best allowed one, sampling draws only allowed ones, logprobs stay the model\'s own', async () => {
    const V = model.config.vocabSize;
    const prompt = tok.encode('abc');
    // Forbid, at every step, the token greedy decoding would pick unconstrained (read off the free run).
    const [free] = await generate(model, tok, [{ prompt, maxNewTokens: 6, stopTokens: [] }]);
    const seen: number[] = [];
    const notFree = (): TokenConstraint => {
      let step = 0;
      return {
        allowed: () => Uint8Array.from({ length: V }, (_, i) => (i === free.tokens[step] && seen.length === step ? 0 : 1)),
        push: (t) => (seen.push(t), step++),
      };
    };
    const [g] = await generate(model, tok, [{ prompt, maxNewTokens: 1, stopTokens: [], constraint: notFree() }]);
    // The second-best token of the first step, by the model's own log-softmax.
    const [lsm] = await logprobs(model, [{ tokens: [...prompt, 0], start: prompt.length }]);
    const full = await (async () => {
      const rows: number[] = [];
      for (let t = 0; t < V; t++) rows.push((await logprobs(model, [{ tokens: [...prompt, t], start: prompt.length }]))[0][0]);
      return rows;
    })();
    expect(lsm[0]).toBeCloseTo(full[0], 6);
    const order = full.map((lp, t) => [lp, t] as const).sort((a, b) => b[0] - a[0] || a[1] - b[1]);
    expect(order[0][1]).toBe(free.tokens[0]);
    expect(g.tokens[0]).toBe(order[1][1]);
    expect(g.logprobs[0]).toBeCloseTo(order[1][0], 5);
    // Sampling with a small allowed set (ids 3, 5, 7) draws only from it; logprobs are unmasked ones.
    const few = (): TokenConstraint => ({ allowed: () => Uint8Array.from({ length: V }, (_, i) => (i === 3 || i === 5 || i === 7 ? 1 : 0)), push: () => {} });
    const outs = await generate(model, tok, [1, 2, 3, 4].map((seed) => ({ prompt, maxNewTokens: 8, stopTokens: [], sampling: { temperature: 1, topP: 1, seed }, constraint: few() })));
    for (const o of outs) {
      expect(o.tokens.every((t) => t === 3 || t === 5 || t === 7)).toBe(true);
      const [scored] = await logprobs(model, [{ tokens: [...prompt, ...o.tokens], start: prompt.length }]);
      scored.forEach((lp, i) => expect(o.logprobs[i]).toBeCloseTo(lp, 5));
    }
    expect(new Set(outs.flatMap((o) => o.tokens)).size).toBeGreaterThan(1);
  });

  it('stop strings end the generation and cut the text; stop tokens end it with eos', async () => {
    // Sampled (seeded) rather than greedy: greedy on a random model tends to repeat one byte.
    const sampling = { temperature: 1, topP: 1, seed: 5 };
    const [free] = await generate(model, tok, [{ prompt: 'hello', maxNewTokens: 24, stopTokens: [], sampling }]);
    // Choose a stop string that occurs in the free-running text (printable ASCII, 1 or 2 characters).
    const text = free.text;
    let k = 2;
    while (k < text.length && !/[\x21-\x7e]/.test(text[k])) k++;
    expect(k).toBeLessThan(text.length);
    const stop = /[\x21-\x7e]/.test(text[k + 1] ?? '') ? text.slice(k, k + 2) : text[k];
    const cut = text.indexOf(stop);
    const [stopped] = await generate(model, tok, [{ prompt: 'hello', maxNewTokens: 24, stopTokens: [], stop: ['\u0000never', stop], sampling }]);
    expect(stopped.finishReason).toBe('stop');
    expect(stopped.stopIndex).toBe(1);
    expect(stopped.text).toBe(text.slice(0, cut));
    expect(stopped.tokens).toEqual(free.tokens.slice(0, stopped.tokens.length));
    expect(tok.decode(stopped.tokens)).toContain(stop);
    expect(tok.decode(stopped.tokens.slice(0, -1))).not.toContain(stop);
    // Treat the 5th generated token as an end token: generation ends there, text without it.
    const end = free.tokens[4];
    const firstAt = free.tokens.indexOf(end);
    const [eos] = await generate(model, tok, [{ prompt: 'hello', maxNewTokens: 24, stopTokens: [end], sampling }]);
    expect(eos.finishReason).toBe('eos');
    expect(eos.tokens).toEqual(free.tokens.slice(0, firstAt + 1));
    expect(eos.text).toBe(tok.decode(free.tokens.slice(0, firstAt)));
  });

  it('uses the LoRA adapter it is given', async () => {
    const adapter = createLoraAdapter(model.backend, model.config, { name: 'act', rank: 2, alpha: 4, seed: 3 });
    const req: GenerateRequest = { prompt: 'hello', maxNewTokens: 8, stopTokens: [] };
    const [base] = await generate(model, tok, [req]);
    const [fresh] = await generate(model, tok, [req], { adapter });
    expect(fresh.tokens).toEqual(base.tokens);
    const r = new Rng(8);
    for (const [n, t] of adapter.parameters()) if (n.includes('lora_B')) model.backend.write(t, Float32Array.from({ length: t.shape[0] * t.shape[1] }, () => r.normal()));
    const [moved] = await generate(model, tok, [req], { adapter });
    expect(moved.logprobs).not.toEqual(base.logprobs);
  });

  it('a prefix cache reuses earlier turns without changing the tokens; another adapter empties it', async () => {
    const system = tok.encode('<|im_start|>system\nYou are a retail agent.<|im_end|>\n');
    const turn1 = ['find order', 'cancel it', 'hello'].map((u, i): GenerateRequest => ({
      prompt: [...system, ...tok.encode(`<|im_start|>user\n${u}<|im_end|>\n<|im_start|>assistant\n`)],
      maxNewTokens: 6,
      stopTokens: [],
      sampling: { temperature: 1, topP: 0.95, seed: 40 + i },
    }));
    const pc = new PrefixCache(model, 3, 200);
    const a1 = await generate(model, tok, turn1, { prefixCache: pc });
    expect(a1.map((r) => r.tokens)).toEqual((await generate(model, tok, turn1)).map((r) => r.tokens));
    expect(pc.reused).toBe(0);
    // Turn 2 extends each conversation; they come back in another order and find their own slots.
    const turn2 = [2, 0, 1].map((i): GenerateRequest => ({
      ...turn1[i],
      prompt: [...(turn1[i].prompt as number[]), ...a1[i].tokens, ...tok.encode('<|im_end|>\n<|im_start|>user\nok<|im_end|>\n<|im_start|>assistant\n')],
    }));
    const fedBefore = pc.fed;
    const a2 = await generate(model, tok, turn2, { prefixCache: pc });
    expect(a2.map((r) => r.tokens)).toEqual((await generate(model, tok, turn2)).map((r) => r.tokens));
    // Everything but each conversation's last generated token was already in the cache.
    const cached = turn2.reduce((n, r, j) => n + (turn1[[2, 0, 1][j]].prompt as number[]).length + a1[[2, 0, 1][j]].tokens.length - 1, 0);
    expect(pc.reused).toBe(cached);
    expect(pc.fed - fedBefore).toBe(turn2.reduce((n, r) => n + (r.prompt as number[]).length, 0) - cached);
    // Another adapter: the cache forgets (its keys/values were computed with other weights).
    const adapter = createLoraAdapter(model.backend, model.config, { name: 'x', rank: 2, alpha: 2, seed: 1 });
    await generate(model, tok, turn2.slice(0, 1), { prefixCache: pc, adapter });
    expect(pc.reused).toBe(cached);
    pc.free();
  });

  it('a draft changes no token, text, finish or log-probability; a right draft decodes in one forward', async () => {
    // A stateful constraint (no token may repeat the one before it) and stop strings, as rehearsals decode.
    const noRepeat = (): TokenConstraint => {
      let last = -1;
      return {
        allowed: () => (last < 0 ? null : Uint8Array.from({ length: model.config.vocabSize }, (_, v) => (v === last ? 0 : 1))),
        push: (t) => void (last = t),
      };
    };
    const base = (i: number, constrained: boolean): GenerateRequest => ({
      prompt: prompts[i % prompts.length],
      maxNewTokens: 12,
      stopTokens: [],
      ...(i % 3 === 2 ? { stop: ['e'] } : {}),
      ...(constrained ? { constraint: noRepeat() } : {}),
    });
    for (const constrained of [false, true]) {
      const plainReqs = Array.from({ length: 6 }, (_, i) => base(i, constrained));
      let plainSteps = 0;
      const plain = await generate(model, tok, plainReqs, { onStep: () => plainSteps++ });
      // Drafts: the answer itself, a prefix of it, one wrong from the third token, nonsense, longer than allowed, empty.
      const r = new Rng(5);
      const drafts = plain.map((o, i) => {
        const t = o.tokens;
        return [t, t.slice(0, 4), [...t.slice(0, 2), (t[2] + 1) % model.config.vocabSize, ...t.slice(3)], Array.from({ length: 9 }, () => r.int(model.config.vocabSize)), [...t, ...t, ...t], []][i];
      });
      for (const maxBatchTokens of [512, 5]) {
        let steps = 0;
        const drafted = await generate(model, tok, drafts.map((d, i) => ({ ...base(i, constrained), draft: d })), { maxBatchTokens, onStep: () => steps++ });
        drafted.forEach((o, i) => {
          expect(o.tokens).toEqual(plain[i].tokens);
          expect(o.text).toBe(plain[i].text);
          expect(o.finishReason).toBe(plain[i].finishReason);
          expect(o.stopIndex).toBe(plain[i].stopIndex);
          o.logprobs.forEach((lp, j) => expect(lp).toBeCloseTo(plain[i].logprobs[j], 5));
        });
        // The batch decodes as long as its slowest sequence (the nonsense and empty drafts): never longer than without drafts.
        if (maxBatchTokens === 512) expect(steps).toBeLessThanOrEqual(plainSteps);
      }
    }
    // Alone, the right draft is one forward; a prefix cache stays consistent after a draft was cut short.
    const req = base(0, false);
    const [want] = await generate(model, tok, [req]);
    let steps = 0;
    await generate(model, tok, [{ ...req, draft: want.tokens }], { onStep: () => steps++ });
    expect(steps).toBe(1);
    const pc = new PrefixCache(model, 2, 200);
    const wrong = [...want.tokens.slice(0, 3), (want.tokens[3] + 7) % model.config.vocabSize, 1, 2, 3];
    expect((await generate(model, tok, [{ ...req, draft: wrong }], { prefixCache: pc }))[0].tokens).toEqual(want.tokens);
    const next = { ...req, prompt: [...tok.encode(req.prompt as string), ...want.tokens.slice(0, 6)] };
    expect((await generate(model, tok, [next], { prefixCache: pc }))[0].tokens).toEqual((await generate(model, tok, [next]))[0].tokens);
    pc.free();
    await expect(generate(model, tok, [{ ...req, draft: [1], sampling: { temperature: 1, topP: 1, seed: 1 } }])).rejects.toThrow(/draft but samples/);
    await expect(generate(model, tok, [{ ...req, draft: [model.config.vocabSize] }])).rejects.toThrow(/outside the vocabulary/);
  });

  it('logprobs packs many sequences into forwards of bounded size with the same results', async () => {
    const r = new Rng(77);
    const seqs = [9, 3, 14, 2, 6].map((n, i) => ({ tokens: Array.from({ length: n }, () => r.int(model.config.vocabSize)), start: 1 + (i % 2) }));
    const packed = await logprobs(model, seqs, { maxBatchTokens: 12 });
    const wide = await logprobs(model, seqs);
    for (let i = 0; i < seqs.length; i++) {
      const [alone] = await logprobs(model, [seqs[i]]);
      expect(alone).toHaveLength(seqs[i].tokens.length - seqs[i].start);
      expect(packed[i]).toEqual(alone);
      expect(wide[i]).toEqual(alone);
    }
    await expect(logprobs(model, [{ tokens: [1, 2], start: 0 }])).rejects.toThrow(/start 0 outside/);
  });

  it('refuses prompts that cannot run instead of producing garbage', async () => {
    await expect(generate(model, tok, [{ prompt: [], maxNewTokens: 3 }])).rejects.toThrow(/empty prompt/);
    await expect(generate(model, tok, [{ prompt: [model.config.vocabSize + 5], maxNewTokens: 3 }])).rejects.toThrow(/outside the vocabulary/);
    for (const bad of [1.5, -1, NaN]) await expect(generate(model, tok, [{ prompt: [1, bad], maxNewTokens: 3 }])).rejects.toThrow(/has token id .* outside the vocabulary/);
    await expect(generate(model, tok, [{ prompt: 'abcdef', maxNewTokens: 3 }], { maxSeqLen: 4 })).rejects.toThrow(/context holds 4/);
    const [r] = await generate(model, tok, [{ prompt: 'abc', maxNewTokens: 0 }]);
    expect(r).toMatchObject({ tokens: [], finishReason: 'length' });
  });
});

describe('decoding caches are not cleared (cpu-fast)', () => {
  it('stale NaN bytes in reused heap blocks change no token, log-probability or score', async () => {
    const { createCpuFastBackend } = await import('../../src/engine/cpu/fast/backend');
    const b = await createCpuFastBackend({ threads: 1 });
    try {
      const src = new MemorySource(await tinyModelFiles(tinyConfig(), 21));
      const m = (await loadQwen3(src, b, { format: 'f32' })).model;
      const reqs: GenerateRequest[] = prompts.map((p, i) => ({ prompt: p, maxNewTokens: 6 + i, stopTokens: [] }));
      const seq = { tokens: tok.encode('The quick brown fox jumps'), start: 2 };
      // Two slots for four requests: slots are reused mid-batch too.
      const opts = { maxConcurrent: 2, maxBatchTokens: 5 };
      const clean = await generate(m, tok, reqs, opts);
      const [cleanScore] = await logprobs(m, [seq]);
      // Fill the heap's free space with NaN: the next caches are carved from these blocks.
      const junk = b.tensor(new Float32Array(1 << 22).fill(NaN), [1 << 22]);
      b.free(junk);
      const probe = b.empty([1 << 22]);
      const stale = (await b.read(probe)) as Float32Array;
      b.free(probe);
      // The premise: an empty block really is stale memory (otherwise this test could not fail).
      expect(stale.some((x) => Number.isNaN(x))).toBe(true);
      b.free(b.tensor(new Float32Array(1 << 22).fill(NaN), [1 << 22]));
      const dirty = await generate(m, tok, reqs, opts);
      b.free(b.tensor(new Float32Array(1 << 22).fill(NaN), [1 << 22]));
      const [dirtyScore] = await logprobs(m, [seq]);
      dirty.forEach((r, i) => {
        expect(r.tokens).toEqual(clean[i].tokens);
        expect(r.logprobs).toEqual(clean[i].logprobs);
      });
      expect(dirtyScore).toEqual(cleanScore);
    } finally {
      b.dispose();
    }
  });
});
