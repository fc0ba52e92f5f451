// The CPU fast path ('cpu-fast'): the reference backend with its hot ops (matmul in every weight format,
// the transposed products of backward, attention) replaced by WebAssembly SIMD kernels on several threads.
// Everything else is inherited from CpuRefBackend, which stays the oracle the tests compare against.
//
// Memory: with shared memory (Node; cross-origin isolated pages) tensors this backend creates live in
// the wasm memory itself, as typed-array views, so the inherited ops read and write them in place and the
// kernels need no copies. Tensors from elsewhere (the inherited ops' outputs) are copied in per op; that
// costs O(inputs) against the O(M*K*N) product. Without shared memory everything is single-threaded and
// tensors stay on the JS heap (a plain memory's views are detached when it grows); only quantized
// weights, which never change, are kept in the wasm memory.
import type { Backend, Tensor, TokenLayout } from '../../backend';
import { assertShape, EngineError } from '../../errors';
import type { QuantizedWeight } from '../../quant';
import { asCpu, CpuRefBackend, CpuTensor } from '../ref';
import { sharedMemoryAvailable, WasmHeap } from './heap';
import { ThreadPool, type KernelName } from './pool';
import { WASM_PLAIN, WASM_SHARED } from './wasm.gen';

export interface CpuFastOptions {
  /** Threads, the calling one included (default: the machine's logical cores, at most 16). */
  threads?: number;
  /**
   * Shared memory: 'auto' (default) uses it where the platform has it; false forces the plain-memory,
   * single-thread fallback (as on a page that is not cross-origin isolated); true refuses to fall back.
   */
  shared?: 'auto' | boolean;
}

// Pack modes of the gemm kernel (src/engine/cpu/fast/kernels/gemm.ts).
const FWD = { f32: 0, q8: 1, q4: 2 } as const;
const ROWS = { f32: 3, q8: 4, q4: 5 } as const;

/** Below this many flops a job runs on the calling thread only: waking workers costs ~10-50 us. */
const PARALLEL_MIN_FLOPS = 1 << 20;

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

interface WeightOperand {
  kind: 'f32' | 'q8' | 'q4';
  ptr: number;
  scales: number;
  /** Elements per stored row (K for f32, the padded K for q8/q4). */
  stride: number;
}

/** Offsets of the per-op copies made for one kernel call, released when it returns. */
type Temps = number[];

export class CpuFastBackend extends CpuRefBackend {
  override readonly name = 'cpu-fast' as const;
  /** Threads a large op runs on. */
  readonly threads: number;
  private readonly resident = new WeakMap<ArrayBufferView, number>();
  private readonly quant = new WeakMap<QuantizedWeight, { data: number; scales: number }>();
  private readonly finalizer: FinalizationRegistry<number[]>;
  private readonly args: number;
  private readonly gemmScratch: number;
  private disposed = false;
  /** Kernel calls that ran on every thread (tests check the threaded path really ran). */
  parallelJobs = 0;

  constructor(
    private readonly heap: WasmHeap,
    private readonly pool: ThreadPool,
    gemmScratch: number,
  ) {
    super();
    this.threads = pool.size;
    this.gemmScratch = gemmScratch;
    this.args = heap.alloc(256);
    // Tensors the caller forgets to free give their wasm blocks back when their view is collected.
    this.finalizer = new FinalizationRegistry((ptrs) => {
      if (!this.disposed) for (const p of ptrs) heap.release(p);
    });
  }

  /** Whether tensors live in a shared wasm memory (false: the single-thread fallback). */
  get sharedMemory(): boolean {
    return this.heap.shared;
  }

  // ---- memory ----

  override tensor(data: Float32Array | Int32Array, shape: readonly number[]): Tensor {
    const n = shape.reduce((a, b) => a * b, 1);
    assertShape(data.length === n, `tensor: ${data.length} values for shape (${shape})`);
    if (!this.heap.shared) return super.tensor(data, shape);
    const t = this.residentTensor(shape, data instanceof Float32Array ? 'f32' : 'i32');
    t.data!.set(data);
    return t;
  }

  override zeros(shape: readonly number[], dtype: 'f32' | 'i32' = 'f32'): Tensor {
    if (!this.heap.shared) return super.zeros(shape, dtype);
    const t = this.residentTensor(shape, dtype);
    t.data!.fill(0);
    return t;
  }

  override uploadQuantized(q: QuantizedWeight): Tensor {
    if (!this.heap.shared) {
      this.placeQuant(q);
      return super.uploadQuantized(q);
    }
    // The tensor's host copy becomes views of the wasm copy, so the weight is held once.
    const data = this.heap.alloc(q.data.byteLength);
    const scales = this.heap.alloc(q.scales.byteLength);
    const views: QuantizedWeight = { ...q, data: this.heap.u32(data, q.data.length), scales: this.heap.f32(scales, q.scales.length) };
    views.data.set(q.data);
    views.scales.set(q.scales);
    this.quant.set(views, { data, scales });
    this.finalizer.register(views, [data, scales], views);
    return new CpuTensor([q.rows, q.cols], q.kind, null, views);
  }

  override free(t: Tensor): void {
    const c = asCpu(t);
    const ptr = c.data ? this.resident.get(c.data) : undefined;
    if (ptr !== undefined) {
      this.resident.delete(c.data!);
      this.finalizer.unregister(c.data!);
      this.heap.release(ptr);
    }
    const q = c.quant ? this.quant.get(c.quant) : undefined;
    if (q) {
      this.quant.delete(c.quant!);
      this.finalizer.unregister(c.quant!);
      this.heap.release(q.data);
      this.heap.release(q.scales);
    }
  }

  override dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.pool.dispose();
  }

  /** Bytes of wasm memory held by tensors and caches (for leak checks). */
  get liveBytes(): number {
    return this.heap.live;
  }

  private residentTensor(shape: readonly number[], dtype: 'f32' | 'i32'): CpuTensor {
    const n = shape.reduce((a, b) => a * b, 1);
    const ptr = this.heap.alloc(n * 4);
    const view = dtype === 'f32' ? this.heap.f32(ptr, n) : this.heap.i32(ptr, n);
    this.resident.set(view, ptr);
    this.finalizer.register(view, [ptr], view);
    return new CpuTensor([...shape], dtype, view);
  }

  private placeQuant(q: QuantizedWeight): { data: number; scales: number } {
    let p = this.quant.get(q);
    if (!p) {
      p = { data: this.heap.alloc(q.data.byteLength), scales: this.heap.alloc(q.scales.byteLength) };
      this.heap.u32(p.data, q.data.length).set(q.data);
      this.heap.f32(p.scales, q.scales.length).set(q.scales);
      this.quant.set(q, p);
      this.finalizer.register(q, [p.data, p.scales], q);
    }
    return p;
  }

  /** Offset of an input's data in wasm memory (copied in, and recorded in temps, unless resident). */
  private place(a: Float32Array | Int32Array, temps: Temps): number {
    const p = this.resident.get(a);
    if (p !== undefined) return p;
    const ptr = this.heap.alloc(a.byteLength);
    temps.push(ptr);
    (a instanceof Float32Array ? this.heap.f32(ptr, a.length) : this.heap.i32(ptr, a.length)).set(a);
    return ptr;
  }

  private weight(w: CpuTensor, temps: Temps): WeightOperand {
    if (w.quant) {
      const p = this.placeQuant(w.quant);
      return { kind: w.quant.kind, ptr: p.data, scales: p.scales, stride: w.quant.stride };
    }
    assertShape(w.dtype === 'f32', `weight of dtype ${w.dtype}`);
    return { kind: 'f32', ptr: this.place(w.f32, temps), scales: 0, stride: w.shape[1] };
  }

  /** An f32 output of n values: resident when memory is shared, else a temp copied out by `finish`. */
  private output(shape: number[], temps: Temps): { ptr: number; finish: () => CpuTensor } {
    const n = shape.reduce((a, b) => a * b, 1);
    if (this.heap.shared) {
      const t = this.residentTensor(shape, 'f32');
      return { ptr: this.resident.get(t.data!)!, finish: () => t };
    }
    const ptr = this.heap.alloc(n * 4);
    temps.push(ptr);
    return { ptr, finish: () => new CpuTensor(shape, 'f32', this.heap.f32(ptr, n).slice()) };
  }

  /** Runs a kernel with an i32 argument block, with per-thread scratch appended as the last two slots. */
  private launch(kernel: KernelName, slots: number[], scratchPerThread: number, flops: number, temps: Temps): void {
    if (this.disposed) throw new EngineError('unsupported', 'cpu-fast: the backend was disposed');
    const parallel = this.pool.size > 1 && flops >= PARALLEL_MIN_FLOPS;
    const nth = parallel ? this.pool.size : 1;
    const per = Math.ceil(scratchPerThread / 64) * 64;
    const scratch = this.heap.alloc(per * nth);
    temps.push(scratch);
    const a = this.heap.i32(this.args, 64);
    a.set(slots);
    a[slots.length] = scratch;
    a[slots.length + 1] = per;
    if (parallel) this.parallelJobs++;
    this.pool.run(kernel, this.args, parallel);
  }

  private releaseAll(temps: Temps): void {
    for (const p of temps) this.heap.release(p);
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
      const W = this.weight(wc, temps);
      const X = this.place(xs, temps);
      const y = this.output([M, N], temps);
      const small = M <= 3;
      const scratch = small ? 64 + W.stride * 4 : this.gemmScratch;
      const slots = [FWD[W.kind], X, 4, K * 4, M, K, N, W.ptr, W.scales, W.stride, y.ptr, N, 0];
      this.launch(small ? 'gemv' : 'gemm', slots, scratch, 2 * M * K * N, temps);
      return y.finish();
    } finally {
      this.releaseAll(temps);
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
      const W = this.weight(wc, temps);
      const G = this.place(g, temps);
      const dx = this.output([M, K], temps);
      const slots = [ROWS[W.kind], G, 4, N * 4, M, N, K, W.ptr, W.scales, W.stride, dx.ptr, K, 0];
      this.launch('gemm', slots, this.gemmScratch, 2 * M * K * N, temps);
      return dx.finish();
    } finally {
      this.releaseAll(temps);
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
      const G = this.place(g, temps);
      const X = this.place(xs, temps);
      const resident = this.resident.get(d);
      const D = this.place(d, temps);
      // C = dW (N,K) += A (N,M) . B (M,K) with A = dy^T read in place: step N floats along m, 1 between rows.
      const slots = [ROWS.f32, G, N * 4, 4, N, M, K, X, 0, K, D, K, 1];
      this.launch('gemm', slots, this.gemmScratch, 2 * M * K * N, temps);
      if (resident === undefined) d.set(this.heap.f32(D, d.length));
    } finally {
      this.releaseAll(temps);
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
      const Q = this.place(qs, temps);
      const Kc = this.place(ks, temps);
      const Vc = this.place(vs, temps);
      const sl = this.place(slot, temps);
      const ps = this.place(pos, temps);
      const out = this.output([T, Hq, D], temps);
      const scaleBits = new Int32Array(new Float32Array([1 / Math.sqrt(D)]).buffer)[0];
      const slots = [Q, Kc, Vc, out.ptr, sl, ps, T, Hq, Hkv, D, maxT, scaleBits];
      this.launch('attention', slots, (Hq / Hkv) * maxT * 4, 4 * work * Hq * D, temps);
      return out.finish();
    } finally {
      this.releaseAll(temps);
    }
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
  const scratch = pool.global('GEMM_SCRATCH');
  await import('./train'); // registers the fast training ops for 'cpu-fast'
  return new CpuFastBackend(heap, pool, scratch);
}
