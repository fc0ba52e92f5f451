// @ts-nocheck -- AssemblyScript (compiled by scripts/build-wasm.ts), not part of the TypeScript program.
//
// Attention, version 2: tiled (FlashAttention-style) grouped-query causal attention over the KV cache and its
// backward. Same contract as version 1 (./attention1.ts, the simple statement of it): q (T,Hq,D), caches
// (S,maxT,Hkv,D) -> out (T,Hq,D), each token t seeing keys 0..pos[t] of cache slot slot[t].
//
// Query rows are the (token, query head) pairs of one slot that share a kv head, copied into a contiguous
// block; keys come in blocks of BK. Per key block: K transposed (D x BK) and V copied into scratch once for all
// the block's rows; scores of 4 rows x 8 keys per register tile (no horizontal sums: the 8 keys lie across
// lanes); a softmax carried from block to block (running max and sum, the output rescaled when the max grows);
// exp vectorised (vexp, ./simd.ts); the probability-weighted sum of V rows as 4 rows x 8 values per register tile.
//
// The backward recomputes the probabilities (the forward saves nothing): a first pass over the key blocks gets
// each row's max, sum and D_i = sum_j p_ij dp_ij (dp = dOut . v); a second, key block by key block, forms
// p and ds = p (dp - D_i) scale for all rows and accumulates dV and dK of the block in scratch (written once per
// key block) and dQ of every row in scratch (written once per item).
//
// Numerics: every score is the same sequence of f32 operations whatever the tiling, thread count or batch, so a
// row's result depends only on its own inputs (prefill and decode of the same token agree bit for bit, as with
// version 1); but the order of operations differs from version 1 (the sum of exponentials is accumulated
// unnormalised and divided at the end, exp is a polynomial), so versions 1 and 2 agree to ~1e-7, not bit for
// bit. Both are checked against the f64 reference with a tolerance (test/engine/cpu-fast*.test.ts).
// `madd` (./simd.ts) is a*b+c: a separate multiply and add in the strict build, f32x4.relaxed_madd (fused or
// not, depending on the machine) in the relaxed one.
import { claim } from './sched';
import { madd, vexp } from './simd';

/** Keys per block (a multiple of 8: the register tiles span 8 keys). */
const BK: i32 = 32;
/** Bytes of a row of a (rows x BK) tile, or of a (D x BK) transposed block. */
const BKB: usize = 128;
/** Query rows per tile in the backward's products (a multiple of 4). */
const QB: i32 = 32;


@inline
function hsum(v: v128): f32 {
  return (f32x4.extract_lane(v, 0) + f32x4.extract_lane(v, 1)) + (f32x4.extract_lane(v, 2) + f32x4.extract_lane(v, 3));
}

@inline
function hmax(v: v128): f32 {
  return max(max(f32x4.extract_lane(v, 0), f32x4.extract_lane(v, 1)), max(f32x4.extract_lane(v, 2), f32x4.extract_lane(v, 3)));
}

// out (4 x 8, rows os bytes apart) = scale * a (4 rows, `as` bytes apart) . bt (D x 8 of a D x BK block).
@inline
function dot4x8(a: usize, as: usize, bt: usize, D: i32, out: usize, os: usize, scale: v128): void {
  let c00 = f32x4.splat(0), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
  const a1 = a + as, a2 = a1 + as, a3 = a2 + as;
  let pb = bt;
  for (let o: usize = 0, e = <usize>D << 2; o < e; o += 4, pb += BKB) {
    const b0 = v128.load(pb), b1 = v128.load(pb, 16);
    let x = v128.load32_splat(a + o);
    c00 = madd(x, b0, c00); c01 = madd(x, b1, c01);
    x = v128.load32_splat(a1 + o);
    c10 = madd(x, b0, c10); c11 = madd(x, b1, c11);
    x = v128.load32_splat(a2 + o);
    c20 = madd(x, b0, c20); c21 = madd(x, b1, c21);
    x = v128.load32_splat(a3 + o);
    c30 = madd(x, b0, c30); c31 = madd(x, b1, c31);
  }
  const o1 = out + os, o2 = o1 + os, o3 = o2 + os;
  v128.store(out, f32x4.mul(c00, scale)); v128.store(out, f32x4.mul(c01, scale), 16);
  v128.store(o1, f32x4.mul(c10, scale)); v128.store(o1, f32x4.mul(c11, scale), 16);
  v128.store(o2, f32x4.mul(c20, scale)); v128.store(o2, f32x4.mul(c21, scale), 16);
  v128.store(o3, f32x4.mul(c30, scale)); v128.store(o3, f32x4.mul(c31, scale), 16);
}

// out (4 rows, os bytes apart, 8 values) += p (4 x kn, rows pst bytes apart) . y (kn rows, ys bytes apart, 8 values).
@inline
function acc4x8(p: usize, pst: usize, y: usize, ys: usize, kn: i32, out: usize, os: usize): void {
  const p1 = p + pst, p2 = p1 + pst, p3 = p2 + pst;
  const o1 = out + os, o2 = o1 + os, o3 = o2 + os;
  let c00 = v128.load(out), c01 = v128.load(out, 16), c10 = v128.load(o1), c11 = v128.load(o1, 16);
  let c20 = v128.load(o2), c21 = v128.load(o2, 16), c30 = v128.load(o3), c31 = v128.load(o3, 16);
  let py = y;
  for (let o: usize = 0, e = <usize>kn << 2; o < e; o += 4, py += ys) {
    const b0 = v128.load(py), b1 = v128.load(py, 16);
    let x = v128.load32_splat(p + o);
    c00 = madd(x, b0, c00); c01 = madd(x, b1, c01);
    x = v128.load32_splat(p1 + o);
    c10 = madd(x, b0, c10); c11 = madd(x, b1, c11);
    x = v128.load32_splat(p2 + o);
    c20 = madd(x, b0, c20); c21 = madd(x, b1, c21);
    x = v128.load32_splat(p3 + o);
    c30 = madd(x, b0, c30); c31 = madd(x, b1, c31);
  }
  v128.store(out, c00); v128.store(out, c01, 16); v128.store(o1, c10); v128.store(o1, c11, 16);
  v128.store(o2, c20); v128.store(o2, c21, 16); v128.store(o3, c30); v128.store(o3, c31, 16);
}

// dot4x8 and acc4x8 for 2 rows (a tile whose last two rows are padding or see no key of the block: a decode
// step's 2 query heads per kv head). Each value is the same sequence of operations as in the 4-row kernels.
@inline
function dot2x8(a: usize, as: usize, bt: usize, D: i32, out: usize, os: usize, scale: v128): void {
  let c00 = f32x4.splat(0), c01 = c00, c10 = c00, c11 = c00;
  const a1 = a + as;
  let pb = bt;
  for (let o: usize = 0, e = <usize>D << 2; o < e; o += 4, pb += BKB) {
    const b0 = v128.load(pb), b1 = v128.load(pb, 16);
    let x = v128.load32_splat(a + o);
    c00 = madd(x, b0, c00); c01 = madd(x, b1, c01);
    x = v128.load32_splat(a1 + o);
    c10 = madd(x, b0, c10); c11 = madd(x, b1, c11);
  }
  v128.store(out, f32x4.mul(c00, scale)); v128.store(out, f32x4.mul(c01, scale), 16);
  v128.store(out + os, f32x4.mul(c10, scale)); v128.store(out + os, f32x4.mul(c11, scale), 16);
}

@inline
function acc2x8(p: usize, pst: usize, y: usize, ys: usize, kn: i32, out: usize, os: usize): void {
  const p1 = p + pst, o1 = out + os;
  let c00 = v128.load(out), c01 = v128.load(out, 16), c10 = v128.load(o1), c11 = v128.load(o1, 16);
  let py = y;
  for (let o: usize = 0, e = <usize>kn << 2; o < e; o += 4, py += ys) {
    const b0 = v128.load(py), b1 = v128.load(py, 16);
    let x = v128.load32_splat(p + o);
    c00 = madd(x, b0, c00); c01 = madd(x, b1, c01);
    x = v128.load32_splat(p1 + o);
    c10 = madd(x, b0, c10); c11 = madd(x, b1, c11);
  }
  v128.store(out, c00); v128.store(out, c01, 16); v128.store(o1, c10); v128.store(o1, c11, 16);
}

// out (4 key rows, os bytes apart, 8 values) += a^T (the 4 columns at a of `rows` rows ast bytes apart) . b (rows, bs apart, 8 values).
@inline
function accT4x8(a: usize, ast: usize, b: usize, bs: usize, rows: i32, out: usize, os: usize): void {
  const o1 = out + os, o2 = o1 + os, o3 = o2 + os;
  let c00 = v128.load(out), c01 = v128.load(out, 16), c10 = v128.load(o1), c11 = v128.load(o1, 16);
  let c20 = v128.load(o2), c21 = v128.load(o2, 16), c30 = v128.load(o3), c31 = v128.load(o3, 16);
  let pa = a, pb = b;
  for (let i = 0; i < rows; i++, pa += ast, pb += bs) {
    const b0 = v128.load(pb), b1 = v128.load(pb, 16);
    let x = v128.load32_splat(pa);
    c00 = madd(x, b0, c00); c01 = madd(x, b1, c01);
    x = v128.load32_splat(pa, 4);
    c10 = madd(x, b0, c10); c11 = madd(x, b1, c11);
    x = v128.load32_splat(pa, 8);
    c20 = madd(x, b0, c20); c21 = madd(x, b1, c21);
    x = v128.load32_splat(pa, 12);
    c30 = madd(x, b0, c30); c31 = madd(x, b1, c31);
  }
  v128.store(out, c00); v128.store(out, c01, 16); v128.store(o1, c10); v128.store(o1, c11, 16);
  v128.store(o2, c20); v128.store(o2, c21, 16); v128.store(o3, c30); v128.store(o3, c31, 16);
}

// dst (D x BK) = the kn cache rows at src (kvRow bytes apart), transposed: 4 x 4 blocks through shuffles, the
// edges one value at a time. Columns from kn on are left as they are: every consumer masks the keys past a row's
// last one.
@inline
function loadT(dst: usize, src: usize, kvRow: usize, kn: i32, D: i32): void {
  const D4 = D & ~3;
  let j = 0;
  for (; j + 4 <= kn; j += 4) {
    const s0 = src + <usize>j * kvRow, s1 = s0 + kvRow, s2 = s1 + kvRow, s3 = s2 + kvRow;
    const d0 = dst + (<usize>j << 2);
    for (let d = 0; d < D4; d += 4) {
      const o = <usize>d << 2;
      const r0 = v128.load(s0 + o), r1 = v128.load(s1 + o), r2 = v128.load(s2 + o), r3 = v128.load(s3 + o);
      const t0 = i32x4.shuffle(r0, r1, 0, 4, 1, 5), t1 = i32x4.shuffle(r0, r1, 2, 6, 3, 7);
      const t2 = i32x4.shuffle(r2, r3, 0, 4, 1, 5), t3 = i32x4.shuffle(r2, r3, 2, 6, 3, 7);
      const p = d0 + <usize>d * BKB;
      v128.store(p, i32x4.shuffle(t0, t2, 0, 1, 4, 5));
      v128.store(p + BKB, i32x4.shuffle(t0, t2, 2, 3, 6, 7));
      v128.store(p + 2 * BKB, i32x4.shuffle(t1, t3, 0, 1, 4, 5));
      v128.store(p + 3 * BKB, i32x4.shuffle(t1, t3, 2, 3, 6, 7));
    }
    for (let d = D4; d < D; d++) {
      const p = d0 + <usize>d * BKB, o = <usize>d << 2;
      store<f32>(p, load<f32>(s0 + o));
      store<f32>(p, load<f32>(s1 + o), 4);
      store<f32>(p, load<f32>(s2 + o), 8);
      store<f32>(p, load<f32>(s3 + o), 12);
    }
  }
  for (; j < kn; j++) {
    const s = src + <usize>j * kvRow;
    const d0 = dst + (<usize>j << 2);
    for (let d = 0; d < D; d++) store<f32>(d0 + <usize>d * BKB, load<f32>(s + (<usize>d << 2)));
  }
}

// dst (kn rows, ps bytes apart, zero-padded from D to ps/4 values) = the kn cache rows at src.
@inline
function loadRows(dst: usize, src: usize, kvRow: usize, kn: i32, rowBytes: usize, ps: usize): void {
  for (let j = 0; j < kn; j++) {
    const d = dst + <usize>j * ps;
    memory.copy(d, src + <usize>j * kvRow, rowBytes);
    if (ps > rowBytes) memory.fill(d + rowBytes, 0, ps - rowBytes);
  }
}

// out[0..D) = row (ps-strided scratch) * s
@inline
function storeScaled(out: usize, row: usize, s: f32, D: i32): void {
  const vs = f32x4.splat(s);
  let d = 0;
  for (; d + 4 <= D; d += 4) v128.store(out + (<usize>d << 2), f32x4.mul(v128.load(row + (<usize>d << 2)), vs));
  for (; d < D; d++) store<f32>(out + (<usize>d << 2), load<f32>(row + (<usize>d << 2)) * s);
}

/** Whether rows r+2 and r+3 see no key of the block at kb (the 2-row kernels do). */
@inline
function halfTile(nr: usize, r: i32, kb: i32): bool {
  const p = nr + (<usize>r << 2);
  return max(load<i32>(p, 8), load<i32>(p, 12)) <= kb;
}

@inline
function maxN(nr: usize, r: i32): i32 {
  const p = nr + (<usize>r << 2);
  return max(max(load<i32>(p), load<i32>(p, 4)), max(load<i32>(p, 8), load<i32>(p, 12)));
}

// args (i32 slots): 0 q, 1 kCache, 2 vCache, 3 out, 4 order (T i32: the tokens grouped by slot), 5 pos (T i32),
// 6 blocks (i32 pairs: start in `order`, token count; the tokens of a block share a slot), 7 block count, 8 Hq,
// 9 Hkv, 10 D, 11 maxT, 12 scale (f32 bits), 13 slot (T i32), 14 rows (the most query rows of a block, a multiple
// of 4), 15 scratch base, 16 scratch bytes per thread (attention2Scratch in ../ops/attention.ts).
// Work items are (block, kv head); slot/pos must already be validated by the caller.
export function attention2(args: usize, tid: i32, nth: i32): void {
  const Q = <usize>load<u32>(args);
  const Kc = <usize>load<u32>(args, 4);
  const Vc = <usize>load<u32>(args, 8);
  const O = <usize>load<u32>(args, 12);
  const order = <usize>load<u32>(args, 16);
  const pos = <usize>load<u32>(args, 20);
  const blocks = <usize>load<u32>(args, 24);
  const nBlocks = load<i32>(args, 28);
  const Hq = load<i32>(args, 32);
  const Hkv = load<i32>(args, 36);
  const D = load<i32>(args, 40);
  const maxT = load<i32>(args, 44);
  const scale = f32x4.splat(load<f32>(args, 48));
  const slot = <usize>load<u32>(args, 52);
  const R = load<i32>(args, 56);
  const group = Hq / Hkv;
  const rowBytes = <usize>D << 2;
  const kvRow = <usize>Hkv * rowBytes;
  const Dp = (D + 7) & ~7;
  const ps = <usize>Dp << 2;
  // scratch: Qs, Os (R x Dp), Kt (D x BK), Vr (BK x Dp), Sb (R x BK), n, m, l (R)
  const Qs = <usize>load<u32>(args, 60) + <usize>tid * <usize>load<u32>(args, 64);
  const Os = Qs + <usize>R * ps;
  const Kt = Os + <usize>R * ps;
  const Vr = Kt + <usize>Dp * BKB;
  const Sb = Vr + <usize>BK * ps;
  const nr = Sb + <usize>R * BKB;
  const mr = nr + (<usize>R << 2);
  const lr = mr + (<usize>R << 2);
  const items = nBlocks * Hkv;
  for (let it = claim(args); it < items; it = claim(args)) {
    const b = it / Hkv;
    const kvh = it - b * Hkv;
    const start = load<i32>(blocks + (<usize>b << 3));
    const cnt = load<i32>(blocks + (<usize>b << 3), 4);
    const t0 = load<i32>(order + (<usize>start << 2));
    const base = <usize>load<i32>(slot + (<usize>t0 << 2)) * <usize>maxT * kvRow + <usize>kvh * rowBytes;
    const rows = cnt * group;
    const R4 = (rows + 3) & ~3;
    let nmax = 0;
    for (let r = 0; r < R4; r++) {
      const rb = <usize>r << 2;
      memory.fill(Os + <usize>r * ps, 0, ps);
      store<f32>(mr + rb, -Infinity);
      store<f32>(lr + rb, 0);
      if (r < rows) {
        const ti = r / group;
        const t = load<i32>(order + (<usize>(start + ti) << 2));
        memory.copy(Qs + <usize>r * ps, Q + <usize>(t * Hq + kvh * group + r - ti * group) * rowBytes, rowBytes);
        const n = load<i32>(pos + (<usize>t << 2)) + 1;
        store<i32>(nr + rb, n);
        nmax = max(nmax, n);
      } else store<i32>(nr + rb, 0); // padding: sees no key, never written out
    }
    for (let kb = 0; kb < nmax; kb += BK) {
      const kn = min(BK, nmax - kb);
      const src = base + <usize>kb * kvRow;
      loadT(Kt, Kc + src, kvRow, kn, D);
      // V rows: read in place when a row is a whole number of 8-value columns, else copied with zero padding
      let vr = Vc + src, vs = kvRow;
      if (Dp != D) {
        loadRows(Vr, Vc + src, kvRow, kn, rowBytes, ps);
        vr = Vr;
        vs = ps;
      }
      // scores, 4 rows x 8 keys at a time (2 when the last two rows see no key here), as far as the tile's rows see
      for (let r = 0; r < R4; r += 4) {
        const lim = min(kn, maxN(nr, r) - kb);
        const half = halfTile(nr, r, kb);
        for (let j = 0; j < lim; j += 8) {
          const jo = <usize>j << 2;
          if (half) dot2x8(Qs + <usize>r * ps, ps, Kt + jo, D, Sb + <usize>r * BKB + jo, BKB, scale);
          else dot4x8(Qs + <usize>r * ps, ps, Kt + jo, D, Sb + <usize>r * BKB + jo, BKB, scale);
        }
      }
      // the softmax carried over key blocks: mask, block max, rescale, exp
      for (let r = 0; r < R4; r++) {
        const rb = <usize>r << 2;
        const srow = Sb + <usize>r * BKB;
        const lim = load<i32>(nr + rb) - kb;
        if (lim <= 0) continue; // the PV tile stops at lim: p past a row's last key is zeroed below
        const lv = i32x4.splat(lim);
        let idx = i32x4(0, 1, 2, 3);
        let vm = f32x4.splat(-Infinity);
        for (let j = 0; j < BK; j += 4) {
          const o = <usize>j << 2;
          const s = v128.bitselect(v128.load(srow + o), f32x4.splat(-Infinity), i32x4.lt_s(idx, lv));
          v128.store(srow + o, s);
          vm = f32x4.pmax(vm, s);
          idx = i32x4.add(idx, i32x4.splat(4));
        }
        const m0 = load<f32>(mr + rb);
        const m = max(m0, hmax(vm));
        const vmx = f32x4.splat(m);
        let vs = f32x4.splat(0);
        for (let j = 0; j < BK; j += 4) {
          const o = <usize>j << 2;
          const e = vexp(f32x4.sub(v128.load(srow + o), vmx));
          v128.store(srow + o, e);
          vs = f32x4.add(vs, e);
        }
        const l0 = load<f32>(lr + rb);
        if (m0 != m && l0 != 0) {
          const alpha = Mathf.exp(m0 - m);
          store<f32>(lr + rb, l0 * alpha + hsum(vs));
          const va = f32x4.splat(alpha);
          const orow = Os + <usize>r * ps;
          for (let o: usize = 0; o < ps; o += 16) v128.store(orow + o, f32x4.mul(v128.load(orow + o), va));
        } else store<f32>(lr + rb, l0 + hsum(vs));
        store<f32>(mr + rb, m);
      }
      // out += p . V, 4 rows x 8 values at a time
      for (let r = 0; r < R4; r += 4) {
        const lim = min(kn, maxN(nr, r) - kb);
        if (lim <= 0) continue;
        // rows of the tile that see fewer keys have p = 0 there, or (all masked) a stale row: zero it
        for (let i = 0; i < 4; i++) if (load<i32>(nr + (<usize>(r + i) << 2)) <= kb) memory.fill(Sb + <usize>(r + i) * BKB, 0, BKB);
        if (halfTile(nr, r, kb)) for (let d: usize = 0; d < ps; d += 32) acc2x8(Sb + <usize>r * BKB, BKB, vr + d, vs, lim, Os + <usize>r * ps + d, ps);
        else for (let d: usize = 0; d < ps; d += 32) acc4x8(Sb + <usize>r * BKB, BKB, vr + d, vs, lim, Os + <usize>r * ps + d, ps);
      }
    }
    for (let r = 0; r < rows; r++) {
      const ti = r / group;
      const t = load<i32>(order + (<usize>(start + ti) << 2));
      storeScaled(O + <usize>(t * Hq + kvh * group + r - ti * group) * rowBytes, Os + <usize>r * ps, 1 / load<f32>(lr + (<usize>r << 2)), D);
    }
  }
}

// Backward of `attention2`: dOut, q (T,Hq,D), caches (S,maxT,Hkv,D) -> dq (T,Hq,D), dk, dv (S,maxT,Hkv,D) (dk
// and dv zeroed by the caller; rows past a slot's last key stay 0). Items are (slot, kv head): each owns its dk/dv
// rows and the dq rows of its query heads, so threads never write the same bytes. Per item, the slot's keys are
// transposed once; then tiles of QB query rows: pass A computes the scores s and dp = dOut . v for every key the
// tile sees (kept in scratch: QB x keys) with each row's max, sum and D = sum_j p_j dp_j carried over key blocks,
// and keeps exp(s - the running max) in place of s; pass B rescales those to p (one exp per row and key block) and
// forms ds = p (dp - D) scale and accumulates dV += p^T dOut, dK += ds^T q (the slot's
// dK/dV in scratch, 4 keys x 8 values per register tile over the QB rows) and the tile's dq += ds K.
// 10 flops per (row, key, value): s, dp, dV, dK, dq.
// args: 0 dOut, 1 q, 2 kCache, 3 vCache, 4 dq, 5 dk, 6 dv, 7 order (T i32: tokens grouped by slot), 8 pos,
// 9 slotStart (S+1 i32: slot s's tokens are order[slotStart[s]..slotStart[s+1])), 10 Hq, 11 Hkv, 12 D, 13 maxT,
// 14 S, 15 scale (f32 bits), 16 rows (the most query rows of a slot, a multiple of 4), 17 keys (the most keys a
// token sees, rounded up to BK), 18 scratch base, 19 scratch bytes per thread (attentionBackward2Scratch in
// ../ops/attention.ts).
export function attentionBackward2(args: usize, tid: i32, nth: i32): void {
  const G = <usize>load<u32>(args);
  const Q = <usize>load<u32>(args, 4);
  const Kc = <usize>load<u32>(args, 8);
  const Vc = <usize>load<u32>(args, 12);
  const dQ = <usize>load<u32>(args, 16);
  const dK = <usize>load<u32>(args, 20);
  const dV = <usize>load<u32>(args, 24);
  const order = <usize>load<u32>(args, 28);
  const pos = <usize>load<u32>(args, 32);
  const slotStart = <usize>load<u32>(args, 36);
  const Hq = load<i32>(args, 40);
  const Hkv = load<i32>(args, 44);
  const D = load<i32>(args, 48);
  const maxT = load<i32>(args, 52);
  const S = load<i32>(args, 56);
  const scale = f32x4.splat(load<f32>(args, 60));
  const R = load<i32>(args, 64);
  const NP = load<i32>(args, 68);
  const group = Hq / Hkv;
  const rowBytes = <usize>D << 2;
  const kvRow = <usize>Hkv * rowBytes;
  const Dp = (D + 7) & ~7;
  const ps = <usize>Dp << 2;
  const SP = <usize>NP << 2; // a row of the tile's scores
  const TB = <usize>Dp * BKB; // a transposed key block
  const one = f32x4.splat(1);
  // scratch: Qs, dOs (R x Dp), dQt (QB x Dp), Kt, Vt (NP/BK transposed blocks), Kr, dKs, dVs (NP x Dp),
  // Ss, Ds (QB x NP), n, m, 1/l, D, tok (R), Mb (QB x NP/BK)
  const Qs = <usize>load<u32>(args, 72) + <usize>tid * <usize>load<u32>(args, 76);
  const dOs = Qs + <usize>R * ps;
  const dQt = dOs + <usize>R * ps;
  const Kt = dQt + <usize>QB * ps;
  const Vt = Kt + <usize>NP * ps;
  const Kr = Vt + <usize>NP * ps;
  const dKs = Kr + <usize>NP * ps;
  const dVs = dKs + <usize>NP * ps;
  const Ss = dVs + <usize>NP * ps;
  const Ds = Ss + <usize>QB * SP;
  const nr = Ds + <usize>QB * SP;
  const mr = nr + (<usize>R << 2);
  const ir = mr + (<usize>R << 2);
  const dd = ir + (<usize>R << 2);
  const tok = dd + (<usize>R << 2);
  const NB = NP / BK;
  const Mb = tok + (<usize>R << 2); // QB x NB: the running max each block's exponentials in pass A are relative to
  const items = S * Hkv;
  for (let it = claim(args); it < items; it = claim(args)) {
    const s = it / Hkv;
    const kvh = it - s * Hkv;
    const start = load<i32>(slotStart + (<usize>s << 2));
    const cnt = load<i32>(slotStart + (<usize>s << 2), 4) - start;
    if (cnt == 0) continue;
    const base = <usize>s * <usize>maxT * kvRow + <usize>kvh * rowBytes;
    const rows = cnt * group;
    const R4 = (rows + 3) & ~3;
    let nmax = 0;
    for (let r = 0; r < R4; r++) {
      const rb = <usize>r << 2;
      memory.fill(Qs + <usize>r * ps, 0, ps);
      memory.fill(dOs + <usize>r * ps, 0, ps);
      store<f32>(mr + rb, -Infinity);
      store<f32>(ir + rb, 0); // the sum of exponentials until the end of pass A, then its inverse
      store<f32>(dd + rb, 0);
      if (r < rows) {
        const ti = r / group;
        const t = load<i32>(order + (<usize>(start + ti) << 2));
        const row = t * Hq + kvh * group + r - ti * group;
        store<i32>(tok + rb, row);
        memory.copy(Qs + <usize>r * ps, Q + <usize>row * rowBytes, rowBytes);
        memory.copy(dOs + <usize>r * ps, G + <usize>row * rowBytes, rowBytes);
        const n = load<i32>(pos + (<usize>t << 2)) + 1;
        store<i32>(nr + rb, n);
        nmax = max(nmax, n);
      } else store<i32>(nr + rb, 0); // padding: sees no key, contributes nothing
    }
    // the slot's keys: K and V transposed block by block, K as rows; dK, dV accumulators
    for (let kb = 0; kb < nmax; kb += BK) {
      const src = base + <usize>kb * kvRow;
      const kn = min(BK, nmax - kb);
      loadT(Kt + <usize>(kb / BK) * TB, Kc + src, kvRow, kn, D);
      loadT(Vt + <usize>(kb / BK) * TB, Vc + src, kvRow, kn, D);
    }
    // K rows for dq += ds K: in place when a row is a whole number of 8-value columns, else copied padded
    let kr = Kc + base, ks = kvRow;
    if (Dp != D) {
      loadRows(Kr, Kc + base, kvRow, nmax, rowBytes, ps);
      kr = Kr;
      ks = ps;
    }
    const n4 = <usize>((nmax + 3) & ~3) * ps;
    memory.fill(dKs, 0, n4);
    memory.fill(dVs, 0, n4);
    for (let q0 = 0; q0 < R4; q0 += QB) {
      const qn = min(QB, R4 - q0);
      let tmax = 0;
      for (let r = 0; r < qn; r += 4) tmax = max(tmax, maxN(nr, q0 + r));
      if (tmax == 0) continue;
      // Pass A: s and dp for every key the tile sees; per row max, sum, D carried over key blocks.
      for (let kb = 0; kb < tmax; kb += BK) {
        const kn = min(BK, tmax - kb);
        const ktb = Kt + <usize>(kb / BK) * TB;
        const vtb = Vt + <usize>(kb / BK) * TB;
        const kb4 = <usize>kb << 2;
        for (let r = 0; r < qn; r += 4) {
          const lim = min(kn, maxN(nr, q0 + r) - kb);
          if (lim <= 0) continue;
          for (let j = 0; j < lim; j += 8) {
            const jo = <usize>j << 2;
            dot4x8(Qs + <usize>(q0 + r) * ps, ps, ktb + jo, D, Ss + <usize>r * SP + kb4 + jo, SP, scale);
            dot4x8(dOs + <usize>(q0 + r) * ps, ps, vtb + jo, D, Ds + <usize>r * SP + kb4 + jo, SP, one);
          }
          for (let i = 0; i < 4; i++) {
            const rb = <usize>(q0 + r + i) << 2;
            const li = load<i32>(nr + rb) - kb;
            if (li <= 0) continue;
            const srow = Ss + <usize>(r + i) * SP + kb4;
            const drow = Ds + <usize>(r + i) * SP + kb4;
            const lv = i32x4.splat(li);
            let idx = i32x4(0, 1, 2, 3);
            let vm = f32x4.splat(-Infinity);
            for (let j = 0; j < BK; j += 4) {
              const sv = v128.bitselect(v128.load(srow + (<usize>j << 2)), f32x4.splat(-Infinity), i32x4.lt_s(idx, lv));
              vm = f32x4.pmax(vm, sv);
              idx = i32x4.add(idx, i32x4.splat(4));
            }
            const m0 = load<f32>(mr + rb);
            const m = max(m0, hmax(vm));
            const vmx = f32x4.splat(m);
            let vs = f32x4.splat(0), vd = f32x4.splat(0);
            idx = i32x4(0, 1, 2, 3);
            for (let j = 0; j < BK; j += 4) {
              const o = <usize>j << 2;
              const keep = i32x4.lt_s(idx, lv);
              const e = v128.and(vexp(f32x4.sub(v128.load(srow + o), vmx)), keep);
              v128.store(srow + o, e); // kept for pass B, with the max it is relative to
              vs = f32x4.add(vs, e);
              // past the row's last key dp is stale: mask the product
              vd = f32x4.add(vd, v128.and(f32x4.mul(e, v128.load(drow + o)), keep));
              idx = i32x4.add(idx, i32x4.splat(4));
            }
            store<f32>(Mb + ((<usize>(r + i) * <usize>NB + <usize>(kb / BK)) << 2), m);
            const l0 = load<f32>(ir + rb);
            const a0 = load<f32>(dd + rb);
            if (m0 != m && l0 != 0) {
              const alpha = Mathf.exp(m0 - m);
              store<f32>(ir + rb, l0 * alpha + hsum(vs));
              store<f32>(dd + rb, a0 * alpha + hsum(vd));
            } else {
              store<f32>(ir + rb, l0 + hsum(vs));
              store<f32>(dd + rb, a0 + hsum(vd));
            }
            store<f32>(mr + rb, m);
          }
        }
      }
      for (let r = q0; r < q0 + qn; r++) {
        const rb = <usize>r << 2;
        if (load<i32>(nr + rb) == 0) {
          store<f32>(mr + rb, 0);
          continue; // padding: 1/l and D stay 0
        }
        const inv: f32 = 1 / load<f32>(ir + rb);
        store<f32>(ir + rb, inv);
        store<f32>(dd + rb, load<f32>(dd + rb) * inv);
      }
      // Pass B, key block by key block: p and ds in place of s and dp; dV, dK of the block; the tile's dq.
      memory.fill(dQt, 0, <usize>qn * ps);
      for (let kb = 0; kb < tmax; kb += BK) {
        const kn = min(BK, tmax - kb);
        const kb4 = <usize>kb << 2;
        let tlim = 0;
        for (let r = 0; r < qn; r++) {
          const rb = <usize>(q0 + r) << 2;
          const li = load<i32>(nr + rb) - kb;
          const prow = Ss + <usize>r * SP + kb4;
          const drow = Ds + <usize>r * SP + kb4;
          if (li <= 0) {
            memory.fill(prow, 0, BKB);
            memory.fill(drow, 0, BKB);
            continue;
          }
          tlim = max(tlim, min(kn, li));
          const lv = i32x4.splat(li);
          // p = e exp(m_block - m) / l: e = exp(s - m_block) from pass A (zero past the row's last key)
          const f = Mathf.exp(load<f32>(Mb + ((<usize>r * <usize>NB + <usize>(kb / BK)) << 2)) - load<f32>(mr + rb)) * load<f32>(ir + rb);
          const vf = f32x4.splat(f);
          const vdd = f32x4.splat(load<f32>(dd + rb));
          let idx = i32x4(0, 1, 2, 3);
          for (let j = 0; j < BK; j += 4) {
            const o = <usize>j << 2;
            const keep = i32x4.lt_s(idx, lv);
            const p = f32x4.mul(v128.load(prow + o), vf);
            const ds = v128.and(f32x4.mul(f32x4.mul(p, f32x4.sub(v128.load(drow + o), vdd)), scale), keep);
            v128.store(prow + o, p);
            v128.store(drow + o, ds);
            idx = i32x4.add(idx, i32x4.splat(4));
          }
        }
        // dV += p^T dO, dK += ds^T Q over the tile's rows, keys in fours up to the last one a row sees
        for (let j = 0; j < tlim; j += 4) {
          const jo = kb4 + (<usize>j << 2);
          const ko = <usize>(kb + j) * ps;
          for (let d: usize = 0; d < ps; d += 32) {
            accT4x8(Ss + jo, SP, dOs + <usize>q0 * ps + d, ps, qn, dVs + ko + d, ps);
            accT4x8(Ds + jo, SP, Qs + <usize>q0 * ps + d, ps, qn, dKs + ko + d, ps);
          }
        }
        // dq += ds K
        for (let r = 0; r < qn; r += 4) {
          const lim = min(kn, maxN(nr, q0 + r) - kb);
          if (lim <= 0) continue;
          for (let d: usize = 0; d < ps; d += 32) acc4x8(Ds + <usize>r * SP + kb4, SP, kr + <usize>kb * ks + d, ks, lim, dQt + <usize>r * ps + d, ps);
        }
      }
      for (let r = 0; r < qn && q0 + r < rows; r++) memory.copy(dQ + <usize>load<i32>(tok + (<usize>(q0 + r) << 2)) * rowBytes, dQt + <usize>r * ps, rowBytes);
    }
    for (let j = 0; j < nmax; j++) {
      const o = base + <usize>j * kvRow;
      memory.copy(dK + o, dKs + <usize>j * ps, rowBytes);
      memory.copy(dV + o, dVs + <usize>j * ps, rowBytes);
    }
  }
}
