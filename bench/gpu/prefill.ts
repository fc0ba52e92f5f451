// Prefill of our WebGPU engine and of onnxruntime-web's WebGPU EP side by side, over several prompt lengths
// (`npm run bench -- gpu` with BENCH_GPU_PREFILL=4,32,128): per length, one warm-up run and one timed run of each
// engine in turn (ORT first in every other length), so the load of a shared machine falls on both. A run is what
// a user waits for: the forward over P prompt tokens, the last token's logits and (ours) the greedy pick read back;
// tok/s = P / time. Like common.ts, this file imports nothing from Node: the browser page runs it.
import type * as OrtNs from 'onnxruntime-web';
import type { Qwen3Config } from '../../src/model/config';
import { forward, KvCache, type Qwen3Model } from '../../src/model/qwen3';
import { pastKey, pastValue } from '../../src/model/onnx/export';

export function promptIds(n: number, vocab: number): Int32Array {
  return Int32Array.from({ length: n }, (_, i) => (i * 7919 + 13) % vocab);
}

/** Seconds of one prefill of `p` tokens on our engine. */
export async function ourPrefill(model: Qwen3Model, p: number): Promise<number> {
  const b = model.backend;
  const ids = promptIds(p, model.config.vocabSize);
  const cache = new KvCache(model, 1, p + 1);
  const t0 = performance.now();
  try {
    const r = forward(model, cache, { ids, slot: new Int32Array(p), pos: Int32Array.from(ids, (_, i) => i) }, { logitRows: Int32Array.from([p - 1]) });
    const s = b.sample(r.logits, [{ temperature: 0, topP: 1, seed: 0, step: 0 }]);
    await b.read(s.tokens);
    for (const t of [r.logits, s.tokens, s.logprobs]) b.free(t);
    return (performance.now() - t0) / 1000;
  } finally {
    cache.free();
  }
}

/** An ORT session of the exported model that times one prefill of `p` tokens (the logits read back). */
export async function ortPrefiller(ort: typeof OrtNs, bytes: Uint8Array, c: Qwen3Config): Promise<{ run(p: number): Promise<number>; release(): Promise<void> }> {
  const session = await ort.InferenceSession.create(bytes, { executionProviders: ['webgpu'] });
  const empty = () => new ort.Tensor('float32', new Float32Array(0), [c.numKvHeads, 0, c.headDim]);
  return {
    async run(p) {
      const ids = promptIds(p, c.vocabSize);
      const f: Record<string, OrtNs.Tensor> = { input_ids: new ort.Tensor('int64', BigInt64Array.from(Array.from(ids), (v) => BigInt(v)), [p]) };
      for (let l = 0; l < c.numLayers; l++) ((f[pastKey(l)] = empty()), (f[pastValue(l)] = empty()));
      const t0 = performance.now();
      const out = await session.run(f);
      void (out.logits.data as Float32Array)[0];
      return (performance.now() - t0) / 1000;
    },
    release: () => session.release(),
  };
}

export interface PrefillPair {
  prompt: number;
  ours?: number;
  ort?: number;
}

/** tok/s of each engine (those given) at each prompt length, side by side. */
export async function comparePrefill(ours: Qwen3Model | null, ort: { run(p: number): Promise<number> } | null, prompts: number[], log: (m: string) => void): Promise<PrefillPair[]> {
  const out: PrefillPair[] = [];
  for (const [i, p] of prompts.entries()) {
    const pair: PrefillPair = { prompt: p };
    const engines: [keyof PrefillPair, (() => Promise<number>) | null][] = [
      ['ours', ours ? () => ourPrefill(ours, p) : null],
      ['ort', ort ? () => ort.run(p) : null],
    ];
    for (const [name, f] of i % 2 ? engines.reverse() : engines) {
      if (!f) continue;
      await f(); // warm-up: pipelines / ORT's shaders for this length
      (pair as unknown as Record<string, number>)[name] = p / (await f());
    }
    log(`prefill ${p} tokens side by side: ours ${pair.ours?.toPrecision(3) ?? '–'} tok/s, ORT ${pair.ort?.toPrecision(3) ?? '–'} tok/s${pair.ours && pair.ort ? ` (${(pair.ours / pair.ort).toFixed(2)}x)` : ''}`);
    out.push(pair);
  }
  return out;
}
