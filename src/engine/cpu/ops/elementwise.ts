// Elementwise ops and their backward: add, scale, swiglu; the gradient utilities accumulate and fill.
import type { Tensor } from '../../backend';
import { assertShape } from '../../errors';
import { asCpu, CpuTensor, f32 } from '../tensor';

// a, b same shape -> a + b
export function add(a: Tensor, b: Tensor): Tensor {
  const as = asCpu(a).f32;
  const bs = asCpu(b).f32;
  assertShape(as.length === bs.length, `add: (${a.shape}) vs (${b.shape})`);
  const out = new Float32Array(as.length);
  for (let i = 0; i < as.length; i++) out[i] = as[i] + bs[i];
  return new CpuTensor([...a.shape], 'f32', out);
}

// a * s
export function scale(a: Tensor, s: number): Tensor {
  const as = asCpu(a).f32;
  const out = new Float32Array(as.length);
  for (let i = 0; i < as.length; i++) out[i] = as[i] * s;
  return new CpuTensor([...a.shape], 'f32', out);
}

// gate, up (T,F) -> silu(gate) * up
export function swiglu(gate: Tensor, up: Tensor): Tensor {
  const g = asCpu(gate).f32;
  const u = asCpu(up).f32;
  assertShape(g.length === u.length, `swiglu: (${gate.shape}) vs (${up.shape})`);
  const out = new Float32Array(g.length);
  for (let i = 0; i < g.length; i++) out[i] = (g[i] / (1 + Math.exp(-g[i]))) * u[i];
  return new CpuTensor([...gate.shape], 'f32', out);
}

// Backward of `out[i] = (g[i] / (1 + Math.exp(-g[i]))) * u[i]`: with sig = 1/(1+exp(-g)),
// d silu / d g = sig * (1 + g * (1 - sig)), so dg = dy u sig (1 + g (1 - sig)) and du = dy g sig.
export function swigluBackward(dy: Tensor, gate: Tensor, up: Tensor): { dGate: Tensor; dUp: Tensor } {
  const g = asCpu(dy).f32;
  const gs = asCpu(gate).f32;
  const us = asCpu(up).f32;
  assertShape(g.length === gs.length && gs.length === us.length, `swigluBackward: dy (${dy.shape}), gate (${gate.shape}), up (${up.shape})`);
  const dGate = new Float32Array(g.length);
  const dUp = new Float32Array(g.length);
  for (let i = 0; i < g.length; i++) {
    const sig = 1 / (1 + Math.exp(-gs[i]));
    dUp[i] = g[i] * gs[i] * sig;
    dGate[i] = g[i] * us[i] * sig * (1 + gs[i] * (1 - sig));
  }
  return { dGate: f32(gate.shape, dGate), dUp: f32(up.shape, dUp) };
}

// dst += s * src (in place)
export function accumulate(dst: Tensor, src: Tensor, s: number): void {
  const d = asCpu(dst).f32;
  const x = asCpu(src).f32;
  assertShape(d.length === x.length, `accumulate: (${dst.shape}) vs (${src.shape})`);
  for (let i = 0; i < d.length; i++) d[i] += s * x[i];
}

export function fill(t: Tensor, value: number): void {
  asCpu(t).f32.fill(value);
}
