// Row-wise ops (one workgroup per row, tree reductions in workgroup memory; short rows: one thread per
// row): rmsnorm, logSoftmax; and rope.
import { assertShape } from '../../errors';
import { type GpuContext, grid1d } from '../context';
import { type GpuTensor, assertF32 } from '../tensor';

const WG = 256;
// Sum (or max) of one value per thread into r[0]; every thread must call it (it has barriers).
const REDUCE = /* wgsl */ `
var<workgroup> r: array<f32, ${WG}>;
fn reduce_sum(l: u32, v: f32) -> f32 {
  r[l] = v;
  workgroupBarrier();
  for (var s = ${WG / 2}u; s > 0u; s >>= 1u) {
    if (l < s) { r[l] += r[l + s]; }
    workgroupBarrier();
  }
  let out = r[0];
  workgroupBarrier();
  return out;
}
fn reduce_max(l: u32, v: f32) -> f32 {
  r[l] = v;
  workgroupBarrier();
  for (var s = ${WG / 2}u; s > 0u; s >>= 1u) {
    if (l < s) { r[l] = max(r[l], r[l + s]); }
    workgroupBarrier();
  }
  let out = r[0];
  workgroupBarrier();
  return out;
}
fn row_of(w: vec3u, nw: vec3u) -> u32 { return w.y * nw.x + w.x; }
`;

const RMSNORM = {
  code: /* wgsl */ `
struct P { rows: u32, c: u32, eps: f32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> g: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
${REDUCE}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) w: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  let row = row_of(w, nw);
  if (row >= p.rows) { return; } // uniform per workgroup, so barriers below stay uniform
  let base = row * p.c;
  var ss = 0.0;
  for (var i = l; i < p.c; i += ${WG}u) { let v = x[base + i]; ss += v * v; }
  let inv = inverseSqrt(reduce_sum(l, ss) / f32(p.c) + p.eps);
  for (var i = l; i < p.c; i += ${WG}u) { y[base + i] = x[base + i] * inv * g[i]; }
}`,
};

// Short rows (q/k-norm over a head, the hidden state of a small model): one thread per row, no workgroup
// memory. A 256-lane workgroup per row would leave most lanes idle and pay ~9 barriers, which software
// adapters (SwiftShader, lavapipe) run as coroutine switches: measured 375 ms -> 4 ms for 600 rows of 128
// on SwiftShader, 15 -> 0.8 ms on lavapipe.
const ROW_MAX_C = 256;
const RMSNORM_ROW = {
  code: /* wgsl */ `
struct P { rows: u32, c: u32, eps: f32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> g: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) w: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  let row = (w.y * nw.x + w.x) * 64u + l;
  if (row >= p.rows) { return; }
  let base = row * p.c;
  var ss = 0.0;
  for (var i = 0u; i < p.c; i++) { let v = x[base + i]; ss += v * v; }
  let inv = inverseSqrt(ss / f32(p.c) + p.eps);
  for (var i = 0u; i < p.c; i++) { y[base + i] = x[base + i] * inv * g[i]; }
}`,
};

const LOG_SOFTMAX = {
  code: /* wgsl */ `
struct P { rows: u32, c: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
${REDUCE}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) w: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  let row = row_of(w, nw);
  if (row >= p.rows) { return; }
  let base = row * p.c;
  var m = -3.4e38;
  for (var i = l; i < p.c; i += ${WG}u) { m = max(m, x[base + i]); }
  m = reduce_max(l, m);
  var s = 0.0;
  for (var i = l; i < p.c; i += ${WG}u) { s += exp(x[base + i] - m); }
  let lz = m + log(reduce_sum(l, s));
  for (var i = l; i < p.c; i += ${WG}u) { y[base + i] = x[base + i] - lz; }
}`,
};

// Angle pos * f_i with f_i = hi_i + lo_i, hi_i holding 9 significant bits so that pos * hi_i is exact for
// pos < 2^15; the angle is reduced to [-pi, pi] with a two-part 2*pi (Cody-Waite) before sin/cos, whose
// WGSL accuracy is only specified on [-pi, pi]. This keeps long-context angles within ~1e-6 rad.
const ROPE = {
  code: /* wgsl */ `
struct P { t: u32, h: u32, d: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> pos: array<i32>;
@group(0) @binding(3) var<storage, read> freq: array<vec2f>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) w: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  let half = p.d / 2u;
  let idx = (w.y * nw.x + w.x) * ${WG}u + l; // one thread per (t, h, i < D/2)
  if (idx >= p.t * p.h * half) { return; }
  let i = idx % half;
  let th = idx / half;
  let t = th / p.h;
  let ps = f32(pos[t]);
  let f = freq[i];
  let ahi = ps * f.x;
  let alo = ps * f.y;
  let k = round((ahi + alo) * 0.15915494309189535);
  let r = ((ahi - k * 6.28125) - k * 0.0019353071795864769) + alo;
  let c = cos(r);
  let s = sin(r);
  let base = th * p.d;
  let a = x[base + i];
  let b = x[base + i + half];
  y[base + i] = a * c - b * s;
  y[base + i + half] = b * c + a * s;
}`,
};

/** Host table of (hi, lo) splits of theta^(-2i/D) for i < D/2 (see ROPE). */
function ropeFreqs(theta: number, d: number): Float32Array {
  const out = new Float32Array(d);
  for (let i = 0; i < d / 2; i++) {
    const f = Math.pow(theta, (-2 * i) / d);
    const e = Math.floor(Math.log2(f));
    const q = 2 ** (e - 8); // 9 significant bits
    const hi = Math.round(f / q) * q;
    out[2 * i] = hi;
    out[2 * i + 1] = f - hi;
  }
  return out;
}

const rowGrid = (rows: number): [number, number, number] => grid1d(rows, 1);

// x (R,C), w (C) -> (R,C)
export function rmsnorm(ctx: GpuContext, x: GpuTensor, w: GpuTensor, eps: number): GpuTensor {
  assertF32(x, 'rmsnorm');
  assertF32(w, 'rmsnorm');
  const c = w.size;
  assertShape(c > 0 && x.size % c === 0 && x.shape[x.shape.length - 1] === c, `rmsnorm: x (${x.shape}) vs w (${w.shape})`);
  const rows = x.size / c;
  const y = ctx.empty(x.shape, 'f32');
  if (c <= ROW_MAX_C) ctx.dispatch(RMSNORM_ROW, [x.buf, w.buf, y.buf], [rows, c, { f32: eps }], grid1d(rows, 64));
  else ctx.dispatch(RMSNORM, [x.buf, w.buf, y.buf], [rows, c, { f32: eps }], rowGrid(rows));
  return y;
}

// x (R,V) -> (R,V)
export function logSoftmax(ctx: GpuContext, x: GpuTensor): GpuTensor {
  assertF32(x, 'logSoftmax');
  const c = x.shape[x.shape.length - 1];
  assertShape(x.shape.length >= 1 && c > 0, `logSoftmax: x (${x.shape})`);
  const rows = x.size / c;
  const y = ctx.empty(x.shape, 'f32');
  ctx.dispatch(LOG_SOFTMAX, [x.buf, y.buf], [rows, c], rowGrid(rows));
  return y;
}

// x (T,H,D), pos (T) i32 -> (T,H,D)
export function rope(ctx: GpuContext, x: GpuTensor, pos: GpuTensor, theta: number): GpuTensor {
  assertF32(x, 'rope');
  assertShape(x.shape.length === 3, `rope: x must be (T,H,D), got (${x.shape})`);
  const [t, h, d] = x.shape;
  assertShape(pos.dtype === 'i32' && pos.size === t && d % 2 === 0, `rope: x (${x.shape}), pos ${pos.dtype} (${pos.shape})`);
  const y = ctx.empty(x.shape, 'f32');
  const freq = ctx.constant(`rope/${theta}/${d}`, () => ropeFreqs(theta, d));
  ctx.dispatch(ROPE, [x.buf, pos.buf, freq, y.buf], [t, h, d], grid1d((t * h * d) / 2, WG));
  return y;
}
