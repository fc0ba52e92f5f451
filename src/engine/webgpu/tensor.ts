// GpuTensor: a tensor that lives in one or more GPU buffers (row shards). Most tensors have exactly one
// part; weights and embedding tables bigger than the context's maxBufferBytes are split by rows so that
// no single buffer passes the device's storage binding limit.
import type { DType, Tensor } from '../backend';
import { EngineError, assertShape } from '../errors';
import type { GpuContext } from './context';

/** Rows [row0, row0 + rows) of the tensor's first axis. q8/q4 parts also carry their scales. */
export interface GpuPart {
  row0: number;
  rows: number;
  data: GPUBuffer;
  scales?: GPUBuffer;
}

/** Layout facts of a quantized weight (see src/engine/quant.ts). */
export interface QuantLayout {
  /** Padded K (multiple of 4 for q8, 32 for q4). */
  stride: number;
}

export class GpuTensor implements Tensor {
  readonly backend = 'webgpu' as const;
  constructor(
    readonly ctx: GpuContext,
    readonly shape: readonly number[],
    readonly dtype: DType,
    readonly parts: readonly GpuPart[],
    readonly quant: QuantLayout | null = null,
    // shared with reshape views, so freeing a view and its source together cannot release a buffer twice
    private readonly storage: { freed: boolean } = { freed: false },
  ) {}

  /** Same buffers, new shape (f32/i32 only; sharded tensors only when each shard keeps whole rows). */
  view(shape: readonly number[]): GpuTensor {
    const n = shape.reduce((a, b) => a * b, 1);
    assertShape(this.dtype === 'f32' || this.dtype === 'i32', `reshape: cannot reshape a ${this.dtype} tensor`);
    assertShape(n === this.size && shape.every((d) => Number.isInteger(d) && d >= 0), `reshape: (${this.shape}) -> (${shape})`);
    if (this.parts.length > 1 && shape[0] !== this.shape[0])
      throw new EngineError('unsupported', `reshape: sharded tensor (${this.shape}) must keep its first axis`);
    // one part: its row range follows the new first axis (read/write size their copies from it)
    const parts = this.parts.length === 1 ? [{ ...this.parts[0], row0: 0, rows: shape.length > 0 ? shape[0] : 1 }] : this.parts;
    return new GpuTensor(this.ctx, [...shape], this.dtype, parts, null, this.storage);
  }

  get size(): number {
    return this.shape.reduce((a, b) => a * b, 1);
  }

  /** The single buffer of an unsharded tensor (what most kernels bind). */
  get buf(): GPUBuffer {
    if (this.storage.freed) throw new EngineError('shape', `tensor (${this.shape}) used after free`);
    if (this.parts.length !== 1)
      throw new EngineError('unsupported', `tensor (${this.shape}) is sharded in ${this.parts.length} buffers; this op needs one`);
    return this.parts[0].data;
  }

  get isFreed(): boolean {
    return this.storage.freed;
  }

  free(): void {
    if (this.storage.freed) return;
    this.storage.freed = true;
    for (const p of this.parts) {
      this.ctx.release(p.data);
      if (p.scales) this.ctx.release(p.scales);
    }
  }
}

export function asGpu(t: Tensor, what: string): GpuTensor {
  assertShape(t instanceof GpuTensor, `${what}: tensor of backend ${t.backend} passed to the WebGPU backend`);
  assertShape(!t.isFreed, `${what}: tensor (${t.shape}) used after free`);
  return t;
}

export function assertF32(t: GpuTensor, what: string): void {
  assertShape(t.dtype === 'f32', `${what}: expected f32, got ${t.dtype} (${t.shape})`);
}
