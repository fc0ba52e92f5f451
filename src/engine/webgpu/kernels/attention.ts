// Grouped-query causal attention over the KV cache. Heads of up to 64 dims: one thread per (token, head)
// (threadKernel). Bigger heads: one workgroup per (token, query head): the token's
// keys are visited in chunks of 64 (one key per thread for the scores), with a running max and sum
// (online softmax) so any context length works in one pass; each thread owns up to 4 output dims.
// Prefill (many tokens of one slot) and decode (one token per slot) are the same call; with few tokens
// in flight the keys are also split into partitions of 256 (see attentionKernel).
//
// Backward, in two passes without atomics:
//  1. one thread per (t, h): recompute p_j = softmax_j(scale q.k_j) over j <= pos[t], then
//     D = sum_j p_j dp_j with dp_j = dOut.v_j, and dq = scale sum_j p_j (dp_j - D) k_j;
//     keeps lse and D per (t, h).
//  2. one thread per cache row (s, j, kvh): sums over the tokens t of slot s (scanning only the span of
//     the batch where slot s's tokens lie) with pos[t] >= j and the
//     query heads h of its group: dk_j = scale sum p (dp - D) q_t, dv_j = sum p dOut_t.
// Head size D is a compile-time constant (one pipeline per D), so the per-thread vectors and
// accumulators are unrolled into registers.
import { attentionDims } from '../../attention-args';
import { assertShape } from '../../errors';
import { type GpuContext, grid1d } from '../context';
import { GpuTensor, assertF32 } from '../tensor';
import { INDEX, WG as WG_BWD } from '../wgsl';
import { samePartition } from './gather';

const WG = 64;
const MAX_D = 4 * WG;

// split = false: one workgroup per (head, token) over all its keys, normalized output y (T,Hq,D).
// split = true ("flash decoding"): workgroup (head, token, z) covers keys [z*part, (z+1)*part) and writes
// its unnormalized partial (max, sum, acc[D]) to ml/y; attentionCombine merges the partitions. Used
// when few tokens are in flight (decode), where one workgroup per head would leave most of a GPU idle.
function attentionKernel(split: boolean): string {
  const outDecl = split
    ? `@group(0) @binding(6) var<storage, read_write> y: array<f32>; // (T,Hq,parts,D) partial acc
@group(0) @binding(7) var<storage, read_write> ml: array<vec2f>; // (T,Hq,parts) running max, sum`
    : '@group(0) @binding(6) var<storage, read_write> y: array<f32>;';
  const range = split
    ? `let jlo = wg.z * p.part;
  let jhi = min(n, jlo + p.part);`
    : `let jlo = 0u;
  let jhi = n;`;
  const write = split
    ? `let slotOut = (t * p.hq + h) * p.parts + wg.z;
  if (l == 0u) { ml[slotOut] = vec2f(mrun, lrun); }
  for (var e = 0u; e < 4u; e++) {
    let d = l + e * ${WG}u;
    if (d < p.d) { y[slotOut * p.d + d] = acc[e]; }
  }`
    : `for (var e = 0u; e < 4u; e++) {
    let d = l + e * ${WG}u;
    if (d < p.d) { y[qb + d] = select(0.0, acc[e] / lrun, n > 0u); }
  }`;
  return /* wgsl */ `
struct P { hq: u32, hkv: u32, d: u32, maxt: u32, s: u32, scale: f32, s0: u32, ns: u32, part: u32, parts: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> kc: array<f32>;
@group(0) @binding(3) var<storage, read> vc: array<f32>;
@group(0) @binding(4) var<storage, read> slot: array<i32>;
@group(0) @binding(5) var<storage, read> pos: array<i32>;
${outDecl}
var<workgroup> qs: array<f32, ${MAX_D}>;
var<workgroup> sc: array<f32, ${WG}>;
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) l: u32) {
  let h = wg.x;
  let t = wg.y;
  let kvh = h / (p.hq / p.hkv);
  let sl = slot[t];
  let ps = pos[t];
  // keys 0..pos of this slot; an out-of-range slot/pos attends to nothing and yields zeros (written by
  // the dispatch of the first cache shard). A cache sharded by slots is one dispatch per shard.
  let valid = sl >= 0 && u32(sl) < p.s && ps >= 0 && u32(ps) < p.maxt;
  let mine = valid && u32(sl) >= p.s0 && u32(sl) < p.s0 + p.ns;
  if (!mine && (valid || p.s0 != 0u)) { return; }
  var n = 0u;
  if (mine) { n = u32(ps) + 1u; }
  let qb = (t * p.hq + h) * p.d;
  for (var d = l; d < p.d; d += ${WG}u) { qs[d] = q[qb + d]; }
  workgroupBarrier();
  let rowStride = p.hkv * p.d;
  let base = ((u32(max(sl, 0)) - select(0u, p.s0, mine)) * p.maxt) * rowStride + kvh * p.d;
  var mrun = -3.0e38;
  var lrun = 0.0;
  var acc = array<f32, 4>(0.0, 0.0, 0.0, 0.0);
  ${range}
  for (var j0 = jlo; j0 < jhi; j0 += ${WG}u) {
    let j = j0 + l;
    var s = -3.0e38;
    if (j < jhi) {
      let kb = base + j * rowStride;
      var dot = 0.0;
      for (var d = 0u; d < p.d; d++) { dot += qs[d] * kc[kb + d]; }
      s = dot * p.scale;
    }
    sc[l] = s;
    workgroupBarrier();
    let cnt = min(${WG}u, jhi - j0);
    var cmax = mrun;
    for (var i = 0u; i < cnt; i++) { cmax = max(cmax, sc[i]); }
    let factor = exp(mrun - cmax);
    workgroupBarrier();
    sc[l] = select(0.0, exp(s - cmax), j < jhi);
    workgroupBarrier();
    var psum = 0.0;
    for (var i = 0u; i < cnt; i++) { psum += sc[i]; }
    lrun = lrun * factor + psum;
    for (var e = 0u; e < 4u; e++) {
      let d = l + e * ${WG}u;
      if (d < p.d) {
        var a = acc[e] * factor;
        for (var i = 0u; i < cnt; i++) { a += sc[i] * vc[base + (j0 + i) * rowStride + d]; }
        acc[e] = a;
      }
    }
    mrun = cmax;
    workgroupBarrier();
  }
  ${write}
}`;
}
const ATTENTION = { code: attentionKernel(false) };
const ATTENTION_PART = { code: attentionKernel(true) };

// Small heads (D <= THREAD_MAX_D): one thread per (token, head[, key partition]), with q and the output
// accumulator in named vec4 registers (D is a compile-time constant of the generated source) and no
// workgroup memory or barrier. The chunked kernel above pays 4 barriers per 64 keys, which software
// adapters run as coroutine switches: a 600-token prefill of the bundled policy (4 heads of 32) took
// 2.4 s per layer on SwiftShader, 0.33 s with this one. Same online softmax, rescaled only when the
// running max grows; the split variant writes the same partials as the chunked one, for the combine.
const THREAD_MAX_D = 64;
const threadKernels = new Map<string, { code: string }>();
function threadKernel(d: number, split: boolean): { code: string } {
  const key = `${d}/${split}`;
  let k = threadKernels.get(key);
  if (k) return k;
  const G = Math.ceil(d / 4);
  const gs = Array.from({ length: G }, (_, g) => g);
  const vec = (arr: string, base: string, g: number) => `vec4f(${[0, 1, 2, 3].map((c) => (4 * g + c < d ? `${arr}[${base} + ${4 * g + c}u]` : '0.0')).join(', ')})`;
  const store = (dst: (c: number) => string, val: (g: number, c: number) => string) =>
    gs.flatMap((g) => [0, 1, 2, 3].filter((c) => 4 * g + c < d).map((c) => `${dst(4 * g + c)} = ${val(g, c)};`)).join('\n  ');
  const write = split
    ? `let slotOut = (t * p.hq + h) * p.parts + z;
  ml[slotOut] = vec2f(mrun, lrun);
  let yb = slotOut * ${d}u;
  ${store((i) => `y[yb + ${i}u]`, (g, c) => `a${g}[${c}]`)}`
    : `let inv = select(0.0, 1.0 / lrun, n > 0u);
  ${store((i) => `y[qb + ${i}u]`, (g, c) => `a${g}[${c}] * inv`)}`;
  const code = /* wgsl */ `
struct P { hq: u32, hkv: u32, d: u32, maxt: u32, s: u32, scale: f32, s0: u32, ns: u32, part: u32, parts: u32, t: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> kc: array<f32>;
@group(0) @binding(3) var<storage, read> vc: array<f32>;
@group(0) @binding(4) var<storage, read> slot: array<i32>;
@group(0) @binding(5) var<storage, read> pos: array<i32>;
@group(0) @binding(6) var<storage, read_write> y: array<f32>;
${split ? '@group(0) @binding(7) var<storage, read_write> ml: array<vec2f>;' : ''}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  let i = (wg.y * nw.x + wg.x) * 64u + l; // ((t * hq + h) * parts + z)
  let z = i % p.parts;
  let h = (i / p.parts) % p.hq;
  let t = i / (p.parts * p.hq);
  if (t >= p.t) { return; }
  let kvh = h / (p.hq / p.hkv);
  let sl = slot[t];
  let ps = pos[t];
  let valid = sl >= 0 && u32(sl) < p.s && ps >= 0 && u32(ps) < p.maxt;
  let mine = valid && u32(sl) >= p.s0 && u32(sl) < p.s0 + p.ns;
  if (!mine && (valid || p.s0 != 0u)) { return; }
  var n = 0u;
  if (mine) { n = u32(ps) + 1u; }
  let qb = (t * p.hq + h) * ${d}u;
  ${gs.map((g) => `let q${g} = ${vec('q', 'qb', g)};\n  var a${g} = vec4f(0.0);`).join('\n  ')}
  let rowStride = p.hkv * ${d}u;
  let base = ((u32(max(sl, 0)) - select(0u, p.s0, mine)) * p.maxt) * rowStride + kvh * ${d}u;
  var mrun = -3.0e38;
  var lrun = 0.0;
  let jlo = ${split ? 'z * p.part' : '0u'};
  let jhi = ${split ? 'min(n, jlo + p.part)' : 'n'};
  for (var j = jlo; j < jhi; j++) {
    let kb = base + j * rowStride;
    let sc = (${gs.map((g) => `dot(q${g}, ${vec('kc', 'kb', g)})`).join(' + ')}) * p.scale;
    if (sc > mrun) {
      let f = exp(mrun - sc);
      lrun *= f;
      ${gs.map((g) => `a${g} *= f;`).join(' ')}
      mrun = sc;
    }
    let e = exp(sc - mrun);
    lrun += e;
    ${gs.map((g) => `a${g} += e * ${vec('vc', 'kb', g)};`).join('\n    ')}
  }
  ${write}
}`;
  k = { code };
  threadKernels.set(key, k);
  return k;
}

const COMBINE = {
  code: /* wgsl */ `
struct P { hq: u32, d: u32, parts: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> part: array<f32>;
@group(0) @binding(2) var<storage, read> ml: array<vec2f>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) l: u32) {
  let row = wg.y * p.hq + wg.x; // (t, h)
  let b = row * p.parts;
  var m = -3.0e38;
  for (var z = 0u; z < p.parts; z++) { m = max(m, ml[b + z].x); }
  var sum = 0.0;
  for (var z = 0u; z < p.parts; z++) { sum += exp(ml[b + z].x - m) * ml[b + z].y; }
  for (var d = l; d < p.d; d += ${WG}u) {
    var a = 0.0;
    for (var z = 0u; z < p.parts; z++) { a += exp(ml[b + z].x - m) * part[(b + z) * p.d + d]; }
    y[row * p.d + d] = select(0.0, a / sum, sum > 0.0);
  }
}`,
};

const PART = 256; // keys per partition of the split kernel
/** Partitions for the split kernel, or 1 for the one-pass kernel (enough (token, head) pairs to fill a GPU). */
export function attentionParts(t: number, hq: number, maxT: number): number {
  return t * hq >= 512 || maxT <= PART ? 1 : Math.ceil(maxT / PART);
}

// q (T,Hq,D), caches (S,maxT,Hkv,D), slot/pos (T) i32 -> (T,Hq,D)
export function attention(ctx: GpuContext, q: GpuTensor, kc: GpuTensor, vc: GpuTensor, slot: GpuTensor, pos: GpuTensor): GpuTensor {
  for (const [x, n] of [[q, 'q'], [kc, 'kCache'], [vc, 'vCache']] as const) assertF32(x, `attention ${n}`);
  const { T: t, Hq: hq, D: d, S: s, maxT, Hkv: hkv } = attentionDims('attention', q, kc, vc, slot, pos);
  assertShape(d <= MAX_D, `attention: head dim ${d} > ${MAX_D}`);
  assertShape(t <= 65535 && hq <= 65535, `attention: ${t} tokens x ${hq} heads exceeds one dispatch grid (65535 per axis)`);
  assertShape(samePartition(kc, vc), 'attention: k and v caches are sharded differently');
  const y = ctx.empty(q.shape, 'f32');
  const parts = attentionParts(t, hq, maxT);
  const partial = parts > 1 ? ctx.alloc(t * hq * parts * d * 4, 'attention partials') : null;
  const ml = parts > 1 ? ctx.alloc(t * hq * parts * 8, 'attention partial max/sum') : null;
  kc.parts.forEach((kp, i) => {
    const u = [hq, hkv, d, maxT, s, { f32: 1 / Math.sqrt(d) }, kp.row0, kp.rows, PART, parts];
    const io = [q.buf, kp.data, vc.parts[i].data, slot.buf, pos.buf];
    if (d <= THREAD_MAX_D) ctx.dispatch(threadKernel(d, parts > 1), partial && ml ? [...io, partial, ml] : [...io, y.buf], [...u, t], grid1d(t * hq * parts, 64));
    else if (partial && ml) ctx.dispatch(ATTENTION_PART, [...io, partial, ml], u, [hq, t, parts]);
    else ctx.dispatch(ATTENTION, [...io, y.buf], u, [hq, t]);
  });
  if (partial && ml) {
    ctx.dispatch(COMBINE, [partial, ml, y.buf], [hq, d, parts], [hq, t]);
    ctx.release(partial);
    ctx.release(ml);
  }
  return y;
}

// ---- backward of `y[qb + d] = acc[e] / lrun` (softmax(scale q.k_j) . v_j) ----
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
@compute @workgroup_size(${WG_BWD})
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
@compute @workgroup_size(${WG_BWD})
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
@compute @workgroup_size(${WG_BWD})
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
  const { T, Hq, D, S, maxT, Hkv } = attentionDims('attentionBackward', q, kCache, vCache, slot, pos, dOut);
  assertShape(samePartition(kCache, vCache), 'attentionBackward: k and v caches are sharded differently');
  assertShape(D <= 256, `attentionBackward: head size ${D} > 256 is not supported`);
  const dq = ctx.empty(q.shape, 'f32');
  const stats = ctx.empty([T * Hq, 2], 'f32');
  const ranges = ctx.empty([S, 2], 'i32');
  ctx.dispatch(RANGES, [slot.buf, ranges.buf], [T, S], grid1d(S, WG_BWD));
  const dkCache = emptyLike(ctx, kCache);
  const dvCache = emptyLike(ctx, vCache);
  const u = (s0: number, ns: number) => [T, Hq, Hkv, s0, ns, maxT, { f32: 1 / Math.sqrt(D) }];
  kCache.parts.forEach((kp, i) => {
    const vp = vCache.parts[i];
    ctx.dispatch(pass1(D), [dOut.buf, q.buf, kp.data, vp.data, slot.buf, pos.buf, dq.buf, stats.buf], u(kp.row0, kp.rows), grid1d(T * Hq, WG_BWD));
  });
  kCache.parts.forEach((kp, i) => {
    const vp = vCache.parts[i];
    ctx.dispatch(pass2(D), [dOut.buf, q.buf, kp.data, vp.data, slot.buf, pos.buf, stats.buf, ranges.buf, dkCache.parts[i].data, dvCache.parts[i].data], u(kp.row0, kp.rows), grid1d(kp.rows * maxT * Hkv, WG_BWD));
  });
  stats.free();
  ranges.free();
  return { dq, dkCache, dvCache };
}
