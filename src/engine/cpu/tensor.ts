// The tensor of the CPU backends (a host array, or a quantized weight kept as quantized) and the helpers
// every CPU op uses to read one.
import type { DType, Tensor } from '../backend';
import { assertShape } from '../errors';
import { dequantAt, type QuantizedWeight } from '../quant';

export class CpuTensor implements Tensor {
  readonly backend = 'cpu-ref' as const;
  constructor(
    readonly shape: readonly number[],
    readonly dtype: DType,
    readonly data: Float32Array | Int32Array | null,
    readonly quant: QuantizedWeight | null = null,
  ) {}
  get size(): number {
    return this.shape.reduce((a, b) => a * b, 1);
  }
  get f32(): Float32Array {
    assertShape(this.data instanceof Float32Array, `expected an f32 tensor, got ${this.dtype}`);
    return this.data;
  }
  get i32(): Int32Array {
    assertShape(this.data instanceof Int32Array, `expected an i32 tensor, got ${this.dtype}`);
    return this.data;
  }
}

export const numel = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);

export function asCpu(t: Tensor): CpuTensor {
  assertShape(t instanceof CpuTensor, `tensor of backend ${t.backend} passed to a CPU backend`);
  return t;
}

/** W[n,k] of an f32 or quantized (N,K) weight. */
export function weightAt(w: CpuTensor, n: number, k: number): number {
  return w.quant ? dequantAt(w.quant, n, k) : w.f32[n * w.shape[1] + k];
}

/** Row n of an (N,K) f32 or quantized weight, as f64. */
export function weightRow(w: CpuTensor, n: number, out: Float64Array): void {
  const K = w.shape[1];
  if (w.quant) for (let k = 0; k < K; k++) out[k] = dequantAt(w.quant, n, k);
  else for (let k = 0; k < K; k++) out[k] = w.f32[n * K + k];
}

/** An f32 tensor of `data` (f64 accumulators are rounded to f32 once, here). */
export const f32 = (shape: readonly number[], data: Float32Array | Float64Array) =>
  new CpuTensor([...shape], 'f32', data instanceof Float32Array ? data : Float32Array.from(data));
