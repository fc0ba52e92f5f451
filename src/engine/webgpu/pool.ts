// Free GPU buffers kept for reuse, by size bucket, so ops do not create a buffer per call.
//
// Which free buffer a request gets decides whether bind groups can be reused: a bind group names its buffers,
// so a decode step gets cached bind groups only when it binds the very same buffers as the step before.
//   'slot' (default): every buffer gets a slot number the first time it enters the pool, and a request takes the
//          free buffer of the lowest slot. A step that makes the same requests and releases from the same free
//          set therefore gets the same buffers every time: a steady decode step binds what it bound before.
//   'lifo' (the first version, kept for the benchmark): the buffer released last. Releases are deferred to the
//          next submit and come back in release order, so each step sees the pool in another order and binds
//          other buffers (measured: 481 createBindGroup calls per 510 dispatches at the 0.6B shape).
export type BufferReuse = 'slot' | 'lifo';

export class BufferPool {
  private readonly free = new Map<number, GPUBuffer[]>(); // per bucket, in the order put
  private readonly slots = new WeakMap<GPUBuffer, number>();
  private nextSlot = 0;
  private bytes = 0;
  reuse: BufferReuse = 'slot';
  constructor(private readonly limit: number) {}

  /** Bucket size: exact to 256 B for small buffers, within 1/8 of a power of two for big ones. */
  static bucket(bytes: number): number {
    const b = Math.max(256, Math.ceil(bytes / 256) * 256);
    if (b <= 65536) return b;
    const step = 2 ** (Math.floor(Math.log2(b)) - 3);
    return Math.ceil(b / step) * step;
  }

  /** A free buffer of exactly `size` bytes (a bucket size), if any. */
  take(size: number): GPUBuffer | null {
    const list = this.free.get(size);
    if (!list || list.length === 0) return null;
    this.bytes -= size;
    if (this.reuse === 'lifo') return list.pop()!;
    // a bucket holds tens of buffers at most during a decode step: a scan costs less than a dispatch's host work
    let at = 0;
    for (let i = 1; i < list.length; i++) if (this.slots.get(list[i])! < this.slots.get(list[at])!) at = i;
    const buf = list[at];
    list[at] = list[list.length - 1];
    list.pop();
    return buf;
  }

  /** Keep a buffer no pending work uses; destroyed instead when the pool is full or the size is odd. */
  put(buf: GPUBuffer): void {
    if (this.bytes + buf.size > this.limit || buf.size !== BufferPool.bucket(buf.size)) {
      buf.destroy();
      return;
    }
    if (!this.slots.has(buf)) this.slots.set(buf, this.nextSlot++);
    const list = this.free.get(buf.size) ?? [];
    list.push(buf);
    this.free.set(buf.size, list);
    this.bytes += buf.size;
  }

  destroy(): void {
    for (const list of this.free.values()) for (const b of list) b.destroy();
    this.free.clear();
    this.bytes = 0;
  }
}
