// The CPU attention op's arguments, opened once for its four entries: the reference's forward and backward
// (./ops/attention.ts) and the fast path's, which launch either kernel version (./fast/ops/attention.ts). The
// shape checks are every backend's (../attention-args.ts); what is added here needs the values, which a CPU
// backend holds and a GPU one does not: each token's slot and position inside the cache (reading outside it
// would give garbage, not an error), and the causal work Σ (pos + 1) that sizes the fast path's launches.
import { attentionDims, type AttentionDims } from '../attention-args';
import type { Tensor, TokenLayout } from '../backend';
import { assertShape } from '../errors';
import { asCpu } from './tensor';

export interface CpuAttentionArgs extends AttentionDims {
  qs: Float32Array;
  ks: Float32Array;
  vs: Float32Array;
  slot: Int32Array;
  pos: Int32Array;
  /** The backward's dOut (T,Hq,D); null for the forward. */
  go: Float32Array | null;
  /** Keys attended over all tokens and one head: Σ_t (pos[t] + 1). */
  work: number;
}

/** The checked arguments of an attention call, or a `shape` EngineError naming `op`. */
export function openAttention(op: string, q: Tensor, kCache: Tensor, vCache: Tensor, layout: TokenLayout, dOut?: Tensor): CpuAttentionArgs {
  const dims = attentionDims(op, q, kCache, vCache, layout.slot, layout.pos, dOut);
  const slot = asCpu(layout.slot).i32;
  const pos = asCpu(layout.pos).i32;
  let work = 0;
  for (let t = 0; t < dims.T; t++) {
    assertShape(slot[t] >= 0 && slot[t] < dims.S && pos[t] >= 0 && pos[t] < dims.maxT, `${op}: slot ${slot[t]} pos ${pos[t]} outside cache (${dims.S},${dims.maxT})`);
    work += pos[t] + 1;
  }
  return { ...dims, qs: asCpu(q).f32, ks: asCpu(kCache).f32, vs: asCpu(vCache).f32, slot, pos, go: dOut ? asCpu(dOut).f32 : null, work };
}
