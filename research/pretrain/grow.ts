// Growth: a checkpoint becomes a larger one that computes the same function, so a stage can add capacity
// without throwing away what was learned.
//
// Depth: new layers are appended on top with random weights (as a fresh model would get them) except their
// two residual output projections (attention o_proj, MLP down_proj), which are zero: both branches then add
// nothing to the residual stream and the logits stay equal bit for bit (a ReZero-style identity start).
//
// Width (factor F): hidden size, attention heads, KV heads and MLP width all become F times larger, head_dim
// stays. Every unit is copied F times (copy c of unit j sits at c·n + j, so copy c of query head h still reads
// copy c of its KV head), which keeps the residual stream an F-fold repeat [x, x, …] of the original's:
//  - a linear map's rows (its output units) are copied; its columns (inputs, which arrive F-fold repeated) are
//    split into F parts that sum to the original weight: W/F plus noise that sums to zero over the F parts.
//    The output is the same for any noise, and the noise (different in every row copy) is what makes the
//    copies' gradients differ, so they can learn different things (identical copies would stay identical);
//  - the embedding's columns and every RMSNorm weight are copied (the RMS of [x, x] is the RMS of x);
//  - with tied embeddings the LM head reads the copied embedding, which would multiply the logits by F, so
//    the final norm's weight is divided by F.
// The logits then equal the original's up to float rounding. The result is a plain Qwen3 checkpoint.
import type { Qwen3Config } from '../../src/model/config';
import type { HostWeight, HostWeights, WeightSpec } from '../../src/model/weights';
import { denseOf } from '../../src/model/weights';
import { Rng } from '../../src/util/rng';
import { initWeights } from './trainer';

const LAYER = /^model\.layers\.(\d+)\./;
const RESIDUAL_OUT = /(o_proj|down_proj)\.weight$/;
/** Noise of a column split, relative to the RMS of the weight it splits. */
const SPLIT_NOISE = 0.1;

export class GrowError extends Error {
  override readonly name = 'GrowError';
}

/** A shape F times as wide (what `npm run pretrain -- --width-factor F` trains). */
export function widenShape<C extends Pick<Qwen3Config, 'hiddenSize' | 'intermediateSize' | 'numHeads' | 'numKvHeads'>>(c: C, f: number): C {
  return { ...c, hiddenSize: c.hiddenSize * f, intermediateSize: c.intermediateSize * f, numHeads: c.numHeads * f, numKvHeads: c.numKvHeads * f };
}

/** The width factor from `from` to `to` (1: same width), or a GrowError naming what does not scale. */
export function widthFactor(from: Qwen3Config, to: Qwen3Config): number {
  const f = to.hiddenSize / from.hiddenSize;
  const scaled: (keyof Qwen3Config)[] = ['hiddenSize', 'intermediateSize', 'numHeads', 'numKvHeads'];
  const bad = scaled.filter((k) => (to[k] as number) !== (from[k] as number) * f);
  if (!Number.isInteger(f) || f < 1 || bad.length)
    throw new GrowError(`the width can only grow by one integer factor for hidden size, MLP, heads and KV heads together; got ${scaled.map((k) => `${k} ${String(from[k])} -> ${String(to[k])}`).join(', ')}`);
  return f;
}

/**
 * Weights of `to` from the host weights of a model of config `from`: the layer count may grow and the width
 * may grow by an integer factor (widthFactor); everything else must be equal. New layers are drawn from
 * initWeights(to, seed) with zero residual outputs; widened tensors follow the rules above (noise from seed).
 */
export function grownWeights(from: Qwen3Config, host: HostWeights, to: Qwen3Config, seed: number): (spec: WeightSpec) => HostWeight {
  const keys: (keyof Qwen3Config)[] = ['headDim', 'vocabSize', 'tieWordEmbeddings', 'rmsNormEps', 'ropeTheta'];
  const differ = keys.filter((k) => from[k] !== to[k]);
  if (differ.length) throw new GrowError(`only the layer count and the width can grow; these differ: ${differ.map((k) => `${k} ${String(from[k])} -> ${String(to[k])}`).join(', ')}`);
  if (to.numLayers < from.numLayers) throw new GrowError(`cannot shrink ${from.numLayers} layers to ${to.numLayers}`);
  const f = widthFactor(from, to);
  const fresh = initWeights(to, seed);
  const rng = new Rng(seed * 31 + 17);
  return (spec) => {
    const m = LAYER.exec(spec.name);
    if (m && Number(m[1]) >= from.numLayers) {
      const w = fresh(spec);
      if (RESIDUAL_OUT.test(spec.name)) w.data.fill(0);
      return w;
    }
    const w = host.get(spec.name);
    if (!w) throw new GrowError(`the model to grow has no tensor '${spec.name}'`);
    if (f === 1) return w;
    return { kind: 'f32', shape: [...spec.shape], data: widen(spec, denseOf(w), f, to, rng) };
  };
}

/** One tensor of the widened model (see the header): `old` is the original tensor, dense. */
function widen(spec: WeightSpec, old: Float32Array, f: number, to: Qwen3Config, rng: Rng): Float32Array {
  const [rows, cols] = spec.shape;
  if (cols === undefined) {
    // q_norm / k_norm act per head_dim and keep their size; the other norms are copied F times.
    const n = old.length;
    if (rows === n) return Float32Array.from(old);
    const out = new Float32Array(rows);
    const scale = spec.name === 'model.norm.weight' && to.tieWordEmbeddings ? 1 / f : 1;
    for (let i = 0; i < rows; i++) out[i] = old[i % n] * scale;
    return out;
  }
  const oldCols = cols / f;
  const out = new Float32Array(rows * cols);
  if (spec.name === 'model.embed_tokens.weight') {
    for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[r * cols + c] = old[r * oldCols + (c % oldCols)];
    return out;
  }
  // Rows: the LM head keeps its V vocabulary rows; every other output unit is copied.
  const oldRows = spec.name === 'lm_head.weight' ? rows : rows / f;
  let ss = 0;
  for (const x of old) ss += x * x;
  const sigma = SPLIT_NOISE * Math.sqrt(ss / old.length);
  const noise = new Float64Array(f);
  for (let r = 0; r < rows; r++) {
    const src = (r % oldRows) * oldCols;
    for (let j = 0; j < oldCols; j++) {
      let mean = 0;
      for (let k = 0; k < f; k++) mean += noise[k] = sigma * rng.normal();
      mean /= f;
      const w = old[src + j] / f;
      for (let k = 0; k < f; k++) out[r * cols + k * oldCols + j] = w + (noise[k] - mean);
    }
  }
  return out;
}
