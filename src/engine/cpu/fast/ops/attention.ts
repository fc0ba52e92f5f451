// Grouped-query causal attention over the KV cache and its backward, on the wasm kernels.
import type { Tensor, TokenLayout } from '../../../backend';
import { assertShape } from '../../../errors';
import { asCpu, CpuTensor } from '../../tensor';
import { f32Bits, type Temps, type WasmRuntime } from '../runtime';

// q (T,Hq,D), caches (S,maxT,Hkv,D) -> (T,Hq,D)
export function attention(rt: WasmRuntime, q: Tensor, kCache: Tensor, vCache: Tensor, layout: TokenLayout): Tensor {
  const qs = asCpu(q).f32;
  const ks = asCpu(kCache).f32;
  const vs = asCpu(vCache).f32;
  const slot = asCpu(layout.slot).i32;
  const pos = asCpu(layout.pos).i32;
  assertShape(q.shape.length === 3 && kCache.shape.length === 4, `attention: q (${q.shape}), cache (${kCache.shape})`);
  const [T, Hq, D] = q.shape;
  const [S, maxT, Hkv] = kCache.shape;
  assertShape(Hkv > 0 && Hq % Hkv === 0 && kCache.shape[3] === D, `attention: q (${q.shape}) vs cache (${kCache.shape})`);
  assertShape(vCache.shape.join() === kCache.shape.join(), `attention: v cache (${vCache.shape}) vs k cache (${kCache.shape})`);
  assertShape(slot.length === T && pos.length === T, `attention: layout of ${slot.length}/${pos.length} tokens for ${T}`);
  let work = 0;
  for (let t = 0; t < T; t++) {
    assertShape(slot[t] >= 0 && slot[t] < S && pos[t] >= 0 && pos[t] < maxT, `attention: slot ${slot[t]} pos ${pos[t]} outside cache (${S},${maxT})`);
    work += pos[t] + 1;
  }
  const temps: Temps = [];
  try {
    const Q = rt.place(qs, temps);
    const Kc = rt.place(ks, temps);
    const Vc = rt.place(vs, temps);
    const sl = rt.place(slot, temps);
    const ps = rt.place(pos, temps);
    const out = rt.output([T, Hq, D], temps);
    const slots = [Q, Kc, Vc, out.ptr, sl, ps, T, Hq, Hkv, D, maxT, f32Bits(1 / Math.sqrt(D))];
    rt.launch('attention', slots, (Hq / Hkv) * maxT * 4, 4 * work * Hq * D, temps);
    return out.finish();
  } finally {
    rt.release(temps);
  }
}

/**
 * Backward of attention (out = softmax(scale q.k_j) . v_j, recomputed: the forward saves nothing): dOut, q (T,Hq,D), caches (S,maxT,Hkv,D) -> dq (T,Hq,D), dkCache, dvCache
 * (S,maxT,Hkv,D). Recomputes the probabilities, like the reference's TrainOps.attentionBackward.
 */
export function attentionBackward(rt: WasmRuntime, dOut: Tensor, q: Tensor, kCache: Tensor, vCache: Tensor, layout: TokenLayout): { dq: CpuTensor; dkCache: CpuTensor; dvCache: CpuTensor } {
  const go = asCpu(dOut).f32;
  const qs = asCpu(q).f32;
  const ks = asCpu(kCache).f32;
  const vs = asCpu(vCache).f32;
  const slot = asCpu(layout.slot).i32;
  const pos = asCpu(layout.pos).i32;
  assertShape(q.shape.length === 3 && kCache.shape.length === 4, `attentionBackward: q (${q.shape}), cache (${kCache.shape})`);
  const [T, Hq, D] = q.shape;
  const [S, maxT, Hkv] = kCache.shape;
  assertShape(Hkv > 0 && Hq % Hkv === 0 && kCache.shape[3] === D && go.length === qs.length, `attentionBackward: q (${q.shape}) vs cache (${kCache.shape})`);
  assertShape(vCache.shape.join() === kCache.shape.join(), `attentionBackward: v cache (${vCache.shape}) vs k cache (${kCache.shape})`);
  assertShape(slot.length === T && pos.length === T, `attentionBackward: layout of ${slot.length}/${pos.length} tokens for ${T}`);
  let work = 0;
  for (let t = 0; t < T; t++) {
    assertShape(slot[t] >= 0 && slot[t] < S && pos[t] >= 0 && pos[t] < maxT, `attentionBackward: slot ${slot[t]} pos ${pos[t]} outside cache`);
    work += pos[t] + 1;
  }
  const temps: Temps = [];
  try {
    const ptrs = [go, qs, ks, vs].map((a) => rt.place(a, temps));
    const dq = rt.output([T, Hq, D], temps);
    const dk = rt.output([S, maxT, Hkv, D], temps);
    const dv = rt.output([S, maxT, Hkv, D], temps);
    const n = S * maxT * Hkv * D;
    for (const o of [dq, dk, dv]) rt.heap.f32(o.ptr, o === dq ? qs.length : n).fill(0);
    const sl = rt.place(slot, temps);
    const ps = rt.place(pos, temps);
    const slots = [...ptrs, dq.ptr, dk.ptr, dv.ptr, sl, ps, T, Hq, Hkv, D, maxT, S, f32Bits(1 / Math.sqrt(D))];
    rt.launch('attentionBackward', slots, 2 * maxT * 4, 10 * work * Hq * D, temps);
    return { dq: dq.finish(), dkCache: dk.finish(), dvCache: dv.finish() };
  } finally {
    rt.release(temps);
  }
}
