// Grouped-query causal attention over the KV cache and its backward, on the wasm kernels of the backend's version:
// 3 (../kernels/attention3.ts, the default: version 2's blocking with less softmax work and its own scratch layout),
// 2 (tiled, ../kernels/attention2.ts) or 1 (the simple one, ../kernels/attention1.ts). Versions 2 and 3 take the
// same arguments and the same row blocks.
import type { Tensor, TokenLayout } from '../../../backend';
import { openAttention } from '../../attention-args';
import type { CpuTensor } from '../../tensor';
import { f32Bits, type Temps, type WasmRuntime } from '../runtime';

// q (T,Hq,D), caches (S,maxT,Hkv,D) -> (T,Hq,D)
export function attention(rt: WasmRuntime, q: Tensor, kCache: Tensor, vCache: Tensor, layout: TokenLayout): Tensor {
  const { qs, ks, vs, slot, pos, T, Hq, D, S, maxT, Hkv, work } = openAttention('attention', q, kCache, vCache, layout);
  const temps: Temps = [];
  try {
    const Q = rt.place(qs, temps);
    const Kc = rt.place(ks, temps);
    const Vc = rt.place(vs, temps);
    const sl = rt.place(slot, temps);
    const ps = rt.place(pos, temps);
    const out = rt.output([T, Hq, D], temps);
    const version = rt.attentionKernel;
    if (version === 1) {
      const slots = [Q, Kc, Vc, out.ptr, sl, ps, T, Hq, Hkv, D, maxT, f32Bits(1 / Math.sqrt(D))];
      rt.launch('attention1', slots, (Hq / Hkv) * maxT * 4, 4 * work * Hq * D, temps);
      return out.finish();
    }
    const group = Hq / Hkv;
    const { order, start } = bySlot(slot, pos, S);
    // blocks of up to ~32 query rows (tokens x the query heads of a kv head), tokens of one slot each,
    // longest first so that the threads' last items are short ones
    const per = Math.max(1, Math.floor(ROWS / group));
    const blocks: [number, number, number][] = [];
    for (let s = 0; s < S; s++)
      for (let b = start[s]; b < start[s + 1]; b += per) {
        const cnt = Math.min(per, start[s + 1] - b);
        let cost = 0;
        for (let i = b; i < b + cnt; i++) cost += pos[order[i]] + 1;
        blocks.push([b, cnt, cost]);
      }
    blocks.sort((x, y) => y[2] - x[2] || x[0] - y[0]);
    const bl = new Int32Array(2 * blocks.length);
    let most = 0;
    blocks.forEach(([b, c], i) => ((bl[2 * i] = b), (bl[2 * i + 1] = c), (most = Math.max(most, c))));
    const rows = roundUp(most * group, 4);
    const slots = [Q, Kc, Vc, out.ptr, rt.place(order, temps), ps, rt.place(bl, temps), blocks.length, Hq, Hkv, D, maxT, f32Bits(1 / Math.sqrt(D)), sl, rows];
    const scratch = version === 3 ? attention3Scratch(rows, D) : attention2Scratch(rows, D);
    rt.launch(version === 3 ? 'attention3' : 'attention2', slots, scratch, 4 * work * Hq * D, temps);
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
  const a = openAttention('attentionBackward', q, kCache, vCache, layout, dOut);
  const { qs, ks, vs, slot, pos, T, Hq, D, S, maxT, Hkv, work } = a;
  const go = a.go!;
  const temps: Temps = [];
  try {
    const ptrs = [go, qs, ks, vs].map((a) => rt.place(a, temps));
    const dq = rt.output([T, Hq, D], temps);
    const dk = rt.output([S, maxT, Hkv, D], temps);
    const dv = rt.output([S, maxT, Hkv, D], temps);
    const n = S * maxT * Hkv * D;
    for (const o of [dq, dk, dv]) rt.heap.f32(o.ptr, o === dq ? qs.length : n).fill(0);
    const ps = rt.place(pos, temps);
    const version = rt.attentionKernel;
    if (version === 1) {
      const slots = [...ptrs, dq.ptr, dk.ptr, dv.ptr, rt.place(slot, temps), ps, T, Hq, Hkv, D, maxT, S, f32Bits(1 / Math.sqrt(D))];
      rt.launch('attentionBackward1', slots, 2 * maxT * 4, 10 * work * Hq * D, temps);
    } else {
      const { order, start } = bySlot(slot, pos, S);
      let most = 0;
      for (let s = 0; s < S; s++) most = Math.max(most, start[s + 1] - start[s]);
      const rows = roundUp(most * (Hq / Hkv), 4);
      let keys = 0;
      for (let t = 0; t < T; t++) keys = Math.max(keys, pos[t] + 1);
      keys = roundUp(keys, BK);
      const slots = [...ptrs, dq.ptr, dk.ptr, dv.ptr, rt.place(order, temps), ps, rt.place(start, temps), Hq, Hkv, D, maxT, S, f32Bits(1 / Math.sqrt(D)), rows, keys];
      const scratch = version === 3 ? attentionBackward3Scratch(rows, keys, D) : attentionBackward2Scratch(rows, keys, D);
      rt.launch(version === 3 ? 'attentionBackward3' : 'attentionBackward2', slots, scratch, 10 * work * Hq * D, temps);
    }
    return { dq: dq.finish(), dkCache: dk.finish(), dvCache: dv.finish() };
  } finally {
    rt.release(temps);
  }
}

export type { AttentionVersion } from '../runtime';

/** Query rows per forward block of version 2 (tokens x the query heads sharing a kv head). */
const ROWS = 32;
/** Keys per block and query rows per backward tile in ../kernels/attention2.ts. */
const BK = 32;
const QB = 32;

const roundUp = (n: number, m: number) => Math.ceil(n / m) * m;

/**
 * The tokens grouped by slot, by position within a slot (then token order): slot s has order[start[s]..start[s + 1]).
 * Sorted by position, a block or tile of query rows sees a narrow range of keys, so the causal mask lets the
 * kernels skip whole key blocks whatever order the layout lists the tokens in.
 */
function bySlot(slot: Int32Array, pos: Int32Array, S: number): { order: Int32Array; start: Int32Array } {
  const start = new Int32Array(S + 1);
  for (const s of slot) start[s + 1]++;
  for (let s = 0; s < S; s++) start[s + 1] += start[s];
  const fill = start.slice(0, S);
  const order = new Int32Array(slot.length);
  for (let t = 0; t < slot.length; t++) order[fill[slot[t]]++] = t;
  for (let s = 0; s < S; s++) {
    const seg = order.subarray(start[s], start[s + 1]);
    let sorted = true;
    for (let i = 1; i < seg.length && sorted; i++) sorted = pos[seg[i - 1]] <= pos[seg[i]];
    if (!sorted) seg.set(Array.from(seg).sort((a, b) => pos[a] - pos[b] || a - b));
  }
  return { order, start };
}

/** Scratch bytes per thread of attention2 (its layout: Qs, Os, Kt, Vr, Sb, n, m, l). */
export function attention2Scratch(rows: number, D: number): number {
  const Dp = roundUp(D, 8);
  return 4 * (2 * rows * Dp + Dp * BK + BK * Dp + rows * BK + 3 * rows);
}

/** Scratch bytes per thread of attentionBackward2 (Qs, dOs, dQt, Kt, Vt, Kr, dKs, dVs, Ss, Ds, n, m, 1/l, D, tok, Mb). */
export function attentionBackward2Scratch(rows: number, keys: number, D: number): number {
  const Dp = roundUp(D, 8);
  return 4 * (2 * rows * Dp + QB * Dp + 5 * keys * Dp + 2 * QB * keys + 5 * rows + QB * (keys / BK));
}

/** Scratch bytes per thread of attention3 (attention2's layout: Qs, Os, Kt, Vr, Sb, n, m, l). */
export function attention3Scratch(rows: number, D: number): number {
  return attention2Scratch(rows, D);
}

/** Scratch bytes per thread of attentionBackward3 (Qs, dOs, dQt, Kt, Vt, Kr, dKs, dVs, Ss, Ds, n, m, tok). */
export function attentionBackward3Scratch(rows: number, keys: number, D: number): number {
  const Dp = roundUp(D, 8);
  return 4 * (2 * rows * Dp + QB * Dp + 5 * keys * Dp + 2 * QB * keys + 3 * rows);
}
