// Random-weight Qwen3 models for tests and benchmarks. Weights are drawn from one seeded stream in
// weightSpecs order, and quantized weights are produced a block of rows at a time so that a 0.6B-shaped
// model in q4 never holds its f32 weights at once.
import { Rng } from '../util/rng';
import { paddedCols, quantize, type QuantizedWeight } from '../engine/quant';
import type { Qwen3Config } from './config';
import type { HostWeight, WeightSpec } from './weights';
import type { WeightFormat } from './qwen3';

/**
 * A generator for buildQwen3: norms are 1 + 0.1 N(0,1) (so a model's norms are not the identity),
 * matrices N(0, 1/K) (keeps activations O(1) through depth; for the tied embedding it keeps logits
 * O(1), so sampling is not trivially greedy).
 */
export function randomWeights(c: Qwen3Config, seed: number, format: WeightFormat, opts: { dist?: 'normal' | 'uniform' } = {}): (spec: WeightSpec) => HostWeight {
  const rng = new Rng(seed);
  // 'uniform' (same variance, U(-sqrt(3), sqrt(3))) is ~3x cheaper to draw: for benchmark-sized models.
  const draw = opts.dist === 'uniform' ? () => Math.sqrt(3) * (2 * rng.next() - 1) : () => rng.normal();
  return (spec) => {
    if (spec.shape.length === 1) {
      const data = new Float32Array(spec.shape[0]);
      for (let i = 0; i < data.length; i++) data[i] = 1 + 0.1 * draw();
      return { kind: 'f32', shape: [...spec.shape], data };
    }
    const [N, K] = spec.shape;
    const std = 1 / Math.sqrt(K);
    if (format === 'f32' || !spec.quantizable) {
      const data = new Float32Array(N * K);
      for (let i = 0; i < data.length; i++) data[i] = std * draw();
      return { kind: 'f32', shape: [N, K], data };
    }
    const stride = paddedCols(format, K);
    const perU32 = format === 'q8' ? 4 : 8;
    const groups = format === 'q8' ? 1 : stride / 32;
    const out: QuantizedWeight = { kind: format, rows: N, cols: K, stride, data: new Uint32Array((N * stride) / perU32), scales: new Float32Array(N * groups) };
    const block = Math.max(1, Math.floor((1 << 20) / K));
    for (let r0 = 0; r0 < N; r0 += block) {
      const rows = Math.min(block, N - r0);
      const chunk = new Float32Array(rows * K);
      for (let i = 0; i < chunk.length; i++) chunk[i] = std * draw();
      // Quantization is per row, so quantizing a block of rows gives exactly those rows' slice.
      const q = quantize(chunk, rows, K, format);
      out.data.set(q.data, (r0 * stride) / perU32);
      out.scales.set(q.scales, r0 * groups);
    }
    return out;
  };
}
