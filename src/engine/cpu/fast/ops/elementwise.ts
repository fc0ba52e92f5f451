// Elementwise ops and their backward on the wasm kernels: add, scale, swiglu; and AdamW, elementwise over
// the parameters.
import type { Tensor } from '../../../backend';
import { assertShape, EngineError } from '../../../errors';
import { asCpu, CpuTensor } from '../../tensor';
import type { AdamWStep } from '../../../train';
import { f32Bits, type Temps, type WasmRuntime } from '../runtime';

// gate, up (T,F) -> silu(gate) * up
export function swiglu(rt: WasmRuntime, gate: Tensor, up: Tensor): Tensor {
  const g = asCpu(gate).f32;
  const u = asCpu(up).f32;
  assertShape(g.length === u.length, `swiglu: (${gate.shape}) vs (${up.shape})`);
  return elementwise(rt, 'swiglu', gate.shape, [g, u], [g.length], g.length * 32);
}

/** Backward of `y = silu(gate) * up`: dy, gate, up (T,F) -> d gate, d up (T,F). */
export function swigluBackward(rt: WasmRuntime, dy: Tensor, gate: Tensor, up: Tensor): { dGate: CpuTensor; dUp: CpuTensor } {
  const g = asCpu(dy).f32;
  const gs = asCpu(gate).f32;
  const us = asCpu(up).f32;
  assertShape(g.length === gs.length && gs.length === us.length, `swigluBackward: dy (${dy.shape}), gate (${gate.shape}), up (${up.shape})`);
  const temps: Temps = [];
  try {
    const ptrs = [g, gs, us].map((a) => rt.place(a, temps));
    const dGate = rt.output([...gate.shape], temps);
    const dUp = rt.output([...up.shape], temps);
    rt.launch('swigluBackward', [...ptrs, dGate.ptr, dUp.ptr, g.length], 0, g.length * 40, temps);
    return { dGate: dGate.finish(), dUp: dUp.finish() };
  } finally {
    rt.release(temps);
  }
}

// a, b same shape -> a + b
export function add(rt: WasmRuntime, a: Tensor, b: Tensor): Tensor {
  const as = asCpu(a).f32;
  const bs = asCpu(b).f32;
  assertShape(as.length === bs.length, `add: (${a.shape}) vs (${b.shape})`);
  return elementwise(rt, 'axpb', a.shape, [as, bs], [as.length, 0, 0], as.length);
}

// a * s
export function scale(rt: WasmRuntime, a: Tensor, s: number): Tensor {
  const as = asCpu(a).f32;
  return elementwise(rt, 'axpb', a.shape, [as, as], [as.length, f32Bits(s), 1], as.length);
}

function elementwise(rt: WasmRuntime, kernel: 'swiglu' | 'axpb', shape: readonly number[], inputs: Float32Array[], rest: number[], work: number): Tensor {
  const temps: Temps = [];
  try {
    const ptrs = inputs.map((a) => rt.place(a, temps));
    const out = rt.output([...shape], temps);
    rt.launch(kernel, [...ptrs, out.ptr, ...rest], 0, work, temps);
    return out.finish();
  } finally {
    rt.release(temps);
  }
}

/** One AdamW update of param with grad, in place on param, m and v (all the same size). */
export function adamw(rt: WasmRuntime, param: Tensor, grad: Tensor, m: Tensor, v: Tensor, hp: AdamWStep): void {
  if (rt.isFrozen(asCpu(param))) throw new EngineError('unsupported', `adamw: the parameter (${param.shape}) is frozen (backend.freeze): its packed panels would go stale`);
  const [p, g, ms, vs] = [param, grad, m, v].map((t) => asCpu(t).f32);
  assertShape(p.length === g.length && g.length === ms.length && ms.length === vs.length, `adamw: param (${param.shape}), grad (${grad.shape}), m, v differ`);
  const temps: Temps = [];
  try {
    const ptrs = [p, g, ms, vs].map((a) => rt.place(a, temps));
    const hyper = [hp.lr, hp.beta1, hp.beta2, hp.eps, 1 - hp.lr * hp.weightDecay, hp.gradScale, 1 - Math.pow(hp.beta1, hp.step), 1 - Math.pow(hp.beta2, hp.step)];
    rt.launch('adamw', [...ptrs, p.length, ...hyper.map(f32Bits)], 0, p.length * 16, temps);
    // Updated in place: copy back whatever was not resident.
    for (const [i, a] of [p, g, ms, vs].entries()) if (i !== 1 && !rt.isResident(a)) a.set(rt.heap.f32(ptrs[i], a.length));
  } finally {
    rt.release(temps);
  }
}
