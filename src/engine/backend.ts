// The backend contract: the one seam between the model/trainer and the hardware.
//
// Implemented by the CPU reference (src/engine/cpu, plain TS, the oracle), the CPU fast path
// (WebAssembly SIMD, threads) and WebGPU (src/engine/webgpu, WGSL). The model is written once
// against this interface; tests run every backend and compare against the CPU reference.
//
// Conventions (the same on every backend):
// - Tensors are opaque handles owned by one backend. Ops enqueue work and return new tensors
//   synchronously; only `read` waits. Callers `free` what they no longer need.
// - Row-major layouts. Shapes in comments are written `(A,B,C)`.
// - Weights follow Hugging Face's nn.Linear layout: W (N,K) maps K inputs to N outputs, y = x W^T.
// - Quantized weights (`q8`, `q4`) are produced by `quantize` in src/engine/quant.ts, identically on
//   every backend; a backend only decides how it stores and multiplies them.
// - Token batches are flat: T tokens, each tagged with the sequence slot and the position it has in
//   that sequence. Prefill (many tokens of one slot), decode (one token for each of many slots) and
//   training (whole sequences) are the same call shapes.
import type { TrainOps } from './train';

export type BackendName = 'cpu-ref' | 'cpu-fast' | 'webgpu';
export type DType = 'f32' | 'i32' | 'q8' | 'q4';

export interface Tensor {
  readonly shape: readonly number[];
  readonly dtype: DType;
  readonly backend: BackendName;
}

/** Per-row sampling settings. temperature 0 = greedy. topP in (0,1]; 1 disables nucleus filtering. */
export interface SampleParams {
  temperature: number;
  topP: number;
  /** Seed of this row's random stream; `step` is the counter within the stream (see src/util/rng.ts). */
  seed: number;
  step: number;
}

/** Everything attention needs to know about a flat batch of T tokens. */
export interface TokenLayout {
  /** (T) i32: which KV-cache slot (sequence) each token belongs to. */
  slot: Tensor;
  /** (T) i32: position of each token within its sequence; the token attends to cache[slot][0..pos]. */
  pos: Tensor;
}

/**
 * Fused forward ops a backend may offer (WebGPU: src/engine/webgpu/kernels/fused.ts) to cut the dispatches of a
 * decode step. Each equals the composition of plain ops written beside it, up to f32 rounding; the model
 * (src/model/qwen3.ts) runs that composition where a backend has none, when it keeps activations for a backward,
 * and for a projection that carries a LoRA pair.
 */
export interface FusedOps {
  /** x (M,K), ws: 1 to 3 weights W_i (N_i,K) -> (M, sum N_i) = [x W_1^T | x W_2^T | ...] (the q, k, v projections) */
  matmulConcat(x: Tensor, ws: readonly Tensor[]): Tensor;
  /** x (M,K), wGate, wUp (F,K) -> swiglu(x Wg^T, x Wu^T) (M,F) */
  matmulSwiglu(x: Tensor, wGate: Tensor, wUp: Tensor): Tensor;
  /** x (M,K), w (N,K), r (M,N) -> add(r, x W^T) (M,N) (a projection and the residual add after it) */
  matmulAdd(x: Tensor, w: Tensor, r: Tensor): Tensor;
  /**
   * qkv (T,(Hq+2Hkv)*D), the output of matmulConcat over q, k, v -> q = rope(rmsnorm(q, qNorm), pos) (T,Hq,D),
   * k = rope(rmsnorm(k, kNorm), pos) (T,Hkv,D), v (T,Hkv,D) (the q/k-norm over each head's D values).
   */
  qkNormRope(qkv: Tensor, qNorm: Tensor, kNorm: Tensor, pos: Tensor, eps: number, theta: number, heads: { q: number; kv: number }): { q: Tensor; k: Tensor; v: Tensor };
}

export interface Backend {
  readonly name: BackendName;
  /** This backend's backward ops, loss heads and optimizer (src/engine/train.ts), made with the backend. */
  readonly train: TrainOps;
  /** Fused forward ops, where the backend has them (see FusedOps). */
  readonly fused?: FusedOps;

  // ---- memory ----
  /** Upload host data. `dtype` defaults to f32 for Float32Array and i32 for Int32Array. */
  tensor(data: Float32Array | Int32Array, shape: readonly number[]): Tensor;
  zeros(shape: readonly number[], dtype?: 'f32' | 'i32'): Tensor;
  /**
   * Storage whose contents are unspecified until written: for buffers every element of which is written before it
   * is read (a decoding KV cache: a slot's positions are written up to the last one attended). Where a backend
   * hands out memory that is zero anyway, the same as zeros; the fast CPU path skips the clearing pass.
   */
  empty(shape: readonly number[], dtype?: 'f32' | 'i32'): Tensor;
  /** Upload a weight quantized by src/engine/quant.ts. */
  uploadQuantized(q: import('./quant').QuantizedWeight): Tensor;
  read(t: Tensor): Promise<Float32Array | Int32Array>;
  /** Overwrite the contents of an f32/i32 tensor (same element count). */
  write(t: Tensor, data: Float32Array | Int32Array): void;
  /**
   * Optional: a promise that an f32 weight's values no longer change (an inference model; a frozen base under LoRA),
   * so the backend may keep a form of it derived once (cpu-fast: the product's packed panels). `unfreeze` takes the
   * promise back (full-parameter training does before its first step); `write` to a frozen weight stays allowed and
   * drops the derived form.
   */
  freeze?(w: Tensor): void;
  unfreeze?(w: Tensor): void;
  free(t: Tensor): void;
  /**
   * Same data, new shape with the same element count (f32/i32 only), e.g. (T,H*D) <-> (T,H,D).
   * The result is a view sharing t's storage: free either t or the view, never both.
   */
  reshape(t: Tensor, shape: readonly number[]): Tensor;
  /** Wait for all enqueued work (no-op on CPU). Rejects with an EngineError if the device was lost. */
  sync(): Promise<void>;
  /** Release everything this backend owns. */
  dispose(): void;

  // ---- forward ops ----
  /** table (V,C) f32|q8|q4, ids (T) i32 -> (T,C) */
  embedding(table: Tensor, ids: Tensor): Tensor;
  /** x (R,C), w (C) -> (R,C); y = x / sqrt(mean(x^2) + eps) * w. Also the q/k-norm with R = T*H, C = D. */
  rmsnorm(x: Tensor, w: Tensor, eps: number): Tensor;
  /** x (T,H,D), pos (T) i32 -> (T,H,D); rotate-half (NeoX/Qwen) convention, theta = rope base. */
  rope(x: Tensor, pos: Tensor, theta: number): Tensor;
  /** x (M,K), w (N,K) f32|q8|q4 -> (M,N); y = x W^T, dequantization fused. */
  matmul(x: Tensor, w: Tensor): Tensor;
  /** a, b same shape -> a + b */
  add(a: Tensor, b: Tensor): Tensor;
  /** a * s (elementwise, scalar s) */
  scale(a: Tensor, s: number): Tensor;
  /** gate, up (T,F) -> silu(gate) * up (T,F) */
  swiglu(gate: Tensor, up: Tensor): Tensor;
  /**
   * Write this batch's keys/values into the cache.
   * k, v (T,Hkv,D); cache (S,maxT,Hkv,D): cache[slot[t], pos[t]] = k[t]. Mutates the caches in place.
   */
  kvWrite(kCache: Tensor, vCache: Tensor, k: Tensor, v: Tensor, layout: TokenLayout): void;
  /**
   * Grouped-query causal attention over the cache.
   * q (T,Hq,D), caches (S,maxT,Hkv,D) -> out (T,Hq,D); token t attends to cache[slot[t]][0..pos[t]]
   * with head h reading kv-head floor(h / (Hq/Hkv)), scale 1/sqrt(D).
   */
  attention(q: Tensor, kCache: Tensor, vCache: Tensor, layout: TokenLayout): Tensor;
  /** x (R,V) -> log-softmax over the last axis (R,V) */
  logSoftmax(x: Tensor): Tensor;
  /**
   * Sample one token per row of logits (R,V). Returns tokens (R) i32 and the log-probability of each
   * chosen token under softmax(logits / t) with t = temperature (or 1 when greedy), before top-p.
   * The same logits and params give the same tokens on every backend (shared counter-based RNG).
   */
  sample(logits: Tensor, params: readonly SampleParams[]): { tokens: Tensor; logprobs: Tensor };
  /** Gather rows: x (R,C), rows (n) i32 -> (n,C). Used to keep only the last token of each sequence. */
  gatherRows(x: Tensor, rows: Tensor): Tensor;
}
