// Optimizer kernels: AdamW (decoupled weight decay, bias correction) and the global sum of squares
// used for grad-norm clipping and the NaN/Inf guard.
import { assertShape } from '../../errors';
import type { AdamWStep } from '../../train';
import { type GpuContext, grid1d } from '../context';
import { type GpuTensor, assertF32 } from '../tensor';
import { INDEX, REDUCE, WG } from '../wgsl';

const ADAMW = {
  code: /* wgsl */ `
struct P { n: u32, lr: f32, b1: f32, b2: f32, eps: f32, decay: f32, bc1: f32, bc2: f32, gs: f32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> g: array<f32>;
@group(0) @binding(2) var<storage, read_write> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> m: array<f32>;
@group(0) @binding(4) var<storage, read_write> v: array<f32>;
${INDEX}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  let i = index(wg, nw, l);
  if (i >= p.n) { return; }
  let gi = g[i] * p.gs;
  let mi = p.b1 * m[i] + (1.0 - p.b1) * gi;
  let vi = p.b2 * v[i] + (1.0 - p.b2) * gi * gi;
  m[i] = mi;
  v[i] = vi;
  w[i] = w[i] * p.decay - p.lr * (mi / p.bc1) / (sqrt(vi / p.bc2) + p.eps);
}`,
};

export function adamw(ctx: GpuContext, param: GpuTensor, grad: GpuTensor, m: GpuTensor, v: GpuTensor, hp: AdamWStep): void {
  for (const t of [param, grad, m, v]) assertF32(t, 'adamw');
  assertShape(param.size === grad.size && grad.size === m.size && m.size === v.size, `adamw: param (${param.shape}), grad (${grad.shape}), m, v differ`);
  const u = [
    param.size,
    { f32: hp.lr },
    { f32: hp.beta1 },
    { f32: hp.beta2 },
    { f32: hp.eps },
    { f32: 1 - hp.lr * hp.weightDecay },
    { f32: 1 - Math.pow(hp.beta1, hp.step) },
    { f32: 1 - Math.pow(hp.beta2, hp.step) },
    { f32: hp.gradScale },
  ];
  ctx.dispatch(ADAMW, [grad.buf, param.buf, m.buf, v.buf], u, grid1d(param.size, WG));
}

const MAX_GROUPS = 256;

// partial[off + group] = sum of squares of this group's strided share of x
const SUMSQ = {
  code: /* wgsl */ `
struct P { n: u32, off: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> part: array<f32>;
${REDUCE}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) w: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  var s = 0.0;
  for (var i = w.x * ${WG}u + l; i < p.n; i += nw.x * ${WG}u) { s += x[i] * x[i]; }
  let tot = reduce_sum(l, s);
  if (l == 0u) { part[p.off + w.x] = tot; }
}`,
};

const SUM = {
  code: /* wgsl */ `
struct P { n: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> part: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
${REDUCE}
@compute @workgroup_size(${WG})
fn main(@builtin(local_invocation_index) l: u32) {
  var s = 0.0;
  for (var i = l; i < p.n; i += ${WG}u) { s += part[i]; }
  let tot = reduce_sum(l, s);
  if (l == 0u) { out[0] = tot; }
}`,
};

/** (1): sum of squares of every element of every tensor (each tensor's shards included). */
export function sumSquares(ctx: GpuContext, ts: readonly GpuTensor[]): GpuTensor {
  const jobs: { buf: GPUBuffer; n: number; groups: number }[] = [];
  for (const t of ts) {
    assertF32(t, 'sumSquares');
    const rowElems = t.size / Math.max(1, t.shape[0] ?? 1);
    for (const part of t.parts) {
      const n = part.rows * rowElems;
      if (n > 0) jobs.push({ buf: part.data, n, groups: Math.min(MAX_GROUPS, Math.ceil(n / WG)) });
    }
  }
  const total = jobs.reduce((a, j) => a + j.groups, 0);
  const part = ctx.empty([Math.max(total, 1)], 'f32');
  let off = 0;
  for (const j of jobs) {
    ctx.dispatch(SUMSQ, [j.buf, part.buf], [j.n, off], [j.groups, 1, 1]);
    off += j.groups;
  }
  const out = ctx.empty([1], 'f32');
  ctx.dispatch(SUM, [part.buf, out.buf], [total], [1, 1, 1]);
  part.free();
  return out;
}
