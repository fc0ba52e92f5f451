// The Qwen3 decoder, written once against the Backend interface.
//
//   x = embed[ids]                                              (T,d)
//   per layer l:
//     x = x + o( attn( rope(qnorm(q(n1(x)))), rope(knorm(k(n1(x)))), v(n1(x)) ) )   attentionBlock
//     x = x + down( silu(gate(n2(x))) * up(n2(x)) )                                 mlpBlock
//   logits = norm(x)[rows] lm_head^T                            (n,V)
//
// A batch is a flat list of T tokens, each with its KV-cache slot and position (TokenLayout), so a
// prefill of one prompt, a decode step over many sequences and a mix of both are the same call.
// Every linear map may carry a LoRA pair (lora.ts). Inference and training run the same trunk driver
// (`trunk`: embedding and layers); for training it keeps each layer's input and, unless the backward
// recomputes them, each block's intermediate activations in a record (AttentionSaved / MlpSaved) for
// the explicit backward pass of src/train/model-grad.ts. Otherwise they are freed as soon as they are dead.
import type { Backend, FusedOps, Tensor, TokenLayout } from '../engine/backend';
import { EngineError } from '../engine/errors';
import type { Qwen3Config } from './config';
import type { LoraAdapter, LoraPair, LoraTarget } from './lora';

export type WeightFormat = 'f32' | 'q8' | 'q4';

export interface LayerWeights {
  inputNorm: Tensor; // (d)
  q: Tensor; // (Hq*D, d)
  k: Tensor; // (Hkv*D, d)
  v: Tensor; // (Hkv*D, d)
  o: Tensor; // (d, Hq*D)
  qNorm: Tensor; // (D)
  kNorm: Tensor; // (D)
  postNorm: Tensor; // (d)
  gate: Tensor; // (F, d)
  up: Tensor; // (F, d)
  down: Tensor; // (d, F)
}

export interface Qwen3Weights {
  embed: Tensor; // (V, d)
  layers: LayerWeights[];
  finalNorm: Tensor; // (d)
  /** (V, d); the same tensor as `embed` when the embeddings are tied. */
  lmHead: Tensor;
}

export class Qwen3Model {
  constructor(
    readonly config: Qwen3Config,
    readonly backend: Backend,
    readonly weights: Qwen3Weights,
    readonly format: WeightFormat,
  ) {}

  free(): void {
    const w = this.weights;
    const all = [w.embed, w.finalNorm, ...w.layers.flatMap((l) => Object.values(l))];
    if (w.lmHead !== w.embed) all.push(w.lmHead);
    for (const t of all) this.backend.free(t);
  }
}

/**
 * What one call's KV caches may take unless told otherwise (generate()'s slots, runRollouts' groups of episodes):
 * the caches are allocated whole, for the longest sequence, and 1000 drafted rehearsals of 1000 positions on a 4-layer
 * policy already ask for 5.6 GB, more than a wasm memory holds (4 GiB) or a WebGPU buffer may be.
 */
export const KV_BUDGET_BYTES = 512 * 2 ** 20;

/** Bytes of keys and values one cache slot of maxT positions takes (f32, every layer). */
export function kvBytesPerSlot(c: Pick<Qwen3Config, 'numLayers' | 'numKvHeads' | 'headDim'>, maxT: number): number {
  return 2 * c.numLayers * maxT * c.numKvHeads * c.headDim * 4;
}

/** Cache slots of maxT positions that fit `budget` bytes (at least one). */
export function slotsThatFit(c: Pick<Qwen3Config, 'numLayers' | 'numKvHeads' | 'headDim'>, maxT: number, budget = KV_BUDGET_BYTES): number {
  return Math.max(1, Math.floor(budget / kvBytesPerSlot(c, maxT)));
}

/**
 * Keys and values of every layer for S sequence slots of up to maxT tokens: (S,maxT,Hkv,D) each. `cleared: false`
 * (decoding) leaves the storage as the backend hands it out: attention reads a slot's positions only up to the last
 * one written for it, as a reused prefix cache already relies on, so a cache sized for the longest request is not
 * cleared in full for every batch.
 */
export class KvCache {
  readonly k: Tensor[] = [];
  readonly v: Tensor[] = [];
  constructor(
    readonly model: Qwen3Model,
    readonly slots: number,
    readonly maxT: number,
    opts: { cleared?: boolean } = {},
  ) {
    const c = model.config;
    const b = model.backend;
    const make = (shape: number[]) => (opts.cleared === false ? b.empty(shape) : b.zeros(shape));
    for (let l = 0; l < c.numLayers; l++) {
      this.k.push(make([slots, maxT, c.numKvHeads, c.headDim]));
      this.v.push(make([slots, maxT, c.numKvHeads, c.headDim]));
    }
  }
  free(): void {
    for (const t of [...this.k, ...this.v]) this.model.backend.free(t);
  }
}

/** T tokens: ids, the cache slot each belongs to and its position in that sequence. */
export interface TokenBatch {
  ids: Int32Array;
  slot: Int32Array;
  pos: Int32Array;
}

export interface ForwardOptions {
  /** LoRA adapter to apply; null or absent = the base model. */
  adapter?: LoraAdapter | null;
  /** Token rows whose logits are wanted (e.g. the last token of each sequence); default all T. */
  logitRows?: Int32Array;
}

/** What a LoRA'd linear map keeps: u = x A^T (T,r), the only LoRA intermediate its backward needs. */
export type LoraSaved = Partial<Record<LoraTarget, Tensor>>;

export interface AttentionSaved {
  x: Tensor; // (T,d) block input (residual stream)
  xn: Tensor; // (T,d) input_layernorm(x)
  q: Tensor; // (T,Hq,D) q projection
  k: Tensor; // (T,Hkv,D)
  v: Tensor; // (T,Hkv,D), written to the cache as is
  qn: Tensor; // (T,Hq,D) after q_norm
  kn: Tensor; // (T,Hkv,D) after k_norm
  qr: Tensor; // (T,Hq,D) after rope
  kr: Tensor; // (T,Hkv,D) after rope, written to the cache
  attn: Tensor; // (T,Hq*D) attention output, input of o_proj
  lora: LoraSaved;
  out: Tensor; // (T,d) x + o_proj(attn)
}

export interface MlpSaved {
  x: Tensor; // (T,d) block input
  xn: Tensor; // (T,d) post_attention_layernorm(x)
  gate: Tensor; // (T,F)
  up: Tensor; // (T,F)
  act: Tensor; // (T,F) silu(gate) * up, input of down_proj
  lora: LoraSaved;
  out: Tensor; // (T,d) x + down_proj(act)
}

export interface ForwardResult {
  /** (n,V) logits of the requested rows. */
  logits: Tensor;
}

/** Frees what a forward pass did not keep. */
export class Scratch {
  private dead: Tensor[] = [];
  constructor(
    private readonly b: Backend,
    readonly keep: boolean,
  ) {}
  /** t is an intermediate: freed at the end of the block unless activations are kept. */
  tmp<T extends Tensor>(t: T): T {
    if (!this.keep) this.dead.push(t);
    return t;
  }
  /** t is dead in every case. */
  drop(t: Tensor): void {
    this.dead.push(t);
  }
  flush(): void {
    for (const t of this.dead) this.b.free(t);
    this.dead = [];
  }
}

/** x (M,K), w (N,K) [+ LoRA A (r,K), B (N,r)] -> (M,N) = x W^T + s (x A^T) B^T */
function linear(b: Backend, x: Tensor, w: Tensor, pair: LoraPair | undefined, scaling: number, s: Scratch, saved: LoraSaved, t: LoraTarget): Tensor {
  const y = b.matmul(x, w);
  if (!pair) return y;
  const u = s.tmp(b.matmul(x, pair.A)); // (M,r)
  saved[t] = u;
  const d = b.matmul(u, pair.B); // (M,N)
  const ds = b.scale(d, scaling);
  const out = b.add(y, ds);
  s.drop(y);
  s.drop(d);
  s.drop(ds);
  return out;
}

/**
 * The backend's fused ops for layer l, or null where the unfused composition runs: a backend without them, or a
 * pass that keeps activations for a backward (the records hold the unfused intermediates). `has` says which of
 * the given projections carry a LoRA pair in this layer: those run unfused (base matmul + LoRA, as `linear`).
 */
function fusedFor(b: Backend, s: Scratch, adapter: LoraAdapter | null, l: number): { ops: FusedOps; has(...t: LoraTarget[]): boolean } | null {
  const ops = b.fused;
  if (!ops || s.keep) return null;
  return { ops, has: (...ts) => !!adapter && ts.some((t) => adapter.pair(l, t) !== undefined) };
}

/** x + linear(a) (T,d): the projection and the residual add in one op where fused and no LoRA pair is on it. */
function residualLinear(b: Backend, x: Tensor, a: Tensor, w: Tensor, adapter: LoraAdapter | null, l: number, t: LoraTarget, sc: number, s: Scratch, lora: LoraSaved, fz: ReturnType<typeof fusedFor>): Tensor {
  if (fz && !fz.has(t)) return fz.ops.matmulAdd(a, w, x);
  const y = linear(b, a, w, adapter?.pair(l, t), sc, s, lora, t);
  s.drop(y);
  return b.add(x, y);
}

/**
 * A prefix-shared training batch's extra KV writes (src/train/batch.ts KvCopyPlan) on the backend: token
 * src[i]'s key/value also go to cache[layout.slot[i], layout.pos[i]]; rounds[r] are the copies (idx, into
 * the copies) of round r and their distinct tokens (src), for the backward's scatter-add.
 */
export interface KvCopies {
  src: Tensor;
  layout: TokenLayout;
  rounds: { idx: Tensor; src: Tensor }[];
}

/** A token layout, with the KV copies of a prefix-shared batch when it is one. */
export type SharedLayout = TokenLayout & { copies?: KvCopies };

/** x (T,d) -> x + o_proj(attention(...)) (T,d); writes this batch's k, v into the cache (and their copies). */
export function attentionBlock(m: Qwen3Model, l: number, x: Tensor, layout: SharedLayout, cache: KvCache, adapter: LoraAdapter | null, s: Scratch): { out: Tensor; saved: AttentionSaved | null } {
  const b = m.backend;
  const c = m.config;
  const w = m.weights.layers[l];
  const T = x.shape[0];
  const [Hq, Hkv, D] = [c.numHeads, c.numKvHeads, c.headDim];
  const sc = adapter?.scaling ?? 0;
  const lora: LoraSaved = {};

  const xn = s.tmp(b.rmsnorm(x, w.inputNorm, c.rmsNormEps)); // (T,d)
  const fz = fusedFor(b, s, adapter, l);
  let q: Tensor | null = null;
  let k: Tensor | null = null;
  let qn: Tensor | null = null;
  let kn: Tensor | null = null;
  let v: Tensor;
  let qr: Tensor;
  let kr: Tensor;
  if (fz && !fz.has('q', 'k', 'v')) {
    // one projection into [q | k | v], then q/k-norm, RoPE and the split in one more op
    const qkv = s.tmp(fz.ops.matmulConcat(xn, [w.q, w.k, w.v])); // (T,(Hq+2Hkv)*D)
    const r = fz.ops.qkNormRope(qkv, w.qNorm, w.kNorm, layout.pos, c.rmsNormEps, c.ropeTheta, { q: Hq, kv: Hkv });
    [qr, kr, v] = [s.tmp(r.q), s.tmp(r.k), s.tmp(r.v)];
  } else {
    // Projections, viewed as one row per head for the per-head q/k-norm: (T,H*D) -> (T*H,D).
    q = s.tmp(b.reshape(linear(b, xn, w.q, adapter?.pair(l, 'q'), sc, s, lora, 'q'), [T * Hq, D]));
    k = s.tmp(b.reshape(linear(b, xn, w.k, adapter?.pair(l, 'k'), sc, s, lora, 'k'), [T * Hkv, D]));
    v = s.tmp(b.reshape(linear(b, xn, w.v, adapter?.pair(l, 'v'), sc, s, lora, 'v'), [T, Hkv, D]));
    qn = s.tmp(b.reshape(b.rmsnorm(q, w.qNorm, c.rmsNormEps), [T, Hq, D]));
    kn = s.tmp(b.reshape(b.rmsnorm(k, w.kNorm, c.rmsNormEps), [T, Hkv, D]));
    qr = s.tmp(b.rope(qn, layout.pos, c.ropeTheta)); // (T,Hq,D)
    kr = s.tmp(b.rope(kn, layout.pos, c.ropeTheta)); // (T,Hkv,D)
  }
  b.kvWrite(cache.k[l], cache.v[l], kr, v, layout);
  if (layout.copies) {
    // Shared tokens' keys/values into the slots of the other sequences through them: (C,Hkv,D).
    const cp = layout.copies;
    const C = cp.src.shape[0];
    const kc = b.gatherRows(b.reshape(kr, [T, Hkv * D]), cp.src);
    const vc = b.gatherRows(b.reshape(v, [T, Hkv * D]), cp.src);
    b.kvWrite(cache.k[l], cache.v[l], b.reshape(kc, [C, Hkv, D]), b.reshape(vc, [C, Hkv, D]), cp.layout);
    b.free(kc);
    b.free(vc);
  }
  const attn = s.tmp(b.reshape(b.attention(qr, cache.k[l], cache.v[l], layout), [T, Hq * D])); // (T,Hq*D)
  const out = residualLinear(b, x, attn, w.o, adapter, l, 'o', sc, s, lora, fz); // x + o_proj(attn) (T,d)
  const saved = s.keep
    ? { x, xn, q: b.reshape(q!, [T, Hq, D]), k: b.reshape(k!, [T, Hkv, D]), v, qn: qn!, kn: kn!, qr, kr, attn, lora, out }
    : null;
  return { out, saved };
}

/** x (T,d) -> x + down(silu(gate(n2(x))) * up(n2(x))) (T,d) */
export function mlpBlock(m: Qwen3Model, l: number, x: Tensor, adapter: LoraAdapter | null, s: Scratch): { out: Tensor; saved: MlpSaved | null } {
  const b = m.backend;
  const w = m.weights.layers[l];
  const sc = adapter?.scaling ?? 0;
  const lora: LoraSaved = {};
  const xn = s.tmp(b.rmsnorm(x, w.postNorm, m.config.rmsNormEps)); // (T,d)
  const fz = fusedFor(b, s, adapter, l);
  if (fz && !fz.has('gate', 'up')) {
    const act = s.tmp(fz.ops.matmulSwiglu(xn, w.gate, w.up)); // (T,F)
    return { out: residualLinear(b, x, act, w.down, adapter, l, 'down', sc, s, lora, fz), saved: null };
  }
  const gate = s.tmp(linear(b, xn, w.gate, adapter?.pair(l, 'gate'), sc, s, lora, 'gate')); // (T,F)
  const up = s.tmp(linear(b, xn, w.up, adapter?.pair(l, 'up'), sc, s, lora, 'up')); // (T,F)
  const act = s.tmp(b.swiglu(gate, up)); // (T,F)
  const out = residualLinear(b, x, act, w.down, adapter, l, 'down', sc, s, lora, fz);
  return { out, saved: s.keep ? { x, xn, gate, up, act, lora, out } : null };
}

/** What the trunk keeps: nothing (inference), each layer's input (training that recomputes blocks), or both
 * the inputs and every block's records (training). */
export type TrunkKeep = 'none' | 'inputs' | 'blocks';

export interface TrunkResult {
  /** (T,d) the last layer's output, input of the final norm. */
  last: Tensor;
  /** Per layer: its input (T,d), unless keep is 'none' (layer 0's is the embedding output). */
  inputs: Tensor[];
  /** Per layer: the block records when keep is 'blocks', else null. */
  layers: ({ attention: AttentionSaved; mlp: MlpSaved } | null)[];
}

/**
 * The decoder trunk: ids (T) -> embedding -> every layer -> (T,d), writing this batch's keys/values into
 * `cache`. `afterLayer` runs once each layer's dead intermediates are freed (training flushes the GPU
 * queue there so they can be reused).
 */
export function trunk(m: Qwen3Model, cache: KvCache, layout: SharedLayout, ids: Int32Array, adapter: LoraAdapter | null, keep: TrunkKeep, afterLayer?: () => void): TrunkResult {
  const b = m.backend;
  const T = ids.length;
  const idt = b.tensor(ids, [T]);
  let x = b.embedding(m.weights.embed, idt); // (T,d)
  b.free(idt);
  const inputs: Tensor[] = [];
  const layers: TrunkResult['layers'] = [];
  for (let l = 0; l < m.config.numLayers; l++) {
    const s = new Scratch(b, keep === 'blocks');
    const a = attentionBlock(m, l, x, layout, cache, adapter, s);
    const f = mlpBlock(m, l, a.out, adapter, s);
    if (keep === 'none') s.drop(x);
    else inputs.push(x);
    if (keep !== 'blocks') s.drop(a.out);
    s.flush();
    afterLayer?.();
    layers.push(keep === 'blocks' ? { attention: a.saved!, mlp: f.saved! } : null);
    x = f.out;
  }
  return { last: x, inputs, layers };
}

/** Run T tokens through the model, writing their keys/values into `cache`. */
export function forward(m: Qwen3Model, cache: KvCache, batch: TokenBatch, opts: ForwardOptions = {}): ForwardResult {
  const b = m.backend;
  const c = m.config;
  const T = batch.ids.length;
  if (batch.slot.length !== T || batch.pos.length !== T) throw new EngineError('shape', `forward: ${T} ids, ${batch.slot.length} slots, ${batch.pos.length} positions`);
  for (let t = 0; t < T; t++) {
    if (batch.ids[t] < 0 || batch.ids[t] >= c.vocabSize) throw new EngineError('shape', `forward: token id ${batch.ids[t]} outside the vocabulary [0,${c.vocabSize})`);
    if (batch.slot[t] < 0 || batch.slot[t] >= cache.slots || batch.pos[t] < 0 || batch.pos[t] >= cache.maxT)
      throw new EngineError('shape', `forward: slot ${batch.slot[t]} position ${batch.pos[t]} outside the KV cache (${cache.slots} slots x ${cache.maxT})`);
  }
  const layout: TokenLayout = { slot: b.tensor(batch.slot, [T]), pos: b.tensor(batch.pos, [T]) };
  const { last } = trunk(m, cache, layout, batch.ids, opts.adapter ?? null, 'none');
  const normed = b.rmsnorm(last, m.weights.finalNorm, c.rmsNormEps); // (T,d)
  let head = normed; // (n,d)
  if (opts.logitRows) {
    const rows = b.tensor(opts.logitRows, [opts.logitRows.length]);
    head = b.gatherRows(normed, rows);
    b.free(rows);
  }
  const logits = b.matmul(head, m.weights.lmHead); // (n,V)
  for (const t of new Set([last, normed, head, layout.slot, layout.pos])) b.free(t);
  return { logits };
}
