// Elementwise ops and their backward: add, scale, swiglu; and the gradient utilities accumulate (dst += s
// src) and fill. One thread per element; grids fold into y past 65535 groups.
import { assertShape } from '../../errors';
import { type GpuContext, grid1d } from '../context';
import { type GpuTensor, assertF32 } from '../tensor';
import { INDEX, WG } from '../wgsl';

const HEAD = /* wgsl */ `
struct P { n: u32, s: f32 }
@group(0) @binding(0) var<uniform> p: P;
${INDEX}
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

// Backward of `y[i] = x / (1.0 + exp(-x)) * u[i]` with sig = 1/(1+exp(-g)):
// dg = dy u sig (1 + g (1 - sig)), du = dy silu(g) = dy g sig.
const SWIGLU_BWD = {
  code: /* wgsl */ `
struct P { n: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> g: array<f32>;
@group(0) @binding(3) var<storage, read> u: array<f32>;
@group(0) @binding(4) var<storage, read_write> dg: array<f32>;
@group(0) @binding(5) var<storage, read_write> du: array<f32>;
${INDEX}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) w: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  let i = index(w, nw, l);
  if (i >= p.n) { return; }
  let x = g[i];
  let sig = 1.0 / (1.0 + exp(-x));
  du[i] = dy[i] * x * sig;
  dg[i] = dy[i] * u[i] * sig * (1.0 + x * (1.0 - sig));
}`,
};

export function swigluBackward(ctx: GpuContext, dy: GpuTensor, gate: GpuTensor, up: GpuTensor): { dGate: GpuTensor; dUp: GpuTensor } {
  for (const t of [dy, gate, up]) assertF32(t, 'swigluBackward');
  assertShape(dy.size === gate.size && gate.size === up.size, `swigluBackward: dy (${dy.shape}), gate (${gate.shape}), up (${up.shape})`);
  const dGate = ctx.empty(gate.shape, 'f32');
  const dUp = ctx.empty(up.shape, 'f32');
  ctx.dispatch(SWIGLU_BWD, [dy.buf, gate.buf, up.buf, dGate.buf, dUp.buf], [dy.size], grid1d(dy.size, WG));
  return { dGate, dUp };
}

const AXPY = {
  code: /* wgsl */ `
struct P { n: u32, s: f32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
${INDEX}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) w: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  let i = index(w, nw, l);
  if (i < p.n) { y[i] += p.s * x[i]; }
}`,
};

/** dst += s * src */
export function accumulate(ctx: GpuContext, dst: GpuTensor, src: GpuTensor, s: number): void {
  assertF32(dst, 'accumulate');
  assertF32(src, 'accumulate');
  assertShape(dst.size === src.size, `accumulate: (${dst.shape}) vs (${src.shape})`);
  ctx.dispatch(AXPY, [src.buf, dst.buf], [dst.size, { f32: s }], grid1d(dst.size, WG));
}

const FILL = {
  code: /* wgsl */ `
struct P { n: u32, v: f32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
${INDEX}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) w: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  let i = index(w, nw, l);
  if (i < p.n) { y[i] = p.v; }
}`,
};

export function fill(ctx: GpuContext, t: GpuTensor, value: number): void {
  assertF32(t, 'fill');
  const rowElems = t.size / Math.max(1, t.shape[0] ?? 1);
  for (const part of t.parts) {
    const n = part.rows * rowElems;
    ctx.dispatch(FILL, [part.data], [n, { f32: value }], grid1d(n, WG));
  }
}

