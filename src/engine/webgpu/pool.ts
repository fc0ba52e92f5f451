// Free GPU buffers kept for reuse, by size bucket, so ops do not create a buffer per call.
export class BufferPool {
  private readonly free = new Map<number, GPUBuffer[]>();
  private bytes = 0;
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
    return list.pop()!;
  }

  /** Keep a buffer no pending work uses; destroyed instead when the pool is full or the size is odd. */
  put(buf: GPUBuffer): void {
    if (this.bytes + buf.size > this.limit || buf.size !== BufferPool.bucket(buf.size)) {
      buf.destroy();
      return;
    }
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
