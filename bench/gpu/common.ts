// `npm run bench -- gpu`, the part that runs wherever a WebGPU adapter is (Node/Dawn or a browser page):
// prefill and decode tokens/s of our WebGPU engine and of onnxruntime-web's WebGPU execution provider
// on the same exported model, plus the fraction of the memory-bandwidth bound.
//
// Models: the bundled policy (f32 and q4) and a Qwen3-0.6B-shaped model (q4, default scheme: embedding /
// LM head q8) with random quantized weights drawn directly as codes (a speed benchmark: values do not
// matter, and drawing 600 M Gaussian weights would take minutes). Both engines run the very same
// weights: ours from the host weights, ORT from exportQwen3Onnx of the same host weights (MatMulNBits /
// GatherBlockQuantized for q4/q8, Gemm for f32).
//
// prefill: one forward over P prompt tokens (logits of the last token), tok/s = P / time.
// decode:  N single-token steps after it and after one untimed step (forward, greedy pick, read back), tok/s = N / time.
// Bandwidth: a decode step reads every weight once (the embedding table only as the LM head when tied,
// one row otherwise), so weight GB/s = weight bytes per token × decode tok/s; the bound is the adapter's
// memory bandwidth when given (BENCH_GPU_BANDWIDTH_GBS) or else a measured buffer-copy bandwidth
// (copyBufferToBuffer, read + write bytes); fraction = weight GB/s / that bandwidth. The KV-cache reads
// (tiny at these contexts) are not counted.
//
// This file imports nothing from Node: the browser page (bench/gpu/page.ts) runs it too.
import type * as OrtNs from 'onnxruntime-web';
import type { Backend } from '../../src/engine/backend';
import { quantizedBytes, paddedCols, type QuantizedWeight } from '../../src/engine/quant';
import { paramCount, type Qwen3Config } from '../../src/model/config';
import { buildQwen3, loadQwen3, weightSpecs, type HostWeight, type HostWeights } from '../../src/model/weights';
import { forward, KvCache, type Qwen3Model, type WeightFormat } from '../../src/model/qwen3';
import { exportQwen3Onnx, pastKey, pastValue, presentKey, presentValue } from '../../src/model/onnx/export';
import type { ModelSource } from '../../src/model/source';
import { defaultEmbedFormat } from '../../src/engine/quant';

import { QWEN3_06B_SHAPE } from '../../src/model/config';
import type { BenchRecord, Bound } from '../lib';
import { comparePrefill, ortPrefiller, promptIds } from './prefill';
export { QWEN3_06B_SHAPE };

/** A bench record (bench/lib.ts) without machine/date/suite/commit, which the runner fills in; GPU engines (and cpu-fast, decoding side by side with ours). */
export type GpuRecord = Omit<BenchRecord, 'machine' | 'date' | 'suite' | 'commit' | 'backend'> & {
  backend: 'webgpu' | 'ort-webgpu' | 'cpu-fast';
  /** The limit that bounds the figure (bench/lib.ts); the Node runner turns it into fraction_of_limit. */
  bound?: Bound;
};

/** What the bench reads and switches on our backend's context (src/engine/webgpu/context.ts). */
export interface GpuCtxView {
  device: GPUDevice;
  adapterName: string;
  counters: { dispatches: number; bindGroups: number; submits: number };
  bufferReuse: 'slot' | 'lifo';
  hasSubgroups: boolean;
}

export interface GpuBenchOptions {
  /** 'bundled', '0.6b' (default both). */
  models: string[];
  /** Engines to run: 'ours', 'ort'. */
  engines: ('ours' | 'ort')[];
  /** Token counts; default by adapter: small on software adapters. */
  prompt?: number;
  decode?: number;
  /** The adapter's memory bandwidth in GB/s, when known. */
  bandwidthGBs?: number;
  /** Models not run when the adapter is a software one (too slow there), unless asked for by name. */
  softwareSkip?: string[];
  /** Steady decode steps counted (and timed) per buffer-reuse order; default by adapter. */
  hostSteps?: number;
  /** Prompt lengths whose prefill both engines run side by side (./prefill.ts); none by default. */
  prefillPrompts?: number[];
  /** Layers of the 0.6B shape (default its 28): fewer keep every matrix's shape and make a software adapter's run short. */
  layers?: number;
  /** Layers of the 0.6B shape on a software adapter when `layers` is not given (default 28). */
  softwareLayers?: number;
  /** Run the side-by-side decode comparisons (buffer reuse, fused ops, GEMV versions); default true. */
  compare?: boolean;
}

export interface GpuEnv {
  /** Creates our WebGPU backend. */
  makeBackend(): Promise<Backend & { ctx: GpuCtxView; gemvVersion?: 'gemv' | 'gemv2' | 'gemv-lane'; fuse?: boolean }>;
  /** onnxruntime-web with the webgpu EP, or null where it cannot run. */
  ort: typeof OrtNs | null;
  /** The bundled model's folder. */
  bundled: ModelSource | null;
  /**
   * The CPU fast path on the same machine (Node only), decoded side by side with our WebGPU engine at the widths
   * where a GEMV decodes (the 0.6B shape): the issue's bar is the ratio of the two, measured in one run.
   */
  makeCpu?: () => Promise<Backend>;
  log(m: string): void;
}

/** An adapter's name, kind, features and limits, as lines of text (`npm run bench -- gpu --device-report`). */
export function adapterReport(adapter: GPUAdapter): string {
  const i = adapter.info as GPUAdapterInfo & { subgroupMinSize?: number; subgroupMaxSize?: number; isFallbackAdapter?: boolean };
  const name = [i.vendor, i.architecture, i.device, i.description].filter(Boolean).join(' ') || 'unknown adapter';
  const lines = [`adapter: ${name}${isSoftwareAdapter(name) ? ' (software: its figures say the path works, not GPU speed)' : ''}`];
  if (i.subgroupMinSize !== undefined) lines.push(`subgroup sizes: ${i.subgroupMinSize}-${i.subgroupMaxSize}`);
  lines.push(`features: ${[...adapter.features].sort().join(', ') || 'none'}`);
  const used = ['shader-f16', 'subgroups'].map((f) => `${f} ${adapter.features.has(f) ? 'yes' : 'no'}`).join(', ');
  lines.push(`features our kernels use where present: ${used}`);
  const limits: string[] = [];
  // GPUSupportedLimits keeps its values as getters on the prototype: list them from there
  for (let o = Object.getPrototypeOf(adapter.limits); o && o !== Object.prototype; o = Object.getPrototypeOf(o))
    for (const k of Object.getOwnPropertyNames(o)) {
      const v = (adapter.limits as unknown as Record<string, unknown>)[k];
      if (typeof v === 'number') limits.push(`${k}=${v}`);
    }
  lines.push(`limits: ${limits.sort().join(', ')}`);
  return lines.join('\n');
}

/** Software adapters (lavapipe, SwiftShader) say the path works, not how fast a GPU is. */
export function isSoftwareAdapter(name: string): boolean {
  return /llvmpipe|lavapipe|swiftshader|software|warp|basic render/i.test(name);
}

/** Quantized (or f32) weights drawn as random codes: instant, deterministic, NaN-free. */
export function fastRandomWeights(c: Qwen3Config, format: WeightFormat, seed = 1): HostWeights {
  let s = seed >>> 0 || 1;
  const next = () => ((s ^= s << 13), (s ^= s >>> 17), (s ^= s << 5), s >>> 0);
  const host: HostWeights = new Map();
  const embedFormat = defaultEmbedFormat(format);
  for (const spec of weightSpecs(c)) {
    if (spec.shape.length === 1) {
      host.set(spec.name, { kind: 'f32', shape: [...spec.shape], data: new Float32Array(spec.shape[0]).fill(1) });
      continue;
    }
    const [N, K] = spec.shape;
    const table = spec.name === 'model.embed_tokens.weight' || spec.name === 'lm_head.weight';
    const f = table ? embedFormat : format;
    const std = 1 / Math.sqrt(K);
    if (f === 'f32') {
      const data = new Float32Array(N * K);
      for (let i = 0; i < data.length; i++) data[i] = std * 1.732 * ((next() / 2 ** 31) - 1);
      host.set(spec.name, { kind: 'f32', shape: [N, K], data });
      continue;
    }
    const stride = paddedCols(f, K);
    const words = (N * stride) / (f === 'q8' ? 4 : 8);
    const data = new Uint32Array(words);
    for (let i = 0; i < words; i++) data[i] = next();
    if (f === 'q4') for (let i = 0; i < words; i++) data[i] |= 0x11111111; // nibbles 1..15 = codes -7..7 (q8: any byte)
    if (stride !== K) throw new Error(`fastRandomWeights: K=${K} not a multiple of the ${f} block`);
    const scales = new Float32Array(f === 'q8' ? N : N * (stride / 32)).fill((std * 1.732) / (f === 'q8' ? 127 : 7));
    const q: QuantizedWeight = { kind: f, rows: N, cols: K, stride, data, scales };
    host.set(spec.name, q);
  }
  return host;
}

const bytesOf = (w: HostWeight) => (w.kind === 'f32' ? w.data.byteLength : quantizedBytes(w));

/** Bytes of weights one decode step reads: every matrix and norm; the embedding only as a tied LM head. */
export function weightBytesPerToken(c: Qwen3Config, host: HostWeights): number {
  let total = 0;
  for (const [name, w] of host) if (name !== 'model.embed_tokens.weight' || c.tieWordEmbeddings) total += bytesOf(w);
  return total;
}

/** Copy bandwidth (GB/s, bytes read + written) of copyBufferToBuffer on this device: the best of `rounds` timed runs of `reps` copies. */
export async function copyBandwidth(device: GPUDevice, bytes = 64 << 20, reps = 8, rounds = 1): Promise<number> {
  bytes = Math.min(bytes, device.limits.maxBufferSize);
  const usage = 0x04 | 0x08; // COPY_SRC | COPY_DST
  const a = device.createBuffer({ size: bytes, usage });
  const b = device.createBuffer({ size: bytes, usage });
  const run = async (n: number) => {
    const enc = device.createCommandEncoder();
    for (let i = 0; i < n; i++) enc.copyBufferToBuffer(i % 2 ? b : a, 0, i % 2 ? a : b, 0, bytes);
    device.queue.submit([enc.finish()]);
    await device.queue.onSubmittedWorkDone();
  };
  await run(2);
  let best = 0;
  for (let r = 0; r < rounds; r++) {
    const t0 = performance.now();
    await run(reps);
    best = Math.max(best, (2 * bytes * reps) / ((performance.now() - t0) / 1000) / 1e9);
  }
  a.destroy();
  b.destroy();
  return best;
}


async function timeOurs(model: Qwen3Model, prompt: number, decode: number): Promise<{ prefill: number; decode: number }> {
  const b = model.backend;
  const ids = promptIds(prompt, model.config.vocabSize);
  const cache = new KvCache(model, 1, prompt + decode + 2);
  const pre = async () => {
    const r = forward(model, cache, { ids, slot: new Int32Array(ids.length), pos: Int32Array.from(ids, (_, i) => i) }, { logitRows: Int32Array.from([ids.length - 1]) });
    const s = b.sample(r.logits, [{ temperature: 0, topP: 1, seed: 0, step: 0 }]);
    const tok = (await b.read(s.tokens))[0];
    for (const t of [r.logits, s.tokens, s.logprobs]) b.free(t);
    return tok;
  };
  await pre(); // pipelines
  let t0 = performance.now();
  let token = await pre();
  const prefill = prompt / ((performance.now() - t0) / 1000);
  // one untimed step first: a single-token step runs kernels (one row of x) that the prefill did not compile
  for (let i = 0; i <= decode; i++) {
    if (i === 1) t0 = performance.now();
    const r = forward(model, cache, { ids: Int32Array.from([token]), slot: new Int32Array(1), pos: Int32Array.from([prompt + i]) });
    const s = b.sample(r.logits, [{ temperature: 0, topP: 1, seed: 0, step: i + 1 }]);
    token = (await b.read(s.tokens))[0];
    for (const t of [r.logits, s.tokens, s.logprobs]) b.free(t);
  }
  const dec = decode / ((performance.now() - t0) / 1000);
  cache.free();
  return { prefill, decode: dec };
}

/** One greedy decode step of one sequence at position `pos`: forward, pick, read the token back. */
async function decodeStep(model: Qwen3Model, cache: KvCache, token: number, pos: number, step: number): Promise<number> {
  const b = model.backend;
  const r = forward(model, cache, { ids: Int32Array.from([token]), slot: new Int32Array(1), pos: Int32Array.from([pos]) });
  const s = b.sample(r.logits, [{ temperature: 0, topP: 1, seed: 0, step }]);
  const next = (await b.read(s.tokens))[0];
  for (const t of [r.logits, s.tokens, s.logprobs]) b.free(t);
  return next;
}

/** A setting of our backend that a side-by-side decode comparison switches on and off. */
export interface DecodeVariant {
  label: string;
  /** Switch the backend to this variant (the comparison restores nothing: the last variant stays on). */
  set(): void;
}

export interface DecodeCounts {
  label: string;
  steps: number;
  dispatchesPerStep: number;
  bindGroupsPerStep: number;
  submitsPerStep: number;
  tokS: number;
}

/**
 * Steady decode steps of one model and one cache under each variant, side by side: per variant, `warm` warm-up
 * steps (pipelines; after a switch of buffer reuse, the pool settles), then `steps` counted and timed steps; the
 * variants alternate (in reverse every other round) over `rounds` rounds and their counts and times add up, so a
 * loaded machine's load falls on all of them. A step is what a user waits for per token: forward, greedy pick,
 * read-back.
 */
export async function compareDecode(model: Qwen3Model, ctx: GpuCtxView, variants: DecodeVariant[], steps: number, o: { rounds?: number; warm?: number; prompt?: number } = {}): Promise<DecodeCounts[]> {
  const { rounds = 2, warm = 2, prompt = 4 } = o;
  const cache = new KvCache(model, 1, prompt + rounds * variants.length * (warm + steps) + 1);
  const ids = promptIds(prompt, model.config.vocabSize);
  const r = forward(model, cache, { ids, slot: new Int32Array(prompt), pos: Int32Array.from(ids, (_, i) => i) }, { logitRows: Int32Array.from([prompt - 1]) });
  const s = model.backend.sample(r.logits, [{ temperature: 0, topP: 1, seed: 0, step: 0 }]);
  let token = (await model.backend.read(s.tokens))[0];
  for (const t of [r.logits, s.tokens, s.logprobs]) model.backend.free(t);
  let pos = prompt;
  const total = new Map(variants.map((v) => [v, { d: 0, b: 0, s: 0, sec: 0, n: 0 }]));
  try {
    for (let round = 0; round < rounds; round++)
      for (const v of round % 2 ? [...variants].reverse() : variants) {
        v.set();
        for (let i = 0; i < warm; i++) token = await decodeStep(model, cache, token, pos, pos++);
        const c0 = { ...ctx.counters };
        const t0 = performance.now();
        for (let i = 0; i < steps; i++) token = await decodeStep(model, cache, token, pos, pos++);
        const t = total.get(v)!;
        t.sec += (performance.now() - t0) / 1000;
        t.d += ctx.counters.dispatches - c0.dispatches;
        t.b += ctx.counters.bindGroups - c0.bindGroups;
        t.s += ctx.counters.submits - c0.submits;
        t.n += steps;
      }
  } finally {
    cache.free();
  }
  return variants.map((v) => {
    const t = total.get(v)!;
    return { label: v.label, steps: t.n, dispatchesPerStep: t.d / t.n, bindGroupsPerStep: t.b / t.n, submitsPerStep: t.s / t.n, tokS: t.n / t.sec };
  });
}

/**
 * Steady decode steps of several models (one per backend) side by side: per model its own cache and prompt; then the
 * models alternate (in reverse every other round) over `rounds` rounds of `warm` + `steps` steps, the counted steps'
 * times adding up, so the load of a shared machine falls on all of them.
 */
export async function compareModels(entries: { label: string; model: Qwen3Model }[], steps: number, o: { rounds?: number; warm?: number; prompt?: number } = {}): Promise<{ label: string; steps: number; tokS: number }[]> {
  const { rounds = 2, warm = 1, prompt = 4 } = o;
  const state = await Promise.all(
    entries.map(async (e) => {
      const cache = new KvCache(e.model, 1, prompt + rounds * (warm + steps) + 1);
      const ids = promptIds(prompt, e.model.config.vocabSize);
      const r = forward(e.model, cache, { ids, slot: new Int32Array(prompt), pos: Int32Array.from(ids, (_, i) => i) }, { logitRows: Int32Array.from([prompt - 1]) });
      const s = e.model.backend.sample(r.logits, [{ temperature: 0, topP: 1, seed: 0, step: 0 }]);
      const token = (await e.model.backend.read(s.tokens))[0];
      for (const t of [r.logits, s.tokens, s.logprobs]) e.model.backend.free(t);
      return { e, cache, token, pos: prompt, sec: 0, n: 0 };
    }),
  );
  try {
    for (let round = 0; round < rounds; round++)
      for (const st of round % 2 ? [...state].reverse() : state) {
        for (let i = 0; i < warm; i++) st.token = await decodeStep(st.e.model, st.cache, st.token, st.pos, st.pos++);
        const t0 = performance.now();
        for (let i = 0; i < steps; i++) st.token = await decodeStep(st.e.model, st.cache, st.token, st.pos, st.pos++);
        st.sec += (performance.now() - t0) / 1000;
        st.n += steps;
      }
  } finally {
    for (const st of state) st.cache.free();
  }
  return state.map((st) => ({ label: st.e.label, steps: st.n, tokS: st.n / st.sec }));
}

/**
 * Host work under each buffer-reuse order (src/engine/webgpu/pool.ts): 'lifo' (the first version) and 'slot'.
 * Both share one bind-group cache, so the lifo steps also hit bind groups the slot steps made: if anything, its
 * count is lower than a lifo-only run's.
 */
export function hostWork(model: Qwen3Model, ctx: GpuCtxView, steps: number, rounds = 2): Promise<DecodeCounts[]> {
  const before = ctx.bufferReuse;
  const orders = (['lifo', 'slot'] as const).map((r) => ({ label: `buffers=${r}`, set: () => (ctx.bufferReuse = r) }));
  return compareDecode(model, ctx, orders, steps, { rounds }).finally(() => (ctx.bufferReuse = before));
}

async function timeOrt(ort: typeof OrtNs, bytes: Uint8Array, c: Qwen3Config, prompt: number, decode: number): Promise<{ prefill: number; decode: number }> {
  const session = await ort.InferenceSession.create(bytes, { executionProviders: ['webgpu'] });
  try {
    const empty = () => new ort.Tensor('float32', new Float32Array(0), [c.numKvHeads, 0, c.headDim]);
    const feeds = (ids: ArrayLike<number>, past: (l: number, k: boolean) => OrtNs.Tensor) => {
      const f: Record<string, OrtNs.Tensor> = { input_ids: new ort.Tensor('int64', BigInt64Array.from(Array.from(ids), (v) => BigInt(v)), [ids.length]) };
      for (let l = 0; l < c.numLayers; l++) ((f[pastKey(l)] = past(l, true)), (f[pastValue(l)] = past(l, false)));
      return f;
    };
    const argmax = (t: OrtNs.Tensor) => {
      const d = t.data as Float32Array;
      let best = 0;
      for (let i = 1; i < d.length; i++) if (d[i] > d[best]) best = i;
      return best;
    };
    const ids = promptIds(prompt, c.vocabSize);
    await session.run(feeds(ids, empty)); // shaders
    let t0 = performance.now();
    let out = await session.run(feeds(ids, empty));
    let token = argmax(out.logits);
    const prefill = prompt / ((performance.now() - t0) / 1000);
    t0 = performance.now();
    for (let i = 0; i < decode; i++) {
      const prev = out;
      out = await session.run(feeds([token], (l, k) => prev[k ? presentKey(l) : presentValue(l)]));
      token = argmax(out.logits);
    }
    return { prefill, decode: decode / ((performance.now() - t0) / 1000) };
  } finally {
    await session.release();
  }
}

/** Run every model × format × engine the options ask for; returns records. */
export async function runGpuBench(env: GpuEnv, o: GpuBenchOptions): Promise<GpuRecord[]> {
  const out: GpuRecord[] = [];
  const probe = await env.makeBackend();
  const adapter = probe.ctx.adapterName;
  const software = isSoftwareAdapter(adapter);
  const copy = await copyBandwidth(probe.ctx.device);
  probe.dispose();
  env.log(`adapter: ${adapter}${software ? ' (software: figures say the path works, not GPU speed)' : ''}; copy bandwidth ${copy.toFixed(1)} GB/s`);
  const bound = o.bandwidthGBs ?? copy;
  const rec = (r: Omit<GpuRecord, 'adapter' | 'threads'>) => out.push({ ...r, threads: 1, adapter });
  rec({ case: 'buffer copy', backend: 'webgpu', metric: 'copy_gb_s', value: copy, unit: 'GB/s', shape: '64 MiB copyBufferToBuffer, read+write' });

  for (const m of o.softwareSkip ?? [])
    if (software && o.models.includes(m)) {
      env.log(`${m}: skipped on a software adapter (minutes per token here; BENCH_GPU_MODELS=${m} runs it anyway)`);
      o = { ...o, models: o.models.filter((x) => x !== m) };
    }
  const runs: { name: string; format: WeightFormat; host: () => Promise<{ c: Qwen3Config; host: HostWeights }>; prompt: number; decode: number; hostSteps: number }[] = [];
  if (o.models.includes('bundled') && env.bundled) {
    for (const format of ['f32', 'q4'] as const)
      runs.push({
        name: 'bundled',
        format,
        host: async () => {
          const b = await env.makeBackend();
          try {
            const { model, host } = await loadQwen3(env.bundled!, b, { format, keepHost: true });
            model.free();
            return { c: model.config, host: host! };
          } finally {
            b.dispose();
          }
        },
        prompt: o.prompt ?? (software ? 32 : 128),
        decode: o.decode ?? (software ? 8 : 64),
        hostSteps: o.hostSteps ?? (software ? 8 : 32),
      });
  }
  if (o.models.includes('0.6b')) {
    const asked = o.layers ?? (software ? o.softwareLayers : undefined);
    const layers = asked === QWEN3_06B_SHAPE.numLayers ? undefined : asked;
    const c06 = layers ? { ...QWEN3_06B_SHAPE, numLayers: layers } : QWEN3_06B_SHAPE;
    if (layers) env.log(`qwen3-0.6b-shape: ${layers} of its ${QWEN3_06B_SHAPE.numLayers} layers (every matrix of its shape; BENCH_GPU_LAYERS sets the count)`);
    runs.push({
      name: layers ? `qwen3-0.6b-shape-${layers}-layers` : 'qwen3-0.6b-shape',
      format: 'q4',
      host: async () => ({ c: c06, host: fastRandomWeights(c06, 'q4') }),
      prompt: o.prompt ?? (software ? 4 : 128),
      decode: o.decode ?? (software ? 2 : 64),
      hostSteps: o.hostSteps ?? (software ? 2 : 16),
    });
  }

  for (const r of runs) {
    const t0 = performance.now();
    const { c, host } = await r.host();
    const perToken = weightBytesPerToken(c, host);
    const model = `${r.name}-${r.format}`;
    const shape = `prompt=${r.prompt},decode=${r.decode}`;
    env.log(`${model}: ${(paramCount(c) / 1e6).toFixed(1)}M parameters, ${(perToken / 2 ** 20).toFixed(1)} MiB of weights per token (${((performance.now() - t0) / 1000).toFixed(1)} s to prepare)`);
    rec({ case: `weights per token ${model}`, backend: 'webgpu', metric: 'weight_bytes_per_token', value: perToken, unit: 'B', model });
    const put = (backend: GpuRecord['backend'], t: { prefill: number; decode: number }) => {
      rec({ case: `prefill ${model}`, backend, metric: 'prefill_tok_s', value: t.prefill, unit: 'tok/s', shape, model });
      const gbs = (perToken * t.decode) / 1e9;
      rec({ case: `decode ${model}`, backend, metric: 'decode_tok_s', value: t.decode, unit: 'tok/s', shape, model, bound: { kind: 'gpu-copy', use: gbs } });
      rec({ case: `decode ${model}`, backend, metric: 'weight_gb_s', value: gbs, unit: 'GB/s', shape, model });
      rec({ case: `decode ${model}`, backend, metric: 'bandwidth_fraction', value: gbs / bound, unit: o.bandwidthGBs ? 'of stated bandwidth' : 'of measured copy bandwidth', shape, model });
      env.log(`${model} ${backend}: prefill ${t.prefill.toPrecision(3)} tok/s, decode ${t.decode.toPrecision(3)} tok/s = ${gbs.toPrecision(3)} GB/s of weights (${((100 * gbs) / bound).toPrecision(3)} % of ${bound.toFixed(1)} GB/s)`);
    };
    if (o.engines.includes('ours')) {
      const b = await env.makeBackend();
      try {
        const { model: m } = await buildQwen3(b, c, (spec) => host.get(spec.name)!, { format: r.format });
        put('webgpu', await timeOurs(m, r.prompt, r.decode));
        const shown = (h: DecodeCounts) => `steady decode step, ${h.label}, steps=${h.steps}`;
        const counts = (h: DecodeCounts) => {
          const hs = shown(h);
          rec({ case: `decode ${model}`, backend: 'webgpu', metric: 'dispatches_per_token', value: h.dispatchesPerStep, unit: 'dispatches', shape: hs, model });
          rec({ case: `decode ${model}`, backend: 'webgpu', metric: 'bind_groups_per_step', value: h.bindGroupsPerStep, unit: 'createBindGroup', shape: hs, model });
          rec({ case: `decode ${model}`, backend: 'webgpu', metric: 'submits_per_step', value: h.submitsPerStep, unit: 'submits', shape: hs, model });
        };
        const speed = (h: DecodeCounts) => {
          const gbs = (perToken * h.tokS) / 1e9;
          rec({ case: `decode ${model}`, backend: 'webgpu', metric: 'decode_tok_s', value: h.tokS, unit: 'tok/s', shape: shown(h), model, bound: { kind: 'gpu-copy', use: gbs } });
          rec({ case: `decode ${model}`, backend: 'webgpu', metric: 'bandwidth_fraction', value: gbs / bound, unit: o.bandwidthGBs ? 'of stated bandwidth' : 'of measured copy bandwidth', shape: shown(h), model });
          return `${h.tokS.toPrecision(3)} tok/s (${((100 * gbs) / bound).toPrecision(3)} % of ${bound.toFixed(1)} GB/s) over ${h.steps} steps`;
        };
        // the side-by-side comparisons of host work, fused ops and GEMV versions (BENCH_GPU_COMPARE=0 leaves them out)
        if (o.compare !== false) {
          const hw = await hostWork(m, b.ctx, r.hostSteps);
          for (const h of hw) {
            counts(h);
            env.log(`${model} host work, ${h.label}: ${h.dispatchesPerStep.toFixed(1)} dispatches, ${h.bindGroupsPerStep.toFixed(1)} createBindGroup, ${h.submitsPerStep.toFixed(1)} submits per step; ${speed(h)}`);
          }
          const [lifo, slot] = hw;
          env.log(`${model}: slot reuse against lifo: bind groups per step ${slot.bindGroupsPerStep.toFixed(1)} against ${lifo.bindGroupsPerStep.toFixed(1)}, decode ${(slot.tokS / lifo.tokS).toFixed(2)}x`);
          if (b.fuse !== undefined) {
            // The fused forward ops (src/engine/webgpu/kernels/fused.ts) off (the unfused composition) and on, side by side.
            const fv = await compareDecode(m, b.ctx, [
              { label: 'fused=off', set: () => (b.fuse = false) },
              { label: 'fused=on', set: () => (b.fuse = true) },
            ], r.hostSteps);
            b.fuse = true;
            for (const h of fv) {
              counts(h);
              env.log(`${model} ${h.label}: ${speed(h)}, ${h.dispatchesPerStep.toFixed(0)} dispatches, ${h.bindGroupsPerStep.toFixed(1)} createBindGroup per step`);
            }
            env.log(`${model}: fused ops: ${fv[0].dispatchesPerStep.toFixed(0)} -> ${fv[1].dispatchesPerStep.toFixed(0)} dispatches per step, decode ${(fv[1].tokS / fv[0].tokS).toFixed(2)}x`);
          }
          // (a model of hidden size <= 512 decodes with the 'block' kernel: no GEMV to compare)
          if (b.gemvVersion !== undefined && c.hiddenSize > 512) {
            // The decode GEMV: v3 'gemv' (the first) against v5 'gemv2' (fused: v6), with and (where the device has them)
            // without subgroups, and v7 'gemv-lane' (one output row per lane, for CPU adapters).
            const sub = b.ctx.hasSubgroups;
            const before = b.gemvVersion;
            const gemvs: DecodeVariant[] = [
              { label: 'gemv=v3', set: () => ((b.gemvVersion = 'gemv'), (b.ctx.hasSubgroups = sub)) },
              { label: `gemv=v5${sub ? ' subgroups' : ''}`, set: () => ((b.gemvVersion = 'gemv2'), (b.ctx.hasSubgroups = sub)) },
              ...(sub ? [{ label: 'gemv=v5 no-subgroups', set: () => ((b.gemvVersion = 'gemv2'), (b.ctx.hasSubgroups = false)) }] : []),
              { label: 'gemv=v7 lane', set: () => ((b.gemvVersion = 'gemv-lane'), (b.ctx.hasSubgroups = sub)) },
            ];
            const gv = await compareDecode(m, b.ctx, gemvs, r.hostSteps, { warm: 1 });
            b.gemvVersion = before;
            b.ctx.hasSubgroups = sub;
            for (const h of gv) {
              counts(h);
              env.log(`${model} ${h.label}: ${speed(h)}, ${h.dispatchesPerStep.toFixed(0)} dispatches per step`);
            }
            env.log(`${model}: decode ${gv.slice(1).map((h) => `${h.label} ${(h.tokS / gv[0].tokS).toFixed(2)}x`).join(', ')} of gemv=v3`);
          }
        }
        if (env.makeCpu && c.hiddenSize > 512) {
          // The CPU fast path on the same weights, decoding side by side with ours (the same machine, the same load).
          const cb = await env.makeCpu();
          try {
            const { model: cm } = await buildQwen3(cb, c, (spec) => host.get(spec.name)!, { format: r.format });
            const [g, cf] = await compareModels([{ label: 'webgpu', model: m }, { label: 'cpu-fast', model: cm }], r.hostSteps);
            cm.free();
            const hs = (label: string, n: number) => `steady decode step, ${label} (webgpu and cpu-fast side by side), steps=${n}`;
            rec({ case: `decode ${model}`, backend: 'webgpu', metric: 'decode_tok_s', value: g.tokS, unit: 'tok/s', shape: hs('webgpu', g.steps), model, bound: { kind: 'gpu-copy', use: (perToken * g.tokS) / 1e9 } });
            rec({ case: `decode ${model}`, backend: 'webgpu', metric: 'bandwidth_fraction', value: (perToken * g.tokS) / 1e9 / bound, unit: o.bandwidthGBs ? 'of stated bandwidth' : 'of measured copy bandwidth', shape: hs('webgpu', g.steps), model });
            rec({ case: `decode ${model}`, backend: 'cpu-fast', metric: 'decode_tok_s', value: cf.tokS, unit: 'tok/s', shape: hs('cpu-fast', cf.steps), model });
            rec({ case: `decode ${model}`, backend: 'webgpu', metric: 'decode_vs_cpu_fast', value: g.tokS / cf.tokS, unit: 'x', shape: `steady decode steps side by side, steps=${g.steps}`, model });
            env.log(`${model}: decode side by side: webgpu ${g.tokS.toPrecision(3)} tok/s, cpu-fast ${cf.tokS.toPrecision(3)} tok/s: ${(g.tokS / cf.tokS).toFixed(2)}x`);
          } finally {
            cb.dispose();
          }
        }
        m.free();
      } catch (e) {
        env.log(`${model} webgpu failed: ${(e as Error).message}`);
      } finally {
        b.dispose();
      }
    }
    if (o.engines.includes('ort') && env.ort) {
      try {
        const bytes = exportQwen3Onnx(c, host, { weights: r.format === 'f32' ? 'f32' : 'q4', maxPositions: r.prompt + r.decode + 1, logits: 'last' });
        put('ort-webgpu', await timeOrt(env.ort, bytes, c, r.prompt, r.decode));
      } catch (e) {
        env.log(`${model} ort-webgpu failed: ${(e as Error).message}`);
      }
    }
    if (o.prefillPrompts?.length) {
      // Prefill over several prompt lengths, both engines side by side (./prefill.ts)
      const b = o.engines.includes('ours') ? await env.makeBackend() : null;
      let ort: Awaited<ReturnType<typeof ortPrefiller>> | null = null;
      try {
        const ours = b ? (await buildQwen3(b, c, (spec) => host.get(spec.name)!, { format: r.format })).model : null;
        if (o.engines.includes('ort') && env.ort) {
          const bytes = exportQwen3Onnx(c, host, { weights: r.format === 'f32' ? 'f32' : 'q4', maxPositions: Math.max(...o.prefillPrompts) + 1, logits: 'last' });
          ort = await ortPrefiller(env.ort, bytes, c);
        }
        for (const pr of await comparePrefill(ours, ort, o.prefillPrompts, (m) => env.log(`${model}: ${m}`))) {
          const shape = `prompt=${pr.prompt} (both engines side by side)`;
          if (pr.ours !== undefined) rec({ case: `prefill ${model}`, backend: 'webgpu', metric: 'prefill_tok_s', value: pr.ours, unit: 'tok/s', shape, model });
          if (pr.ort !== undefined) rec({ case: `prefill ${model}`, backend: 'ort-webgpu', metric: 'prefill_tok_s', value: pr.ort, unit: 'tok/s', shape, model });
          if (pr.ours !== undefined && pr.ort !== undefined) rec({ case: `prefill ${model}`, backend: 'webgpu', metric: 'prefill_vs_ort', value: pr.ours / pr.ort, unit: 'x', shape, model });
        }
        ours?.free();
      } catch (e) {
        env.log(`${model} prefill side by side failed: ${(e as Error).message}`);
      } finally {
        await ort?.release();
        b?.dispose();
      }
    }
  }
  return out;
}
