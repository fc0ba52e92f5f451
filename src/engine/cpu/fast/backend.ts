// The CPU fast path ('cpu-fast'): the reference backend with its hot ops (matmul in every weight format,
// the transposed products of backward, attention, the row-wise ops around them) replaced by WebAssembly
// SIMD kernels on several threads. Everything else is inherited from CpuRefBackend, which stays the
// oracle the tests compare against. Where operands live: ./runtime.ts.
import type { Backend, Tensor, TokenLayout } from '../../backend';
import { assertShape, EngineError } from '../../errors';
import type { QuantizedWeight } from '../../quant';
import type { AdamWStep } from '../../train';
import { asCpu, CpuRefBackend, CpuTensor } from '../ref';
import { sharedMemoryAvailable, WasmHeap } from './heap';
import { ThreadPool } from './pool';
import { f32Bits, WasmRuntime, type Temps } from './runtime';
import { WASM_PLAIN, WASM_SHARED } from './wasm.gen';

export interface CpuFastOptions {
  /** Threads, the calling one included (default: the machine's logical cores, at most 16). */
  threads?: number;
  /**
   * Shared memory: 'auto' (default) uses it where the platform has it; false forces the plain-memory,
   * single-thread fallback (as on a page that is not cross-origin isolated); true refuses to fall back.
   */
  shared?: 'auto' | boolean;
  /** Work (flops) from which an op uses every thread (default 2^20; 0 threads everything, for tests). */
  parallelMinWork?: number;
}

// Pack modes of the gemm kernel (src/engine/cpu/fast/kernels/gemm.ts).
const FWD = { f32: 0, q8: 1, q4: 2 } as const;
const ROWS = { f32: 3, q8: 4, q4: 5 } as const;

const modules = new Map<boolean, Promise<WebAssembly.Module>>();
function wasmModule(shared: boolean): Promise<WebAssembly.Module> {
  let m = modules.get(shared);
  if (!m) {
    const b64 = shared ? WASM_SHARED : WASM_PLAIN;
    m = WebAssembly.compile(Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)));
    modules.set(shared, m);
  }
  return m;
}

export class CpuFastBackend extends CpuRefBackend {
  override readonly name = 'cpu-fast' as const;
  /** Threads a large op runs on. */
  readonly threads: number;

  constructor(
    private readonly rt: WasmRuntime,
    private readonly gemmScratch: number,
  ) {
    super();
    this.threads = rt.pool.size;
  }

  /** Whether tensors live in a shared wasm memory (false: the single-thread fallback). */
  get sharedMemory(): boolean {
    return this.rt.shared;
  }
  /** Bytes of wasm memory held by tensors and caches (for leak checks). */
  get liveBytes(): number {
    return this.rt.heap.live;
  }
  /** Kernel calls that ran on every thread. */
  get parallelJobs(): number {
    return this.rt.parallelJobs;
  }
  /** Times a worker thread joined such a call (the rest of the time the caller worked alone). */
  get workerJoins(): number {
    return this.rt.pool.workerJoins;
  }

  // ---- memory ----

  override tensor(data: Float32Array | Int32Array, shape: readonly number[]): Tensor {
    const n = shape.reduce((a, b) => a * b, 1);
    assertShape(data.length === n, `tensor: ${data.length} values for shape (${shape})`);
    if (!this.rt.shared) return super.tensor(data, shape);
    const t = this.rt.residentTensor(shape, data instanceof Float32Array ? 'f32' : 'i32');
    t.data!.set(data);
    return t;
  }

  override zeros(shape: readonly number[], dtype: 'f32' | 'i32' = 'f32'): Tensor {
    if (!this.rt.shared) return super.zeros(shape, dtype);
    const t = this.rt.residentTensor(shape, dtype);
    t.data!.fill(0);
    return t;
  }

  override uploadQuantized(q: QuantizedWeight): Tensor {
    if (!this.rt.shared) {
      this.rt.placeQuant(q);
      return super.uploadQuantized(q);
    }
    return new CpuTensor([q.rows, q.cols], q.kind, null, this.rt.residentQuant(q));
  }

  override free(t: Tensor): void {
    this.rt.free(asCpu(t));
  }

  override dispose(): void {
    this.rt.dispose();
  }

  // ---- fast ops ----

  // x (M,K), w (N,K) f32|q8|q4 -> (M,N)
  override matmul(x: Tensor, w: Tensor): Tensor {
    const xs = asCpu(x).f32;
    const wc = asCpu(w);
    const [N, K] = wc.shape;
    assertShape(xs.length % K === 0 && x.shape[x.shape.length - 1] === K, `matmul: x (${x.shape}) vs W (${N},${K})`);
    const M = xs.length / K;
    const temps: Temps = [];
    try {
      const W = this.rt.weight(wc, temps);
      const X = this.rt.place(xs, temps);
      const y = this.rt.output([M, N], temps);
      const small = M <= 3;
      const scratch = small ? 64 + W.stride * 4 : this.gemmScratch;
      const slots = [FWD[W.kind], X, 4, K * 4, M, K, N, W.ptr, W.scales, W.stride, y.ptr, N, 0];
      this.rt.launch(small ? 'gemv' : 'gemm', slots, scratch, 2 * M * K * N, temps);
      return y.finish();
    } finally {
      this.rt.release(temps);
    }
  }

  /** dy (M,N), w (N,K) f32|q8|q4 -> dx (M,K) = dy W: the input gradient of y = x W^T. */
  matmulTransposed(dy: Tensor, w: Tensor): Tensor {
    const g = asCpu(dy).f32;
    const wc = asCpu(w);
    const [N, K] = wc.shape;
    assertShape(dy.shape[dy.shape.length - 1] === N && g.length % N === 0, `matmulTransposed: dy (${dy.shape}) vs W (${N},${K})`);
    const M = g.length / N;
    const temps: Temps = [];
    try {
      const W = this.rt.weight(wc, temps);
      const G = this.rt.place(g, temps);
      const dx = this.rt.output([M, K], temps);
      const slots = [ROWS[W.kind], G, 4, N * 4, M, N, K, W.ptr, W.scales, W.stride, dx.ptr, K, 0];
      this.rt.launch('gemm', slots, this.gemmScratch, 2 * M * K * N, temps);
      return dx.finish();
    } finally {
      this.rt.release(temps);
    }
  }

  /** dy (M,N), x (M,K), dw (N,K) f32: dw += dy^T x, in place (the weight gradient of y = x W^T). */
  matmulWeightGradInto(dy: Tensor, x: Tensor, dw: Tensor): void {
    const g = asCpu(dy).f32;
    const xs = asCpu(x).f32;
    const d = asCpu(dw).f32;
    assertShape(dw.shape.length === 2, `matmulWeightGradInto: dW (${dw.shape}) is not a matrix`);
    const [N, K] = dw.shape;
    const M = g.length / N;
    assertShape(Number.isInteger(M) && xs.length === M * K, `matmulWeightGradInto: dy (${dy.shape}), x (${x.shape}), dW (${N},${K})`);
    const temps: Temps = [];
    try {
      const G = this.rt.place(g, temps);
      const X = this.rt.place(xs, temps);
      const resident = this.rt.isResident(d);
      const D = this.rt.place(d, temps);
      // C = dW (N,K) += A (N,M) . B (M,K) with A = dy^T read in place: step N floats along m, 1 between rows.
      const slots = [ROWS.f32, G, N * 4, 4, N, M, K, X, 0, K, D, K, 1];
      this.rt.launch('gemm', slots, this.gemmScratch, 2 * M * K * N, temps);
      if (!resident) d.set(this.rt.heap.f32(D, d.length));
    } finally {
      this.rt.release(temps);
    }
  }

  // q (T,Hq,D), caches (S,maxT,Hkv,D) -> (T,Hq,D)
  override attention(q: Tensor, kCache: Tensor, vCache: Tensor, layout: TokenLayout): Tensor {
    const qs = asCpu(q).f32;
    const ks = asCpu(kCache).f32;
    const vs = asCpu(vCache).f32;
    const slot = asCpu(layout.slot).i32;
    const pos = asCpu(layout.pos).i32;
    assertShape(q.shape.length === 3 && kCache.shape.length === 4, `attention: q (${q.shape}), cache (${kCache.shape})`);
    const [T, Hq, D] = q.shape;
    const [S, maxT, Hkv] = kCache.shape;
    assertShape(Hkv > 0 && Hq % Hkv === 0 && kCache.shape[3] === D, `attention: q (${q.shape}) vs cache (${kCache.shape})`);
    assertShape(vCache.shape.join() === kCache.shape.join(), `attention: v cache (${vCache.shape}) vs k cache (${kCache.shape})`);
    assertShape(slot.length === T && pos.length === T, `attention: layout of ${slot.length}/${pos.length} tokens for ${T}`);
    let work = 0;
    for (let t = 0; t < T; t++) {
      assertShape(slot[t] >= 0 && slot[t] < S && pos[t] >= 0 && pos[t] < maxT, `attention: slot ${slot[t]} pos ${pos[t]} outside cache (${S},${maxT})`);
      work += pos[t] + 1;
    }
    const temps: Temps = [];
    try {
      const Q = this.rt.place(qs, temps);
      const Kc = this.rt.place(ks, temps);
      const Vc = this.rt.place(vs, temps);
      const sl = this.rt.place(slot, temps);
      const ps = this.rt.place(pos, temps);
      const out = this.rt.output([T, Hq, D], temps);
      const slots = [Q, Kc, Vc, out.ptr, sl, ps, T, Hq, Hkv, D, maxT, f32Bits(1 / Math.sqrt(D))];
      this.rt.launch('attention', slots, (Hq / Hkv) * maxT * 4, 4 * work * Hq * D, temps);
      return out.finish();
    } finally {
      this.rt.release(temps);
    }
  }

  /**
   * Backward of attention: dOut, q (T,Hq,D), caches (S,maxT,Hkv,D) -> dq (T,Hq,D), dkCache, dvCache
   * (S,maxT,Hkv,D). Recomputes the probabilities, like the reference's TrainOps.attentionBackward.
   */
  attentionBackward(dOut: Tensor, q: Tensor, kCache: Tensor, vCache: Tensor, layout: TokenLayout): { dq: CpuTensor; dkCache: CpuTensor; dvCache: CpuTensor } {
    const go = asCpu(dOut).f32;
    const qs = asCpu(q).f32;
    const ks = asCpu(kCache).f32;
    const vs = asCpu(vCache).f32;
    const slot = asCpu(layout.slot).i32;
    const pos = asCpu(layout.pos).i32;
    assertShape(q.shape.length === 3 && kCache.shape.length === 4, `attentionBackward: q (${q.shape}), cache (${kCache.shape})`);
    const [T, Hq, D] = q.shape;
    const [S, maxT, Hkv] = kCache.shape;
    assertShape(Hkv > 0 && Hq % Hkv === 0 && kCache.shape[3] === D && go.length === qs.length, `attentionBackward: q (${q.shape}) vs cache (${kCache.shape})`);
    assertShape(vCache.shape.join() === kCache.shape.join(), `attentionBackward: v cache (${vCache.shape}) vs k cache (${kCache.shape})`);
    assertShape(slot.length === T && pos.length === T, `attentionBackward: layout of ${slot.length}/${pos.length} tokens for ${T}`);
    let work = 0;
    for (let t = 0; t < T; t++) {
      assertShape(slot[t] >= 0 && slot[t] < S && pos[t] >= 0 && pos[t] < maxT, `attentionBackward: slot ${slot[t]} pos ${pos[t]} outside cache`);
      work += pos[t] + 1;
    }
    const temps: Temps = [];
    try {
      const ptrs = [go, qs, ks, vs].map((a) => this.rt.place(a, temps));
      const dq = this.rt.output([T, Hq, D], temps);
      const dk = this.rt.output([S, maxT, Hkv, D], temps);
      const dv = this.rt.output([S, maxT, Hkv, D], temps);
      const n = S * maxT * Hkv * D;
      for (const o of [dq, dk, dv]) this.rt.heap.f32(o.ptr, o === dq ? qs.length : n).fill(0);
      const sl = this.rt.place(slot, temps);
      const ps = this.rt.place(pos, temps);
      const slots = [...ptrs, dq.ptr, dk.ptr, dv.ptr, sl, ps, T, Hq, Hkv, D, maxT, S, f32Bits(1 / Math.sqrt(D))];
      this.rt.launch('attentionBackward', slots, 2 * maxT * 4, 10 * work * Hq * D, temps);
      return { dq: dq.finish(), dkCache: dk.finish(), dvCache: dv.finish() };
    } finally {
      this.rt.release(temps);
    }
  }

  /**
   * logits (R,V), weight (R) -> p = softmax of each row (0 for rows of weight 0) and, per row,
   * [log-normalizer, sum_i p_i x_i] (f64): the vocabulary-wide work of the loss heads (./train.ts).
   */
  softmaxRows(logits: Tensor, weight: Tensor): { p: CpuTensor; stats: Float64Array } {
    const xs = asCpu(logits).f32;
    const ws = asCpu(weight).f32;
    assertShape(logits.shape.length === 2 && ws.length === logits.shape[0], `softmaxRows: logits (${logits.shape}), weight (${ws.length})`);
    const [R, V] = logits.shape;
    const temps: Temps = [];
    try {
      const X = this.rt.place(xs, temps);
      const W = this.rt.place(ws, temps);
      const p = this.rt.output([R, V], temps);
      const st = this.rt.heap.alloc(R * 16);
      temps.push(st);
      this.rt.launch('softmaxRows', [X, W, p.ptr, st, R, V], 0, R * V * 16, temps);
      return { p: p.finish(), stats: new Float64Array(this.rt.heap.buffer, st, R * 2).slice() };
    } finally {
      this.rt.release(temps);
    }
  }

  /** dy, x (R,C), w (C) -> dx (R,C); when dw (C) is given, dw += d loss / d w (TrainOps.rmsnormBackward). */
  rmsnormBackward(dy: Tensor, x: Tensor, w: Tensor, eps: number, dw: Tensor | null): CpuTensor {
    const g = asCpu(dy).f32;
    const xs = asCpu(x).f32;
    const ws = asCpu(w).f32;
    const C = ws.length;
    assertShape(C > 0 && xs.length % C === 0 && g.length === xs.length, `rmsnormBackward: dy (${dy.shape}), x (${x.shape}), w (${C})`);
    const d = dw ? asCpu(dw).f32 : null;
    if (d) assertShape(d.length === C, `rmsnormBackward: dw (${dw!.shape}) vs C=${C}`);
    const temps: Temps = [];
    try {
      const ptrs = [g, xs, ws].map((a) => this.rt.place(a, temps));
      const dx = this.rt.output([...x.shape], temps);
      // One f64 partial dw per thread (threads own rows; dw sums over rows), reduced here.
      const partials = this.rt.heap.alloc(this.threads * C * 8);
      temps.push(partials);
      const part = new Float64Array(this.rt.heap.buffer, partials, this.threads * C);
      part.fill(0);
      this.rt.launch('rmsnormBackward', [...ptrs, dx.ptr, xs.length / C, C, f32Bits(eps), partials], 0, xs.length * 12, temps);
      if (d) {
        const p = new Float64Array(this.rt.heap.buffer, partials, this.threads * C);
        for (let c = 0; c < C; c++) {
          let acc = 0;
          for (let t = 0; t < this.threads; t++) acc += p[t * C + c];
          d[c] += acc;
        }
      }
      return dx.finish();
    } finally {
      this.rt.release(temps);
    }
  }

  /** dy, gate, up (T,F) -> d gate, d up of y = silu(gate) * up. */
  swigluBackward(dy: Tensor, gate: Tensor, up: Tensor): { dGate: CpuTensor; dUp: CpuTensor } {
    const g = asCpu(dy).f32;
    const gs = asCpu(gate).f32;
    const us = asCpu(up).f32;
    assertShape(g.length === gs.length && gs.length === us.length, `swigluBackward: dy (${dy.shape}), gate (${gate.shape}), up (${up.shape})`);
    const temps: Temps = [];
    try {
      const ptrs = [g, gs, us].map((a) => this.rt.place(a, temps));
      const dGate = this.rt.output([...gate.shape], temps);
      const dUp = this.rt.output([...up.shape], temps);
      this.rt.launch('swigluBackward', [...ptrs, dGate.ptr, dUp.ptr, g.length], 0, g.length * 40, temps);
      return { dGate: dGate.finish(), dUp: dUp.finish() };
    } finally {
      this.rt.release(temps);
    }
  }

  /** One AdamW update of param with grad, in place on param, m and v (all the same size). */
  adamwStep(param: Tensor, grad: Tensor, m: Tensor, v: Tensor, hp: AdamWStep): void {
    const [p, g, ms, vs] = [param, grad, m, v].map((t) => asCpu(t).f32);
    assertShape(p.length === g.length && g.length === ms.length && ms.length === vs.length, `adamw: param (${param.shape}), grad (${grad.shape}), m, v differ`);
    const temps: Temps = [];
    try {
      const ptrs = [p, g, ms, vs].map((a) => this.rt.place(a, temps));
      const hyper = [hp.lr, hp.beta1, hp.beta2, hp.eps, 1 - hp.lr * hp.weightDecay, hp.gradScale, 1 - Math.pow(hp.beta1, hp.step), 1 - Math.pow(hp.beta2, hp.step)];
      this.rt.launch('adamw', [...ptrs, p.length, ...hyper.map(f32Bits)], 0, p.length * 16, temps);
      // Updated in place: copy back whatever was not resident.
      for (const [i, a] of [p, g, ms, vs].entries()) if (i !== 1 && !this.rt.isResident(a)) a.set(this.rt.heap.f32(ptrs[i], a.length));
    } finally {
      this.rt.release(temps);
    }
  }

  // x (R,C), w (C) -> (R,C)
  override rmsnorm(x: Tensor, w: Tensor, eps: number): Tensor {
    const xs = asCpu(x).f32;
    const ws = asCpu(w).f32;
    const C = ws.length;
    assertShape(C > 0 && xs.length % C === 0, `rmsnorm: x (${x.shape}) vs w (${C})`);
    const temps: Temps = [];
    try {
      const X = this.rt.place(xs, temps);
      const W = this.rt.place(ws, temps);
      const out = this.rt.output([...x.shape], temps);
      this.rt.launch('rmsnorm', [X, W, out.ptr, xs.length / C, C, f32Bits(eps)], 0, xs.length * 8, temps);
      return out.finish();
    } finally {
      this.rt.release(temps);
    }
  }

  // gate, up (T,F) -> silu(gate) * up
  override swiglu(gate: Tensor, up: Tensor): Tensor {
    const g = asCpu(gate).f32;
    const u = asCpu(up).f32;
    assertShape(g.length === u.length, `swiglu: (${gate.shape}) vs (${up.shape})`);
    return this.elementwise('swiglu', gate.shape, [g, u], [g.length], g.length * 32);
  }

  override add(a: Tensor, b: Tensor): Tensor {
    const as = asCpu(a).f32;
    const bs = asCpu(b).f32;
    assertShape(as.length === bs.length, `add: (${a.shape}) vs (${b.shape})`);
    return this.elementwise('axpb', a.shape, [as, bs], [as.length, 0, 0], as.length);
  }

  override scale(a: Tensor, s: number): Tensor {
    const as = asCpu(a).f32;
    return this.elementwise('axpb', a.shape, [as, as], [as.length, f32Bits(s), 1], as.length);
  }

  private elementwise(kernel: 'swiglu' | 'axpb', shape: readonly number[], inputs: Float32Array[], rest: number[], work: number): Tensor {
    const temps: Temps = [];
    try {
      const ptrs = inputs.map((a) => this.rt.place(a, temps));
      const out = this.rt.output([...shape], temps);
      this.rt.launch(kernel, [...ptrs, out.ptr, ...rest], 0, work, temps);
      return out.finish();
    } finally {
      this.rt.release(temps);
    }
  }

  // x (T,H,D), pos (T) -> (T,H,D). The reference's rule and f64 angles, but each token's cos/sin are
  // computed once for all heads (the transcendentals are what this op costs): bit-identical.
  override rope(x: Tensor, pos: Tensor, theta: number): Tensor {
    return this.rotate(x, pos, theta, 1, 'rope');
  }

  /** dy (T,H,D), pos (T) -> dx (T,H,D): the inverse rotation (TrainOps.ropeBackward), bit-identical to the reference. */
  ropeBackward(dy: Tensor, pos: Tensor, theta: number): CpuTensor {
    return this.rotate(dy, pos, theta, -1, 'ropeBackward');
  }

  private rotate(x: Tensor, pos: Tensor, theta: number, dir: 1 | -1, op: string): CpuTensor {
    const xs = asCpu(x).f32;
    const ps = asCpu(pos).i32;
    assertShape(x.shape.length === 3, `${op}: x (${x.shape}) is not (T,H,D)`);
    const [T, H, D] = x.shape;
    assertShape(ps.length === T && D % 2 === 0, `${op}: x (${x.shape}), pos (${ps.length})`);
    const half = D / 2;
    const inv = Float64Array.from({ length: half }, (_, i) => Math.pow(theta, (-2 * i) / D));
    const cos = new Float64Array(half);
    const sin = new Float64Array(half);
    const out = this.rt.shared ? this.rt.residentTensor([T, H, D], 'f32') : new CpuTensor([T, H, D], 'f32', new Float32Array(xs.length));
    const o = out.f32;
    for (let t = 0; t < T; t++) {
      for (let i = 0; i < half; i++) {
        const ang = ps[t] * inv[i];
        cos[i] = Math.cos(ang);
        sin[i] = dir * Math.sin(ang); // negating is exact: the backward's a*c + b*s, b*c - a*s
      }
      for (let h = 0; h < H; h++) {
        const base = (t * H + h) * D;
        for (let i = 0; i < half; i++) {
          const a = xs[base + i];
          const b = xs[base + i + half];
          o[base + i] = a * cos[i] - b * sin[i];
          o[base + i + half] = b * cos[i] + a * sin[i];
        }
      }
    }
    return out;
  }
}

function defaultThreads(): number {
  const nav = (globalThis as { navigator?: { hardwareConcurrency?: number } }).navigator;
  return Math.min(16, Math.max(1, nav?.hardwareConcurrency ?? 1));
}

/**
 * The CPU fast path. Threads default to the machine's logical cores; without shared memory
 * (a page that is not cross-origin isolated) it runs on one thread. Call dispose() to stop the workers.
 */
export async function createCpuFastBackend(opts: CpuFastOptions = {}): Promise<Backend & CpuFastBackend> {
  let threads = opts.threads ?? defaultThreads();
  if (opts.threads === undefined && typeof process !== 'undefined' && process.versions?.node) {
    const name = 'node:os';
    const os = (await import(/* @vite-ignore */ name)) as typeof import('node:os');
    threads = Math.min(16, os.availableParallelism());
  }
  if (!Number.isInteger(threads) || threads < 1 || threads > 256)
    throw new EngineError('unsupported', `cpu-fast: threads must be an integer in [1, 256], got ${threads}`);
  const want = opts.shared ?? 'auto';
  const shared = want !== false && sharedMemoryAvailable();
  if (!shared && want === true) throw new EngineError('unsupported', 'cpu-fast: shared memory is not available here');
  const heap = new WasmHeap(shared);
  const module = await wasmModule(shared);
  const pool = await ThreadPool.create(heap, module, shared ? threads : 1);
  await import('./train'); // registers the fast training ops for 'cpu-fast'
  return new CpuFastBackend(new WasmRuntime(heap, pool, opts.parallelMinWork), pool.global('GEMM_SCRATCH'));
}
