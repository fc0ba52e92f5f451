// Loss heads on the device: token cross-entropy and the GRPO clipped surrogate (dual clip, k3 KL).
// One workgroup per row computes lse, entropy, the row's loss and d loss / d logits; a second
// single-workgroup pass sums the per-row metrics. Same math as CpuRefTrainOps.head (src/engine/cpu/ops/loss.ts).
import { assertShape } from '../../errors';
import { checkGrpoOptions, type GrpoInputs, type GrpoOptions } from '../../train';
import { type GpuContext, grid1d } from '../context';
import { type GpuTensor, assertF32 } from '../tensor';
import { REDUCE, WG } from '../wgsl';

const ROWS = {
  code: /* wgsl */ `
struct P { rows: u32, v: u32, mode: u32, hasRef: u32, eps: f32, dual: f32, kl: f32, nanBits: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> tg: array<i32>;
@group(0) @binding(3) var<storage, read> wt: array<f32>;
@group(0) @binding(4) var<storage, read> adv: array<f32>;
@group(0) @binding(5) var<storage, read> old: array<f32>;
@group(0) @binding(6) var<storage, read> refp: array<f32>;
@group(0) @binding(7) var<storage, read_write> dx: array<f32>;
@group(0) @binding(8) var<storage, read_write> met: array<f32>;
${REDUCE}
var<workgroup> dlw: f32;
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) w: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  let row = row_of(w, nw);
  if (row >= p.rows) { return; }
  let base = row * p.v;
  let wr = wt[row];
  if (wr == 0.0) {
    for (var i = l; i < p.v; i += ${WG}u) { dx[base + i] = 0.0; }
    if (l < 5u) { met[row * 5u + l] = 0.0; }
    return;
  }
  var m = -3.0e38;
  for (var i = l; i < p.v; i += ${WG}u) { m = max(m, x[base + i]); }
  m = reduce_max(l, m);
  var z = 0.0;
  var zx = 0.0;
  for (var i = l; i < p.v; i += ${WG}u) {
    let e = exp(x[base + i] - m);
    z += e;
    zx += e * x[base + i];
  }
  z = reduce_sum(l, z);
  zx = reduce_sum(l, zx);
  let lse = m + log(z);
  let tgt = tg[row];
  if (l == 0u) {
    // an out-of-range target poisons the row with NaN, which the trainer's guard refuses
    var logp = bitcast<f32>(p.nanBits);
    if (tgt >= 0 && u32(tgt) < p.v) { logp = x[base + u32(tgt)] - lse; }
    var loss = -logp;
    var dl = -1.0;
    var clipped = 0.0;
    var klv = 0.0;
    if (p.mode == 1u) {
      let a = adv[row];
      let ratio = exp(logp - old[row]);
      let pg1 = -a * ratio;
      let pg2 = -a * clamp(ratio, 1.0 - p.eps, 1.0 + p.eps);
      var pg = max(pg1, pg2);
      var flows = !(pg2 > pg1);
      if (a < 0.0 && -a * p.dual < pg) { pg = -a * p.dual; flows = false; }
      if (!flows) { clipped = 1.0; }
      loss = pg;
      dl = select(0.0, -a * ratio, flows);
      if (p.hasRef == 1u) {
        let d = refp[row] - logp;
        klv = exp(d) - d - 1.0;
        loss += p.kl * klv;
        dl += p.kl * (1.0 - exp(d));
      }
    }
    dlw = wr * dl;
    met[row * 5u] = wr * loss;
    met[row * 5u + 1u] = clipped;
    met[row * 5u + 2u] = klv;
    met[row * 5u + 3u] = lse - zx / z;
    met[row * 5u + 4u] = 1.0;
  }
  workgroupBarrier();
  let g = dlw;
  for (var i = l; i < p.v; i += ${WG}u) {
    let pr = exp(x[base + i] - lse);
    dx[base + i] = g * (select(0.0, 1.0, i32(i) == tgt) - pr);
  }
}`,
};

const SUM = {
  code: /* wgsl */ `
struct P { rows: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> met: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
${REDUCE}
@compute @workgroup_size(${WG})
fn main(@builtin(local_invocation_index) l: u32) {
  var s: array<f32, 5>;
  for (var r = l; r < p.rows; r += ${WG}u) {
    for (var c = 0u; c < 5u; c++) { s[c] += met[r * 5u + c]; }
  }
  let loss = reduce_sum(l, s[0]);
  let clip = reduce_sum(l, s[1]);
  let kl = reduce_sum(l, s[2]);
  let ent = reduce_sum(l, s[3]);
  let n = max(reduce_sum(l, s[4]), 1.0);
  if (l == 0u) {
    out[0] = loss;
    out[1] = clip / n;
    out[2] = kl / n;
    out[3] = ent / n;
  }
}`,
};

/** logits (R,V), targets (R) i32, weight (R) -> dLogits (R,V), metrics (4) */
export function lossHead(ctx: GpuContext, logits: GpuTensor, targets: GpuTensor, weight: GpuTensor, g: GrpoInputs | null, o: GrpoOptions | null) {
  assertF32(logits, 'loss head');
  assertF32(weight, 'loss head');
  const [R, V] = logits.shape;
  assertShape(logits.shape.length === 2 && targets.dtype === 'i32' && targets.size === R && weight.size === R, `loss head: logits (${logits.shape}), targets (${targets.shape}), weight (${weight.shape})`);
  if (o) checkGrpoOptions(o, !!g?.refLogp);
  const side = (t: GpuTensor | null | undefined, name: string) => {
    if (!t) return weight.buf; // bound but never read in this mode
    assertShape(t.dtype === 'f32' && t.size === R, `grpo: ${name} (${t.shape}) must be (${R}) f32`);
    return t.buf;
  };
  const gg = g as { advantage: GpuTensor; oldLogp: GpuTensor; refLogp: GpuTensor | null } | null;
  const dLogits = ctx.empty([R, V], 'f32');
  const met = ctx.empty([R, 5], 'f32');
  ctx.dispatch(
    ROWS,
    [logits.buf, targets.buf, weight.buf, side(gg?.advantage, 'advantage'), side(gg?.oldLogp, 'oldLogp'), side(gg?.refLogp, 'refLogp'), dLogits.buf, met.buf],
    [R, V, o ? 1 : 0, gg?.refLogp ? 1 : 0, { f32: o?.clipEps ?? 0 }, { f32: o?.dualClip ?? 0 }, { f32: o?.klCoef ?? 0 }, 0x7fc00000],
    grid1d(R, 1),
  );
  const metrics = ctx.empty([4], 'f32');
  ctx.dispatch(SUM, [met.buf, metrics.buf], [R], [1, 1, 1]);
  met.free();
  return { dLogits, metrics };
}
