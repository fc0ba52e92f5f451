// The optimizer step and the global gradient norm.
import type { Tensor } from '../../backend';
import { assertShape } from '../../errors';
import type { AdamWStep } from '../../train';
import { asCpu, f32 } from '../tensor';

// (1): sum of squares over all elements of all tensors
export function sumSquares(ts: readonly Tensor[]): Tensor {
  let s = 0;
  for (const t of ts) for (const v of asCpu(t).f32) s += v * v;
  return f32([1], Float32Array.of(s));
}

// PyTorch AdamW: p *= 1 - lr wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
export function adamw(param: Tensor, grad: Tensor, m: Tensor, v: Tensor, hp: AdamWStep): void {
  const p = asCpu(param).f32;
  const g = asCpu(grad).f32;
  const ms = asCpu(m).f32;
  const vs = asCpu(v).f32;
  assertShape(p.length === g.length && g.length === ms.length && ms.length === vs.length, `adamw: param (${param.shape}), grad (${grad.shape}), m, v differ`);
  const bc1 = 1 - Math.pow(hp.beta1, hp.step);
  const bc2 = 1 - Math.pow(hp.beta2, hp.step);
  const decay = 1 - hp.lr * hp.weightDecay;
  for (let i = 0; i < p.length; i++) {
    const gi = g[i] * hp.gradScale;
    ms[i] = hp.beta1 * ms[i] + (1 - hp.beta1) * gi;
    vs[i] = hp.beta2 * vs[i] + (1 - hp.beta2) * gi * gi;
    p[i] = p[i] * decay - (hp.lr * (ms[i] / bc1)) / (Math.sqrt(vs[i] / bc2) + hp.eps);
  }
}
