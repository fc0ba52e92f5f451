// WGSL access to f32 / q8 / q4 weights (formats of src/engine/quant.ts), shared by matmul and embedding.
// `weightWgsl(dtype, b)` declares the weight bindings from @binding(b) and `fn wload(n, k, stride) -> f32`,
// the dequantized W[n,k] of one shard (n local to the shard; stride = K for f32, padded K otherwise).
import type { DType } from '../../backend';
import type { GpuPart, GpuTensor } from '../tensor';

export function weightWgsl(dtype: DType, b: number): string {
  if (dtype === 'f32')
    return /* wgsl */ `
@group(0) @binding(${b}) var<storage, read> wd: array<f32>;
fn wload(n: u32, k: u32, stride: u32) -> f32 { return wd[n * stride + k]; }
const WCOUNT = ${b + 1}u;`;
  const decl = `
@group(0) @binding(${b}) var<storage, read> wd: array<u32>;
@group(0) @binding(${b + 1}) var<storage, read> ws: array<f32>;`;
  if (dtype === 'q8')
    return /* wgsl */ `${decl}
fn wload(n: u32, k: u32, stride: u32) -> f32 {
  let idx = n * stride + k;
  let byte = (wd[idx >> 2u] >> (8u * (idx & 3u))) & 0xffu;
  return f32(bitcast<i32>(byte << 24u) >> 24u) * ws[n];
}`;
  return /* wgsl */ `${decl}
fn wload(n: u32, k: u32, stride: u32) -> f32 {
  let idx = n * stride + k;
  let nib = (wd[idx >> 3u] >> (4u * (idx & 7u))) & 0xfu;
  return (f32(nib) - 8.0) * ws[n * (stride / 32u) + k / 32u];
}`;
}

/** The buffers of one shard, in the binding order weightWgsl declares. */
export function weightBuffers(p: GpuPart): GPUBuffer[] {
  return p.scales ? [p.data, p.scales] : [p.data];
}

/** Row stride (elements) of a weight as its kernel indexes it. */
export function weightStride(w: GpuTensor): number {
  return w.quant ? w.quant.stride : w.shape[1];
}

/**
 * The WGSL declarations of a GEMV's weight sets from binding 3 on (one array per f32 set; words and scales per
 * quantized set, in that order) and the binding that follows them (a residual, where the kernel has one).
 */
export function weightBindings(sets: readonly string[], dtype: DType): { decls: string; resBinding: number } {
  const wType = dtype === 'f32' ? 'vec4f' : 'vec4u';
  const per = dtype === 'f32' ? 1 : 2;
  const decls = sets
    .map((s, i) => {
      const b = 3 + per * i;
      return `@group(0) @binding(${b}) var<storage, read> wd${s}: array<${wType}>;${dtype === 'f32' ? '' : `\n@group(0) @binding(${b + 1}) var<storage, read> ws${s}: array<f32>;`}`;
    })
    .join('\n');
  return { decls, resBinding: 3 + sets.length * per };
}
