// The training forward (the decoder trunk of src/model/qwen3.ts, keeping activations) and the explicit
// backward of the Qwen3 decoder, block by block in reverse. Gradients accumulate into the ParamSet's
// tensors (only trainable weights get one: LoRA A/B, or every f32 weight in full-parameter mode).
//
// With `recompute`, the forward keeps only each layer's input (T,d) and the backward re-runs that
// layer's forward with saved activations right before its backward (checkpoint per block).
import type { Backend, Tensor } from '../engine/backend';
import type { KvCopyPlan } from './batch';
import type { TrainOps } from '../engine/train';
import type { LoraAdapter, LoraPair, LoraTarget } from '../model/lora';
import { attentionBlock, KvCache, mlpBlock, Scratch, trunk, type AttentionSaved, type KvCopies, type LoraSaved, type MlpSaved, type Qwen3Model, type SharedLayout } from '../model/qwen3';
import type { ParamSet } from './params';

export interface TrainActivations {
  layout: SharedLayout;
  cache: KvCache;
  /** Per layer: the saved block records, or null when they will be recomputed. */
  layers: ({ attention: AttentionSaved; mlp: MlpSaved } | null)[];
  /** Per layer: the layer input (T,d) (kept in both modes; layer 0's is the embedding output). */
  inputs: Tensor[];
  /** (T,d) last layer output, input of the final norm. */
  last: Tensor;
  /** (T,d) final-normed hidden states, input of lm_head. */
  normed: Tensor;
}

/**
 * Run the decoder trunk (everything before lm_head, the same driver as inference) keeping what the backward
 * needs. `copies`: the extra KV writes of a prefix-shared batch (src/train/batch.ts packShared).
 */
export function trainForward(m: Qwen3Model, ids: Int32Array, slot: Int32Array, pos: Int32Array, slots: number, maxT: number, adapter: LoraAdapter | null, recompute: boolean, copies?: KvCopyPlan): TrainActivations {
  const b = m.backend;
  const T = ids.length;
  const layout: SharedLayout = { slot: b.tensor(slot, [T]), pos: b.tensor(pos, [T]) };
  if (copies && copies.src.length > 0) layout.copies = uploadCopies(b, copies);
  const cache = new KvCache(m, slots, maxT);
  const t = trunk(m, cache, layout, ids, adapter, recompute ? 'inputs' : 'blocks', () => b.train.flush());
  const normed = b.rmsnorm(t.last, m.weights.finalNorm, m.config.rmsNormEps);
  return { layout, cache, layers: t.layers, inputs: t.inputs, last: t.last, normed };
}

function uploadCopies(b: Backend, p: KvCopyPlan): KvCopies {
  const C = p.src.length;
  const rounds: KvCopies['rounds'] = [];
  for (let r = 0; r + 1 < p.roundStart.length; r++) {
    const [a, z] = [p.roundStart[r], p.roundStart[r + 1]];
    const idx = new Int32Array(z - a);
    for (let i = 0; i < idx.length; i++) idx[i] = a + i;
    rounds.push({ idx: b.tensor(idx, [idx.length]), src: b.tensor(p.src.slice(a, z), [idx.length]) });
  }
  return { src: b.tensor(p.src, [C]), layout: { slot: b.tensor(p.slot, [C]), pos: b.tensor(p.pos, [C]) }, rounds };
}

function freeCopies(b: Backend, c: KvCopies): void {
  for (const t of [c.src, c.layout.slot, c.layout.pos, ...c.rounds.flatMap((r) => [r.idx, r.src])]) b.free(t);
}

/** x (M,K) -> y = x W^T + s (x A^T) B^T; backward: returns dx (M,K), accumulates dW, dA, dB. */
function linearBackward(ops: TrainOps, ps: ParamSet, dy: Tensor, x: Tensor, w: Tensor, pair: LoraPair | undefined, scaling: number, u: Tensor | undefined): Tensor {
  const b = ops.backend;
  const dx = ops.matmulBackwardInput(dy, w); // (M,K)
  const gw = ps.grad(w);
  if (gw) ops.matmulBackwardWeight(dy, x, gw);
  if (pair && u) {
    const dys = b.scale(dy, scaling); // (M,N)
    const gB = ps.grad(pair.B);
    if (gB) ops.matmulBackwardWeight(dys, u, gB); // dB (N,r) += s dy^T u
    const du = ops.matmulBackwardInput(dys, pair.B); // (M,r) = s dy B
    const gA = ps.grad(pair.A);
    if (gA) ops.matmulBackwardWeight(du, x, gA); // dA (r,K) += du^T x
    const dx2 = ops.matmulBackwardInput(du, pair.A); // (M,K)
    ops.accumulate(dx, dx2);
    for (const t of [dys, du, dx2]) b.free(t);
  }
  return dx;
}

type Lora = { adapter: LoraAdapter | null; l: number; saved: LoraSaved };
const pairOf = (o: Lora, t: LoraTarget) => o.adapter?.pair(o.l, t);

/** dOut (T,d) of mlpBlock -> d input (T,d) */
function mlpBackward(m: Qwen3Model, ops: TrainOps, ps: ParamSet, l: number, s: MlpSaved, dOut: Tensor, adapter: LoraAdapter | null): Tensor {
  const b = m.backend;
  const w = m.weights.layers[l];
  const sc = adapter?.scaling ?? 0;
  const o: Lora = { adapter, l, saved: s.lora };
  const lin = (dy: Tensor, x: Tensor, t: 'gate' | 'up' | 'down') => linearBackward(ops, ps, dy, x, w[t], pairOf(o, t), sc, s.lora[t]);
  const dAct = lin(dOut, s.act, 'down'); // (T,F)
  const { dGate, dUp } = ops.swigluBackward(dAct, s.gate, s.up); // (T,F)
  const dXn = lin(dGate, s.xn, 'gate'); // (T,d)
  const dXn2 = lin(dUp, s.xn, 'up');
  ops.accumulate(dXn, dXn2);
  const dx = ops.rmsnormBackward(dXn, s.x, w.postNorm, m.config.rmsNormEps, ps.grad(w.postNorm)); // (T,d)
  ops.accumulate(dx, dOut); // residual
  for (const t of [dAct, dGate, dUp, dXn, dXn2]) b.free(t);
  return dx;
}

/** dOut (T,d) of attentionBlock -> d input (T,d) */
function attentionBackward(m: Qwen3Model, ops: TrainOps, ps: ParamSet, l: number, s: AttentionSaved, dOut: Tensor, act: TrainActivations, adapter: LoraAdapter | null): Tensor {
  const b = m.backend;
  const c = m.config;
  const w = m.weights.layers[l];
  const T = s.x.shape[0];
  const [Hq, Hkv, D] = [c.numHeads, c.numKvHeads, c.headDim];
  const sc = adapter?.scaling ?? 0;
  const o: Lora = { adapter, l, saved: s.lora };
  const lin = (dy: Tensor, x: Tensor, t: 'q' | 'k' | 'v' | 'o') => linearBackward(ops, ps, dy, x, w[t], pairOf(o, t), sc, s.lora[t]);
  const dAttn = lin(dOut, s.attn, 'o'); // (T,Hq*D)
  const g = ops.attentionBackward(b.reshape(dAttn, [T, Hq, D]), s.qr, act.cache.k[l], act.cache.v[l], act.layout);
  const { dk, dv } = ops.kvWriteBackward(g.dkCache, g.dvCache, act.layout); // (T,Hkv,D) w.r.t. kr and v
  const cp = act.layout.copies;
  if (cp) {
    // A shared token's key/value were read in every slot it was copied to: add those gradients back.
    const C = cp.src.shape[0];
    const e = ops.kvWriteBackward(g.dkCache, g.dvCache, cp.layout); // (C,Hkv,D)
    for (const [dst, src] of [[dk, e.dk], [dv, e.dv]] as const) {
      const dst2 = b.reshape(dst, [T, Hkv * D]);
      const src2 = b.reshape(src, [C, Hkv * D]);
      for (const r of cp.rounds) {
        const part = b.gatherRows(src2, r.idx);
        ops.scatterAddRows(dst2, part, r.src);
        b.free(part);
      }
    }
    b.free(e.dk);
    b.free(e.dv);
  }
  const dqn = ops.ropeBackward(g.dq, act.layout.pos, c.ropeTheta); // (T,Hq,D)
  const dkn = ops.ropeBackward(dk, act.layout.pos, c.ropeTheta); // (T,Hkv,D)
  const dq = ops.rmsnormBackward(b.reshape(dqn, [T * Hq, D]), b.reshape(s.q, [T * Hq, D]), w.qNorm, c.rmsNormEps, ps.grad(w.qNorm));
  const dkr = ops.rmsnormBackward(b.reshape(dkn, [T * Hkv, D]), b.reshape(s.k, [T * Hkv, D]), w.kNorm, c.rmsNormEps, ps.grad(w.kNorm));
  const dXn = lin(b.reshape(dq, [T, Hq * D]), s.xn, 'q'); // (T,d)
  const dXk = lin(b.reshape(dkr, [T, Hkv * D]), s.xn, 'k');
  const dXv = lin(b.reshape(dv, [T, Hkv * D]), s.xn, 'v');
  ops.accumulate(dXn, dXk);
  ops.accumulate(dXn, dXv);
  const dx = ops.rmsnormBackward(dXn, s.x, w.inputNorm, c.rmsNormEps, ps.grad(w.inputNorm)); // (T,d)
  ops.accumulate(dx, dOut); // residual
  for (const t of [dAttn, g.dq, g.dkCache, g.dvCache, dk, dv, dqn, dkn, dq, dkr, dXn, dXk, dXv]) b.free(t);
  return dx;
}

function freeSaved(b: Backend, a: AttentionSaved, f: MlpSaved, keepInput: Tensor): void {
  const all = new Set<Tensor>([
    ...[a.xn, a.q, a.k, a.v, a.qn, a.kn, a.qr, a.kr, a.attn, a.out, ...Object.values(a.lora)],
    ...[f.xn, f.gate, f.up, f.act, ...Object.values(f.lora)],
  ].filter((t): t is Tensor => t !== undefined));
  all.delete(keepInput);
  for (const t of all) b.free(t);
}

/**
 * dNormed (T,d) = d loss / d normed -> accumulates every trainable gradient. Frees the activations
 * (the caller frees act.normed and the cache via freeActivations).
 */
export function modelBackward(m: Qwen3Model, ps: ParamSet, act: TrainActivations, dNormed: Tensor, ids: Int32Array, adapter: LoraAdapter | null): void {
  const b = m.backend;
  const ops = b.train;
  let dx = ops.rmsnormBackward(dNormed, act.last, m.weights.finalNorm, m.config.rmsNormEps, ps.grad(m.weights.finalNorm));
  for (let l = m.config.numLayers - 1; l >= 0; l--) {
    let rec = act.layers[l];
    if (!rec) {
      // recompute this block's activations from its saved input
      const s = new Scratch(b, true);
      const a = attentionBlock(m, l, act.inputs[l], act.layout, act.cache, adapter, s);
      const f = mlpBlock(m, l, a.out, adapter, s);
      s.flush(); // what the block dropped (pre-LoRA sums etc.); the saved records stay
      b.free(f.out);
      ops.flush();
      rec = { attention: a.saved!, mlp: f.saved! };
    }
    const d1 = mlpBackward(m, ops, ps, l, rec.mlp, dx, adapter);
    b.free(dx);
    ops.flush();
    const d2 = attentionBackward(m, ops, ps, l, rec.attention, d1, act, adapter);
    b.free(d1);
    dx = d2;
    freeSaved(b, rec.attention, rec.mlp, act.inputs[l]);
    act.layers[l] = null;
    if (l + 1 < m.config.numLayers) b.free(act.inputs[l + 1]);
    ops.flush();
  }
  const ge = ps.grad(m.weights.embed);
  if (ge) ops.embeddingBackward(dx, ids, ge);
  b.free(dx);
}

/** Free what the forward kept that modelBackward does not free itself. */
export function freeActivations(b: Backend, act: TrainActivations): void {
  for (const t of new Set([act.inputs[0], act.last, act.normed, act.layout.slot, act.layout.pos])) b.free(t);
  if (act.layout.copies) freeCopies(b, act.layout.copies);
  act.cache.free();
}
