// Shared WGSL snippets and host helpers of the training kernels.
import type { GpuContext } from '../context';
import { uploadDense } from '../memory';
import type { GpuTensor } from '../tensor';

export const WG = 256;

/** 1-D thread index for grids folded by grid1d. */
export const INDEX = /* wgsl */ `
fn index(w: vec3u, nw: vec3u, l: u32) -> u32 { return (w.y * nw.x + w.x) * ${WG}u + l; }`;

/** Workgroup tree reductions over WG threads; every thread must call them (they have barriers). */
export const REDUCE = /* wgsl */ `
var<workgroup> red: array<f32, ${WG}>;
fn reduce_sum(l: u32, v: f32) -> f32 {
  red[l] = v;
  workgroupBarrier();
  for (var s = ${WG / 2}u; s > 0u; s >>= 1u) {
    if (l < s) { red[l] += red[l + s]; }
    workgroupBarrier();
  }
  let out = red[0];
  workgroupBarrier();
  return out;
}
fn reduce_max(l: u32, v: f32) -> f32 {
  red[l] = v;
  workgroupBarrier();
  for (var s = ${WG / 2}u; s > 0u; s >>= 1u) {
    if (l < s) { red[l] = max(red[l], red[l + s]); }
    workgroupBarrier();
  }
  let out = red[0];
  workgroupBarrier();
  return out;
}
fn row_of(w: vec3u, nw: vec3u) -> u32 { return w.y * nw.x + w.x; }`;

/** A temporary device copy of host integers (freed by the caller). */
export function uploadI32(ctx: GpuContext, data: Int32Array): GpuTensor {
  return uploadDense(ctx, data.length ? data : new Int32Array(1), [Math.max(data.length, 1)]);
}
