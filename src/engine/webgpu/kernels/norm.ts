// Row-wise ops and their backward: rmsnorm, logSoftmax. One workgroup per row with tree reductions in
// workgroup memory; short rows (C <= ROW_MAX_C): one thread per row.
import { assertShape } from '../../errors';
import { type GpuContext, grid1d } from '../context';
import { type GpuTensor, assertF32 } from '../tensor';
import { INDEX, REDUCE, WG } from '../wgsl';

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

// Backward of `y[base + i] = x[base + i] * inv * g[i]` with inv = 1/sqrt(mean(x^2)+eps):
// dx = inv (w dy) - x inv^3/C sum(w dy x); also stores inv per row for the dw pass.
const RMS_DX = {
  code: /* wgsl */ `
struct P { rows: u32, c: u32, eps: f32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> g: array<f32>;
@group(0) @binding(4) var<storage, read_write> dx: array<f32>;
@group(0) @binding(5) var<storage, read_write> invs: array<f32>;
${REDUCE}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) w: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  let row = row_of(w, nw);
  if (row >= p.rows) { return; }
  let base = row * p.c;
  var ss = 0.0;
  var dot = 0.0;
  for (var i = l; i < p.c; i += ${WG}u) {
    let v = x[base + i];
    ss += v * v;
    dot += g[i] * dy[base + i] * v;
  }
  let inv = inverseSqrt(reduce_sum(l, ss) / f32(p.c) + p.eps);
  let k = inv * inv * inv * reduce_sum(l, dot) / f32(p.c);
  for (var i = l; i < p.c; i += ${WG}u) { dx[base + i] = inv * g[i] * dy[base + i] - k * x[base + i]; }
  if (l == 0u) { invs[row] = inv; }
}`,
};

// The same for short rows (C <= ROW_MAX_C: q/k-norm, a small model's hidden state): one thread per row, no
// barriers (software adapters pay ~1 ms per 256-lane workgroup of tree reductions; SwiftShader spent 25 s
// of a bundled-policy GRPO update in RMS_DX).
const RMS_DX_ROW = {
  code: /* wgsl */ `
struct P { rows: u32, c: u32, eps: f32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> g: array<f32>;
@group(0) @binding(4) var<storage, read_write> dx: array<f32>;
@group(0) @binding(5) var<storage, read_write> invs: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) w: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  let row = (w.y * nw.x + w.x) * 64u + l;
  if (row >= p.rows) { return; }
  let base = row * p.c;
  var ss = 0.0;
  var dot = 0.0;
  for (var i = 0u; i < p.c; i++) {
    let v = x[base + i];
    ss += v * v;
    dot += g[i] * dy[base + i] * v;
  }
  let inv = inverseSqrt(ss / f32(p.c) + p.eps);
  let k = inv * inv * inv * dot / f32(p.c);
  for (var i = 0u; i < p.c; i++) { dx[base + i] = inv * g[i] * dy[base + i] - k * x[base + i]; }
  invs[row] = inv;
}`,
};

// dw[c] += sum_r dy[r,c] x[r,c] inv[r], in two passes so that many rows (q/k-norm: T*H rows) spread
// over many workgroups: partial[block, c] over blocks of RB rows, then a sum over blocks per column.
const RB = 64;
const RMS_DW_PART = {
  code: /* wgsl */ `
struct P { rows: u32, c: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> invs: array<f32>;
@group(0) @binding(4) var<storage, read_write> part: array<f32>;
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) w: vec3u, @builtin(local_invocation_index) l: u32) {
  let c = w.x * ${WG}u + l;
  if (c >= p.c) { return; }
  let r0 = w.y * ${RB}u;
  var s = 0.0;
  for (var r = r0; r < min(r0 + ${RB}u, p.rows); r++) { s += dy[r * p.c + c] * x[r * p.c + c] * invs[r]; }
  part[w.y * p.c + c] = s;
}`,
};
const RMS_DW_SUM = {
  code: /* wgsl */ `
struct P { blocks: u32, c: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> part: array<f32>;
@group(0) @binding(2) var<storage, read_write> dw: array<f32>;
${INDEX}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) w: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  let c = index(w, nw, l);
  if (c >= p.c) { return; }
  var s = 0.0;
  for (var b = 0u; b < p.blocks; b++) { s += part[b * p.c + c]; }
  dw[c] += s;
}`,
};

/** dy, x (R,C), w (C) -> dx (R,C); dw (C) += d/dw when given */
export function rmsnormBackward(ctx: GpuContext, dy: GpuTensor, x: GpuTensor, w: GpuTensor, eps: number, dw: GpuTensor | null): GpuTensor {
  for (const t of [dy, x, w]) assertF32(t, 'rmsnormBackward');
  const C = w.size;
  assertShape(C > 0 && x.size % C === 0 && dy.size === x.size, `rmsnormBackward: dy (${dy.shape}), x (${x.shape}), w (${C})`);
  const R = x.size / C;
  const dx = ctx.empty(x.shape, 'f32');
  const invs = ctx.empty([R], 'f32');
  if (C <= ROW_MAX_C) ctx.dispatch(RMS_DX_ROW, [dy.buf, x.buf, w.buf, dx.buf, invs.buf], [R, C, { f32: eps }], grid1d(R, 64));
  else ctx.dispatch(RMS_DX, [dy.buf, x.buf, w.buf, dx.buf, invs.buf], [R, C, { f32: eps }], rowGrid(R));
  if (dw) {
    assertF32(dw, 'rmsnormBackward');
    assertShape(dw.size === C, `rmsnormBackward: dw (${dw.shape}) vs C=${C}`);
    const blocks = Math.ceil(R / RB);
    assertShape(blocks <= 65535 && Math.ceil(C / WG) <= 65535, `rmsnormBackward: (${R},${C}) too large for the dw grid`);
    const part = ctx.empty([blocks, C], 'f32');
    ctx.dispatch(RMS_DW_PART, [dy.buf, x.buf, invs.buf, part.buf], [R, C], [Math.ceil(C / WG), blocks, 1]);
    ctx.dispatch(RMS_DW_SUM, [part.buf, dw.buf], [blocks, C], grid1d(C, WG));
    part.free();
  }
  invs.free();
  return dx;
}

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

// Backward of `y[base + i] = x[base + i] - lz`: dx = dy - softmax(x) sum(dy), softmax(x) = exp(y).
const LSM_BWD = {
  code: /* wgsl */ `
struct P { rows: u32, c: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> y: array<f32>;
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;
${REDUCE}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) w: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  let row = row_of(w, nw);
  if (row >= p.rows) { return; }
  let base = row * p.c;
  var s = 0.0;
  for (var i = l; i < p.c; i += ${WG}u) { s += dy[base + i]; }
  let tot = reduce_sum(l, s);
  for (var i = l; i < p.c; i += ${WG}u) { dx[base + i] = dy[base + i] - exp(y[base + i]) * tot; }
}`,
};

/** dy, y (R,V), y = logSoftmax(x) -> dx = dy - softmax(x) sum(dy) */
export function logSoftmaxBackward(ctx: GpuContext, dy: GpuTensor, y: GpuTensor): GpuTensor {
  assertF32(dy, 'logSoftmaxBackward');
  assertF32(y, 'logSoftmaxBackward');
  const V = y.shape[y.shape.length - 1];
  assertShape(dy.size === y.size && V > 0, `logSoftmaxBackward: dy (${dy.shape}) vs y (${y.shape})`);
  const R = y.size / V;
  const dx = ctx.empty(y.shape, 'f32');
  ctx.dispatch(LSM_BWD, [dy.buf, y.buf, dx.buf], [R, V], rowGrid(R));
  return dx;
}
