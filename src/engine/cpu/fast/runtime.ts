// What the fast backend's ops share: where each operand lives in the wasm memory, outputs, argument
// blocks and kernel launches.
//
// With shared memory (Node; cross-origin isolated pages) the tensors the backend creates live in the
// wasm memory itself, as typed-array views, so the inherited reference ops read and write them in place
// and the kernels need no copies. Tensors from elsewhere (the inherited ops' outputs, other backends')
// are copied in per op: O(inputs) against the O(M*K*N) of a product. Without shared memory everything
// is single-threaded and tensors stay on the JS heap (a plain memory's views are detached when it
// grows); only quantized weights, which never change, are kept in the wasm memory.
import { assertShape, EngineError } from '../../errors';
import type { QuantizedWeight } from '../../quant';
import { CpuTensor } from '../tensor';
import type { WasmHeap } from './heap';
import type { KernelName, ThreadPool } from './pool';

/** Bytes of packed weight panels a runtime holds at most by default (createCpuFastBackend({ packedWeightBytes })). */
export const PACKED_WEIGHT_BYTES = 256 * 2 ** 20;

/** Below this much work (flops, or element-ops) a job runs on the calling thread only: waking workers costs ~10-50 us. */
export const PARALLEL_MIN_WORK = 1 << 20;

export interface WeightOperand {
  kind: 'f32' | 'q8' | 'q4';
  ptr: number;
  scales: number;
  /** Elements per stored row (K for f32, the padded K for q8/q4). */
  stride: number;
}

const COUNTER_SLOT = 31;

/** Offsets of the per-op copies made for one kernel call, released when it returns. */
export type Temps = number[];

/** Bytes of B's panels as kernels/gemm2.ts packPanels lays them out: Nout padded to 8 columns, x inner, f32. */
export const panelBytes = (Nout: number, inner: number): number => Math.ceil(Nout / 8) * 8 * inner * 4;

/** The attention kernels' versions (kernels/attention1.ts, attention2.ts, attention3.ts; the default 3). */
export const ATTENTION_VERSIONS = [1, 2, 3] as const;
export type AttentionVersion = (typeof ATTENTION_VERSIONS)[number];

export class WasmRuntime {
  private readonly resident = new WeakMap<ArrayBufferView, number>();
  private readonly quant = new WeakMap<QuantizedWeight, { data: number; scales: number }>();
  private readonly finalizer: FinalizationRegistry<number[]>;
  /** The same for resident tensors, one block each: a number as the held value costs half of an array (every op makes one). */
  private readonly finalizeBlock: FinalizationRegistry<number>;
  private readonly args: number;
  private disposed = false;
  /**
   * Forward weights packed once as the product's panels (kernels/gemm2.ts packPanels), by their data: a quantized
   * weight (never changed) or a frozen f32 one (freeze). Each holds its block's offset and size.
   */
  private readonly panels = new WeakMap<object, { ptr: number; bytes: number }>();
  private readonly frozen = new WeakSet<ArrayBufferView>();
  private readonly finalizePanels: FinalizationRegistry<{ ptr: number; bytes: number }>;
  /** Bytes the panels hold now. */
  packedBytes = 0;
  /** Whether the forward product of version 2 reads packed panels (making them on first use); off, it packs per call. */
  packWeights = true;
  /** Kernel calls that ran on every thread (tests check the threaded path really ran). */
  parallelJobs = 0;
  /** Wall-clock milliseconds inside kernel calls (the rest of a program's time is JS on the calling thread). */
  kernelMs = 0;
  /** The attention kernels' version: 3 (the default), 2 (the tiled version before it) or 1 (the simple one, kept for comparison). */
  attentionKernel: AttentionVersion = 3;
  /** The matrix product kernels' version: 2 (kernels/gemm2.ts, gemv2.ts; the default) or 1 (gemm.ts, gemv.ts): the same bits. */
  matmulKernel: 1 | 2 = 2;
  /** Workspace offset of the gemm kernel's packing buffers. */
  readonly gemmScratch: number;
  /** ... and version 2's (its packed A block after version 1's buffers). */
  readonly gemm2Scratch: number;

  constructor(
    readonly heap: WasmHeap,
    readonly pool: ThreadPool,
    private readonly parallelMinWork = PARALLEL_MIN_WORK,
    /** The kernels' build (scripts/build-wasm.ts): strict or relaxed multiply-adds. */
    readonly simd: 'strict' | 'relaxed' = 'strict',
    /** The panels' budget: a weight whose panels would pass it is packed per call, as without them. */
    readonly packedWeightBytes = PACKED_WEIGHT_BYTES,
  ) {
    this.args = heap.alloc(256);
    this.gemmScratch = pool.global('GEMM_SCRATCH');
    this.gemm2Scratch = pool.global('GEMM2_SCRATCH');
    // Tensors the caller forgets to free give their wasm blocks back when their view is collected.
    this.finalizer = new FinalizationRegistry((ptrs) => {
      if (!this.disposed) for (const p of ptrs) heap.release(p);
    });
    this.finalizeBlock = new FinalizationRegistry((ptr) => {
      if (!this.disposed) heap.release(ptr);
    });
    this.finalizePanels = new FinalizationRegistry((p) => this.dropPanels(p));
  }

  /** Threads a large op runs on. */
  get threads(): number {
    return this.pool.size;
  }

  get shared(): boolean {
    return this.heap.shared;
  }

  /** A zero-copy tensor in wasm memory (shared mode only). Contents are not initialized. */
  residentTensor(shape: readonly number[], dtype: 'f32' | 'i32'): CpuTensor {
    const n = shape.reduce((a, b) => a * b, 1);
    const ptr = this.heap.alloc(n * 4);
    const view = dtype === 'f32' ? this.heap.f32(ptr, n) : this.heap.i32(ptr, n);
    this.resident.set(view, ptr);
    this.finalizeBlock.register(view, ptr, view);
    return new CpuTensor([...shape], dtype, view);
  }

  /** A quantized weight whose host arrays are views of its wasm copy (held once). */
  residentQuant(q: QuantizedWeight): QuantizedWeight {
    const data = this.heap.alloc(q.data.byteLength);
    const scales = this.heap.alloc(q.scales.byteLength);
    const views: QuantizedWeight = { ...q, data: this.heap.u32(data, q.data.length), scales: this.heap.f32(scales, q.scales.length) };
    views.data.set(q.data);
    views.scales.set(q.scales);
    this.quant.set(views, { data, scales });
    this.finalizer.register(views, [data, scales], views);
    return views;
  }

  /** Offsets of a quantized weight's wasm copy (made and cached on first use). */
  placeQuant(q: QuantizedWeight): { data: number; scales: number } {
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

  /** Gives a tensor's wasm blocks back (no-op for JS-heap data and for a second free). */
  free(c: CpuTensor): void {
    this.forgetPanels(c);
    const ptr = c.data ? this.resident.get(c.data) : undefined;
    if (ptr !== undefined) {
      this.resident.delete(c.data!);
      this.finalizeBlock.unregister(c.data!);
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

  /**
   * Promises that an f32 weight's values no longer change (a frozen base under LoRA, inference), so its forward
   * panels may be packed once and kept. The backend's AdamW refuses a frozen tensor; a caller that writes into the
   * data itself must call unfreeze first (the backend's write drops the panels itself).
   */
  freeze(c: CpuTensor): void {
    assertShape(c.dtype === 'f32' && c.data !== null && c.shape.length === 2, `freeze: an f32 matrix, got ${c.dtype} (${c.shape})`);
    this.frozen.add(c.data!);
  }

  /** Takes freeze back: the weight may change again, so its panels go. */
  unfreeze(c: CpuTensor): void {
    if (c.data) this.frozen.delete(c.data);
    this.forgetPanels(c);
  }

  /** Drops a weight's packed panels (freed, or about to be written), if it has any. */
  forgetPanels(c: CpuTensor): void {
    for (const key of [c.quant, c.data]) {
      const p = key ? this.panels.get(key) : undefined;
      if (p) {
        this.panels.delete(key!);
        this.finalizePanels.unregister(key!);
        this.dropPanels(p);
      }
    }
  }

  isFrozen(c: CpuTensor): boolean {
    return c.data !== null && this.frozen.has(c.data);
  }

  /**
   * Offset of the forward panels of w (N, K) (placed as W; `mode` its forward pack mode, kernels/gemm.ts), packed on
   * first use; 0 where w is f32 and not frozen, the runtime does not pack weights, or the panels would pass the
   * budget (the product then packs per call).
   */
  panelsOf(w: CpuTensor, W: WeightOperand, mode: number, temps: Temps): number {
    const key: object | null = w.quant ?? (this.isFrozen(w) ? w.data : null);
    if (!key || !this.packWeights) return 0;
    const have = this.panels.get(key);
    if (have) return have.ptr;
    const [N, K] = w.shape;
    const bytes = panelBytes(N, K);
    if (this.packedBytes + bytes > this.packedWeightBytes) return 0;
    const ptr = this.packPanels(mode, W.ptr, W.scales, W.stride, N, K, temps);
    const held = { ptr, bytes };
    this.packedBytes += bytes;
    this.panels.set(key, held);
    this.finalizePanels.register(key, held, key);
    return ptr;
  }

  /**
   * B (Nout output columns, `inner` deep, any pack mode of kernels/gemm.ts with its operands) packed into all its
   * panels (kernels/gemm2.ts packPanels) at fresh memory of panelBytes(Nout, inner): its offset, the caller's to free.
   */
  packPanels(mode: number, B: number, scales: number, stride: number, Nout: number, inner: number, temps: Temps): number {
    const ptr = this.heap.alloc(panelBytes(Nout, inner));
    try {
      this.launch('packPanels', [mode, B, scales, stride, Nout, inner, ptr], this.gemmScratch, Nout * inner * 4, temps);
    } catch (e) {
      this.heap.release(ptr);
      throw e;
    }
    return ptr;
  }

  private dropPanels(p: { ptr: number; bytes: number }): void {
    if (this.disposed) return;
    this.heap.release(p.ptr);
    this.packedBytes -= p.bytes;
  }

  isResident(a: ArrayBufferView): boolean {
    return this.resident.has(a);
  }

  /** Offset of an input's data in wasm memory (copied in, and recorded in temps, unless resident). */
  place(a: Float32Array | Int32Array, temps: Temps): number {
    const p = this.resident.get(a);
    if (p !== undefined) return p;
    const ptr = this.heap.alloc(a.byteLength);
    temps.push(ptr);
    (a instanceof Float32Array ? this.heap.f32(ptr, a.length) : this.heap.i32(ptr, a.length)).set(a);
    return ptr;
  }

  weight(w: CpuTensor, temps: Temps): WeightOperand {
    if (w.quant) {
      const p = this.placeQuant(w.quant);
      return { kind: w.quant.kind, ptr: p.data, scales: p.scales, stride: w.quant.stride };
    }
    assertShape(w.dtype === 'f32', `weight of dtype ${w.dtype}`);
    return { kind: 'f32', ptr: this.place(w.f32, temps), scales: 0, stride: w.shape[1] };
  }

  /** An f32 output: resident when memory is shared, else a temp that `finish` copies out. */
  output(shape: number[], temps: Temps): { ptr: number; finish: () => CpuTensor } {
    const n = shape.reduce((a, b) => a * b, 1);
    if (this.heap.shared) {
      const t = this.residentTensor(shape, 'f32');
      return { ptr: this.resident.get(t.data!)!, finish: () => t };
    }
    const ptr = this.heap.alloc(n * 4);
    temps.push(ptr);
    return { ptr, finish: () => new CpuTensor(shape, 'f32', this.heap.f32(ptr, n).slice()) };
  }

  /** Runs a kernel with an i32 argument block; per-thread scratch (if any) goes in the last two slots. */
  launch(kernel: KernelName, slots: number[], scratchPerThread: number, work: number, temps: Temps): void {
    if (this.disposed) throw new EngineError('unsupported', 'cpu-fast: the backend was disposed');
    const parallel = this.pool.size > 1 && work >= this.parallelMinWork;
    const nth = parallel ? this.pool.size : 1;
    // The scratch first: allocating may grow a plain memory, which detaches views taken before.
    const per = Math.ceil(scratchPerThread / 64) * 64;
    const scratch = per > 0 ? this.heap.alloc(per * nth) : 0;
    if (per > 0) temps.push(scratch);
    const a = this.heap.i32(this.args, 64);
    a.set(slots);
    a[COUNTER_SLOT] = 0; // the chunk counter the threads claim work from (kernels/sched.ts)
    if (per > 0) {
      a[slots.length] = scratch;
      a[slots.length + 1] = per;
    }
    if (parallel) this.parallelJobs++;
    const t0 = performance.now();
    try {
      this.pool.run(kernel, this.args, parallel);
    } finally {
      this.kernelMs += performance.now() - t0;
    }
  }

  release(temps: Temps): void {
    for (const p of temps) this.heap.release(p);
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.pool.dispose();
  }
}

/** The i32 bit pattern of an f32 (for f32 kernel arguments in the i32 argument block). */
export function f32Bits(x: number): number {
  return new Int32Array(new Float32Array([x]).buffer)[0];
}
