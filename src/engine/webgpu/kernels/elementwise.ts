// Elementwise ops: add, scale, swiglu. One thread per element; grids fold into y past 65535 groups.
import { assertShape } from '../../errors';
import { type GpuContext, grid1d } from '../context';
import { type GpuTensor, assertF32 } from '../tensor';

const WG = 256;
const HEAD = /* wgsl */ `
struct P { n: u32, s: f32 }
@group(0) @binding(0) var<uniform> p: P;
fn index(w: vec3u, nw: vec3u, l: u32) -> u32 { return (w.y * nw.x + w.x) * ${WG}u + l; }
`;

const ADD = {
  code: /* wgsl */ `${HEAD}
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) w: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  let i = index(w, nw, l);
  if (i < p.n) { y[i] = a[i] + b[i]; }
}`,
};

const SCALE = {
  code: /* wgsl */ `${HEAD}
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) w: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  let i = index(w, nw, l);
  if (i < p.n) { y[i] = a[i] * p.s; }
}`,
};

// silu(g) * u with silu(g) = g / (1 + exp(-g)); exp(-g) overflows to inf for g < -88, giving g/inf = -0, the right limit.
const SWIGLU = {
  code: /* wgsl */ `${HEAD}
@group(0) @binding(1) var<storage, read> g: array<f32>;
@group(0) @binding(2) var<storage, read> u: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) w: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  let i = index(w, nw, l);
  if (i < p.n) { let x = g[i]; y[i] = x / (1.0 + exp(-x)) * u[i]; }
}`,
};

function binary(ctx: GpuContext, k: { code: string }, a: GpuTensor, b: GpuTensor, what: string): GpuTensor {
  assertF32(a, what);
  assertF32(b, what);
  assertShape(a.size === b.size, `${what}: (${a.shape}) vs (${b.shape})`);
  const y = ctx.empty(a.shape, 'f32');
  ctx.dispatch(k, [a.buf, b.buf, y.buf], [a.size, { f32: 0 }], grid1d(a.size, WG));
  return y;
}

// a, b same shape -> a + b
export const add = (ctx: GpuContext, a: GpuTensor, b: GpuTensor) => binary(ctx, ADD, a, b, 'add');
// gate, up (T,F) -> silu(gate) * up
export const swiglu = (ctx: GpuContext, g: GpuTensor, u: GpuTensor) => binary(ctx, SWIGLU, g, u, 'swiglu');

export function scale(ctx: GpuContext, a: GpuTensor, s: number): GpuTensor {
  assertF32(a, 'scale');
  const y = ctx.empty(a.shape, 'f32');
  ctx.dispatch(SCALE, [a.buf, y.buf], [a.size, { f32: s }], grid1d(a.size, WG));
  return y;
}
