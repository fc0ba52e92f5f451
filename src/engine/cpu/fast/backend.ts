// The CPU fast path ('cpu-fast'): the reference backend with its hot ops (matmul in every weight format,
// the transposed products of backward, attention, the row-wise ops around them) replaced by WebAssembly
// SIMD kernels on several threads. Everything else is inherited from CpuRefBackend, which stays the
// Where operands live: ./runtime.ts. Each op's forward and backward wrappers stand side by side in ./ops;
// the training ops (./train.ts) are made by the backend, as its `train`.
import type { Backend, Tensor, TokenLayout } from '../../backend';
import { assertShape, EngineError } from '../../errors';
import type { QuantizedWeight } from '../../quant';
import type { TrainOps } from '../../train';
import { CpuRefBackend } from '../ref';
import { asCpu, CpuTensor } from '../tensor';
import { sharedMemoryAvailable, WasmHeap } from './heap';
import { attention, type AttentionVersion } from './ops/attention';
import { add, scale, swiglu } from './ops/elementwise';
import { matmul } from './ops/matmul';
import { rmsnorm } from './ops/norm';
import { rope } from './ops/rope';
import { ThreadPool } from './pool';
import { ATTENTION_VERSIONS, PACKED_WEIGHT_BYTES, WasmRuntime } from './runtime';
import { CpuFastTrainOps } from './train';
import { WASM_PLAIN, WASM_PLAIN_RELAXED, WASM_SHARED, WASM_SHARED_RELAXED } from './wasm.gen';

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
  /**
   * Bytes of weights packed once as the forward product's panels (f32, 4 bytes a value, whatever the weight's
   * format): quantized weights and frozen f32 ones (`freeze`) on the product of rows M >= 4, version 2, so a call
   * no longer repacks the weight (at M = 16 that repacking took a quarter of the product's time). Default 256 MiB;
   * 0 packs on every call as before. The same bits either way.
   */
  packedWeightBytes?: number;
  /**
   * The attention kernels (forward and backward): 3 (default), tiled with little work around the multiply-adds
   * (kernels/attention3.ts); 2, the tiled version before it (kernels/attention2.ts); or 1, the simple per-row
   * version (kernels/attention1.ts), kept for benchmarks and as a readable statement of the op. They agree to ~1e-7,
   * not bit for bit (different order of operations); each is deterministic whatever the thread count. Default:
   * CPU_FAST_ATTENTION from Node's environment if set (records made with version 2 rerun with CPU_FAST_ATTENTION=2),
   * else 3.
   */
  attentionKernel?: AttentionVersion;
  /**
   * Which build of the kernels (scripts/build-wasm.ts; kernels/simd.ts): 'strict' (default), multiply-adds as a
   * separate multiply and add, the same bits on every machine and engine (Node and the browser train the same
   * bits); or 'relaxed', f32x4.relaxed_madd, which V8 fuses where the machine has FMA (faster; one rounding, so
   * other bits than strict, and bits that depend on the machine, though still the same on any thread count and
   * in Node and Chromium on one machine). 'relaxed' refuses where the engine cannot compile relaxed SIMD; in
   * Node 20 it turns on V8's --experimental-wasm-relaxed-simd first. Default: CPU_FAST_SIMD from Node's
   * environment if set, else 'strict'.
   */
  simd?: 'strict' | 'relaxed';
  /**
   * The matrix product's kernels: 2 (default), A packed and lane shuffles in the blocked product
   * (kernels/gemm2.ts) and 3 columns a step in the decode product (kernels/gemv2.ts), laid out for V8's register
   * allocation; or 1, kernels/gemm.ts and gemv.ts. The same arithmetic in the same order: the same bits.
   */
  matmulKernel?: 1 | 2;
}

const modules = new Map<string, Promise<WebAssembly.Module>>();
const bytesOf = (b64: string) => Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
function wasmModule(shared: boolean, relaxed: boolean): Promise<WebAssembly.Module> {
  const key = `${shared}/${relaxed}`;
  let m = modules.get(key);
  if (!m) {
    const b64 = relaxed ? (shared ? WASM_SHARED_RELAXED : WASM_PLAIN_RELAXED) : shared ? WASM_SHARED : WASM_PLAIN;
    m = WebAssembly.compile(bytesOf(b64));
    modules.set(key, m);
  }
  return m;
}

let relaxedProbe: Promise<boolean> | null = null;
/**
 * Whether this engine compiles the relaxed build. Chromium (114+) does; Node 20 only with V8's
 * --experimental-wasm-relaxed-simd, which this turns on (v8.setFlagsFromString, before the module is compiled;
 * worker threads share the process's flags) when the plain check fails.
 */
export function relaxedSimdAvailable(): Promise<boolean> {
  relaxedProbe ??= (async () => {
    const bytes = bytesOf(WASM_PLAIN_RELAXED);
    if (WebAssembly.validate(bytes)) return true;
    if (typeof process === 'undefined' || !process.versions?.node) return false;
    try {
      const name = 'node:v8';
      const v8 = (await import(/* @vite-ignore */ name)) as typeof import('node:v8');
      v8.setFlagsFromString('--experimental-wasm-relaxed-simd');
    } catch {
      return false;
    }
    return WebAssembly.validate(bytes);
  })();
  return relaxedProbe;
}

export class CpuFastBackend extends CpuRefBackend {
  override readonly name = 'cpu-fast' as const;
  /** Threads a large op runs on. */
  readonly threads: number;

  constructor(private readonly rt: WasmRuntime) {
    super();
    this.threads = rt.threads;
  }

  protected override makeTrainOps(): TrainOps {
    return new CpuFastTrainOps(this, this.rt);
  }

  /** Whether tensors live in a shared wasm memory (false: the single-thread fallback). */
  get sharedMemory(): boolean {
    return this.rt.shared;
  }
  /** The kernels' build: 'strict' or 'relaxed' (CpuFastOptions.simd). */
  get simd(): 'strict' | 'relaxed' {
    return this.rt.simd;
  }
  /** Bytes of wasm memory held by tensors and caches (for leak checks). */
  get liveBytes(): number {
    return this.rt.heap.live;
  }
  /** The attention kernels' version (see CpuFastOptions.attentionKernel); settable, for side-by-side benchmarks. */
  get attentionKernel(): AttentionVersion {
    return this.rt.attentionKernel;
  }
  set attentionKernel(v: AttentionVersion) {
    if (!ATTENTION_VERSIONS.includes(v)) throw new EngineError('unsupported', `cpu-fast: no attention kernel version ${String(v)}`);
    this.rt.attentionKernel = v;
  }
  /** The matrix product kernels' version (see CpuFastOptions.matmulKernel); settable, for side-by-side benchmarks. */
  get matmulKernel(): 1 | 2 {
    return this.rt.matmulKernel;
  }
  set matmulKernel(v: 1 | 2) {
    if (v !== 1 && v !== 2) throw new EngineError('unsupported', `cpu-fast: no matmul kernel version ${String(v)}`);
    this.rt.matmulKernel = v;
  }
  /** Kernel calls that ran on every thread. */
  /** Whether forward products read weights packed once (quantized, frozen); false packs per call (benchmarks compare). */
  get packWeights(): boolean {
    return this.rt.packWeights;
  }
  set packWeights(on: boolean) {
    this.rt.packWeights = on;
  }

  /** Bytes of packed weight panels held now. */
  get packedBytes(): number {
    return this.rt.packedBytes;
  }

  /** Promises that an f32 weight no longer changes, so its panels are packed once (WasmRuntime.freeze). */
  freeze(t: Tensor): void {
    this.rt.freeze(asCpu(t));
  }

  unfreeze(t: Tensor): void {
    this.rt.unfreeze(asCpu(t));
  }

  override write(t: Tensor, data: Float32Array | Int32Array): void {
    this.rt.forgetPanels(asCpu(t));
    super.write(t, data);
  }

  get parallelJobs(): number {
    return this.rt.parallelJobs;
  }
  /** Wall-clock milliseconds spent inside kernel calls since the backend was made. */
  get kernelMs(): number {
    return this.rt.kernelMs;
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

  /** A heap block as the allocator hands it out: a reused block keeps its old bytes (NaN included). */
  override empty(shape: readonly number[], dtype: 'f32' | 'i32' = 'f32'): Tensor {
    if (!this.rt.shared) return super.empty(shape, dtype);
    return this.rt.residentTensor(shape, dtype);
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

  override matmul(x: Tensor, w: Tensor): Tensor {
    return matmul(this.rt, x, w);
  }
  override attention(q: Tensor, kCache: Tensor, vCache: Tensor, layout: TokenLayout): Tensor {
    return attention(this.rt, q, kCache, vCache, layout);
  }
  override rmsnorm(x: Tensor, w: Tensor, eps: number): Tensor {
    return rmsnorm(this.rt, x, w, eps);
  }
  override rope(x: Tensor, pos: Tensor, theta: number): Tensor {
    return rope(this.rt, x, pos, theta);
  }
  override swiglu(gate: Tensor, up: Tensor): Tensor {
    return swiglu(this.rt, gate, up);
  }
  override add(a: Tensor, b: Tensor): Tensor {
    return add(this.rt, a, b);
  }
  override scale(a: Tensor, s: number): Tensor {
    return scale(this.rt, a, s);
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
  // Without the option, CPU_FAST_ATTENTION=1, 2 or 3 in Node's environment selects that version (to rerun records made with it).
  const envKernel = typeof process !== 'undefined' ? process.env?.CPU_FAST_ATTENTION : undefined;
  const attentionKernel = opts.attentionKernel ?? (envKernel ? (Number(envKernel) as AttentionVersion) : undefined);
  if (attentionKernel !== undefined && !ATTENTION_VERSIONS.includes(attentionKernel))
    throw new EngineError('unsupported', `cpu-fast: no attention kernel version ${String(attentionKernel)}`);
  if (opts.matmulKernel !== undefined && opts.matmulKernel !== 1 && opts.matmulKernel !== 2)
    throw new EngineError('unsupported', `cpu-fast: no matmul kernel version ${String(opts.matmulKernel)}`);
  const envSimd = typeof process !== 'undefined' ? process.env?.CPU_FAST_SIMD : undefined;
  const simd = opts.simd ?? ((envSimd || 'strict') as 'strict' | 'relaxed');
  if (simd !== 'strict' && simd !== 'relaxed') throw new EngineError('unsupported', `cpu-fast: simd must be 'strict' or 'relaxed', got ${String(simd)}`);
  if (simd === 'relaxed' && !(await relaxedSimdAvailable())) throw new EngineError('unsupported', 'cpu-fast: this engine has no relaxed SIMD');
  const want = opts.shared ?? 'auto';
  const shared = want !== false && sharedMemoryAvailable();
  if (!shared && want === true) throw new EngineError('unsupported', 'cpu-fast: shared memory is not available here');
  const heap = new WasmHeap(shared);
  const module = await wasmModule(shared, simd === 'relaxed');
  const pool = await ThreadPool.create(heap, module, shared ? threads : 1);
  const packed = opts.packedWeightBytes ?? PACKED_WEIGHT_BYTES;
  if (!(packed >= 0)) throw new EngineError('unsupported', `cpu-fast: packedWeightBytes must be >= 0, got ${String(opts.packedWeightBytes)}`);
  const backend = new CpuFastBackend(new WasmRuntime(heap, pool, opts.parallelMinWork, simd, packed));
  // Without it, the runtime's default: version 3, measured faster than version 2 in both builds (src/engine/cpu/fast/README.md).
  if (attentionKernel !== undefined) backend.attentionKernel = attentionKernel;
  if (opts.matmulKernel !== undefined) backend.matmulKernel = opts.matmulKernel;
  return backend;
}
