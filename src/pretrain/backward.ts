// Full-parameter gradients of the Qwen3 decoder for the from-scratch pretraining, strung together from
// the backend's training ops (src/engine/train.ts) in the reverse order of src/model/qwen3.ts's forward.
// The forward runs with `save: true`; nothing is recomputed except the attention probabilities (inside
// attentionBackward). Tied embeddings get one gradient tensor that both uses accumulate into.
import type { Backend, Tensor } from '../engine/backend';
import { trainOps, type TrainOps } from '../engine/train';
import type { KvCache, LayerWeights, Qwen3Model, SavedActivations } from '../model/qwen3';

export interface Grads {
  embed: Tensor; // (V,d)
  layers: LayerWeights[]; // each (same shapes as the weights)
  finalNorm: Tensor; // (d)
  /** The same tensor as `embed` when the embeddings are tied. */
  lmHead: Tensor;
}

/** Zero gradients, one f32 tensor per distinct weight tensor. */
export function zeroGrads(m: Qwen3Model): Grads {
  const b = m.backend;
  const z = (t: Tensor) => b.zeros([...t.shape]);
  const embed = z(m.weights.embed);
  return {
    embed,
    layers: m.weights.layers.map((l) => Object.fromEntries(Object.entries(l).map(([k, t]) => [k, z(t)])) as unknown as LayerWeights),
    finalNorm: z(m.weights.finalNorm),
    lmHead: m.weights.lmHead === m.weights.embed ? embed : z(m.weights.lmHead),
  };
}

/** Every distinct (weight, gradient) pair, in a fixed order (the optimizer's and the checkpoint's). */
export function paramPairs(m: Qwen3Model, g: Grads): { name: string; w: Tensor; g: Tensor }[] {
  const out = [{ name: 'embed', w: m.weights.embed, g: g.embed }];
  m.weights.layers.forEach((l, i) => {
    for (const k of Object.keys(l) as (keyof LayerWeights)[]) out.push({ name: `layers.${i}.${k}`, w: l[k], g: g.layers[i][k] });
  });
  out.push({ name: 'finalNorm', w: m.weights.finalNorm, g: g.finalNorm });
  if (g.lmHead !== g.embed) out.push({ name: 'lmHead', w: m.weights.lmHead, g: g.lmHead });
  return out;
}

/**
 * Accumulates d loss / d weights into `g`, given d loss / d logits of the rows the forward computed.
 * dLogits (n,V); ids (T) the batch's token ids; headRows (n) which of the T rows the logits came from
 * (null = all T). Frees every intermediate it makes; leaves `saved` to the caller.
 */
export function backward(m: Qwen3Model, cache: KvCache, saved: SavedActivations, ids: Int32Array, headRows: Int32Array | null, dLogits: Tensor, g: Grads): void {
  const b = m.backend;
  const ops = trainOps(b);
  const c = m.config;
  const T = ids.length;
  const d = c.hiddenSize;

  // logits = head lmHead^T: d lmHead += dLogits^T head; d head = dLogits lmHead   (n,d)
  ops.matmulBackwardWeight(dLogits, saved.head, g.lmHead);
  const dHead = ops.matmulBackwardInput(dLogits, m.weights.lmHead);
  let dNormed = dHead;
  if (headRows) dNormed = scatterRows(b, dHead, headRows, T, d);
  const last = saved.layers[c.numLayers - 1].mlp.out;
  let dx = ops.rmsnormBackward(dNormed, last, m.weights.finalNorm, c.rmsNormEps, g.finalNorm);
  if (dNormed !== dHead) b.free(dNormed);
  b.free(dHead);

  for (let l = c.numLayers - 1; l >= 0; l--) {
    const dMid = mlpBackward(b, ops, m, l, saved.layers[l].mlp, dx, g.layers[l]);
    b.free(dx);
    dx = attentionBackward(b, ops, m, l, cache, saved, dMid, g.layers[l]);
    b.free(dMid);
  }
  ops.embeddingBackward(dx, ids, g.embed);
  b.free(dx);
}

/** dy (n,d) for rows `rows` of a (T,d) matrix -> (T,d), summed where a row repeats (host-side: CPU pretraining). */
function scatterRows(b: Backend, dy: Tensor, rows: Int32Array, T: number, d: number): Tensor {
  const src = readSync(b, dy);
  const out = new Float32Array(T * d);
  for (let i = 0; i < rows.length; i++) for (let j = 0; j < d; j++) out[rows[i] * d + j] += src[i * d + j];
  return b.tensor(out, [T, d]);
}

/** The f32 data of a CPU tensor without a round trip through a promise. */
function readSync(b: Backend, t: Tensor): Float32Array {
  const data = (t as unknown as { f32?: Float32Array }).f32;
  if (!(data instanceof Float32Array)) throw new Error(`pretraining with logit rows needs a CPU backend (got ${b.name})`);
  return data;
}

/** out = x + down(silu(gate(xn)) * up(xn)), xn = rmsnorm(x): returns d x (T,d). */
function mlpBackward(b: Backend, ops: TrainOps, m: Qwen3Model, l: number, s: SavedActivations['layers'][number]['mlp'], dOut: Tensor, g: LayerWeights): Tensor {
  const w = m.weights.layers[l];
  ops.matmulBackwardWeight(dOut, s.act, g.down);
  const dAct = ops.matmulBackwardInput(dOut, w.down); // (T,F)
  const { dGate, dUp } = ops.swigluBackward(dAct, s.gate, s.up);
  b.free(dAct);
  ops.matmulBackwardWeight(dGate, s.xn, g.gate);
  ops.matmulBackwardWeight(dUp, s.xn, g.up);
  const dxn = ops.matmulBackwardInput(dGate, w.gate); // (T,d)
  const dxnUp = ops.matmulBackwardInput(dUp, w.up);
  ops.accumulate(dxn, dxnUp);
  for (const t of [dGate, dUp, dxnUp]) b.free(t);
  const dx = ops.rmsnormBackward(dxn, s.x, w.postNorm, m.config.rmsNormEps, g.postNorm);
  b.free(dxn);
  ops.accumulate(dx, dOut); // the residual path
  return dx;
}

/** out = x + o(attention(rope(qnorm(q(xn))), rope(knorm(k(xn))), v(xn))): returns d x (T,d). */
function attentionBackward(b: Backend, ops: TrainOps, m: Qwen3Model, l: number, cache: KvCache, saved: SavedActivations, dOut: Tensor, g: LayerWeights): Tensor {
  const c = m.config;
  const w = m.weights.layers[l];
  const s = saved.layers[l].attention;
  const layout = saved.layout;
  const T = dOut.shape[0];
  const [Hq, Hkv, D] = [c.numHeads, c.numKvHeads, c.headDim];

  ops.matmulBackwardWeight(dOut, s.attn, g.o);
  const dAttn = ops.matmulBackwardInput(dOut, w.o); // (T,Hq*D)
  const dAttn3 = b.reshape(dAttn, [T, Hq, D]);
  const { dq, dkCache, dvCache } = ops.attentionBackward(dAttn3, s.qr, cache.k[l], cache.v[l], layout);
  const { dk, dv } = ops.kvWriteBackward(dkCache, dvCache, layout);
  for (const t of [dAttn, dkCache, dvCache]) b.free(t);
  const dqn = ops.ropeBackward(dq, layout.pos, c.ropeTheta); // (T,Hq,D)
  const dkn = ops.ropeBackward(dk, layout.pos, c.ropeTheta); // (T,Hkv,D)
  b.free(dq);
  b.free(dk);
  // Per-head q/k norms: rows of D.
  const dqp = ops.rmsnormBackward(b.reshape(dqn, [T * Hq, D]), b.reshape(s.q, [T * Hq, D]), w.qNorm, c.rmsNormEps, g.qNorm);
  const dkp = ops.rmsnormBackward(b.reshape(dkn, [T * Hkv, D]), b.reshape(s.k, [T * Hkv, D]), w.kNorm, c.rmsNormEps, g.kNorm);
  b.free(dqn);
  b.free(dkn);
  const dq2 = b.reshape(dqp, [T, Hq * D]);
  const dk2 = b.reshape(dkp, [T, Hkv * D]);
  const dv2 = b.reshape(dv, [T, Hkv * D]);
  ops.matmulBackwardWeight(dq2, s.xn, g.q);
  ops.matmulBackwardWeight(dk2, s.xn, g.k);
  ops.matmulBackwardWeight(dv2, s.xn, g.v);
  const dxn = ops.matmulBackwardInput(dq2, w.q); // (T,d)
  for (const [dy, wt] of [
    [dk2, w.k],
    [dv2, w.v],
  ] as const) {
    const part = ops.matmulBackwardInput(dy, wt);
    ops.accumulate(dxn, part);
    b.free(part);
  }
  for (const t of [dqp, dkp, dv]) b.free(t);
  const dx = ops.rmsnormBackward(dxn, s.x, w.inputNorm, c.rmsNormEps, g.inputNorm);
  b.free(dxn);
  ops.accumulate(dx, dOut);
  return dx;
}

/** Frees the activations a `save: true` forward kept (views share storage: freeing twice is harmless on CPU). */
export function freeSaved(b: Backend, saved: SavedActivations): void {
  const seen = new Set<Tensor>();
  const add = (t: Tensor | undefined) => t && seen.add(t);
  add(saved.embedded);
  add(saved.normed);
  add(saved.head);
  add(saved.layout.slot);
  add(saved.layout.pos);
  for (const { attention: a, mlp } of saved.layers) {
    for (const t of [a.x, a.xn, a.q, a.k, a.v, a.qn, a.kn, a.qr, a.kr, a.attn, a.out, mlp.x, mlp.xn, mlp.gate, mlp.up, mlp.act, mlp.out]) add(t);
  }
  for (const t of seen) b.free(t);
}
