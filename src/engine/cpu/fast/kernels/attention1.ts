// @ts-nocheck -- AssemblyScript (compiled by scripts/build-wasm.ts), not part of the TypeScript program.
//
// Attention, version 1 (the simple one, kept beside the tiled version 2 in ./attention2.ts as the
// readable statement of what it computes and as a benchmark baseline: bench/suites/attention.ts).
// Grouped-query causal attention over the KV cache (the contract in src/engine/backend.ts):
// q (T,Hq,D), caches (S,maxT,Hkv,D) -> out (T,Hq,D). Two passes per (token, head): scores and their
// max, then exp / sum and the probability-weighted sum of V, SIMD over D. The (token, kv-head) items
// are claimed one by one by the threads (causal rows have different lengths); the `group` query heads that
// share a kv head are done together so each K/V row is loaded once for all of them.
import { claim } from './sched';

@inline
function dot(a: usize, b: usize, D: i32): f32 {
  let s0 = f32x4.splat(0), s1 = f32x4.splat(0);
  let d = 0;
  for (; d + 8 <= D; d += 8) {
    const o = <usize>d << 2;
    s0 = f32x4.add(s0, f32x4.mul(v128.load(a + o), v128.load(b + o)));
    s1 = f32x4.add(s1, f32x4.mul(v128.load(a + o, 16), v128.load(b + o, 16)));
  }
  for (; d + 4 <= D; d += 4) {
    const o = <usize>d << 2;
    s0 = f32x4.add(s0, f32x4.mul(v128.load(a + o), v128.load(b + o)));
  }
  const s = f32x4.add(s0, s1);
  let r = (f32x4.extract_lane(s, 0) + f32x4.extract_lane(s, 1)) + (f32x4.extract_lane(s, 2) + f32x4.extract_lane(s, 3));
  for (; d < D; d++) r += load<f32>(a + (<usize>d << 2)) * load<f32>(b + (<usize>d << 2));
  return r;
}

// out[0..D) += p * v[0..D)
@inline
function axpy(out: usize, p: f32, v: usize, D: i32): void {
  const ps = f32x4.splat(p);
  let d = 0;
  for (; d + 4 <= D; d += 4) {
    const o = <usize>d << 2;
    v128.store(out + o, f32x4.add(v128.load(out + o), f32x4.mul(ps, v128.load(v + o))));
  }
  for (; d < D; d++) {
    const o = <usize>d << 2;
    store<f32>(out + o, load<f32>(out + o) + p * load<f32>(v + o));
  }
}

// args (i32 slots): 0 q, 1 kCache, 2 vCache, 3 out, 4 slot (T i32), 5 pos (T i32), 6 T, 7 Hq, 8 Hkv, 9 D,
// 10 maxT, 11 scale (f32 bits), 12 scratch base, 13 scratch bytes per thread (>= group * maxT * 4).
// slot/pos must already be validated by the caller.
export function attention1(args: usize, tid: i32, nth: i32): void {
  const Q = <usize>load<u32>(args);
  const Kc = <usize>load<u32>(args, 4);
  const Vc = <usize>load<u32>(args, 8);
  const O = <usize>load<u32>(args, 12);
  const slot = <usize>load<u32>(args, 16);
  const pos = <usize>load<u32>(args, 20);
  const T = load<i32>(args, 24);
  const Hq = load<i32>(args, 28);
  const Hkv = load<i32>(args, 32);
  const D = load<i32>(args, 36);
  const maxT = load<i32>(args, 40);
  const scale = load<f32>(args, 44);
  const scores = <usize>load<u32>(args, 48) + <usize>tid * <usize>load<u32>(args, 52);
  const group = Hq / Hkv;
  const rowBytes = <usize>D << 2;
  const kvRow = <usize>Hkv * rowBytes; // bytes between positions in the cache
  const items = T * Hkv;
  for (let it = claim(args); it < items; it = claim(args)) {
    const t = it / Hkv;
    const kvh = it - t * Hkv;
    const n = load<i32>(pos + (<usize>t << 2)) + 1;
    const base = (<usize>load<i32>(slot + (<usize>t << 2)) * <usize>maxT) * kvRow + <usize>kvh * rowBytes;
    const h0 = kvh * group;
    // Pass 1: scores (group x n) and each head's max.
    for (let g = 0; g < group; g++) {
      const q = Q + (<usize>(t * Hq + h0 + g)) * rowBytes;
      const sc = scores + (<usize>(g * n) << 2);
      let mx = -Infinity as f32;
      for (let j = 0; j < n; j++) {
        const s = dot(q, Kc + base + <usize>j * kvRow, D) * scale;
        store<f32>(sc + (<usize>j << 2), s);
        mx = max(mx, s);
      }
      let sum: f32 = 0;
      for (let j = 0; j < n; j++) {
        const p = Mathf.exp(load<f32>(sc + (<usize>j << 2)) - mx);
        store<f32>(sc + (<usize>j << 2), p);
        sum += p;
      }
      const inv: f32 = 1 / sum;
      for (let j = 0; j < n; j++) store<f32>(sc + (<usize>j << 2), load<f32>(sc + (<usize>j << 2)) * inv);
      memory.fill(O + (<usize>(t * Hq + h0 + g)) * rowBytes, 0, rowBytes);
    }
    // Pass 2: out_g += p_g[j] * V[j], each V row loaded once for the whole group.
    for (let j = 0; j < n; j++) {
      const v = Vc + base + <usize>j * kvRow;
      for (let g = 0; g < group; g++) {
        axpy(O + (<usize>(t * Hq + h0 + g)) * rowBytes, load<f32>(scores + (<usize>(g * n + j) << 2)), v, D);
      }
    }
  }
}

// Backward of `attention1` (recomputes the probabilities; nothing is saved by the forward):
// dOut, q (T,Hq,D), caches (S,maxT,Hkv,D) -> dq (T,Hq,D), dk, dv (S,maxT,Hkv,D) (zeroed by the caller).
// Many tokens add into the same cache rows, so work is split by (slot, kv head): each item owns its
// dk/dv rows and the dq rows of its query heads, and threads never write the same bytes.
// args: 0 dOut, 1 q, 2 kCache, 3 vCache, 4 dq, 5 dk, 6 dv, 7 slot, 8 pos, 9 T, 10 Hq, 11 Hkv, 12 D,
// 13 maxT, 14 S, 15 scale (f32 bits), 16 scratch base, 17 scratch bytes per thread (>= 2 * maxT * 4).
export function attentionBackward1(args: usize, tid: i32, nth: i32): void {
  const G = <usize>load<u32>(args);
  const Q = <usize>load<u32>(args, 4);
  const Kc = <usize>load<u32>(args, 8);
  const Vc = <usize>load<u32>(args, 12);
  const dQ = <usize>load<u32>(args, 16);
  const dK = <usize>load<u32>(args, 20);
  const dV = <usize>load<u32>(args, 24);
  const slot = <usize>load<u32>(args, 28);
  const pos = <usize>load<u32>(args, 32);
  const T = load<i32>(args, 36);
  const Hq = load<i32>(args, 40);
  const Hkv = load<i32>(args, 44);
  const D = load<i32>(args, 48);
  const maxT = load<i32>(args, 52);
  const S = load<i32>(args, 56);
  const scale = load<f32>(args, 60);
  const p = <usize>load<u32>(args, 64) + <usize>tid * <usize>load<u32>(args, 68);
  const dp = p + (<usize>maxT << 2);
  const group = Hq / Hkv;
  const rowBytes = <usize>D << 2;
  const kvRow = <usize>Hkv * rowBytes;
  const items = S * Hkv;
  for (let it = claim(args); it < items; it = claim(args)) {
    const s = it / Hkv;
    const kvh = it - s * Hkv;
    const base = <usize>s * <usize>maxT * kvRow + <usize>kvh * rowBytes;
    for (let t = 0; t < T; t++) {
      if (load<i32>(slot + (<usize>t << 2)) != s) continue;
      const n = load<i32>(pos + (<usize>t << 2)) + 1;
      for (let g = 0; g < group; g++) {
        const qo = (<usize>(t * Hq + kvh * group + g)) * rowBytes;
        const q = Q + qo;
        const go = G + qo;
        let mx = -Infinity as f32;
        for (let j = 0; j < n; j++) {
          const sc = dot(q, Kc + base + <usize>j * kvRow, D) * scale;
          store<f32>(p + (<usize>j << 2), sc);
          mx = max(mx, sc);
        }
        let sum: f32 = 0;
        for (let j = 0; j < n; j++) {
          const e = Mathf.exp(load<f32>(p + (<usize>j << 2)) - mx);
          store<f32>(p + (<usize>j << 2), e);
          sum += e;
        }
        const inv: f32 = 1 / sum;
        let pdp: f32 = 0;
        for (let j = 0; j < n; j++) {
          const pj = load<f32>(p + (<usize>j << 2)) * inv;
          store<f32>(p + (<usize>j << 2), pj);
          const d = dot(go, Vc + base + <usize>j * kvRow, D);
          store<f32>(dp + (<usize>j << 2), d);
          pdp += pj * d;
        }
        for (let j = 0; j < n; j++) {
          const pj = load<f32>(p + (<usize>j << 2));
          const ds = pj * (load<f32>(dp + (<usize>j << 2)) - pdp) * scale;
          const o = base + <usize>j * kvRow;
          axpy(dQ + qo, ds, Kc + o, D);
          axpy(dK + o, ds, q, D);
          axpy(dV + o, pj, go, D);
        }
      }
    }
  }
}
