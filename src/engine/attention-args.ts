// The attention op's arguments, opened once for every backend: q (T,Hq,D), the two caches (S,maxT,Hkv,D) of one
// shape with Hq a multiple of Hkv, slot and pos (T) i32, and for the backward dOut shaped like q. A backend adds
// only what is its own (WebGPU: head size and dispatch limits, cache shards; the CPU paths: each token's slot
// and position inside the cache, which needs the values).
import type { Tensor } from './backend';
import { assertShape } from './errors';

export interface AttentionDims {
  T: number;
  Hq: number;
  D: number;
  S: number;
  maxT: number;
  Hkv: number;
}

const numel = (t: Tensor) => t.shape.reduce((a, b) => a * b, 1);

/** The dimensions of an attention call, or a `shape` EngineError naming `op` and the arguments that disagree. */
export function attentionDims(op: string, q: Tensor, kCache: Tensor, vCache: Tensor, slot: Tensor, pos: Tensor, dOut?: Tensor): AttentionDims {
  assertShape(q.shape.length === 3 && kCache.shape.length === 4, `${op}: q (${q.shape}), cache (${kCache.shape})`);
  const [T, Hq, D] = q.shape;
  const [S, maxT, Hkv] = kCache.shape;
  assertShape(Hkv > 0 && Hq % Hkv === 0 && kCache.shape[3] === D, `${op}: q (${q.shape}) vs cache (${kCache.shape})`);
  assertShape(vCache.shape.join() === kCache.shape.join(), `${op}: v cache (${vCache.shape}) vs k cache (${kCache.shape})`);
  assertShape(slot.dtype === 'i32' && pos.dtype === 'i32' && numel(slot) === T && numel(pos) === T, `${op}: slot/pos must be (${T}) i32, got (${slot.shape}) ${slot.dtype} / (${pos.shape}) ${pos.dtype}`);
  if (dOut) assertShape(dOut.shape.join() === q.shape.join(), `${op}: dOut (${dOut.shape}) vs q (${q.shape})`);
  return { T, Hq, D, S, maxT, Hkv };
}
