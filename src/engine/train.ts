// The training seam: backward ops, loss heads and optimizer ops, one implementation per backend.
//
// The forward ops live on `Backend` (src/engine/backend.ts); each has its backward here as an explicit
// function with the same shape conventions (no autograd). The model-level backward (`modelBackward` in
// src/train/model-grad.ts) strings them together in reverse order.
//
// Conventions:
// - Ops return new tensors owned by the backend, except the `...Into` style ops documented as
//   accumulating in place (gradients of shared weights are summed over several uses).
// - Gradient tensors are always f32, even when the forward weight is q8/q4 (those are frozen: only
//   their input gradient is ever needed).
// - Loss heads take per-token weights (R) f32 that fold in the response mask, the aggregation mode and
//   any micro-batch scaling, so the loss is sum_r weight[r] * loss_r; build them with `tokenWeights`.
import type { Backend, Tensor, TokenLayout } from './backend';
import { EngineError } from './errors';
import { CpuRefTrainOps } from './cpu/ref-train';

export interface LossHeadResult {
  /** (R,V) f32: d loss / d logits. */
  dLogits: Tensor;
  /**
   * (4) f32: [loss = sum_r weight[r] * loss_r, clip fraction, mean k3 KL, mean entropy]; the last three
   * are plain means over the rows with weight != 0 (whatever the aggregation mode).
   */
  metrics: Tensor;
}

export interface GrpoInputs {
  /** (R) f32: advantage of each token (the row's advantage repeated). */
  advantage: Tensor;
  /** (R) f32: log-prob of each target token under the policy that sampled it. */
  oldLogp: Tensor;
  /** (R) f32: log-prob under the reference policy, or null when the KL term is off. */
  refLogp: Tensor | null;
}

export interface GrpoOptions {
  /** Ratio clip: the surrogate uses clamp(ratio, 1 - clipEps, 1 + clipEps). Paper: 0.2. */
  clipEps: number;
  /** Dual clip c > 1 for A < 0: the per-token loss is at most -A * c. Paper: 3. */
  dualClip: number;
  /** Coefficient of the k3 KL to the reference policy (0 = off). Paper: 1e-4. */
  klCoef: number;
}

/** The GRPO options every backend's head accepts (and a reference log-prob whenever the KL is on). */
export function checkGrpoOptions(o: GrpoOptions, hasRefLogp: boolean): void {
  if (!(o.clipEps > 0 && o.clipEps < 1 && o.dualClip > 1 && o.klCoef >= 0))
    throw new EngineError('shape', `grpo: need 0 < clipEps < 1, dualClip > 1, klCoef >= 0 (got ${JSON.stringify(o)})`);
  if (o.klCoef > 0 && !hasRefLogp) throw new EngineError('shape', 'grpo: klCoef > 0 needs refLogp');
}

/** One token's loss and d(loss)/d(logp), with its clip (0|1) and k3 KL (0 without a reference). */
export interface TokenLoss {
  l: number;
  dl: number;
  clipped: number;
  kl: number;
}

/** Cross-entropy of one target token: l = -logp. */
export function ceTokenLoss(logp: number): TokenLoss {
  return { l: -logp, dl: -1, clipped: 0, kl: 0 };
}

/**
 * The GRPO surrogate of one token, the rule every backend's host-side head shares: ratio = exp(logp - old),
 * loss max(-A ratio, -A clip(ratio, 1±eps)), capped at -A c for A < 0 (dual clip); the gradient flows only
 * through the unclipped branch. With a reference log-prob, k3 = exp(ref - logp) - (ref - logp) - 1 is added
 * with weight klCoef.
 */
export function grpoTokenLoss(logp: number, A: number, old: number, ref: number | null, o: GrpoOptions): TokenLoss {
  const ratio = Math.exp(logp - old);
  const pg1 = -A * ratio;
  const pg2 = -A * Math.min(Math.max(ratio, 1 - o.clipEps), 1 + o.clipEps);
  let pg = Math.max(pg1, pg2);
  let flows = !(pg2 > pg1);
  if (A < 0 && -A * o.dualClip < pg) {
    pg = -A * o.dualClip;
    flows = false;
  }
  let l = pg;
  let dl = flows ? -A * ratio : 0;
  let kl = 0;
  if (ref !== null) {
    const d = ref - logp;
    kl = Math.exp(d) - d - 1;
    l += o.klCoef * kl;
    dl += o.klCoef * (1 - Math.exp(d));
  }
  return { l, dl, clipped: flows ? 0 : 1, kl };
}

export interface AdamWStep {
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
  /** 1-based step count, for the bias correction. */
  step: number;
  /** Multiplies the gradient before it enters the moments (grad-norm clip factor). */
  gradScale: number;
}

export interface TrainOps {
  readonly backend: Backend;

  // ---- backward of the forward ops ----
  /** dy (T,C), ids (T) host, dTable (V,C) f32: dTable[ids[t]] += dy[t] (scatter-add, in place). */
  embeddingBackward(dy: Tensor, ids: Int32Array, dTable: Tensor): void;
  /** dy, x (R,C), w (C) -> dx (R,C); when dw (C) is given, dw += d loss / d w (in place). */
  rmsnormBackward(dy: Tensor, x: Tensor, w: Tensor, eps: number, dw: Tensor | null): Tensor;
  /** dy (T,H,D), pos (T) -> dx (T,H,D): the inverse rotation. */
  ropeBackward(dy: Tensor, pos: Tensor, theta: number): Tensor;
  /** dy (M,N), w (N,K) f32|q8|q4 -> dx (M,K) = dy W (through the dequantized weight). */
  matmulBackwardInput(dy: Tensor, w: Tensor): Tensor;
  /** dy (M,N), x (M,K), dw (N,K) f32: dw += dy^T x (in place). */
  matmulBackwardWeight(dy: Tensor, x: Tensor, dw: Tensor): void;
  /** dy, gate, up (T,F) -> d gate, d up (T,F) of y = silu(gate) * up. */
  swigluBackward(dy: Tensor, gate: Tensor, up: Tensor): { dGate: Tensor; dUp: Tensor };
  /**
   * dOut, q (T,Hq,D), caches (S,maxT,Hkv,D) -> dq (T,Hq,D), dkCache, dvCache (S,maxT,Hkv,D).
   * Recomputes the attention probabilities (nothing is saved by the forward).
   */
  attentionBackward(
    dOut: Tensor,
    q: Tensor,
    kCache: Tensor,
    vCache: Tensor,
    layout: TokenLayout,
  ): { dq: Tensor; dkCache: Tensor; dvCache: Tensor };
  /** dkCache, dvCache (S,maxT,Hkv,D) -> dk, dv (T,Hkv,D): gathers cache[slot[t], pos[t]]. */
  kvWriteBackward(dkCache: Tensor, dvCache: Tensor, layout: TokenLayout): { dk: Tensor; dv: Tensor };
  /** dy, y (R,V) with y = logSoftmax(x) -> dx (R,V). */
  logSoftmaxBackward(dy: Tensor, y: Tensor): Tensor;

  // ---- loss heads (response tokens only: rows with weight 0 contribute nothing) ----
  /** logits (R,V), targets (R) i32, weight (R) f32 -> token cross-entropy. */
  crossEntropy(logits: Tensor, targets: Tensor, weight: Tensor): LossHeadResult;
  /** The GRPO / PPO clipped surrogate with dual clip and optional k3 KL. */
  grpo(logits: Tensor, targets: Tensor, weight: Tensor, inputs: GrpoInputs, opts: GrpoOptions): LossHeadResult;

  // ---- optimizer and gradient utilities ----
  /** dst (R,C), src (n,C), rows (n) i32 distinct: dst[rows[i]] += src[i] (the backward of gatherRows). */
  scatterAddRows(dst: Tensor, src: Tensor, rows: Tensor): void;
  /**
   * Submit the work recorded so far without waiting, so the temporaries it freed can be reused (GPU
   * buffers freed while work is being recorded are held until the next submit). No-op on CPU.
   */
  flush(): void;
  /** dst += s * src (same element count, in place). */
  accumulate(dst: Tensor, src: Tensor, s?: number): void;
  /** Set every element of an f32 tensor (zeroing gradients). */
  fill(t: Tensor, value: number): void;
  /** (1) f32: sum of squares over all elements of all tensors (Inf/NaN if any element is). */
  sumSquares(ts: readonly Tensor[]): Tensor;
  /** One AdamW update of param with grad; m, v are the moment tensors (all same size, in place). */
  adamw(param: Tensor, grad: Tensor, m: Tensor, v: Tensor, hp: AdamWStep): void;
}

const factories = new Map<string, (b: Backend) => TrainOps>();

/**
 * Register the TrainOps factory of a backend. The WebGPU backend's training kernels register
 * themselves when src/engine/webgpu/train is imported, so CPU-only code never loads WGSL.
 */
export function registerTrainOps(name: string, make: (b: Backend) => TrainOps): void {
  factories.set(name, make);
}

const cache = new WeakMap<Backend, TrainOps>();

/** The TrainOps of a backend (one instance per backend object). */
export function trainOps(backend: Backend): TrainOps {
  let ops = cache.get(backend);
  if (ops) return ops;
  const make = factories.get(backend.name);
  if (make) ops = make(backend);
  else if (backend.name === 'cpu-ref' || backend.name === 'cpu-fast') ops = new CpuRefTrainOps(backend);
  else throw new EngineError('unsupported', `no training ops for backend ${backend.name} (import src/engine/webgpu/train first)`);
  cache.set(backend, ops);
  return ops;
}

export type Aggregation = 'token-mean' | 'seq-mean-token-mean' | 'seq-mean-token-sum';

/**
 * Per-token loss weights from the response mask (R) and the sequence index of each row (R).
 * token-mean: 1 / (all masked tokens); seq-mean-token-mean: 1 / (S * tokens of the row's sequence);
 * seq-mean-token-sum: 1 / S; S = number of sequences with at least one masked token.
 * `scale` multiplies every weight (e.g. 1 / micro-batches for gradient accumulation).
 */
export function tokenWeights(mask: ArrayLike<number>, seq: ArrayLike<number>, mode: Aggregation, scale = 1): Float32Array {
  if (mask.length !== seq.length) throw new EngineError('shape', `tokenWeights: mask (${mask.length}) vs seq (${seq.length})`);
  // A mask entry is the token's relative weight: 1 (or 0) for policy rows; pretraining gives sampled
  // prompt tokens a fraction. Sums run over those weights, so 0/1 masks count tokens.
  const perSeq = new Map<number, number>();
  let total = 0;
  for (let i = 0; i < mask.length; i++)
    if (mask[i] !== 0) {
      perSeq.set(seq[i], (perSeq.get(seq[i]) ?? 0) + mask[i]);
      total += mask[i];
    }
  const S = perSeq.size;
  const w = new Float32Array(mask.length);
  for (let i = 0; i < mask.length; i++) {
    if (mask[i] === 0) continue;
    if (mode === 'token-mean') w[i] = (scale * mask[i]) / total;
    else if (mode === 'seq-mean-token-mean') w[i] = (scale * mask[i]) / (S * perSeq.get(seq[i])!);
    else if (mode === 'seq-mean-token-sum') w[i] = (scale * mask[i]) / S;
    else throw new EngineError('shape', `tokenWeights: unknown aggregation ${String(mode)}`);
  }
  return w;
}

export type LrSchedule =
  | { kind: 'constant'; lr: number }
  | { kind: 'warmup-cosine'; lr: number; warmupSteps: number; totalSteps: number; minLr?: number };

/** Learning rate at 1-based step `step`: linear warmup to lr, then cosine decay to minLr at totalSteps. */
export function lrAt(s: LrSchedule, step: number): number {
  if (s.kind === 'constant') return s.lr;
  const min = s.minLr ?? 0;
  if (step <= s.warmupSteps) return (s.lr * step) / Math.max(1, s.warmupSteps);
  const span = Math.max(1, s.totalSteps - s.warmupSteps);
  const p = Math.min(1, (step - s.warmupSteps) / span);
  return min + 0.5 * (s.lr - min) * (1 + Math.cos(Math.PI * p));
}

/** Factor that scales gradients so their global norm is at most maxNorm (1 when already below). */
export function clipFactor(sumSquares: number, maxNorm: number): number {
  const norm = Math.sqrt(sumSquares);
  return maxNorm > 0 && norm > maxNorm ? maxNorm / (norm + 1e-6) : 1;
}
