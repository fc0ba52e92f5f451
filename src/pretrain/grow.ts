// Depth growth: a checkpoint of L layers becomes one of L + N layers that computes exactly the same function.
// The old layers keep their weights; each new layer is appended on top with random weights (as a fresh model
// would get them) except its two residual output projections (attention o_proj, MLP down_proj), which are zero:
// both branches then add nothing to the residual stream, so the grown model's logits equal the original's bit
// for bit, and training moves on from there with the extra capacity (a ReZero-style identity start). The
// result is a plain Qwen3 checkpoint: only num_hidden_layers differs.
import type { Qwen3Config } from '../model/config';
import type { HostWeight, HostWeights, WeightSpec } from '../model/weights';
import { initWeights } from './trainer';

const LAYER = /^model\.layers\.(\d+)\./;
const RESIDUAL_OUT = /(o_proj|down_proj)\.weight$/;

export class GrowError extends Error {
  override readonly name = 'GrowError';
}

/**
 * Weights of `to` from the host weights of a model of config `from`: same shapes everywhere except the layer
 * count, which may only grow. New layers are drawn from initWeights(to, seed) with zero residual outputs.
 */
export function grownWeights(from: Qwen3Config, host: HostWeights, to: Qwen3Config, seed: number): (spec: WeightSpec) => HostWeight {
  const keys: (keyof Qwen3Config)[] = ['hiddenSize', 'intermediateSize', 'numHeads', 'numKvHeads', 'headDim', 'vocabSize', 'tieWordEmbeddings', 'rmsNormEps', 'ropeTheta'];
  const differ = keys.filter((k) => from[k] !== to[k]);
  if (differ.length) throw new GrowError(`only the layer count can grow; these differ: ${differ.map((k) => `${k} ${String(from[k])} -> ${String(to[k])}`).join(', ')}`);
  if (to.numLayers < from.numLayers) throw new GrowError(`cannot shrink ${from.numLayers} layers to ${to.numLayers}`);
  const fresh = initWeights(to, seed);
  return (spec) => {
    const m = LAYER.exec(spec.name);
    if (!m || Number(m[1]) < from.numLayers) {
      const w = host.get(spec.name);
      if (!w) throw new GrowError(`the model to grow has no tensor '${spec.name}'`);
      return w;
    }
    const w = fresh(spec);
    if (RESIDUAL_OUT.test(spec.name)) w.data.fill(0);
    return w;
  };
}
