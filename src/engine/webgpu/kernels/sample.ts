// Sampling, one workgroup per row, implementing exactly the rule of src/engine/sampling.ts with the RNG of
// src/util/rng.ts ported to u32 arithmetic:
//  - argmax with the lowest index on ties; logZ = log sum exp((x - max) / t), t = temperature or 1.
//  - greedy (temperature <= 0): the argmax, logprob = -logZ.
//  - else p_i = exp((x_i - max)/t - logZ). Nucleus threshold tau = the largest probability value v whose
//    mass S(v) = sum of p_i >= v reaches topP: this is the CPU's "smallest probability among the fewest
//    top tokens reaching topP" (ties at tau are kept on both). Found without sorting by a binary search
//    over the bit patterns of positive f32 (their order is the order of the values), one reduction per step.
//  - target = uniform(seed, step) * S(tau); the first kept token in index order whose running mass exceeds
//    target (per-thread chunk sums, a scan, then one walk); if rounding leaves none, the last kept token.
// Probabilities are kept in a pooled scratch buffer between passes. The running sums and the target are
// compensated (see add2/mul2), so the only disagreement left with the CPU's f64 rule is a target within
// the f32 resolution of the probabilities themselves (~1e-9 of mass) of a cumulative boundary: measured
// 3 draws in 320 on flat random logits at V = 151936, none on peaked or small-vocabulary rows.
// A row whose distribution is not finite (a NaN or +Inf logit, or no logit above -Inf) gets the token
// NON_FINITE_TOKEN and a NaN logprob, so the caller can say so instead of failing later on a token id -1.
import type { SampleParams } from '../../backend';
import { assertShape } from '../../errors';
import type { GpuContext } from '../context';
import { type GpuTensor, assertF32 } from '../tensor';
import { REDUCE, WG } from '../wgsl';

/** The token written for a row whose logits make no distribution (NaN, +Inf, or all -Inf). */
export const NON_FINITE_TOKEN = -2;
const NON_FINITE_TOKEN_WGSL = `${NON_FINITE_TOKEN}i`;

export const RNG_WGSL = /* wgsl */ `
fn hash32(v: u32) -> u32 {
  var x = v;
  x ^= x >> 16u;
  x *= 0x7feb352du;
  x ^= x >> 15u;
  x *= 0x846ca68bu;
  x ^= x >> 16u;
  return x;
}
fn uniform01(seed: u32, step: u32) -> f32 {
  let h = hash32(hash32(seed) ^ (step * 0x9e3779b9u));
  return f32(h >> 8u) / 16777216.0;
}`;

const SAMPLE = {
  code: /* wgsl */ `
struct P { v: u32, r0: u32 }
struct Row { temp: f32, topp: f32, seed: u32, step: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> rows: array<Row>;
@group(0) @binding(3) var<storage, read_write> probs: array<f32>;
@group(0) @binding(4) var<storage, read_write> tokens: array<i32>;
@group(0) @binding(5) var<storage, read_write> logprobs: array<f32>;
${RNG_WGSL}
var<workgroup> rv: array<f32, ${WG + 1}>;
var<workgroup> re: array<f32, ${WG + 1}>;
// compensated sum: a.x + a.y holds the running total with the rounding error of each step kept in a.y
fn add2(a: vec2f, v: f32) -> vec2f {
  let t = a.x + v;
  let e = select((v - t) + a.x, (a.x - t) + v, abs(a.x) >= abs(v));
  return vec2f(t, a.y + e);
}
// u * (k.x + k.y) as a compensated pair, for u = n / 2^24: u and k.x split in 12-bit halves make the four
// partial products exact in f32, so the target keeps the precision of the CPU's f64 product.
fn mul2(u: f32, k: vec2f) -> vec2f {
  let uh = floor(u * 4096.0) / 4096.0;
  let ul = u - uh;
  let kh = bitcast<f32>(bitcast<u32>(k.x) & 0xfffff000u);
  let kl = k.x - kh;
  var a = vec2f(uh * kh, 0.0);
  a = add2(a, uh * kl);
  a = add2(a, ul * kh);
  a = add2(a, ul * kl);
  return add2(a, u * k.y);
}
var<workgroup> ri: array<u32, ${WG}>;
var<workgroup> best: atomic<u32>;
var<workgroup> lastKept: atomic<i32>;
var<workgroup> nonFinite: atomic<u32>;
// NaN (exponent all ones, mantissa non-zero) or +Inf, by bit pattern: WGSL comparisons may assume no NaN.
fn nan_or_pos_inf(v: f32) -> bool {
  let b = bitcast<u32>(v);
  return (b & 0x7f800000u) == 0x7f800000u && b != 0xff800000u;
}
${REDUCE}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) l: u32) {
  let r = wg.x + p.r0;
  let prm = rows[r];
  let base = r * p.v;
  let pb = wg.x * p.v; // this row in the scratch (which holds one dispatch's rows)
  // max and argmax (lowest index on ties)
  if (l == 0u) { atomicStore(&nonFinite, 0u); }
  workgroupBarrier();
  var m = -3.4e38;
  var mi = 0xffffffffu;
  var bad = false;
  for (var i = l; i < p.v; i += ${WG}u) { let xv = x[base + i]; bad = bad || nan_or_pos_inf(xv); if (xv > m) { m = xv; mi = i; } }
  if (bad) { atomicOr(&nonFinite, 1u); }
  rv[l] = m;
  ri[l] = mi;
  workgroupBarrier();
  for (var s = ${WG / 2}u; s > 0u; s >>= 1u) {
    if (l < s) {
      let a = rv[l + s];
      if (a > rv[l] || (a == rv[l] && ri[l + s] < ri[l])) { rv[l] = a; ri[l] = ri[l + s]; }
    }
    workgroupBarrier();
  }
  let mx = rv[0];
  let arg = ri[0];
  workgroupBarrier();
  let greedy = prm.temp <= 0.0;
  let t = select(prm.temp, 1.0, greedy);
  var se = 0.0;
  for (var i = l; i < p.v; i += ${WG}u) { se += exp((x[base + i] - mx) / t); }
  let logz = log(reduce_sum(l, se));
  // probabilities for the sampling passes (written also when greedy: keeps control flow uniform)
  for (var i = l; i < p.v; i += ${WG}u) { probs[pb + i] = exp((x[base + i] - mx) / t - logz); }
  storageBarrier();
  workgroupBarrier();
  // nucleus threshold: largest bit pattern v in [0, bits(1.0)] with S(v) >= topP (S(0) = everything)
  var lo = 0u;
  var hi = 0x3f800001u;
  let nucleus = prm.topp < 1.0 && !greedy;
  for (var it = 0u; it < 31u; it++) {
    let mid = lo + (hi - lo) / 2u;
    let v = bitcast<f32>(mid);
    var part = 0.0;
    if (nucleus && hi - lo > 1u) {
      for (var i = l; i < p.v; i += ${WG}u) { let pv = probs[pb + i]; if (pv >= v) { part += pv; } }
    }
    let mass = reduce_sum(l, part);
    if (nucleus && hi - lo > 1u) {
      if (mass >= prm.topp) { lo = mid; } else { hi = mid; }
    }
  }
  let tau = bitcast<f32>(lo);
  // chunk sums of kept mass, exclusive scan, then walk the chunk that holds the target. These running
  // sums are compensated (value = s + e, Neumaier) so that, like the CPU's f64 sums, they do not drift
  // with the length of the walk; plain f32 here picks a neighbouring token in a few % of draws at V ~ 150K.
  let chunk = (p.v + ${WG - 1}u) / ${WG}u;
  let c0 = min(l * chunk, p.v);
  let c1 = min(c0 + chunk, p.v);
  var cs = vec2f(0.0, 0.0);
  var lastMine = -1;
  for (var i = c0; i < c1; i++) { let pv = probs[pb + i]; if (pv >= tau) { cs = add2(cs, pv); lastMine = i32(i); } }
  rv[l] = cs.x;
  re[l] = cs.y;
  if (l == 0u) { atomicStore(&best, 0xffffffffu); atomicStore(&lastKept, -1); }
  workgroupBarrier();
  if (l == 0u) {
    var acc = vec2f(0.0, 0.0);
    for (var i = 0u; i < ${WG}u; i++) {
      let c = vec2f(rv[i], re[i]);
      rv[i] = acc.x;
      re[i] = acc.y;
      acc = add2(add2(acc, c.x), c.y);
    }
    rv[${WG}u] = acc.x;
    re[${WG}u] = acc.y;
  }
  workgroupBarrier();
  let goal = mul2(uniform01(prm.seed, prm.step), vec2f(rv[${WG}u], re[${WG}u]));
  var run = vec2f(rv[l], re[l]);
  for (var i = c0; i < c1; i++) {
    let pv = probs[pb + i];
    if (pv >= tau) {
      run = add2(run, pv);
      if ((run.x - goal.x) + (run.y - goal.y) > 0.0) { atomicMin(&best, i); break; }
    }
  }
  atomicMax(&lastKept, lastMine);
  workgroupBarrier();
  if (l == 0u) {
    var tok = atomicLoad(&best);
    if (tok == 0xffffffffu) { tok = u32(atomicLoad(&lastKept)); }
    if (greedy) { tok = arg; }
    if (atomicLoad(&nonFinite) != 0u || arg == 0xffffffffu || tok >= p.v) {
      tokens[r] = ${NON_FINITE_TOKEN_WGSL};
      logprobs[r] = bitcast<f32>(0x7fc00000u | (p.v & 0u)); // a runtime NaN: a constant one is refused by the compiler
    } else {
      tokens[r] = i32(tok);
      logprobs[r] = (x[base + tok] - mx) / t - logz;
    }
  }
}`,
};

// logits (R,V) -> tokens (R) i32, logprobs (R)
export function sample(ctx: GpuContext, logits: GpuTensor, params: readonly SampleParams[]): { tokens: GpuTensor; logprobs: GpuTensor } {
  assertF32(logits, 'sample');
  assertShape(logits.shape.length === 2 && logits.shape[1] > 0, `sample: logits must be (R,V), got (${logits.shape})`);
  const [r, v] = logits.shape;
  assertShape(params.length === r, `sample: ${params.length} params for ${r} rows`);
  assertShape(r <= 65535, `sample: ${r} rows (max 65535 per call)`);
  const host = new ArrayBuffer(Math.max(1, r) * 16);
  const dv = new DataView(host);
  params.forEach((q, i) => {
    assertShape(Number.isFinite(q.temperature) && q.topP > 0 && q.topP <= 1, `sample: row ${i} temperature ${q.temperature}, topP ${q.topP}`);
    dv.setFloat32(i * 16, q.temperature, true);
    dv.setFloat32(i * 16 + 4, q.topP, true);
    dv.setUint32(i * 16 + 8, q.seed >>> 0, true);
    dv.setUint32(i * 16 + 12, q.step >>> 0, true);
  });
  const tokens = ctx.empty([r], 'i32');
  const logprobs = ctx.empty([r], 'f32');
  // rows per dispatch so that the probability scratch stays within the buffer size limit
  const per = Math.max(1, Math.min(r, Math.floor(ctx.maxBufferBytes / (v * 4))));
  const scratch = ctx.alloc(Math.max(4, per * v * 4), 'sampling scratch');
  // staged per dispatch: a slice from ctx.inline is only valid until the next flush
  for (let r0 = 0; r0 < r; r0 += per)
    ctx.dispatch(SAMPLE, [logits.buf, ctx.inline(host), scratch, tokens.buf, logprobs.buf], [v, r0], [Math.min(per, r - r0)]);
  ctx.release(scratch);
  return { tokens, logprobs };
}
