// The training seam: backward ops, loss heads and optimizer ops, one implementation per backend, which
// every backend carries as `backend.train` (no registration: creating a backend gives its training ops).
//
// The forward ops live on `Backend` (src/engine/backend.ts); each has its backward here as an explicit
// function with the same shape conventions (no autograd). In each backend's sources an op's forward and
// backward stand side by side, llm.c style (src/engine/cpu/ops/, src/engine/webgpu/kernels/, and the wasm
// wrappers of src/engine/cpu/fast/). The model-level backward (`modelBackward` in src/train/model-grad.ts)
// strings them together in reverse order.
//
// Conventions:
// - Ops return new tensors owned by the backend, except the `...Into` style ops documented as
//   accumulating in place (gradients of shared weights are summed over several uses).
// - Gradient tensors are always f32, even when the forward weight is q8/q4 (those are frozen: only
//   their input gradient is ever needed).
// - Loss heads take per-token weights (R) f32 that fold in the response mask, the aggregation mode and
//   any micro-batch scaling, so the loss is sum_r weight[r] * loss_r (src/train/batch.ts builds them).
import type { Backend, Tensor, TokenLayout } from './backend';
import { EngineError } from './errors';

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
