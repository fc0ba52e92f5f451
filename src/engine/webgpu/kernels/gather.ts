// Index-driven copies and their backward: embedding (f32/q8/q4 tables, per shard) and its scatter-add,
// gatherRows and scatterAddRows, kvWrite and the gather of its cache gradient.
// Indices live on the GPU, so they cannot be checked on the host without a readback: out-of-range token
// ids and rows give zero rows, and out-of-range cache slots/positions are skipped (the CPU reference throws).
import { assertShape } from '../../errors';
import { type GpuContext, grid1d } from '../context';
import { uploadDense } from '../memory';
import { type GpuTensor, assertF32 } from '../tensor';
import { INDEX, WG } from '../wgsl';
import { weightBuffers, weightStride, weightWgsl } from './weights';

const embedKernels = new Map<string, { code: string }>();
function embedKernel(dtype: 'f32' | 'q8' | 'q4') {
  let k = embedKernels.get(dtype);
  if (!k) {
    k = {
      code: /* wgsl */ `
struct P { t: u32, c: u32, row0: u32, rows: u32, v: u32, stride: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> ids: array<i32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
${weightWgsl(dtype, 3)}
${INDEX}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) w: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  let i = index(w, nw, l); // one thread per (t, c)
  if (i >= p.t * p.c) { return; }
  let t = i / p.c;
  let c = i % p.c;
  let id = ids[t];
  if (id >= 0 && u32(id) >= p.row0 && u32(id) < p.row0 + p.rows) {
    y[i] = wload(u32(id) - p.row0, c, p.stride);
  } else if (p.row0 == 0u && (id < 0 || u32(id) >= p.v)) {
    y[i] = 0.0; // written once, by the first shard's dispatch
  }
}`,
    };
    embedKernels.set(dtype, k);
  }
  return k;
}

// table (V,C) f32|q8|q4, ids (T) i32 -> (T,C)
export function embedding(ctx: GpuContext, table: GpuTensor, ids: GpuTensor): GpuTensor {
  assertShape(table.shape.length === 2 && table.dtype !== 'i32', `embedding: table (${table.shape}) ${table.dtype}`);
  assertShape(ids.dtype === 'i32' && ids.shape.length === 1, `embedding: ids must be (T) i32, got ${ids.dtype} (${ids.shape})`);
  const [v, c] = table.shape;
  const t = ids.size;
  const y = ctx.empty([t, c], 'f32');
  const k = embedKernel(table.dtype as 'f32' | 'q8' | 'q4');
  for (const part of table.parts)
    ctx.dispatch(k, [ids.buf, y.buf, ...weightBuffers(part)], [t, c, part.row0, part.rows, v, weightStride(table)], grid1d(t * c, WG));
  return y;
}

// Backward of `y[i] = wload(u32(id) - p.row0, c, p.stride)`: dTable[ids[t]] += dy[t], summed per distinct id
// over a host-built CSR of the ids.
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

/** A temporary device copy of host integers (freed by the caller). */
function uploadI32(ctx: GpuContext, data: Int32Array): GpuTensor {
  return uploadDense(ctx, data.length ? data : new Int32Array(1), [Math.max(data.length, 1)]);
}
const GATHER = {
  code: /* wgsl */ `
struct P { n: u32, c: u32, r: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> rows: array<i32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
${INDEX}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) w: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  let i = index(w, nw, l);
  if (i >= p.n * p.c) { return; }
  let row = rows[i / p.c];
  y[i] = select(0.0, x[u32(row) * p.c + i % p.c], row >= 0 && u32(row) < p.r);
}`,
};

// x (R,C), rows (n) i32 -> (n,C)
export function gatherRows(ctx: GpuContext, x: GpuTensor, rows: GpuTensor): GpuTensor {
  assertF32(x, 'gatherRows');
  assertShape(x.shape.length === 2, `gatherRows: x must be (R,C), got (${x.shape})`);
  assertShape(rows.dtype === 'i32' && rows.shape.length === 1, `gatherRows: rows must be (n) i32, got ${rows.dtype} (${rows.shape})`);
  const [r, c] = x.shape;
  const n = rows.size;
  const y = ctx.empty([n, c], 'f32');
  ctx.dispatch(GATHER, [x.buf, rows.buf, y.buf], [n, c, r], grid1d(n * c, WG));
  return y;
}

// Backward of `y[i] = x[u32(row) * p.c + i % p.c]` (gatherRows): dst[rows[i]] += src[i].
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

const KV_WRITE = {
  code: /* wgsl */ `
struct P { t: u32, row: u32, s0: u32, ns: u32, maxt: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> k: array<f32>;
@group(0) @binding(2) var<storage, read> v: array<f32>;
@group(0) @binding(3) var<storage, read> slot: array<i32>;
@group(0) @binding(4) var<storage, read> pos: array<i32>;
@group(0) @binding(5) var<storage, read_write> kc: array<f32>;
@group(0) @binding(6) var<storage, read_write> vc: array<f32>;
${INDEX}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) w: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  let i = index(w, nw, l); // one thread per (t, j < Hkv*D)
  if (i >= p.t * p.row) { return; }
  let t = i / p.row;
  let s = slot[t];
  let ps = pos[t];
  if (s < i32(p.s0) || u32(s) >= p.s0 + p.ns || ps < 0 || u32(ps) >= p.maxt) { return; } // another shard's, or out of range
  let dst = ((u32(s) - p.s0) * p.maxt + u32(ps)) * p.row + i % p.row;
  kc[dst] = k[i];
  vc[dst] = v[i];
}`,
};

// k, v (T,Hkv,D) -> caches (S,maxT,Hkv,D) at [slot[t], pos[t]]
export function kvWrite(ctx: GpuContext, kc: GpuTensor, vc: GpuTensor, k: GpuTensor, v: GpuTensor, slot: GpuTensor, pos: GpuTensor): void {
  for (const [x, n] of [[kc, 'kCache'], [vc, 'vCache'], [k, 'k'], [v, 'v']] as const) assertF32(x, `kvWrite ${n}`);
  assertShape(kc.shape.length === 4 && vc.shape.join() === kc.shape.join(), `kvWrite: caches (${kc.shape}) vs (${vc.shape})`);
  const [, maxT, hkv, d] = kc.shape;
  assertShape(k.shape.length === 3 && k.shape[1] === hkv && k.shape[2] === d && v.shape.join() === k.shape.join(), `kvWrite: k (${k.shape}), v (${v.shape}) vs cache (${kc.shape})`);
  const t = k.shape[0];
  assertShape(slot.dtype === 'i32' && pos.dtype === 'i32' && slot.size === t && pos.size === t, `kvWrite: slot/pos must be (${t}) i32`);
  assertShape(samePartition(kc, vc), 'kvWrite: k and v caches are sharded differently');
  kc.parts.forEach((kp, i) =>
    ctx.dispatch(KV_WRITE, [k.buf, v.buf, slot.buf, pos.buf, kp.data, vc.parts[i].data], [t, hkv * d, kp.row0, kp.rows, maxT], grid1d(t * hkv * d, WG)),
  );
}

/** Two tensors split into the same row ranges (e.g. a K and a V cache, sharded by slots). */
export function samePartition(a: GpuTensor, b: GpuTensor): boolean {
  return a.parts.length === b.parts.length && a.parts.every((p, i) => p.row0 === b.parts[i].row0 && p.rows === b.parts[i].rows);
}

// Backward of `kc[dst] = k[i]; vc[dst] = v[i]` (kvWrite): dk[t] = dkCache[slot[t], pos[t]].
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

/** cache (S,maxT,Hkv,D) (possibly sharded by slots) -> (T,Hkv,D): out[t] = cache[slot[t], pos[t]] */
function gatherKv(ctx: GpuContext, cache: GpuTensor, slot: GpuTensor, pos: GpuTensor): GpuTensor {
  assertF32(cache, 'kvWriteBackward');
  const [, maxT, Hkv, D] = cache.shape;
  const T = slot.size;
  const y = ctx.empty([T, Hkv, D], 'f32');
  for (const part of cache.parts)
    ctx.dispatch(GATHER_KV, [part.data, slot.buf, pos.buf, y.buf], [T, Hkv * D, maxT, part.row0, part.rows], grid1d(T * Hkv * D, WG));
  return y;
}

/** dkCache, dvCache (S,maxT,Hkv,D) -> dk, dv (T,Hkv,D) */
export function kvWriteBackward(ctx: GpuContext, dkc: GpuTensor, dvc: GpuTensor, slot: GpuTensor, pos: GpuTensor): { dk: GpuTensor; dv: GpuTensor } {
  return { dk: gatherKv(ctx, dkc, slot, pos), dv: gatherKv(ctx, dvc, slot, pos) };
}
