// Weight quantization, shared by every backend so that only the matmul differs between them.
//
// q8: int8 per output row, f32 scale per row (scale = absmax/127). K padded to a multiple of 4;
//     4 values per u32, little-endian bytes (two's complement).
// q4: symmetric int4 in groups of 32 along K, f32 scale per group (scale = absmax/7, q in [-7,7]).
//     K padded to a multiple of 32 with zeros; 8 values per u32, lowest nibble first, stored as q+8.

export type QuantKind = 'q8' | 'q4';

/**
 * The format of the embedding table and the LM head (tied or not) when a model loads as `format`.
 * Under q4 they stay q8 by default: that halves q4's logit error on the bundled model and lowers it by a
 * tenth on a random Qwen3-0.6B shape, for 26 % / 16 % more bytes (bench/suites/quant.ts measures every
 * scheme against f32; docs/benchmarks.md).
 */
export function defaultEmbedFormat(format: QuantKind | 'f32'): QuantKind | 'f32' {
  return format === 'q4' ? 'q8' : format;
}

export interface QuantizedWeight {
  kind: QuantKind;
  /** N: output features (rows of the HF weight). */
  rows: number;
  /** K: input features (logical, unpadded). */
  cols: number;
  /** Padded K: a multiple of 4 (q8) or 32 (q4). */
  stride: number;
  data: Uint32Array;
  /** q8: (N); q4: (N, stride/32) */
  scales: Float32Array;
}

export const Q4_GROUP = 32;

export function paddedCols(kind: QuantKind, cols: number): number {
  const m = kind === 'q8' ? 4 : Q4_GROUP;
  return Math.ceil(cols / m) * m;
}

/** w (N,K) f32 -> quantized */
export function quantize(w: Float32Array, rows: number, cols: number, kind: QuantKind): QuantizedWeight {
  if (w.length !== rows * cols) throw new Error(`quantize: ${w.length} values for (${rows},${cols})`);
  const stride = paddedCols(kind, cols);
  if (kind === 'q8') {
    const data = new Uint32Array((rows * stride) / 4);
    const scales = new Float32Array(rows);
    for (let n = 0; n < rows; n++) {
      let amax = 0;
      for (let k = 0; k < cols; k++) amax = Math.max(amax, Math.abs(w[n * cols + k]));
      const s = amax / 127;
      scales[n] = s;
      const inv = s > 0 ? 1 / s : 0;
      for (let k = 0; k < cols; k++) {
        const q = Math.max(-127, Math.min(127, Math.round(w[n * cols + k] * inv)));
        const idx = n * stride + k;
        data[idx >> 2] |= (q & 0xff) << (8 * (idx & 3));
      }
    }
    return { kind, rows, cols, stride, data, scales };
  }
  const groups = stride / Q4_GROUP;
  const data = new Uint32Array((rows * stride) / 8);
  const scales = new Float32Array(rows * groups);
  for (let n = 0; n < rows; n++) {
    for (let g = 0; g < groups; g++) {
      let amax = 0;
      const k0 = g * Q4_GROUP;
      const k1 = Math.min(cols, k0 + Q4_GROUP);
      for (let k = k0; k < k1; k++) amax = Math.max(amax, Math.abs(w[n * cols + k]));
      const s = amax / 7;
      scales[n * groups + g] = s;
      const inv = s > 0 ? 1 / s : 0;
      for (let k = k0; k < k0 + Q4_GROUP; k++) {
        const q = k < cols ? Math.max(-7, Math.min(7, Math.round(w[n * cols + k] * inv))) : 0;
        const idx = n * stride + k;
        data[idx >> 3] |= (q + 8) << (4 * (idx & 7));
      }
    }
  }
  return { kind, rows, cols, stride, data, scales };
}

/** One dequantized value W[n,k]. */
export function dequantAt(q: QuantizedWeight, n: number, k: number): number {
  const idx = n * q.stride + k;
  if (q.kind === 'q8') {
    const b = (q.data[idx >> 2] >>> (8 * (idx & 3))) & 0xff;
    return ((b << 24) >> 24) * q.scales[n];
  }
  const nib = (q.data[idx >> 3] >>> (4 * (idx & 7))) & 0xf;
  return (nib - 8) * q.scales[n * (q.stride / Q4_GROUP) + ((k / Q4_GROUP) | 0)];
}

/** quantized -> (N,K) f32 */
export function dequantize(q: QuantizedWeight): Float32Array {
  const out = new Float32Array(q.rows * q.cols);
  for (let n = 0; n < q.rows; n++) for (let k = 0; k < q.cols; k++) out[n * q.cols + k] = dequantAt(q, n, k);
  return out;
}

/** Bytes a quantized weight occupies (packed values + scales), for benchmark and memory reports. */
export function quantizedBytes(q: QuantizedWeight): number {
  return q.data.byteLength + q.scales.byteLength;
}
