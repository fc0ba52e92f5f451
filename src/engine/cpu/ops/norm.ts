// Row-wise ops and their backward: rmsnorm, logSoftmax.
import type { Tensor } from '../../backend';
import { assertShape } from '../../errors';
import { asCpu, CpuTensor, f32 } from '../tensor';

// x (R,C), w (C) -> (R,C)
export function rmsnorm(x: Tensor, w: Tensor, eps: number): Tensor {
  const xs = asCpu(x).f32;
  const ws = asCpu(w).f32;
  const C = ws.length;
  assertShape(xs.length % C === 0, `rmsnorm: x (${x.shape}) vs w (${C})`);
  const R = xs.length / C;
  const out = new Float32Array(xs.length);
  for (let r = 0; r < R; r++) {
    let ss = 0;
    for (let c = 0; c < C; c++) ss += xs[r * C + c] * xs[r * C + c];
    const inv = 1 / Math.sqrt(ss / C + eps);
    for (let c = 0; c < C; c++) out[r * C + c] = xs[r * C + c] * inv * ws[c];
  }
  return new CpuTensor([...x.shape], 'f32', out);
}

// Backward of `out[r * C + c] = xs[r * C + c] * inv * ws[c]`, inv = 1/sqrt(mean(x^2)+eps):
// dx = inv * (w*dy) - x * inv^3 / C * sum_c(w*dy*x);  dw += sum_r dy * x * inv (in place)
export function rmsnormBackward(dy: Tensor, x: Tensor, w: Tensor, eps: number, dw: Tensor | null): Tensor {
  const g = asCpu(dy).f32;
  const xs = asCpu(x).f32;
  const ws = asCpu(w).f32;
  const C = ws.length;
  assertShape(xs.length % C === 0 && g.length === xs.length, `rmsnormBackward: dy (${dy.shape}), x (${x.shape}), w (${C})`);
  const R = xs.length / C;
  const dx = new Float32Array(xs.length);
  const dwAcc = new Float64Array(C);
  for (let r = 0; r < R; r++) {
    const o = r * C;
    let ss = 0;
    for (let c = 0; c < C; c++) ss += xs[o + c] * xs[o + c];
    const inv = 1 / Math.sqrt(ss / C + eps);
    let dot = 0;
    for (let c = 0; c < C; c++) dot += ws[c] * g[o + c] * xs[o + c];
    const k = (inv * inv * inv * dot) / C;
    for (let c = 0; c < C; c++) {
      dx[o + c] = inv * ws[c] * g[o + c] - k * xs[o + c];
      dwAcc[c] += g[o + c] * xs[o + c] * inv;
    }
  }
  if (dw) {
    const d = asCpu(dw).f32;
    assertShape(d.length === C, `rmsnormBackward: dw (${dw.shape}) vs C=${C}`);
    for (let c = 0; c < C; c++) d[c] += dwAcc[c];
  }
  return f32(x.shape, dx);
}

// x (R,V) -> (R,V)
export function logSoftmax(x: Tensor): Tensor {
  const xs = asCpu(x).f32;
  const V = x.shape[x.shape.length - 1];
  const out = new Float32Array(xs.length);
  for (let r = 0; r < xs.length / V; r++) {
    let max = -Infinity;
    for (let i = 0; i < V; i++) max = Math.max(max, xs[r * V + i]);
    let sum = 0;
    for (let i = 0; i < V; i++) sum += Math.exp(xs[r * V + i] - max);
    const lz = max + Math.log(sum);
    for (let i = 0; i < V; i++) out[r * V + i] = xs[r * V + i] - lz;
  }
  return new CpuTensor([...x.shape], 'f32', out);
}

// Backward of `out[r * V + i] = xs[r * V + i] - lz`: dx = dy - softmax(x) * sum(dy), softmax(x) = exp(y).
export function logSoftmaxBackward(dy: Tensor, y: Tensor): Tensor {
  const g = asCpu(dy).f32;
  const ys = asCpu(y).f32;
  const V = y.shape[y.shape.length - 1];
  assertShape(g.length === ys.length, `logSoftmaxBackward: dy (${dy.shape}) vs y (${y.shape})`);
  const dx = new Float32Array(g.length);
  for (let r = 0; r < g.length / V; r++) {
    let s = 0;
    for (let i = 0; i < V; i++) s += g[r * V + i];
    for (let i = 0; i < V; i++) dx[r * V + i] = g[r * V + i] - Math.exp(ys[r * V + i]) * s;
  }
  return f32(y.shape, dx);
}
