// Matmul y = x W^T (W in Hugging Face's (N,K) layout, f32 or quantized) and its backward.
import type { Tensor } from '../../backend';
import { assertShape } from '../../errors';
import { asCpu, CpuTensor, f32, weightAt, weightRow } from '../tensor';

// x (M,K), w (N,K) -> (M,N)
export function matmul(x: Tensor, w: Tensor): Tensor {
  const xs = asCpu(x).f32;
  const wc = asCpu(w);
  const [N, K] = wc.shape;
  assertShape(xs.length % K === 0 && x.shape[x.shape.length - 1] === K, `matmul: x (${x.shape}) vs W (${N},${K})`);
  const M = xs.length / K;
  const dense = wc.quant ? null : wc.f32;
  const out = new Float32Array(M * N);
  for (let n = 0; n < N; n++) {
    const row = new Float64Array(K);
    for (let k = 0; k < K; k++) row[k] = dense ? dense[n * K + k] : weightAt(wc, n, k);
    for (let m = 0; m < M; m++) {
      let acc = 0;
      for (let k = 0; k < K; k++) acc += xs[m * K + k] * row[k];
      out[m * N + n] = acc;
    }
  }
  return new CpuTensor([M, N], 'f32', out);
}

// Backward of `acc += xs[m * K + k] * row[k]` (row = W[n]) with respect to x: dx (M,K) = dy W.
export function matmulBackwardInput(dy: Tensor, w: Tensor): Tensor {
  const g = asCpu(dy).f32;
  const wc = asCpu(w);
  const [N, K] = wc.shape;
  assertShape(dy.shape[dy.shape.length - 1] === N && g.length % N === 0, `matmulBackwardInput: dy (${dy.shape}) vs W (${N},${K})`);
  const M = g.length / N;
  const acc = new Float64Array(M * K);
  const row = new Float64Array(K);
  for (let n = 0; n < N; n++) {
    weightRow(wc, n, row);
    for (let m = 0; m < M; m++) {
      const gm = g[m * N + n];
      if (gm === 0) continue;
      const o = m * K;
      for (let k = 0; k < K; k++) acc[o + k] += gm * row[k];
    }
  }
  return f32([M, K], acc);
}

// ... and with respect to W: dw (N,K) += dy^T x (in place; trainable f32 weights only).
export function matmulBackwardWeight(dy: Tensor, x: Tensor, dw: Tensor): void {
  const g = asCpu(dy).f32;
  const xs = asCpu(x).f32;
  const d = asCpu(dw).f32;
  const [N, K] = dw.shape;
  const M = g.length / N;
  assertShape(Number.isInteger(M) && xs.length === M * K, `matmulBackwardWeight: dy (${dy.shape}), x (${x.shape}), dW (${N},${K})`);
  for (let n = 0; n < N; n++)
    for (let k = 0; k < K; k++) {
      let acc = 0;
      for (let m = 0; m < M; m++) acc += g[m * N + n] * xs[m * K + k];
      d[n * K + k] += acc;
    }
}
