// Row-wise ops and their backward on the wasm kernels: rmsnorm, and the vocabulary-wide softmax of the
// loss heads (the forward half of the head; the backward is the per-row rule in ../train.ts).
import type { Tensor } from '../../../backend';
import { assertShape } from '../../../errors';
import { asCpu, CpuTensor } from '../../tensor';
import { f32Bits, type Temps, type WasmRuntime } from '../runtime';

// x (R,C), w (C) -> (R,C)
export function rmsnorm(rt: WasmRuntime, x: Tensor, w: Tensor, eps: number): Tensor {
  const xs = asCpu(x).f32;
  const ws = asCpu(w).f32;
  const C = ws.length;
  assertShape(C > 0 && xs.length % C === 0, `rmsnorm: x (${x.shape}) vs w (${C})`);
  const temps: Temps = [];
  try {
    const X = rt.place(xs, temps);
    const W = rt.place(ws, temps);
    const out = rt.output([...x.shape], temps);
    rt.launch('rmsnorm', [X, W, out.ptr, xs.length / C, C, f32Bits(eps)], 0, xs.length * 8, temps);
    return out.finish();
  } finally {
    rt.release(temps);
  }
}

/** Backward of `y = x / sqrt(mean(x^2) + eps) * w`: dy, x (R,C), w (C) -> dx (R,C); dw (C) += d loss / d w when given. */
export function rmsnormBackward(rt: WasmRuntime, dy: Tensor, x: Tensor, w: Tensor, eps: number, dw: Tensor | null): CpuTensor {
  const g = asCpu(dy).f32;
  const xs = asCpu(x).f32;
  const ws = asCpu(w).f32;
  const C = ws.length;
  assertShape(C > 0 && xs.length % C === 0 && g.length === xs.length, `rmsnormBackward: dy (${dy.shape}), x (${x.shape}), w (${C})`);
  const d = dw ? asCpu(dw).f32 : null;
  if (d) assertShape(d.length === C, `rmsnormBackward: dw (${dw!.shape}) vs C=${C}`);
  const temps: Temps = [];
  try {
    const ptrs = [g, xs, ws].map((a) => rt.place(a, temps));
    const dx = rt.output([...x.shape], temps);
    // One f64 partial dw per thread (threads own rows; dw sums over rows), reduced here.
    const partials = rt.heap.alloc(rt.threads * C * 8);
    temps.push(partials);
    const part = new Float64Array(rt.heap.buffer, partials, rt.threads * C);
    part.fill(0);
    rt.launch('rmsnormBackward', [...ptrs, dx.ptr, xs.length / C, C, f32Bits(eps), partials], 0, xs.length * 12, temps);
    if (d) {
      const p = new Float64Array(rt.heap.buffer, partials, rt.threads * C);
      for (let c = 0; c < C; c++) {
        let acc = 0;
        for (let t = 0; t < rt.threads; t++) acc += p[t * C + c];
        d[c] += acc;
      }
    }
    return dx.finish();
  } finally {
    rt.release(temps);
  }
}

/**
 * logits (R,V), weight (R) -> p = softmax of each row (0 for rows of weight 0) and, per row,
 * [log-normalizer, sum_i p_i x_i] (f64): the vocabulary-wide work of the loss heads (./train.ts).
 */
export function softmaxRows(rt: WasmRuntime, logits: Tensor, weight: Tensor): { p: CpuTensor; stats: Float64Array } {
  const xs = asCpu(logits).f32;
  const ws = asCpu(weight).f32;
  assertShape(logits.shape.length === 2 && ws.length === logits.shape[0], `softmaxRows: logits (${logits.shape}), weight (${ws.length})`);
  const [R, V] = logits.shape;
  const temps: Temps = [];
  try {
    const X = rt.place(xs, temps);
    const W = rt.place(ws, temps);
    const p = rt.output([R, V], temps);
    const st = rt.heap.alloc(R * 16);
    temps.push(st);
    rt.launch('softmaxRows', [X, W, p.ptr, st, R, V], 0, R * V * 16, temps);
    return { p: p.finish(), stats: new Float64Array(rt.heap.buffer, st, R * 2).slice() };
  } finally {
    rt.release(temps);
  }
}
