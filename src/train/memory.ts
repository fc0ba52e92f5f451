// Predicted device bytes of one training step, following what the Trainer allocates (src/train/trainer.ts,
// model-grad.ts): weights, trainable state (param, grad, AdamW m and v), KV cache, kept activations,
// and the larger of the loss-head chunk and one block's backward (recomputed activations + temporaries).
// Buffer-pool slack (bucket rounding, freed buffers kept for reuse) is not included.
import type { Qwen3Config } from '../model/config';
import { LORA_TARGETS, targetShape, type LoraTarget } from '../model/lora';
import type { WeightFormat } from '../model/qwen3';
import { defaultEmbedFormat, paddedCols } from '../engine/quant';
import { weightSpecs } from '../model/weights';

export interface TrainShape {
  /** Tokens in the micro-batch. */
  tokens: number;
  /** Sequences (KV slots) and their longest length. */
  slots: number;
  maxT: number;
  /** Rows carrying loss (default: all tokens). */
  lossRows?: number;
}

export interface TrainMemoryOptions {
  format: WeightFormat;
  /**
   * Format of the embedding table and the (untied) LM head, as BuildOptions.embedFormat: default
   * defaultEmbedFormat(format), i.e. q8 under q4, as the loader keeps them.
   */
  embedFormat?: WeightFormat;
  mode: 'lora' | 'full';
  rank?: number;
  targets?: readonly LoraTarget[];
  recompute?: boolean;
  headChunk?: number;
}

export interface TrainBytes {
  weights: number;
  trainable: number;
  kvCache: number;
  activations: number;
  peakTransient: number;
  total: number;
}

function weightBytes(shape: readonly number[], quantizable: boolean, format: WeightFormat): number {
  if (shape.length === 1 || !quantizable || format === 'f32') return 4 * shape.reduce((a, b) => a * b, 1);
  const [N, K] = shape;
  const stride = paddedCols(format, K);
  return format === 'q8' ? N * stride + 4 * N : N * (stride / 2) + 4 * N * (stride / 32);
}

/** Device bytes of a model's weights as the loader stores them (the embedding / LM head as `embedFormat`). */
export function loadedWeightBytes(c: Qwen3Config, format: WeightFormat, embedFormat: WeightFormat = defaultEmbedFormat(format)): number {
  return weightSpecs(c).reduce((a, spec) => a + weightBytes(spec.shape, spec.quantizable, isTable(spec.name) ? embedFormat : format), 0);
}

/**
 * The smallest storage binding a WebGPU device needs for this model: weights are split by rows across
 * buffers, so one row of the widest weight (f32 for the norms), and one row of f32 logits, must fit.
 */
export function minBindingBytes(c: Qwen3Config, format: WeightFormat, embedFormat: WeightFormat = defaultEmbedFormat(format)): number {
  let most = 4 * c.vocabSize;
  for (const spec of weightSpecs(c)) {
    const row = spec.shape.length === 1 ? spec.shape : [1, spec.shape[1]];
    most = Math.max(most, weightBytes(row, spec.quantizable, isTable(spec.name) ? embedFormat : format));
  }
  return most;
}

const isTable = (name: string) => name === 'model.embed_tokens.weight' || name === 'lm_head.weight';

/** A KV cache's bytes: f32 keys and values of every layer, `slots` sequences of `maxT` positions (src/model/qwen3.ts KvCache). */
export function kvCacheBytes(c: Pick<Qwen3Config, 'numLayers' | 'numKvHeads' | 'headDim'>, slots: number, maxT: number): number {
  return 2 * c.numLayers * slots * maxT * c.numKvHeads * c.headDim * 4;
}

export function predictTrainBytes(c: Qwen3Config, s: TrainShape, o: TrainMemoryOptions): TrainBytes {
  const F = 4; // bytes per f32
  const { hiddenSize: d, intermediateSize: f, numLayers: L } = c;
  const qd = c.numHeads * c.headDim;
  const kvd = c.numKvHeads * c.headDim;
  const T = s.tokens;
  const r = o.mode === 'lora' ? (o.rank ?? 8) : 0;
  const targets = o.mode === 'lora' ? (o.targets ?? LORA_TARGETS) : [];

  const weights = loadedWeightBytes(c, o.format, o.embedFormat ?? defaultEmbedFormat(o.format));
  let trainable: number;
  if (o.mode === 'full') trainable = 3 * weights; // grad, m, v next to the (f32) weights
  else trainable = 4 * F * L * targets.reduce((a, t) => a + r * targetShape(c, t).reduce((x, y) => x + y, 0), 0);
  const kvCache = kvCacheBytes(c, s.slots, s.maxT);

  // one block's saved activations (AttentionSaved + MlpSaved, the block input excluded)
  const loraU = T * r * targets.length;
  const block = F * (T * (3 * d + 4 * qd + 4 * kvd + 3 * f) + loraU);
  const kept = o.recompute ? F * T * d * (L + 1) : F * T * d * (L + 1) + L * block;
  const activations = kept + 2 * F * T * d; // + normed and its gradient

  // loss head chunk: gathered rows, logits, dLogits, per-row metrics, dh
  const n = Math.min(o.headChunk ?? 256, s.lossRows ?? T);
  const head = F * n * (2 * d + 2 * c.vocabSize + 5);
  // One block's backward, flushed after the recomputation, after the MLP half and after the attention
  // half (GPU temporaries are only reusable after a flush). Each half: its input gradient, every
  // temporary, and for each LoRA'd map the scaled dy, du and the second dx.
  const lora = (t: LoraTarget, nOut: number, nIn: number) => (targets.includes(t) ? nOut + r + nIn : 0);
  const mlpTemps = F * T * (3 * f + 3 * d + lora('down', d, f) + lora('gate', f, d) + lora('up', f, d)) + F * T * d;
  const attnTemps =
    F * (T * (5 * qd + 4 * kvd + 4 * d + lora('o', d, qd) + lora('q', qd, d) + lora('k', kvd, d) + lora('v', kvd, d)) + 2 * s.slots * s.maxT * kvd) + F * T * d;
  // the recomputed forward's own dead temporaries: per LoRA'd map its base output, the low-rank product and its scaled copy
  const fwdTemps = F * T * (targets.length ? 3 * (qd + 2 * kvd + d + 2 * f + d) : 0);
  const backward = (o.recompute ? block : 0) + Math.max(o.recompute ? fwdTemps : 0, mlpTemps, attnTemps);
  const peakTransient = Math.max(head, backward);
  return { weights, trainable, kvCache, activations, peakTransient, total: weights + trainable + kvCache + activations + peakTransient };
}
