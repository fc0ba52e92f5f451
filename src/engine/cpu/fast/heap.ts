// The one WebAssembly memory of the CPU fast path and a small allocator over it (kept in JS: the kernels
// only ever see byte offsets). Shared (SharedArrayBuffer-backed) when the platform allows it, so worker
// threads run kernels on the same bytes; plain otherwise (single-thread fallback).
//
// Blocks are 64-byte aligned (a cache line: SIMD loads never split one). Freed blocks merge with free
// neighbours and are reused best-fit (split when larger), and a free block at the top gives its space
// back to the bump pointer, so shapes that change from step to step (variable-length batches) reuse
// the same memory instead of growing it.
import { EngineError } from '../../errors';

const PAGE = 65536;
const ALIGN = 64;
/** Bytes below this offset are never handed out (the kernels treat 0 as "no pointer"). */
const BASE = PAGE;

export class WasmHeap {
  readonly memory: WebAssembly.Memory;
  private top = BASE;
  /** Free blocks: start -> size, and end -> start (to merge with the block before). */
  private readonly freeByStart = new Map<number, number>();
  private readonly freeByEnd = new Map<number, number>();
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
        memory = new WebAssembly.Memory({ initial: Math.min(64, max), maximum: max, shared } as WebAssembly.MemoryDescriptor);
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
    let best = -1;
    let bestSize = Infinity;
    for (const [start, sz] of this.freeByStart)
      if (sz >= size && sz < bestSize) {
        best = start;
        bestSize = sz;
        if (sz === size) break;
      }
    let ptr: number;
    if (best >= 0) {
      this.unfree(best, bestSize);
      if (bestSize > size) this.addFree(best + size, bestSize - size);
      ptr = best;
    } else {
      // Bump, starting inside a free block that ends at the top if there is one.
      ptr = this.top;
      const below = this.freeByEnd.get(this.top);
      if (below !== undefined) {
        this.unfree(below, this.top - below);
        ptr = below;
      }
      const end = ptr + size;
      if (end > 2 ** 32) throw new EngineError('out-of-memory', `cpu-fast: ${bytes} bytes do not fit in the wasm memory (4 GiB at most)`);
      const have = this.memory.buffer.byteLength;
      if (end > have) {
        try {
          this.memory.grow(Math.ceil((end - have) / PAGE));
        } catch (e) {
          if (below !== undefined) this.addFree(below, this.top - below);
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
    let start = ptr;
    let end = ptr + size;
    const next = this.freeByStart.get(end);
    if (next !== undefined) {
      this.unfree(end, next);
      end += next;
    }
    const prev = this.freeByEnd.get(start);
    if (prev !== undefined) {
      this.unfree(prev, start - prev);
      start = prev;
    }
    if (end === this.top) this.top = start;
    else this.addFree(start, end - start);
  }

  /** Bytes between the heap's base and its top (what the memory must hold; for tests and stats). */
  get footprint(): number {
    return this.top - BASE;
  }

  private addFree(start: number, size: number): void {
    this.freeByStart.set(start, size);
    this.freeByEnd.set(start + size, start);
  }
  private unfree(start: number, size: number): void {
    this.freeByStart.delete(start);
    this.freeByEnd.delete(start + size);
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
