// Whole-model logits and generations on every other backend against the CPU reference.
import { describe, expect, it } from 'vitest';
import { createBackend } from '../../src/engine/index';
import type { Backend, BackendName } from '../../src/engine/backend';
import { CpuRefBackend } from '../../src/engine/cpu/ref';
import { buildQwen3 } from '../../src/model/weights';
import { randomWeights } from '../../src/model/random';
import { forward, KvCache, type Qwen3Model } from '../../src/model/qwen3';
import { generate, type GenerateRequest } from '../../src/model/generate';
import type { TokenConstraint } from '../../src/model/token-constraint';
import { Tokenizer } from '../../src/model/tokenizer';
import { byteTokenizerConfig, byteTokenizerJson, tinyConfig } from '../fixtures/tiny-model';
import { gpuAvailable, nodeGpu } from '../helpers/gpu';
import { Rng } from '../../src/util/rng';

// Non-multiples of every tile: hidden 40, 5 query heads over 1 kv head, head_dim 8, F 72, vocab 265.
const cfg = tinyConfig({ hiddenSize: 40, numHeads: 5, numKvHeads: 1, intermediateSize: 72 });

async function logitsOn(b: Backend, format: 'f32' | 'q8' | 'q4'): Promise<{ prefill: Float32Array; decode: Float32Array; model: Qwen3Model }> {
  const { model } = await buildQwen3(b, cfg, randomWeights(cfg, 41, 'f32'), { format });
  const r = new Rng(42);
  const a = Int32Array.from({ length: 11 }, () => r.int(cfg.vocabSize));
  const cache = new KvCache(model, 2, 16);
  // Two sequences of different lengths in one prefill (slot 1: 11 tokens, slot 0: 4), then one decode step.
  const ids = Int32Array.from([...a, ...a.subarray(0, 4)]);
  const slot = Int32Array.from([...new Array(11).fill(1), 0, 0, 0, 0]);
  const pos = Int32Array.from([...a.keys(), 0, 1, 2, 3]);
  const p = forward(model, cache, { ids, slot, pos });
  const prefill = (await b.read(p.logits)) as Float32Array;
  const d = forward(model, cache, { ids: Int32Array.from([7, 9]), slot: Int32Array.from([0, 1]), pos: Int32Array.from([4, 11]) }, { logitRows: Int32Array.from([1, 0]) });
  const decode = (await b.read(d.logits)) as Float32Array;
  for (const t of [p.logits, d.logits]) b.free(t);
  cache.free();
  return { prefill, decode, model };
}

function relErr(a: Float32Array, b: Float32Array): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < a.length; i++) ((num += (a[i] - b[i]) ** 2), (den += b[i] ** 2));
  return Math.sqrt(num / den);
}

async function compare(name: BackendName, b: Backend) {
  const tok = Tokenizer.fromJSON(byteTokenizerJson(), byteTokenizerConfig());
  // A constraint (only even ids) goes through the backend's add and sampler: -Infinity logits are never drawn.
  const evenOnly = (): TokenConstraint => ({ allowed: () => Uint8Array.from({ length: cfg.vocabSize }, (_, i) => (i % 2 === 0 ? 1 : 0)), push: () => {} });
  const reqs = (): GenerateRequest[] => [
    { prompt: 'hello world', maxNewTokens: 6, stopTokens: [] },
    { prompt: 'ab', maxNewTokens: 5, stopTokens: [], sampling: { temperature: 0.8, topP: 0.9, seed: 3 } },
    { prompt: 'hello world', maxNewTokens: 6, stopTokens: [], constraint: evenOnly() },
    { prompt: 'ab', maxNewTokens: 5, stopTokens: [], sampling: { temperature: 0.8, topP: 0.9, seed: 3 }, constraint: evenOnly() },
  ];
  for (const format of ['f32', 'q8', 'q4'] as const) {
    const ref = await logitsOn(new CpuRefBackend(), format);
    const got = await logitsOn(b, format);
    const ep = relErr(got.prefill, ref.prefill);
    const ed = relErr(got.decode, ref.decode);
    console.log(`${name} vs cpu-ref, ${format}: prefill rel err ${ep.toExponential(2)}, decode ${ed.toExponential(2)}`);
    expect(ep).toBeLessThanOrEqual(1e-4);
    expect(ed).toBeLessThanOrEqual(1e-4);
    // Same tokens from generate (argmax / sampling decisions are not near ties on these logits).
    const want = await generate(ref.model, tok, reqs());
    const have = await generate(got.model, tok, reqs());
    expect(have.map((x) => x.tokens)).toEqual(want.map((x) => x.tokens));
    for (const r of have.slice(2)) expect(r.tokens.every((t) => t % 2 === 0)).toBe(true);
    // Greedy requests with drafts (right, wrong from the second token) beside sampled ones: the same tokens again.
    const drafted = reqs().map((r, i) => (r.sampling ? r : { ...r, draft: i === 0 ? want[i].tokens : [want[i].tokens[0], (want[i].tokens[1] + 2) % cfg.vocabSize] }));
    expect((await generate(got.model, tok, drafted)).map((x) => x.tokens)).toEqual(want.map((x) => x.tokens));
    got.model.free();
  }
}

describe('whole model on other backends vs the CPU reference (relative error <= 1e-4)', () => {
  it('cpu-fast', async () => {
    const b = await createBackend('cpu-fast', { threads: 1 });
    try {
      await compare('cpu-fast', b);
    } finally {
      b.dispose();
    }
  });

  it('webgpu (Dawn + lavapipe)', async (ctx) => {
    if (!(await gpuAvailable())) return ctx.skip();
    const b = await createBackend('webgpu', { gpu: nodeGpu() });
    try {
      await compare('webgpu', b);
    } finally {
      b.dispose();
    }
  });
});
