// The one WebAssembly memory of the CPU fast path and a small allocator over it (kept in JS: the kernels
// only ever see byte offsets). Shared (SharedArrayBuffer-backed) when the platform allows it, so worker
// threads run kernels on the same bytes; plain otherwise (single-thread fallback).
//
// Blocks are 64-byte aligned (a cache line: SIMD loads never split one) and recycled through exact-size
// free lists, which fit an engine that allocates the same activation shapes step after step.
import { EngineError } from '../../errors';

const PAGE = 65536;
const ALIGN = 64;
/** Bytes below this offset are never handed out (the kernels treat 0 as "no pointer"). */
const BASE = PAGE;

export class WasmHeap {
  readonly memory: WebAssembly.Memory;
  private top = BASE;
  private readonly free = new Map<number, number[]>();
  private readonly sizes = new Map<number, number>();
  /** Bytes currently handed out. */
  live = 0;

  constructor(
    readonly shared: boolean,
    maxPages = 65536,
  ) {
    // A shared memory reserves its maximum up front; where 4 GiB of address space is refused
    // (32-bit or constrained browsers) settle for less.
    let memory: WebAssembly.Memory | null = null;
    let error: unknown = null;
    for (const max of [maxPages, 16384, 4096].filter((m) => m <= maxPages)) {
      try {
        memory = new WebAssembly.Memory({ initial: 64, maximum: max, shared } as WebAssembly.MemoryDescriptor);
        break;
      } catch (e) {
        error = e;
      }
    }
    if (!memory) throw new EngineError('out-of-memory', `cpu-fast: cannot create the wasm memory (${(error as Error).message})`);
    this.memory = memory;
  }

  /** The current buffer (a non-shared memory's buffer is replaced, and old views detached, on growth). */
  get buffer(): ArrayBuffer | SharedArrayBuffer {
    return this.memory.buffer;
  }

  alloc(bytes: number): number {
    const size = Math.max(ALIGN, Math.ceil(bytes / ALIGN) * ALIGN);
    const list = this.free.get(size);
    let ptr = list?.pop();
    if (ptr === undefined) {
      ptr = this.top;
      const end = ptr + size;
      if (end > 2 ** 32) throw new EngineError('out-of-memory', `cpu-fast: ${bytes} bytes do not fit in the wasm memory (4 GiB at most)`);
      const have = this.memory.buffer.byteLength;
      if (end > have) {
        try {
          this.memory.grow(Math.ceil((end - have) / PAGE));
        } catch (e) {
          throw new EngineError('out-of-memory', `cpu-fast: cannot grow the wasm memory to ${end} bytes (${(e as Error).message})`);
        }
      }
      this.top = end;
    }
    this.sizes.set(ptr, size);
    this.live += size;
    return ptr;
  }

  release(ptr: number): void {
    const size = this.sizes.get(ptr);
    if (size === undefined) return; // double free: ignore, the block already went back
    this.sizes.delete(ptr);
    this.live -= size;
    const list = this.free.get(size);
    if (list) list.push(ptr);
    else this.free.set(size, [ptr]);
  }

  f32(ptr: number, n: number): Float32Array {
    return new Float32Array(this.memory.buffer, ptr, n);
  }
  i32(ptr: number, n: number): Int32Array {
    return new Int32Array(this.memory.buffer, ptr, n);
  }
  u32(ptr: number, n: number): Uint32Array {
    return new Uint32Array(this.memory.buffer, ptr, n);
  }
}

/** Whether this platform can share a wasm memory between threads (Node; cross-origin isolated pages). */
export function sharedMemoryAvailable(): boolean {
  if (typeof SharedArrayBuffer === 'undefined') return false;
  if ((globalThis as { crossOriginIsolated?: boolean }).crossOriginIsolated === false) return false;
  try {
    new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true } as WebAssembly.MemoryDescriptor);
    return true;
  } catch {
    return false;
  }
}
