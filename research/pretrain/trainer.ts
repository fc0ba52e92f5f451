// From-scratch training of a small Qwen3 on encoded (prompt, response) sequences, through the one
// training engine (src/train: Trainer in full-parameter mode with the CE head). What is pretraining's own:
// the seeded init, the hyper-parameters, and which tokens carry loss (responses, plus a sampled share of
// the prompt). Deterministic: the same seed, data and backend give the same weights bit for bit.
import { Rng } from '../../src/util/rng';
import type { LrSchedule } from '../../src/train/trainer';
import type { Qwen3Config } from '../../src/model/config';
import type { Qwen3Model } from '../../src/model/qwen3';
import type { WeightSpec } from '../../src/model/weights';
import { packBatch, type TrainBatch, type TrainSequence } from '../../src/train/batch';
import { Trainer } from '../../src/train/trainer';
import type { Encoded } from './data';

/**
 * Init: matrices N(0, 0.02), the residual-branch outputs (o_proj, down_proj) scaled by 1/sqrt(2L) so the
 * residual stream does not grow with depth; norms 1 (the identity, as Hugging Face initialises Qwen3).
 */
export function initWeights(c: Qwen3Config, seed: number): (spec: WeightSpec) => { kind: 'f32'; shape: number[]; data: Float32Array } {
  const rng = new Rng(seed);
  return (spec) => {
    const n = spec.shape.reduce((a: number, b: number) => a * b, 1);
    const data = new Float32Array(n);
    if (spec.shape.length === 1) data.fill(1);
    else {
      const resid = /o_proj|down_proj/.test(spec.name);
      const std = 0.02 / (resid ? Math.sqrt(2 * c.numLayers) : 1);
      for (let i = 0; i < n; i++) data[i] = std * rng.normal();
    }
    return { kind: 'f32', shape: [...spec.shape], data };
  };
}

export interface TrainHyper {
  schedule: LrSchedule;
  weightDecay: number;
  beta1: number;
  beta2: number;
  eps: number;
  maxGradNorm: number;
  /**
   * Weight of an auxiliary next-token loss on prompt tokens, relative to response tokens (0 = responses
   * only). From scratch the model must first learn the domain's text, and prompts hold ~80% of the tokens
   * (past calls, observations, user requests) that a step pays for anyway. Every third prompt position
   * gets this loss.
   */
  promptLossWeight?: number;
}

export const DEFAULT_HYPER: TrainHyper = {
  schedule: { kind: 'warmup-cosine', lr: 3e-3, warmupSteps: 30, totalSteps: 1000, minLr: 3e-4 },
  weightDecay: 0.05,
  beta1: 0.9,
  beta2: 0.98,
  eps: 1e-8,
  maxGradNorm: 1,
};

/** A full-parameter Trainer with these hyper-parameters and the CE head (on the weighted tokens). */
export function pretrainer(model: Qwen3Model, h: TrainHyper): Trainer {
  if (model.format !== 'f32') throw new Error(`pretraining needs f32 weights, got ${model.format}`);
  return new Trainer(model, {
    mode: 'full',
    schedule: h.schedule,
    beta1: h.beta1,
    beta2: h.beta2,
    eps: h.eps,
    weightDecay: h.weightDecay,
    maxGradNorm: h.maxGradNorm,
    loss: { kind: 'ce' },
  });
}

/**
 * A sequence's per-token loss weights: 1 on response tokens; with promptLossWeight > 0, that weight on
 * every third prompt token (positions t with (t-1) % 3 == 0, i.e. targets of rows 0, 3, 6, ...: the LM
 * head is the costly part of a loss row, so a sample of the prompt is enough).
 */
export function pretrainSequence(e: Encoded, promptLossWeight: number, responseWeight = 1, valueWeight = 1): TrainSequence {
  const mask = new Float32Array(e.ids.length);
  for (let t = 1; t < e.ids.length; t++)
    mask[t] = t >= e.promptLen ? responseWeight * (e.valueMask?.[t] ? valueWeight : 1) : promptLossWeight > 0 && (t - 1) % 3 === 0 ? promptLossWeight : 0;
  return { tokens: e.ids, mask };
}

/**
 * One micro-batch of whole sequences (each its own KV slot); weights sum to 1 (token mean). `roleWeights`
 * scales the response tokens of a role (default 1): a few decisive tokens of an Act turn (which user, which
 * order) otherwise weigh as little as any memorised character of a long observation. `valueWeight` further
 * scales the response tokens a sequence's valueMask marks (the stated values a call copies from the request).
 */
export function pretrainBatch(seqs: readonly Encoded[], promptLossWeight: number, roleWeights: Readonly<Partial<Record<Encoded['role'], number>>> = {}, valueWeight = 1): TrainBatch {
  return packBatch(seqs.map((e) => pretrainSequence(e, promptLossWeight, roleWeights[e.role] ?? 1, valueWeight)), 'token-mean');
}
