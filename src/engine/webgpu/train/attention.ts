// Grouped-query causal attention backward over the KV cache, in two passes without atomics:
//  1. one thread per (t, h): recompute p_j = softmax_j(scale q.k_j) over j <= pos[t], then
//     D = sum_j p_j dp_j with dp_j = dOut.v_j, and dq = scale sum_j p_j (dp_j - D) k_j;
//     keeps lse and D per (t, h).
//  2. one thread per cache row (s, j, kvh): sums over the tokens t of slot s (scanning only the span of
//     the batch where slot s's tokens lie) with pos[t] >= j and the
//     query heads h of its group: dk_j = scale sum p (dp - D) q_t, dv_j = sum p dOut_t.
// Head size D is a compile-time constant (one pipeline per D), so the per-thread vectors and
// accumulators are unrolled into registers.
import { assertShape } from '../../errors';
import { type GpuContext, grid1d } from '../context';
import { GpuTensor, assertF32 } from '../tensor';
import { INDEX, WG } from './common';

const HEAD = /* wgsl */ `
struct P { t: u32, hq: u32, hkv: u32, s0: u32, ns: u32, maxT: u32, scale: f32 }
@group(0) @binding(0) var<uniform> p: P;`;

// Per-head vectors are unrolled in the generated source as ceil(D/4) named vec4s (lanes past D read as
// 0.0): software adapters keep a runtime-indexed private array in memory, and the inner loops then cost a
// memory round trip per element (SwiftShader, a bundled-policy GRPO update: 5.5 s -> 2.2 s here).
function vecs(D: number) {
  const gs = Array.from({ length: Math.ceil(D / 4) }, (_, g) => g);
  const load = (arr: string, base: string, g: number) =>
    `vec4f(${[0, 1, 2, 3].map((c) => (4 * g + c < D ? `${arr}[${base} + ${4 * g + c}u]` : '0.0')).join(', ')})`;
  const each = (f: (g: number) => string, sep = '\n  ') => gs.map(f).join(sep);
  const sum = (f: (g: number) => string) => gs.map(f).join(' + ');
  const store = (arr: string, base: string, val: (g: number) => string) =>
    gs.flatMap((g) => [0, 1, 2, 3].filter((c) => 4 * g + c < D).map((c) => `${arr}[${base} + ${4 * g + c}u] = ${val(g)}[${c}];`)).join('\n  ');
  return { load, each, sum, store };
}

const k1 = new Map<number, { code: string }>();
function pass1(D: number) {
  let k = k1.get(D);
  if (!k) {
    const v = vecs(D);
    k = {
      code: /* wgsl */ `${HEAD}
@group(0) @binding(1) var<storage, read> dO: array<f32>;
@group(0) @binding(2) var<storage, read> q: array<f32>;
@group(0) @binding(3) var<storage, read> kc: array<f32>;
@group(0) @binding(4) var<storage, read> vc: array<f32>;
@group(0) @binding(5) var<storage, read> slot: array<i32>;
@group(0) @binding(6) var<storage, read> pos: array<i32>;
@group(0) @binding(7) var<storage, read_write> dq: array<f32>;
@group(0) @binding(8) var<storage, read_write> stats: array<vec2f>;
${INDEX}
const D = ${D}u;
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) w: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  let i = index(w, nw, l);
  if (i >= p.t * p.hq) { return; }
  let t = i / p.hq;
  let h = i % p.hq;
  let kvh = h / (p.hq / p.hkv);
  let qo = i * D;
  let n = u32(pos[t]) + 1u;
  let sl = u32(slot[t]);
  if (sl < p.s0 || sl >= p.s0 + p.ns) { return; } // another cache shard's token
  let base = (sl - p.s0) * p.maxT;
  ${v.each((g) => `let q${g} = ${v.load('q', 'qo', g)};`)}
  ${v.each((g) => `let o${g} = ${v.load('dO', 'qo', g)};`)}
  // online max / sum of the scores
  var m = -3.0e38;
  var z = 0.0;
  for (var j = 0u; j < n; j++) {
    let ko = ((base + j) * p.hkv + kvh) * D;
    let sc = (${v.sum((g) => `dot(q${g}, ${v.load('kc', 'ko', g)})`)}) * p.scale;
    let mn = max(m, sc);
    z = z * exp(m - mn) + exp(sc - mn);
    m = mn;
  }
  let lse = m + log(z);
  ${v.each((g) => `var acc${g} = vec4f(0.0);\n  var accp${g} = vec4f(0.0);`)}
  var dsum = 0.0;
  for (var j = 0u; j < n; j++) {
    let ko = ((base + j) * p.hkv + kvh) * D;
    ${v.each((g) => `let k${g} = ${v.load('kc', 'ko', g)};`, '\n    ')}
    let qk = ${v.sum((g) => `dot(q${g}, k${g})`)};
    let dpv = ${v.sum((g) => `dot(o${g}, ${v.load('vc', 'ko', g)})`)};
    let pj = exp(qk * p.scale - lse);
    dsum += pj * dpv;
    ${v.each((g) => `acc${g} += (pj * dpv) * k${g};\n    accp${g} += pj * k${g};`, '\n    ')}
  }
  // dq = scale (sum_j p_j dp_j k_j - D sum_j p_j k_j)
  ${v.store('dq', 'qo', (g) => `(p.scale * (acc${g} - dsum * accp${g}))`)}
  stats[i] = vec2f(lse, dsum);
}`,
    };
    k1.set(D, k);
  }
  return k;
}

const k2 = new Map<number, { code: string }>();
function pass2(D: number) {
  let k = k2.get(D);
  if (!k) {
    const v = vecs(D);
    k = {
      code: /* wgsl */ `${HEAD}
@group(0) @binding(1) var<storage, read> dO: array<f32>;
@group(0) @binding(2) var<storage, read> q: array<f32>;
@group(0) @binding(3) var<storage, read> kc: array<f32>;
@group(0) @binding(4) var<storage, read> vc: array<f32>;
@group(0) @binding(5) var<storage, read> slot: array<i32>;
@group(0) @binding(6) var<storage, read> pos: array<i32>;
@group(0) @binding(7) var<storage, read> stats: array<vec2f>;
@group(0) @binding(8) var<storage, read> ranges: array<vec2u>;
@group(0) @binding(9) var<storage, read_write> dk: array<f32>;
@group(0) @binding(10) var<storage, read_write> dv: array<f32>;
${INDEX}
const D = ${D}u;
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) w: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  let i = index(w, nw, l);
  if (i >= p.ns * p.maxT * p.hkv) { return; }
  let kvh = i % p.hkv;
  let sj = i / p.hkv;
  let j = sj % p.maxT;
  let s = p.s0 + sj / p.maxT;
  let ko = i * D;
  let group = p.hq / p.hkv;
  ${v.each((g) => `let k${g} = ${v.load('kc', 'ko', g)};`)}
  ${v.each((g) => `let v${g} = ${v.load('vc', 'ko', g)};`)}
  ${v.each((g) => `var ak${g} = vec4f(0.0);\n  var av${g} = vec4f(0.0);`)}
  let range = ranges[s]; // tokens of slot s lie in [range.x, range.y) (packed batches: contiguous)
  for (var t = range.x; t < range.y; t++) {
    if (u32(slot[t]) != s || u32(pos[t]) < j) { continue; }
    for (var h = kvh * group; h < (kvh + 1u) * group; h++) {
      let qo = (t * p.hq + h) * D;
      ${v.each((g) => `let q${g} = ${v.load('q', 'qo', g)};`, '\n      ')}
      ${v.each((g) => `let o${g} = ${v.load('dO', 'qo', g)};`, '\n      ')}
      let qk = ${v.sum((g) => `dot(q${g}, k${g})`)};
      let dpv = ${v.sum((g) => `dot(o${g}, v${g})`)};
      let st = stats[t * p.hq + h];
      let pj = exp(qk * p.scale - st.x);
      let ds = pj * (dpv - st.y) * p.scale;
      ${v.each((g) => `ak${g} += ds * q${g};\n      av${g} += pj * o${g};`, '\n      ')}
    }
  }
  ${v.store('dk', 'ko', (g) => `ak${g}`)}
  ${v.store('dv', 'ko', (g) => `av${g}`)}
}`,
    };
    k2.set(D, k);
  }
  return k;
}

// ranges[s] = (first token of slot s, last + 1), or (0, 0) when the slot has no token
const RANGES = {
  code: /* wgsl */ `
struct P { t: u32, s: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> slot: array<i32>;
@group(0) @binding(2) var<storage, read_write> ranges: array<vec2u>;
${INDEX}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) w: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  let s = index(w, nw, l);
  if (s >= p.s) { return; }
  var lo = p.t;
  var hi = 0u;
  for (var t = 0u; t < p.t; t++) {
    if (u32(slot[t]) == s) { lo = min(lo, t); hi = t + 1u; }
  }
  ranges[s] = vec2u(select(lo, 0u, hi == 0u), hi);
}`,
};

/** A zero-initialised-free f32 tensor split by rows exactly like `like` (cache shards by slot). */
function emptyLike(ctx: GpuContext, like: GpuTensor): GpuTensor {
  const rowElems = like.size / like.shape[0];
  const parts = like.parts.map((p) => ({ row0: p.row0, rows: p.rows, data: ctx.alloc(Math.max(4, p.rows * rowElems * 4)) }));
  return new GpuTensor(ctx, [...like.shape], 'f32', parts);
}

/** dOut, q (T,Hq,D), caches (S,maxT,Hkv,D) (possibly sharded by slots), slot/pos (T) -> dq (T,Hq,D), dkCache, dvCache (sharded like the caches) */
export function attentionBackward(ctx: GpuContext, dOut: GpuTensor, q: GpuTensor, kCache: GpuTensor, vCache: GpuTensor, slot: GpuTensor, pos: GpuTensor) {
  for (const t of [dOut, q, kCache, vCache]) assertF32(t, 'attentionBackward');
  const [T, Hq, D] = q.shape;
  const [, maxT, Hkv] = kCache.shape;
  assertShape(q.shape.length === 3 && kCache.shape.length === 4 && kCache.shape[3] === D && Hq % Hkv === 0, `attentionBackward: q (${q.shape}) vs cache (${kCache.shape})`);
  assertShape(dOut.size === q.size && slot.size === T && pos.size === T, `attentionBackward: dOut (${dOut.shape}), slot/pos (${slot.size}) vs q (${q.shape})`);
  assertShape(vCache.parts.length === kCache.parts.length && vCache.parts.every((p, i) => p.row0 === kCache.parts[i].row0), 'attentionBackward: k and v caches are sharded differently');
  assertShape(D <= 256, `attentionBackward: head size ${D} > 256 is not supported`);
  const S = kCache.shape[0];
  const dq = ctx.empty(q.shape, 'f32');
  const stats = ctx.empty([T * Hq, 2], 'f32');
  const ranges = ctx.empty([S, 2], 'i32');
  ctx.dispatch(RANGES, [slot.buf, ranges.buf], [T, S], grid1d(S, WG));
  const dkCache = emptyLike(ctx, kCache);
  const dvCache = emptyLike(ctx, vCache);
  const u = (s0: number, ns: number) => [T, Hq, Hkv, s0, ns, maxT, { f32: 1 / Math.sqrt(D) }];
  kCache.parts.forEach((kp, i) => {
    const vp = vCache.parts[i];
    ctx.dispatch(pass1(D), [dOut.buf, q.buf, kp.data, vp.data, slot.buf, pos.buf, dq.buf, stats.buf], u(kp.row0, kp.rows), grid1d(T * Hq, WG));
  });
  kCache.parts.forEach((kp, i) => {
    const vp = vCache.parts[i];
    ctx.dispatch(pass2(D), [dOut.buf, q.buf, kp.data, vp.data, slot.buf, pos.buf, stats.buf, ranges.buf, dkCache.parts[i].data, dvCache.parts[i].data], u(kp.row0, kp.rows), grid1d(kp.rows * maxT * Hkv, WG));
  });
  stats.free();
  ranges.free();
  return { dq, dkCache, dvCache };
}
