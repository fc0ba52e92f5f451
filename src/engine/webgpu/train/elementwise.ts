// Elementwise and gather/scatter training kernels: swiglu backward, accumulate, fill, kvWrite backward
// (gather from the cache gradient), embedding backward (scatter-add via a host-built CSR of the ids),
// rope backward (inverse rotation, same angle reduction as the forward rope).
import { assertShape } from '../../errors';
import { type GpuContext, grid1d } from '../context';
import { type GpuTensor, assertF32 } from '../tensor';
import { INDEX, WG, uploadI32 } from './common';

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

// y = silu(g) * u -> dg = dy u sig (1 + g (1 - sig)), du = dy silu(g)
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

const SCATTER_ROWS = {
  code: /* wgsl */ `
struct P { n: u32, c: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> rows: array<i32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
${INDEX}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) w: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  let i = index(w, nw, l);
  if (i < p.n * p.c) { y[u32(rows[i / p.c]) * p.c + i % p.c] += x[i]; }
}`,
};

/** dst (R,C), src (n,C), rows (n) distinct: dst[rows[i]] += src[i] */
export function scatterAddRows(ctx: GpuContext, dst: GpuTensor, src: GpuTensor, rows: GpuTensor): void {
  assertF32(dst, 'scatterAddRows');
  assertF32(src, 'scatterAddRows');
  const C = dst.shape[dst.shape.length - 1];
  assertShape(rows.dtype === 'i32' && src.size === rows.size * C, `scatterAddRows: src (${src.shape}) vs ${rows.size} rows of ${C}`);
  ctx.dispatch(SCATTER_ROWS, [src.buf, rows.buf, dst.buf], [rows.size, C], grid1d(src.size, WG));
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

const GATHER_KV = {
  code: /* wgsl */ `
struct P { t: u32, row: u32, maxT: u32, s0: u32, ns: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read> slot: array<i32>;
@group(0) @binding(3) var<storage, read> pos: array<i32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
${INDEX}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) w: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  let i = index(w, nw, l);
  if (i >= p.t * p.row) { return; }
  let t = i / p.row;
  let e = i % p.row;
  let s = u32(slot[t]);
  if (s < p.s0 || s >= p.s0 + p.ns) { return; } // another shard's token
  y[i] = src[((s - p.s0) * p.maxT + u32(pos[t])) * p.row + e];
}`,
};

/** dkCache (S,maxT,Hkv,D) (possibly sharded by slots) -> dk (T,Hkv,D), dk[t] = dkCache[slot[t], pos[t]] */
export function gatherKv(ctx: GpuContext, cache: GpuTensor, slot: GpuTensor, pos: GpuTensor): GpuTensor {
  assertF32(cache, 'kvWriteBackward');
  const [, maxT, Hkv, D] = cache.shape;
  const T = slot.size;
  const y = ctx.empty([T, Hkv, D], 'f32');
  for (const part of cache.parts)
    ctx.dispatch(GATHER_KV, [part.data, slot.buf, pos.buf, y.buf], [T, Hkv * D, maxT, part.row0, part.rows], grid1d(T * Hkv * D, WG));
  return y;
}

const EMBED_BWD = {
  code: /* wgsl */ `
struct P { u: u32, c: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> uid: array<i32>;
@group(0) @binding(3) var<storage, read> offs: array<i32>;
@group(0) @binding(4) var<storage, read> order: array<i32>;
@group(0) @binding(5) var<storage, read_write> table: array<f32>;
${INDEX}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) w: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  let i = index(w, nw, l);
  if (i >= p.u * p.c) { return; }
  let u = i / p.c;
  let c = i % p.c;
  var s = 0.0;
  for (var j = offs[u]; j < offs[u + 1u]; j++) { s += dy[u32(order[j]) * p.c + c]; }
  table[u32(uid[u]) * p.c + c] += s;
}`,
};

/** dy (T,C), ids host (T), dTable (V,C): dTable[ids[t]] += dy[t]. One thread per (distinct id, c): no atomics. */
export function embeddingBackward(ctx: GpuContext, dy: GpuTensor, ids: Int32Array, dTable: GpuTensor): void {
  assertF32(dy, 'embeddingBackward');
  assertF32(dTable, 'embeddingBackward');
  const [V, C] = dTable.shape;
  assertShape(dy.size === ids.length * C, `embeddingBackward: dy (${dy.shape}) vs ${ids.length} ids, C=${C}`);
  const byId = new Map<number, number[]>();
  for (let t = 0; t < ids.length; t++) {
    assertShape(ids[t] >= 0 && ids[t] < V, `embeddingBackward: token id ${ids[t]} outside [0,${V})`);
    const list = byId.get(ids[t]);
    if (list) list.push(t);
    else byId.set(ids[t], [t]);
  }
  if (ids.length === 0) return;
  const uid = Int32Array.from(byId.keys());
  const offs = new Int32Array(uid.length + 1);
  const order = new Int32Array(ids.length);
  let k = 0;
  uid.forEach((id, u) => {
    offs[u] = k;
    for (const t of byId.get(id)!) order[k++] = t;
  });
  offs[uid.length] = k;
  const tmp = [uploadI32(ctx, uid), uploadI32(ctx, offs), uploadI32(ctx, order)];
  ctx.dispatch(EMBED_BWD, [dy.buf, ...tmp.map((t) => t.buf), dTable.buf], [uid.length, C], grid1d(uid.length * C, WG));
  for (const t of tmp) t.free();
}

// The transpose of the forward rotation: (ga, gb) -> (ga c + gb s, gb c - ga s), with the forward's
// angle: pos * (hi + lo), reduced to [-pi, pi] by a two-part 2*pi before sin/cos.
const ROPE_BWD = {
  code: /* wgsl */ `
struct P { t: u32, h: u32, d: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> pos: array<i32>;
@group(0) @binding(3) var<storage, read> freq: array<vec2f>;
@group(0) @binding(4) var<storage, read_write> dx: array<f32>;
${INDEX}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) w: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  let half = p.d / 2u;
  let idx = index(w, nw, l);
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
  let ga = dy[base + i];
  let gb = dy[base + i + half];
  dx[base + i] = ga * c + gb * s;
  dx[base + i + half] = gb * c - ga * s;
}`,
};

/** theta^(-2i/D) split into (hi with 9 significant bits, lo) so pos * hi is exact in f32. */
function ropeFreqs(theta: number, d: number): Float32Array {
  const out = new Float32Array(d);
  for (let i = 0; i < d / 2; i++) {
    const f = Math.pow(theta, (-2 * i) / d);
    const q = 2 ** (Math.floor(Math.log2(f)) - 8);
    const hi = Math.round(f / q) * q;
    out[2 * i] = hi;
    out[2 * i + 1] = f - hi;
  }
  return out;
}

/** dy (T,H,D), pos (T) -> dx (T,H,D) */
export function ropeBackward(ctx: GpuContext, dy: GpuTensor, pos: GpuTensor, theta: number): GpuTensor {
  assertF32(dy, 'ropeBackward');
  assertShape(dy.shape.length === 3, `ropeBackward: dy must be (T,H,D), got (${dy.shape})`);
  const [t, h, d] = dy.shape;
  assertShape(pos.dtype === 'i32' && pos.size === t && d % 2 === 0, `ropeBackward: dy (${dy.shape}), pos (${pos.shape})`);
  const dx = ctx.empty(dy.shape, 'f32');
  ctx.dispatch(ROPE_BWD, [dy.buf, pos.buf, ctx.inline(ropeFreqs(theta, d)), dx.buf], [t, h, d], grid1d((t * h * d) / 2, WG));
  return dx;
}
