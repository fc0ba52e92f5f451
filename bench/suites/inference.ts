// Inference speed: prefill and decode tokens/s of our backends and of onnxruntime-web (wasm) running the
// same model exported to ONNX, for a tiny f32 model and a random-weight model shaped like Qwen3-0.6B in
// q4 with the default scheme (embedding / LM head q8); ORT runs the very same quantized weights through
// MatMulNBits / GatherBlockQuantized (bits 4, and bits 8 for the embedding / head).
//
// prefill: one forward over a prompt of P tokens (logits of the last token only), tokens/s = P / time.
// decode:  after that prefill, N single-token steps, each forward + greedy pick + read back of the token.
import os from 'node:os';
import * as ort from 'onnxruntime-web';
import { createBackend } from '../../src/engine/index';
import type { Backend, BackendName } from '../../src/engine/backend';
import { CpuRefBackend } from '../../src/engine/cpu/ref';
import { paramCount, QWEN3_06B_SHAPE, type Qwen3Config } from '../../src/model/config';
import { buildQwen3, type HostWeights, type WeightSpec } from '../../src/model/weights';
import { defaultEmbedFormat } from '../../src/engine/quant';
import { randomWeights } from '../../src/model/random';
import { forward, KvCache, type Qwen3Model, type WeightFormat } from '../../src/model/qwen3';
import { exportQwen3Onnx, pastKey, pastValue, presentKey, presentValue } from '../../src/model/onnx/export';
import { Rng } from '../../src/util/rng';
import { nodeAdapter, nodeGpu } from '../gpu';
import type { BenchContext, BenchSuite, Bound } from '../lib';
import { weightBytesPerToken } from '../gpu/common';

interface ModelCase {
  name: string;
  config: Qwen3Config;
  format: WeightFormat;
  prompt: number;
  decode: number;
  /** Backends too slow to be worth timing on this model. */
  skip: BackendName[];
  /** Smaller runs for slow backends (their records carry their own shape). */
  small?: Partial<Record<BackendName, { prompt: number; decode: number }>>;
}

const TINY: Qwen3Config = {
  hiddenSize: 128,
  intermediateSize: 384,
  numLayers: 4,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 32,
  rmsNormEps: 1e-6,
  ropeTheta: 1_000_000,
  vocabSize: 4096,
  tieWordEmbeddings: true,
  maxPositionEmbeddings: 1024,
};

const QWEN3_06B = QWEN3_06B_SHAPE;

function cases(quick: boolean): ModelCase[] {
  return [
    { name: `tiny-${(paramCount(TINY) / 1e6).toFixed(1)}M-f32`, config: TINY, format: 'f32', prompt: quick ? 32 : 128, decode: quick ? 8 : 32, skip: [] },
    // cpu-ref dequantizes every weight per forward in plain JS (tens of seconds per call here).
    { name: 'qwen3-0.6b-shape-q4', config: QWEN3_06B, format: 'q4', prompt: quick ? 8 : 32, decode: quick ? 2 : 4, skip: quick ? ['cpu-ref'] : [], small: { 'cpu-ref': { prompt: 4, decode: 1 } } },
  ];
}

function promptIds(n: number, vocab: number): Int32Array {
  const r = new Rng(7);
  return Int32Array.from({ length: n }, () => r.int(vocab));
}

async function timeOurs(model: Qwen3Model, mc: ModelCase, warmup = true): Promise<{ prefill: number; decode: number }> {
  const b = model.backend;
  const ids = promptIds(mc.prompt, mc.config.vocabSize);
  const cache = new KvCache(model, 1, mc.prompt + mc.decode + 1);
  const run = async () => {
    const r = forward(model, cache, { ids, slot: new Int32Array(ids.length), pos: Int32Array.from(ids, (_, i) => i) }, { logitRows: Int32Array.from([ids.length - 1]) });
    const s = b.sample(r.logits, [{ temperature: 0, topP: 1, seed: 0, step: 0 }]);
    const tok = (await b.read(s.tokens))[0];
    for (const t of [r.logits, s.tokens, s.logprobs]) b.free(t);
    return tok;
  };
  if (warmup) await run(); // pipelines, wasm pages, JIT
  let t0 = performance.now();
  let token = await run();
  const prefill = mc.prompt / ((performance.now() - t0) / 1000);
  t0 = performance.now();
  for (let i = 0; i < mc.decode; i++) {
    const r = forward(model, cache, { ids: Int32Array.from([token]), slot: new Int32Array(1), pos: Int32Array.from([mc.prompt + i]) });
    const s = b.sample(r.logits, [{ temperature: 0, topP: 1, seed: 0, step: i + 1 }]);
    token = (await b.read(s.tokens))[0];
    for (const t of [r.logits, s.tokens, s.logprobs]) b.free(t);
  }
  const decode = mc.decode / ((performance.now() - t0) / 1000);
  cache.free();
  return { prefill, decode };
}

/** Decode throughput of B sequences stepping together (the K rollouts of a prompt), tokens/s over all. */
async function timeBatchedDecode(model: Qwen3Model, B: number, prompt: number, steps: number): Promise<number> {
  const b = model.backend;
  const cache = new KvCache(model, B, prompt + steps + 1);
  const ids = promptIds(B * prompt, model.config.vocabSize);
  const slot = Int32Array.from(ids, (_, i) => Math.floor(i / prompt));
  const pos = Int32Array.from(ids, (_, i) => i % prompt);
  const last = Int32Array.from({ length: B }, (_, s) => s * prompt + prompt - 1);
  const params = Array.from({ length: B }, (_, s) => ({ temperature: 0, topP: 1, seed: s, step: 0 }));
  const step = async (r: ReturnType<typeof forward>) => {
    const smp = b.sample(r.logits, params);
    const toks = (await b.read(smp.tokens)) as Int32Array;
    for (const t of [r.logits, smp.tokens, smp.logprobs]) b.free(t);
    return toks;
  };
  let toks = await step(forward(model, cache, { ids, slot, pos }, { logitRows: last }));
  const slots = Int32Array.from({ length: B }, (_, s) => s);
  const t0 = performance.now();
  for (let i = 0; i < steps; i++) toks = await step(forward(model, cache, { ids: toks, slot: slots, pos: new Int32Array(B).fill(prompt + i) }));
  const rate = (B * steps) / ((performance.now() - t0) / 1000);
  cache.free();
  return rate;
}

async function timeOrt(bytes: Uint8Array, mc: ModelCase): Promise<{ prefill: number; decode: number }> {
  const c = mc.config;
  const session = await ort.InferenceSession.create(bytes);
  const empty = () => new ort.Tensor('float32', new Float32Array(0), [c.numKvHeads, 0, c.headDim]);
  const feeds = (ids: ArrayLike<number>, past: (l: number, k: boolean) => ort.Tensor) => {
    const f: Record<string, ort.Tensor> = { input_ids: new ort.Tensor('int64', BigInt64Array.from(Array.from(ids), (v) => BigInt(v)), [ids.length]) };
    for (let l = 0; l < c.numLayers; l++) ((f[pastKey(l)] = past(l, true)), (f[pastValue(l)] = past(l, false)));
    return f;
  };
  const argmaxLast = (logits: ort.Tensor) => {
    const data = logits.data as Float32Array;
    const V = c.vocabSize;
    let best = 0;
    for (let i = 1; i < V; i++) if (data[data.length - V + i] > data[data.length - V + best]) best = i;
    return best;
  };
  const ids = promptIds(mc.prompt, c.vocabSize);
  await session.run(feeds(ids, empty)); // warm-up
  let t0 = performance.now();
  let out = await session.run(feeds(ids, empty));
  let token = argmaxLast(out.logits);
  const prefill = mc.prompt / ((performance.now() - t0) / 1000);
  t0 = performance.now();
  for (let i = 0; i < mc.decode; i++) {
    const prev = out;
    out = await session.run(feeds([token], (l, k) => prev[k ? presentKey(l) : presentValue(l)]));
    token = argmaxLast(out.logits);
  }
  const decode = mc.decode / ((performance.now() - t0) / 1000);
  await session.release();
  return { prefill, decode };
}

async function backendsAvailable(ctx: BenchContext, threads: number): Promise<{ name: BackendName; make: () => Promise<Backend>; threads: number }[]> {
  const list: { name: BackendName; make: () => Promise<Backend>; threads: number }[] = [
    { name: 'cpu-ref', make: async () => new CpuRefBackend(), threads: 1 },
    { name: 'cpu-fast', make: () => createBackend('cpu-fast', { threads }), threads },
  ];
  const adapter = await nodeAdapter();
  if (adapter) list.push({ name: 'webgpu', make: () => createBackend('webgpu', { gpu: nodeGpu() }), threads: 1 });
  else ctx.log('no WebGPU adapter: webgpu not measured');
  return list;
}

const suite: BenchSuite = {
  name: 'inference',
  async run(ctx) {
    const threads = Number(process.env.BENCH_THREADS ?? Math.min(os.cpus().length, 4));
    ort.env.wasm.numThreads = threads;
    const backends = await backendsAvailable(ctx, threads);
    // BENCH_MODELS=tiny (a comma-separated list of name parts) limits the run to some models.
    const only = process.env.BENCH_MODELS?.split(',').filter(Boolean);
    for (const mc of cases(ctx.quick).filter((m) => !only || only.some((o) => m.name.includes(o)))) {
      ctx.log(`${mc.name}: ${(paramCount(mc.config) / 1e6).toFixed(1)}M parameters, ${mc.format}; generating weights`);
      // Weights are generated once (directly quantized, a block of rows at a time) and shared by every backend.
      const t0 = performance.now();
      // The default scheme: under q4 the embedding / LM head are q8 (defaultEmbedFormat).
      const gen = randomWeights(mc.config, 1, mc.format, { dist: 'uniform' });
      const genTable = randomWeights(mc.config, 2, defaultEmbedFormat(mc.format), { dist: 'uniform' });
      const next = (spec: WeightSpec) => (spec.name === 'model.embed_tokens.weight' || spec.name === 'lm_head.weight' ? genTable(spec) : gen(spec));
      const host: HostWeights = (await buildQwen3(new CpuRefBackend(), mc.config, next, { format: mc.format, keepHost: true })).host!;
      ctx.log(`${mc.name}: weights ready in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
      // Limits (bench/limits.ts): a decoded token reads every weight once (bound: the read bandwidth per thread,
      // of main memory when the weights exceed 16 MiB, or the WebGPU adapter's copy bandwidth); a prefilled token
      // costs ~2 flops per parameter (bound: the wasm-simd mul+add peak per thread; WebGPU: none measured).
      const bytesPerToken = weightBytesPerToken(mc.config, host);
      const flopsPerToken = 2 * paramCount(mc.config);
      const gpuBackend = (b: string) => b === 'webgpu' || b === 'ort-webgpu';
      const decodeBound = (b: string, tokS: number): Bound => ({ kind: gpuBackend(b) ? 'gpu-copy' : bytesPerToken > 16 * 2 ** 20 ? 'read-large' : 'read', use: (bytesPerToken * tokS) / 1e9 });
      const prefillBound = (b: string, tokS: number): Bound | undefined => (gpuBackend(b) ? undefined : { kind: 'fma', use: (flopsPerToken * tokS) / 1e9 });
      const rec = (backend: Parameters<BenchContext['record']>[0]['backend'], th: number, r: { prefill: number; decode: number }, run: ModelCase = mc) => {
        const shape = `prompt=${run.prompt},decode=${run.decode}`;
        ctx.record({ case: `prefill ${mc.name}`, backend, metric: 'prefill_tok_s', value: r.prefill, unit: 'tok/s', threads: th, shape, model: mc.name, bound: prefillBound(backend, r.prefill) });
        ctx.record({ case: `decode ${mc.name}`, backend, metric: 'decode_tok_s', value: r.decode, unit: 'tok/s', threads: th, shape, model: mc.name, bound: decodeBound(backend, r.decode) });
        ctx.log(`${mc.name} ${backend} (threads ${th}): prefill ${r.prefill.toPrecision(3)} tok/s, decode ${r.decode.toPrecision(3)} tok/s`);
      };
      for (const be of backends) {
        if (mc.skip.includes(be.name)) {
          ctx.log(`${mc.name}: ${be.name} skipped in this mode (too slow)`);
          continue;
        }
        let b: Backend | null = null;
        try {
          b = await be.make();
          const { model } = await buildQwen3(b, mc.config, (spec) => host.get(spec.name)!, { format: mc.format });
          const small = mc.small?.[be.name];
          const run = small ? { ...mc, ...small } : mc;
          rec(be.name, be.threads, await timeOurs(model, run, !small), run);
          if (!small) {
            const B = 8;
            const steps = Math.max(1, Math.floor(mc.decode / 2));
            const bp = mc.config.hiddenSize >= 1024 ? 2 : 8; // short prompts: only the decode is timed
            const v = await timeBatchedDecode(model, B, bp, steps);
            // B tokens a step share one read of the weights
            const bound = decodeBound(be.name, v / B);
            ctx.record({ case: `decode x${B} ${mc.name}`, backend: be.name, metric: 'decode_tok_s', value: v, unit: 'tok/s', threads: be.threads, shape: `batch=${B},prompt=${bp},decode=${steps}`, model: mc.name, bound });
            ctx.log(`${mc.name} ${be.name}: ${B} sequences decoding together: ${v.toPrecision(3)} tok/s in all`);
          }
          model.free();
        } catch (e) {
          ctx.log(`${mc.name}: ${be.name} failed: ${(e as Error).message}`);
        } finally {
          b?.dispose();
        }
      }
      try {
        // Last-token logits only, like our forward with logitRows.
        const bytes = exportQwen3Onnx(mc.config, host, { weights: mc.format === 'q4' ? 'q4' : 'f32', maxPositions: mc.prompt + mc.decode + 1, logits: 'last' });
        ctx.log(`${mc.name}: ONNX export ${(bytes.length / 2 ** 20).toFixed(0)} MiB`);
        if (mc.format === 'q4')
          ctx.log(`${mc.name}: note: ORT runs our q4 weights through MatMulNBits; its wasm build measured ~0.13 GFLOP/s on one (1x1024)x(1024x3072) MatMulNBits vs ~15 for an f32 Gemm here, so this baseline is limited by that kernel. An f32 export of this model (2.4 GB) exceeds protobuf's 2 GB limit and wasm32 memory.`);
        rec('ort-wasm', threads, await timeOrt(bytes, mc));
      } catch (e) {
        ctx.log(`${mc.name}: onnxruntime-web could not run the exported model: ${(e as Error).message}`);
      }
    }
  },
};

export default suite;
