// Fused forward ops of a decoder layer (the Backend's optional `fused`, src/engine/backend.ts), each beside the
// unfused composition it replaces, which stays its fallback and its reference:
//   matmulConcat  [x W1^T | x W2^T | x W3^T]   (the q, k, v projections)         unfused: one matmul per weight
//   matmulSwiglu  silu(x Wg^T) * (x Wu^T)       (gate, up and the SwiGLU)        unfused: matmul, matmul, swiglu
//   matmulAdd     r + x W^T                      (o / down and the residual add)  unfused: matmul, add
//   qkNormRope    q/k-norm and RoPE of q and k, v split off, from the fused qkv    unfused: rmsnorm x2, rope x2
// The three matmul fusions are v6 'gemv-fused', the decode GEMV v5 (gemv2, ./matmul.ts) with several weights per
// dispatch and an epilogue: a workgroup's 8 output rows each come from the weight whose row range holds them
// (concat: rows [0, N1) of W1, [N1, N1+N2) of W2, ...), or from two weights at once (swiglu: gate row n and up row
// n, both dequantised from the same K position per step), and the stored value is the concatenation, silu(g) * u,
// or r + x W^T. They run where 'auto' would run v5 (K > 512, M <= 16, K a multiple of the 16-byte word, every
// weight one shard of one dtype); anywhere else the unfused composition runs (concat: each product written into
// its columns of one output by the same matmul kernels, ./matmul.ts matmulInto). Per output value the sums are the
// same as v5's (same lanes, same order, same subgroupAdd / workgroup reduction), so fused and unfused agree to
// the last bit up to the shader compiler's contraction choices.
// qkNormRope is one thread per (token, head) of the fused qkv row: the head's RMS over D, then the rotation of
// RMSNORM_ROW and ROPE (./norm.ts, ./rope.ts) in the same expressions; v heads are copied out.
import type { DType } from '../../backend';
import { assertShape } from '../../errors';
import { type GpuContext, grid1d } from '../context';
import { type GpuTensor, assertF32 } from '../tensor';
import { ROPE_ANGLE, ropeFreqs } from '../wgsl';
import { add, swiglu } from './elementwise';
import { GEMV2_ROWS, GEMV2_WG, GEMV2_WORD, type GemvVersion, type MatmulVersion, gemvRows, matmul, matmulInto, matmulKernelFor } from './matmul';
import { dispatchGemvLane } from './gemv-lane';
import { weightBindings, weightStride } from './weights';

export type FusedGemvKind = 'concat2' | 'concat3' | 'swiglu' | 'residual';

/** One way of producing an output row: the weight sets it reads (suffixes of wd/ws) and the first row it owns. */
interface Alt {
  sets: string[];
  /** WGSL: the first output row of this alternative (its rows are n - off of its weights). */
  off: string;
  /** WGSL condition for rows of this alternative (the last one takes the rest). */
  cond?: string;
}

function alternatives(kind: FusedGemvKind): Alt[] {
  if (kind === 'concat2') return [{ sets: ['0'], off: '0u', cond: 'n < p.n1' }, { sets: ['1'], off: 'p.n1' }];
  if (kind === 'concat3')
    return [{ sets: ['0'], off: '0u', cond: 'n < p.n1' }, { sets: ['1'], off: 'p.n1', cond: 'n < p.n2' }, { sets: ['2'], off: 'p.n2' }];
  if (kind === 'swiglu') return [{ sets: ['g', 'u'], off: '0u' }];
  return [{ sets: [''], off: '0u' }];
}

/** v6 'gemv-fused': the WGSL of one fused GEMV (see the file's head). */
export function gemvFusedSource(dtype: DType, r: number, subgroups: boolean, kind: FusedGemvKind): string {
  const rows = Array.from({ length: r }, (_, i) => i);
  const perWord = GEMV2_WORD[dtype];
  const xv = perWord / 4;
  const alts = alternatives(kind);
  const allSets = [...new Set(alts.flatMap((a) => a.sets))];
  const { decls, resBinding } = weightBindings(allSets, dtype);
  const decode = (s: string) => {
    if (dtype === 'f32') return `let w${s}_0 = wd${s}[nl * (p.stride / 4u) + g];`;
    if (dtype === 'q8')
      return `let wq${s} = wd${s}[nl * (p.stride / 16u) + g];
        ${[0, 1, 2, 3].map((j) => `let w${s}_${j} = vec4f(bitcast<vec4i>(vec4u(wq${s}[${j}]) << vec4u(24u, 16u, 8u, 0u)) >> vec4u(24u));`).join('\n        ')}`;
    return `let wq${s} = wd${s}[nl * (p.stride / 32u) + g];
        let sc${s} = ws${s}[nl * (p.stride / 32u) + g];
        ${[0, 1, 2, 3].map((j) => `let w${s}_${2 * j} = vec4f((vec4u(wq${s}[${j}]) >> vec4u(0u, 4u, 8u, 12u)) & vec4u(15u)) - 8.0;
        let w${s}_${2 * j + 1} = vec4f((vec4u(wq${s}[${j}]) >> vec4u(16u, 20u, 24u, 28u)) & vec4u(15u)) - 8.0;`).join('\n        ')}`;
  };
  // accumulators are named by position p in the alternative's sets: acc{p}_{i}
  const dots = (s: string, p: number, i: number) =>
    `acc${p}_${i} += ${dtype === 'q4' ? `sc${s} * (` : ''}${Array.from({ length: xv }, (_, j) => `dot(w${s}_${j}, x[xr${i} + g * ${xv}u + ${j}u])`).join(' + ')}${dtype === 'q4' ? ')' : ''};`;
  const accumulate = (a: Alt) => `let nl = n - ${a.off};
      ${a.sets.map((_, p) => rows.map((i) => `var acc${p}_${i} = 0.0;`).join(' ')).join(' ')}
      for (var g = lane; g < groups; g += lanes) {
        ${a.sets.map((s) => decode(s)).join('\n        ')}
        ${rows.map((i) => { const d = a.sets.map((s, p) => dots(s, p, i)).join(' '); return r === 1 ? d : `if (${i}u < mc) { ${d} }`; }).join('\n        ')}
      }`;
  const rowScale = (s: string) => (dtype === 'q8' ? ` * ws${s}[nl]` : '');
  // the store of row i from the reduced sums t{p}_{i}
  const store = (a: Alt, i: number) => {
    const o = `(p.m0 + ${i}u) * p.n + p.n0 + n`;
    if (kind === 'swiglu') return `let gv = t0_${i}${rowScale(a.sets[0])}; let uv = t1_${i}${rowScale(a.sets[1])}; y[${o}] = gv / (1.0 + exp(-gv)) * uv;`;
    if (kind === 'residual') return `let o = ${o}; y[o] = rr[o] + t0_${i}${rowScale(a.sets[0])};`;
    return `y[${o}] = t0_${i}${rowScale(a.sets[0])};`;
  };
  const stores = (a: Alt) => rows.map((i) => `if (${i}u < mc) { ${store(a, i)} }`).join('\n        ');
  // if (cond0) { f(alt0) } else if (cond1) { f(alt1) } else { f(last) }
  const branch = (f: (a: Alt) => string) =>
    alts.length === 1 ? `{ ${f(alts[0])} }` : alts.map((a, j) => (j === 0 ? `if (${a.cond}) { ${f(a)} }` : a.cond ? ` else if (${a.cond}) { ${f(a)} }` : ` else { ${f(a)} }`)).join('');
  const width = Math.max(...alts.map((a) => a.sets.length));
  const head = /* wgsl */ `${subgroups ? 'enable subgroups;\ndiagnostic(off, subgroup_uniformity);\n' : ''}
struct P { m: u32, k: u32, ns: u32, n: u32, n0: u32, stride: u32, m0: u32, n1: u32, n2: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<vec4f>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
${decls}
${kind === 'residual' ? `@group(0) @binding(${resBinding}) var<storage, read> rr: array<f32>;` : ''}
const R = ${r}u;`;
  const prologue = `let groups = p.k / ${perWord}u;
  let mc = min(R, p.m - p.m0);
  ${rows.map((i) => `let xr${i} = (p.m0 + min(${i}u, mc - 1u)) * (p.k / 4u);`).join('\n  ')}
  let base = (wg.y * nw.x + wg.x) * ${GEMV2_ROWS}u;`;
  if (subgroups)
    return /* wgsl */ `${head}
@compute @workgroup_size(${GEMV2_WG})
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32,
        @builtin(subgroup_size) sg: u32, @builtin(subgroup_invocation_id) lane: u32) {
  ${prologue}
  let lanes = min(sg, ${GEMV2_WG}u);
  let teams = ${GEMV2_WG}u / lanes;
  for (var t = l / lanes; t < ${GEMV2_ROWS}u; t += teams) {
    let n = base + t;
    if (n < p.ns) {
      ${branch((a) => `${accumulate(a)}
      ${a.sets.map((_, q) => rows.map((i) => `let t${q}_${i} = subgroupAdd(acc${q}_${i});`).join(' ')).join('\n      ')}
      if (lane == 0u) {
        ${stores(a)}
      }`)}
    }
  }
}`;
  const TEAM = GEMV2_WG / GEMV2_ROWS;
  const slot = (q: number, i: number) => (q * r + i) * GEMV2_WG;
  return /* wgsl */ `${head}
var<workgroup> red: array<f32, ${GEMV2_WG * r * width}>;
@compute @workgroup_size(${GEMV2_WG})
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  ${prologue}
  let lanes = ${TEAM}u;
  let lane = l % ${TEAM}u;
  let n0 = base + l / ${TEAM}u;
  let nn = min(n0, p.ns - 1u); // rows past the end compute a duplicate, never stored (the barrier needs every lane)
  {
    let n = nn;
    ${branch((a) => `${accumulate(a)}
      ${a.sets.map((_, q) => rows.map((i) => `red[${slot(q, i)}u + l] = acc${q}_${i};`).join(' ')).join('\n      ')}`)}
  }
  workgroupBarrier();
  if (lane == 0u && n0 < p.ns) {
    ${Array.from({ length: width }, (_, q) => rows.map((i) => `var t${q}_${i} = 0.0; for (var j = 0u; j < ${TEAM}u; j++) { t${q}_${i} += red[${slot(q, i)}u + l + j]; }`).join('\n    ')).join('\n    ')}
    let n = nn;
    ${branch((a) => `let nl = n - ${a.off};
        ${stores(a)}`)}
  }
}`;
}

const kernels = new Map<string, { code: string }>();
function gemvFusedKernel(dtype: DType, r: number, subgroups: boolean, kind: FusedGemvKind): { code: string } {
  const key = `${dtype}/${r}/${subgroups}/${kind}`;
  let k = kernels.get(key);
  if (!k) kernels.set(key, (k = { code: gemvFusedSource(dtype, r, subgroups, kind) }));
  return k;
}

/** The matmul settings of the backend (its matmulVersion / gemvVersion), which decide fused or not. */
export interface MatmulChoice {
  version: MatmulVersion;
  gemv: GemvVersion;
}

/** Whether v6 runs for x against these weights: where 'auto' runs v5 for each, every weight one shard of one dtype and K. */
export function gemvFusedFits(x: GpuTensor, ws: readonly GpuTensor[], c: MatmulChoice): boolean {
  const w0 = ws[0];
  const k = w0.shape[1];
  const m = x.size / k;
  return ws.every(
    (w) => {
      const v = w.parts.length === 1 && c.version === 'auto' ? matmulKernelFor(w, m, c.version, c.gemv) : null;
      return w.dtype === w0.dtype && w.shape[1] === k && weightStride(w) === weightStride(w0) && (v === 'gemv2' || v === 'gemv-lane');
    },
  );
}

function checkWeights(x: GpuTensor, ws: readonly GpuTensor[], what: string): void {
  assertF32(x, `${what} x`);
  const k = ws[0].shape[1];
  for (const w of ws) assertShape(w.shape.length === 2 && w.dtype !== 'i32' && w.shape[1] === k, `${what}: W must be (N,${k}) f32|q8|q4, got ${w.dtype} (${w.shape})`);
  assertShape(k > 0 && x.shape[x.shape.length - 1] === k, `${what}: x (${x.shape}) vs K = ${k}`);
}

function dispatchFused(ctx: GpuContext, kind: FusedGemvKind, x: GpuTensor, y: GpuTensor, ws: readonly GpuTensor[], extra: GPUBuffer[], ns: number, n1: number, n2: number, c: MatmulChoice): void {
  const w0 = ws[0];
  const k = w0.shape[1];
  const m = x.size / k;
  const bufs = [x.buf, y.buf, ...ws.flatMap((w) => (w.parts[0].scales ? [w.parts[0].data, w.parts[0].scales] : [w.parts[0].data])), ...extra];
  if (matmulKernelFor(w0, m, c.version, c.gemv) === 'gemv-lane') {
    dispatchGemvLane(ctx, kind, w0.dtype, bufs, { m, k, ns, n: ns, col0: 0, stride: weightStride(w0), n1, n2 });
    return;
  }
  const groups = Math.ceil(ns / GEMV2_ROWS);
  const gy = Math.ceil(groups / 65535);
  for (let m0 = 0; m0 < m; ) {
    const r = gemvRows(m - m0);
    ctx.dispatch(gemvFusedKernel(w0.dtype, r, ctx.hasSubgroups, kind), bufs, [m, k, ns, ns, 0, weightStride(w0), m0, n1, n2], [Math.ceil(groups / gy), gy]);
    m0 += r;
  }
}

/** x (M,K), ws (N_i,K) (1 to 3) -> (M, sum N_i) = [x W_1^T | x W_2^T | ...] */
export function matmulConcat(ctx: GpuContext, x: GpuTensor, ws: readonly GpuTensor[], c: MatmulChoice): GpuTensor {
  assertShape(ws.length >= 1 && ws.length <= 3, `matmulConcat: 1 to 3 weights, got ${ws.length}`);
  checkWeights(x, ws, 'matmulConcat');
  const m = x.size / ws[0].shape[1];
  const ns = ws.reduce((a, w) => a + w.shape[0], 0);
  const y = ctx.empty([m, ns], 'f32');
  if (ws.length > 1 && gemvFusedFits(x, ws, c)) {
    const n1 = ws[0].shape[0];
    dispatchFused(ctx, ws.length === 2 ? 'concat2' : 'concat3', x, y, ws, [], ns, n1, n1 + (ws.length === 3 ? ws[1].shape[0] : 0), c);
  } else {
    let col = 0;
    for (const w of ws) {
      matmulInto(ctx, x, w, y, col, c.version, c.gemv);
      col += w.shape[0];
    }
  }
  return y;
}

/** x (M,K), wGate, wUp (F,K) -> silu(x Wg^T) * (x Wu^T) (M,F) */
export function matmulSwiglu(ctx: GpuContext, x: GpuTensor, wGate: GpuTensor, wUp: GpuTensor, c: MatmulChoice): GpuTensor {
  checkWeights(x, [wGate, wUp], 'matmulSwiglu');
  assertShape(wGate.shape[0] === wUp.shape[0], `matmulSwiglu: gate (${wGate.shape}) vs up (${wUp.shape})`);
  const m = x.size / wGate.shape[1];
  const f = wGate.shape[0];
  if (gemvFusedFits(x, [wGate, wUp], c)) {
    const y = ctx.empty([m, f], 'f32');
    dispatchFused(ctx, 'swiglu', x, y, [wGate, wUp], [], f, 0, 0, c);
    return y;
  }
  const g = matmul(ctx, x, wGate, c.version, c.gemv);
  const u = matmul(ctx, x, wUp, c.version, c.gemv);
  const y = swiglu(ctx, g, u);
  g.free();
  u.free();
  return y;
}

/** x (M,K), w (N,K), r (M,N) -> r + x W^T (M,N) */
export function matmulAdd(ctx: GpuContext, x: GpuTensor, w: GpuTensor, r: GpuTensor, c: MatmulChoice): GpuTensor {
  checkWeights(x, [w], 'matmulAdd');
  assertF32(r, 'matmulAdd r');
  const m = x.size / w.shape[1];
  const n = w.shape[0];
  assertShape(r.size === m * n && r.shape[r.shape.length - 1] === n, `matmulAdd: r (${r.shape}) vs (${m},${n})`);
  if (gemvFusedFits(x, [w], c)) {
    const y = ctx.empty(r.shape, 'f32');
    dispatchFused(ctx, 'residual', x, y, [w], [r.buf], n, 0, 0, c);
    return y;
  }
  const o = matmul(ctx, x, w, c.version, c.gemv);
  const y = add(ctx, r, o.view(r.shape));
  o.free();
  return y;
}

const qkSource = (which: 'q' | 'k') => `
    let dst = (t * p.h${which === 'q' ? 'q' : 'kv'} + h${which === 'q' ? '' : ' - p.hq'}) * p.d;
    for (var i = 0u; i < half; i++) {
      let a = qkv[src + i] * inv * ${which}n[i];
      let b = qkv[src + i + half] * inv * ${which}n[i + half];
      let r = rope_angle(ps, freq[i]);
      let c = cos(r);
      let s = sin(r);
      ${which}o[dst + i] = a * c - b * s;
      ${which}o[dst + i + half] = b * c + a * s;
    }`;
const QK_NORM_ROPE = {
  code: /* wgsl */ `
struct P { t: u32, hq: u32, hkv: u32, d: u32, eps: f32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> qkv: array<f32>;
@group(0) @binding(2) var<storage, read> qn: array<f32>;
@group(0) @binding(3) var<storage, read> kn: array<f32>;
@group(0) @binding(4) var<storage, read> pos: array<i32>;
@group(0) @binding(5) var<storage, read> freq: array<vec2f>;
@group(0) @binding(6) var<storage, read_write> qo: array<f32>;
@group(0) @binding(7) var<storage, read_write> ko: array<f32>;
@group(0) @binding(8) var<storage, read_write> vo: array<f32>;
${ROPE_ANGLE}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) w: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  let idx = (w.y * nw.x + w.x) * 64u + l; // one thread per (token, head of q | k | v)
  let hs = p.hq + 2u * p.hkv;
  if (idx >= p.t * hs) { return; }
  let t = idx / hs;
  let h = idx % hs;
  let src = idx * p.d;
  if (h >= p.hq + p.hkv) {
    let dst = (t * p.hkv + h - p.hq - p.hkv) * p.d;
    for (var i = 0u; i < p.d; i++) { vo[dst + i] = qkv[src + i]; }
    return;
  }
  var ss = 0.0;
  for (var i = 0u; i < p.d; i++) { let v = qkv[src + i]; ss += v * v; }
  let inv = inverseSqrt(ss / f32(p.d) + p.eps);
  let half = p.d / 2u;
  let ps = f32(pos[t]);
  if (h < p.hq) {${qkSource('q')}
  } else {${qkSource('k')}
  }
}`,
};

/**
 * qkv (T,(Hq+2Hkv)*D) -> q = rope(rmsnorm(q_h, qNorm)) (T,Hq,D), k likewise with kNorm (T,Hkv,D), v (T,Hkv,D).
 */
export function qkNormRope(ctx: GpuContext, qkv: GpuTensor, qNorm: GpuTensor, kNorm: GpuTensor, pos: GpuTensor, eps: number, theta: number, hq: number, hkv: number): { q: GpuTensor; k: GpuTensor; v: GpuTensor } {
  for (const [t, n] of [[qkv, 'qkv'], [qNorm, 'qNorm'], [kNorm, 'kNorm']] as const) assertF32(t, `qkNormRope ${n}`);
  const d = qNorm.size;
  assertShape(kNorm.size === d && d % 2 === 0 && hq > 0 && hkv > 0, `qkNormRope: qNorm (${qNorm.shape}), kNorm (${kNorm.shape}), heads ${hq}/${hkv}`);
  const row = (hq + 2 * hkv) * d;
  assertShape(qkv.shape[qkv.shape.length - 1] === row && qkv.size % row === 0, `qkNormRope: qkv (${qkv.shape}) vs rows of (${hq} + 2 x ${hkv}) x ${d}`);
  const t = qkv.size / row;
  assertShape(pos.dtype === 'i32' && pos.size === t, `qkNormRope: pos ${pos.dtype} (${pos.shape}) vs ${t} tokens`);
  const q = ctx.empty([t, hq, d], 'f32');
  const k = ctx.empty([t, hkv, d], 'f32');
  const v = ctx.empty([t, hkv, d], 'f32');
  const freq = ctx.constant(`rope/${theta}/${d}`, () => ropeFreqs(theta, d));
  ctx.dispatch(QK_NORM_ROPE, [qkv.buf, qNorm.buf, kNorm.buf, pos.buf, freq, q.buf, k.buf, v.buf], [t, hq, hkv, d, { f32: eps }], grid1d(t * (hq + 2 * hkv), 64));
  return { q, k, v };
}
