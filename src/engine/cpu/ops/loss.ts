// The loss heads of the CPU backends: token cross-entropy and the GRPO clipped surrogate, one token at a
// time. The WGSL head (src/engine/webgpu/kernels/loss.ts) computes the same per-token rule on the device.
import type { Tensor } from '../../backend';
import { assertShape } from '../../errors';
import type { GrpoInputs, GrpoOptions, LossHeadResult } from '../../train';
import { asCpu, f32 } from '../tensor';

/** One token's loss and d(loss)/d(logp), with its clip (0|1) and k3 KL (0 without a reference). */
export interface TokenLoss {
  l: number;
  dl: number;
  clipped: number;
  kl: number;
}

/** Cross-entropy of one target token: l = -logp. */
export function ceTokenLoss(logp: number): TokenLoss {
  return { l: -logp, dl: -1, clipped: 0, kl: 0 };
}

/**
 * The GRPO surrogate of one token, the rule of both CPU heads (and of the WGSL head's per-row step): ratio = exp(logp - old),
 * loss max(-A ratio, -A clip(ratio, 1±eps)), capped at -A c for A < 0 (dual clip); the gradient flows only
 * through the unclipped branch. With a reference log-prob, k3 = exp(ref - logp) - (ref - logp) - 1 is added
 * with weight klCoef.
 */
export function grpoTokenLoss(logp: number, A: number, old: number, ref: number | null, o: GrpoOptions): TokenLoss {
  const ratio = Math.exp(logp - old);
  const pg1 = -A * ratio;
  const pg2 = -A * Math.min(Math.max(ratio, 1 - o.clipEps), 1 + o.clipEps);
  let pg = Math.max(pg1, pg2);
  let flows = !(pg2 > pg1);
  if (A < 0 && -A * o.dualClip < pg) {
    pg = -A * o.dualClip;
    flows = false;
  }
  let l = pg;
  let dl = flows ? -A * ratio : 0;
  let kl = 0;
  if (ref !== null) {
    const d = ref - logp;
    kl = Math.exp(d) - d - 1;
    l += o.klCoef * kl;
    dl += o.klCoef * (1 - Math.exp(d));
  }
  return { l, dl, clipped: flows ? 0 : 1, kl };
}

/** A head's inputs as host arrays, checked: logits (R,V), targets and weights (R), GRPO inputs (R) or null. */
export interface HeadInputs {
  xs: Float32Array;
  tg: Int32Array;
  ws: Float32Array;
  R: number;
  V: number;
  adv: Float32Array | null;
  old: Float32Array | null;
  ref: Float32Array | null;
}

export function headInputs(logits: Tensor, targets: Tensor, weight: Tensor, g: GrpoInputs | null): HeadInputs {
  const xs = asCpu(logits).f32;
  const tg = asCpu(targets).i32;
  const ws = asCpu(weight).f32;
  assertShape(logits.shape.length === 2, `loss head: logits (${logits.shape}) is not (R,V)`);
  const [R, V] = logits.shape;
  assertShape(tg.length === R && ws.length === R, `loss head: logits (${logits.shape}), targets (${tg.length}), weight (${ws.length})`);
  const adv = g ? asCpu(g.advantage).f32 : null;
  const old = g ? asCpu(g.oldLogp).f32 : null;
  const ref = g?.refLogp ? asCpu(g.refLogp).f32 : null;
  if (g) assertShape(adv!.length === R && old!.length === R && (!ref || ref.length === R), 'grpo: advantage/oldLogp/refLogp must have R rows');
  return { xs, tg, ws, R, V, adv, old, ref };
}

/** Row r's token loss: the GRPO surrogate when the head has GRPO inputs and options, else cross-entropy. */
export function rowLoss(h: HeadInputs, r: number, logp: number, o: GrpoOptions | null): TokenLoss {
  return h.adv && h.old && o ? grpoTokenLoss(logp, h.adv[r], h.old[r], h.ref ? h.ref[r] : null, o) : ceTokenLoss(logp);
}

/**
 * Shared row loop of both heads. Per row: logp = x[target] - lse(x), p = softmax(x).
 * CE: l = -logp, dl/dlogp = -1.
 * GRPO: ratio = exp(logp - old); pg1 = -A ratio; pg2 = -A clamp(ratio, 1-eps, 1+eps);
 *   pg = max(pg1, pg2), and for A < 0 pg = min(pg, -A c). The gradient flows only through pg1 when
 *   it is the selected branch (dl/dlogp = -A ratio). k3 KL with d = ref - logp: kl = e^d - d - 1,
 *   dkl/dlogp = 1 - e^d. l = pg + klCoef kl.
 * dlogits = weight * dl/dlogp * (onehot(target) - p).
 */
export function lossHead(logits: Tensor, targets: Tensor, weight: Tensor, g: GrpoInputs | null, o: GrpoOptions | null): LossHeadResult {
  const h = headInputs(logits, targets, weight, g);
  const { xs, tg, ws, R, V } = h;
  const dx = new Float32Array(R * V);
  let loss = 0;
  let clipped = 0;
  let kl = 0;
  let ent = 0;
  let rows = 0;
  for (let r = 0; r < R; r++) {
    const w = ws[r];
    if (w === 0) continue;
    assertShape(tg[r] >= 0 && tg[r] < V, `loss head: target ${tg[r]} outside [0,${V}) at row ${r}`);
    const o0 = r * V;
    let max = -Infinity;
    for (let i = 0; i < V; i++) max = Math.max(max, xs[o0 + i]);
    let sum = 0;
    for (let i = 0; i < V; i++) sum += Math.exp(xs[o0 + i] - max);
    const lse = max + Math.log(sum);
    let px = 0;
    for (let i = 0; i < V; i++) px += Math.exp(xs[o0 + i] - lse) * xs[o0 + i];
    ent += lse - px;
    rows++;
    const logp = xs[o0 + tg[r]] - lse;
    const { l, dl, clipped: c1, kl: k3 } = rowLoss(h, r, logp, o);
    clipped += c1;
    kl += k3;
    loss += w * l;
    for (let i = 0; i < V; i++) dx[o0 + i] = w * dl * ((i === tg[r] ? 1 : 0) - Math.exp(xs[o0 + i] - lse));
  }
  const n = Math.max(rows, 1);
  const metrics = Float32Array.of(loss, clipped / n, kl / n, ent / n);
  return { dLogits: f32([R, V], dx), metrics: f32([4], metrics) };
}
