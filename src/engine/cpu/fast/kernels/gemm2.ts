// @ts-nocheck -- AssemblyScript (compiled by scripts/build-wasm.ts), not part of the TypeScript program.
//
// Blocked matrix product, version 2: the contract, argument block, B packing and threading of version 1
// (./gemm.ts, which states them), with A packed too: each 4-row block of A (up to MC rows x KC) is copied once
// per row block as [k][4], so the micro-kernel broadcasts the 4 values of a step from consecutive addresses of
// one pointer (v128.load32_splat: a broadcast load, no shuffle unit), where version 1 broadcasts each from its own
// row (an address computation per row and step). V8 (TurboFan) hoists a step's loads above its multiply-adds:
// a 6 x 8 tile (12 accumulators + 6 broadcasts + 2 panel vectors) or a 4-step unrolled loop spill to the stack,
// and address arithmetic per row costs issue slots; this loop is 6 loads, 8 multiply-adds and the loop's own
// bookkeeping, with the 8 accumulators and the loaded vectors in registers. The loop first read the block's
// step with one 16-byte load and spread its lanes with 4 shuffles (vpshufd): on the 2-core AMD EPYC VM, one
// thread, relaxed build, in a scratch probe beside the fma peak, that reached 83 % of the peak at M = 16 with
// packed weights and 83-85 % at M = 256-1024, the broadcast loads 86 % and 85-86 %. With fused multiply-adds (the
// relaxed build, ./simd.ts) that is the kernel's whole gain over version 1. Each output is the same sequence of
// operations as in version 1 (k in order, one madd per k, the same final adds), so versions 1 and 2 give the
// same bits in the same build (test/engine/cpu-fast.test.ts).
import { FWD_Q4, GEMM_SCRATCH as GEMM1_SCRATCH, KC, packForward, packRows, PANEL, TILE } from './gemm';
import { chunkCount, chunkStart, claim } from './sched';
import { madd } from './simd';

// Row block: MC rows x KC of A stay in L2 while every panel of the thread passes over them.
const R: i32 = 4; // rows of a register tile
const MC_BLOCKS: i32 = 32; // 4-row blocks, MC = 128
/** Per-thread scratch of the packed A block (MC x KC f32, [4-row block][k][4]), after version 1's. */
export const APACK: usize = <usize>GEMM1_SCRATCH;
export const GEMM2_SCRATCH: i32 = GEMM1_SCRATCH + MC_BLOCKS * R * KC * 4;

// C tile (rows<=6, cols<=8) at c (row stride ldc bytes) (+)= A rows (6 x kk) . panel (kk x 8).
// Rows past `rows` repeat the last valid row (harmless reads, never stored).
@inline
function micro(ap: usize, b: usize, kk: i32, c: usize, ldc: usize, rows: i32, cols: i32, acc: bool, tile: usize): void {
  let c00 = f32x4.splat(0), c01 = f32x4.splat(0);
  let c10 = f32x4.splat(0), c11 = f32x4.splat(0);
  let c20 = f32x4.splat(0), c21 = f32x4.splat(0);
  let c30 = f32x4.splat(0), c31 = f32x4.splat(0);
  const end = b + (<usize>kk << 5);
  while (b < end) {
    const b0 = v128.load(b);
    const b1 = v128.load(b, 16);
    let x = v128.load32_splat(ap);
    c00 = madd(x, b0, c00); c01 = madd(x, b1, c01);
    x = v128.load32_splat(ap, 4);
    c10 = madd(x, b0, c10); c11 = madd(x, b1, c11);
    x = v128.load32_splat(ap, 8);
    c20 = madd(x, b0, c20); c21 = madd(x, b1, c21);
    x = v128.load32_splat(ap, 12);
    c30 = madd(x, b0, c30); c31 = madd(x, b1, c31);
    ap += 16;
    b += 32;
  }
  if (cols == 8 && rows == 4) {
    if (acc) {
      c00 = f32x4.add(c00, v128.load(c)); c01 = f32x4.add(c01, v128.load(c, 16));
      c10 = f32x4.add(c10, v128.load(c + ldc)); c11 = f32x4.add(c11, v128.load(c + ldc, 16));
      c20 = f32x4.add(c20, v128.load(c + 2 * ldc)); c21 = f32x4.add(c21, v128.load(c + 2 * ldc, 16));
      c30 = f32x4.add(c30, v128.load(c + 3 * ldc)); c31 = f32x4.add(c31, v128.load(c + 3 * ldc, 16));
    }
    v128.store(c, c00); v128.store(c, c01, 16);
    v128.store(c + ldc, c10); v128.store(c + ldc, c11, 16);
    v128.store(c + 2 * ldc, c20); v128.store(c + 2 * ldc, c21, 16);
    v128.store(c + 3 * ldc, c30); v128.store(c + 3 * ldc, c31, 16);
    return;
  }
  v128.store(tile, c00); v128.store(tile, c01, 16);
  v128.store(tile, c10, 32); v128.store(tile, c11, 48);
  v128.store(tile, c20, 64); v128.store(tile, c21, 80);
  v128.store(tile, c30, 96); v128.store(tile, c31, 112);
  for (let r = 0; r < rows; r++) {
    const cr = c + <usize>r * ldc;
    for (let j = 0; j < cols; j++) {
      const p = cr + (<usize>j << 2);
      const v = load<f32>(tile + ((<usize>(r * 8 + j)) << 2));
      store<f32>(p, acc ? load<f32>(p) + v : v);
    }
  }
}

// Packs rows m0..mEnd-1 of A, inner k0..k0+kk-1, as 4-row blocks [k][4] (16 bytes a step) at dst; rows past M
// are zeros (their outputs are never stored). Only data moves, so every path gives the same packed bytes. Where a
// block's 4 rows sit side by side in memory (arow = 4 bytes: A = dy^T of the weight gradient) a step is one 16-byte
// copy; where each row is contiguous along k (astep = 4: the forward's x, the input gradient's dy) 4 steps are one
// 4 x 4 transpose through shuffles. With few output columns (the small projections of training) A's packing is a
// large share of the product: the scalar loop moved a value with a load and a store.
function packA(A: usize, astep: usize, arow: usize, M: i32, m0: i32, mEnd: i32, k0: i32, kk: i32, dst: usize): void {
  const RB: usize = <usize>R << 2;
  for (let m = m0; m < mEnd; m += R) {
    const base = A + <usize>k0 * astep + <usize>m * arow;
    if (m + R <= M && arow == 4) {
      let s = base;
      let d = dst;
      for (let k = 0; k < kk; k++, d += RB, s += astep) v128.store(d, v128.load(s));
    } else if (m + R <= M && astep == 4) {
      const s0 = base, s1 = base + arow, s2 = base + 2 * arow, s3 = base + 3 * arow;
      const k4 = kk & ~3;
      let d = dst;
      for (let k = 0; k < k4; k += 4, d += RB << 2) {
        const o = <usize>k << 2;
        const r0 = v128.load(s0 + o), r1 = v128.load(s1 + o), r2 = v128.load(s2 + o), r3 = v128.load(s3 + o);
        const t0 = i32x4.shuffle(r0, r1, 0, 4, 1, 5), t1 = i32x4.shuffle(r0, r1, 2, 6, 3, 7);
        const t2 = i32x4.shuffle(r2, r3, 0, 4, 1, 5), t3 = i32x4.shuffle(r2, r3, 2, 6, 3, 7);
        v128.store(d, i32x4.shuffle(t0, t2, 0, 1, 4, 5));
        v128.store(d, i32x4.shuffle(t0, t2, 2, 3, 6, 7), 16);
        v128.store(d, i32x4.shuffle(t1, t3, 0, 1, 4, 5), 32);
        v128.store(d, i32x4.shuffle(t1, t3, 2, 3, 6, 7), 48);
      }
      for (let k = k4; k < kk; k++, d += RB) {
        const o = <usize>k << 2;
        store<f32>(d, load<f32>(s0 + o)); store<f32>(d, load<f32>(s1 + o), 4);
        store<f32>(d, load<f32>(s2 + o), 8); store<f32>(d, load<f32>(s3 + o), 12);
      }
    } else
      for (let r = 0; r < R; r++) {
        const row = m + r;
        let d = dst + (<usize>r << 2);
        if (row >= M) {
          for (let k = 0; k < kk; k++, d += RB) store<f32>(d, 0);
          continue;
        }
        let s = A + <usize>k0 * astep + <usize>row * arow;
        for (let k = 0; k < kk; k++, d += RB, s += astep) store<f32>(d, load<f32>(s));
      }
    dst += <usize>kk * RB;
  }
}

// B given as panels already packed by packPanels (below): pack mode 6, a forward product whose weight was packed
// once (a frozen or quantized weight, src/engine/cpu/fast/runtime.ts) instead of panel by panel on every call.
export const FWD_PANELS: i32 = 6;

// Packs B (any pack mode of gemm: a forward weight, FWD_F32|Q8|Q4, or B read by rows, ROWS_*; N = the product's
// output columns, `inner` its inner dimension) into panels at dst, each block exactly as gemm2 packs it on a call
// (packForward, packRows), so a product reading them (FWD_PANELS) gives the same bits. Used for a weight packed once
// (src/engine/cpu/fast/runtime.ts panelsOf) and for a B packed once per call when the product would pack it again
// for every MC rows (ops/matmul.ts). Layout [k block][panel][k in block][8] f32: a product's pass over one k block
// reads its panels as one sequential stream (laid out panel by panel, each pass jumps by a panel's whole length:
// M = 16 reached 79-82 % of the fma peak that way against 83 % this way, one thread, in a scratch probe).
// Arguments: mode, B, scales, stride, N, inner, dst; scratch after.
export function packPanels(args: usize, tid: i32, nth: i32): void {
  const mode = load<i32>(args);
  const B = <usize>load<u32>(args, 4);
  const scales = <usize>load<u32>(args, 8);
  const stride = load<i32>(args, 12);
  const N = load<i32>(args, 16);
  const inner = load<i32>(args, 20);
  const dst = <usize>load<u32>(args, 24);
  const scratch = <usize>load<u32>(args, 28) + <usize>tid * <usize>load<u32>(args, 32);
  const panels = (N + 7) >> 3;
  const chunks = chunkCount(panels, nth);
  for (let ch = claim(args); ch < chunks; ch = claim(args)) {
    const p1 = chunkStart(panels, ch + 1, chunks);
    for (let p = chunkStart(panels, ch, chunks); p < p1; p++)
      for (let k0 = 0; k0 < inner; k0 += KC) {
        const kk = min(KC, inner - k0);
        if (mode <= FWD_Q4) packForward(mode, B, scales, stride, N, p << 3, k0, kk, scratch);
        else packRows(mode, B, scales, stride, N, p << 3, k0, kk, scratch);
        memory.copy(dst + ((<usize>k0 * <usize>panels + <usize>p * <usize>kk) << 5), scratch + PANEL, <usize>kk << 5);
      }
  }
}

// Same arguments as gemm (./gemm.ts), and pack mode FWD_PANELS (B = packPanels' output).
export function gemm2(args: usize, tid: i32, nth: i32): void {
  const mode = load<i32>(args);
  const A = <usize>load<u32>(args, 4);
  const astep = <usize>load<u32>(args, 8);
  const arow = <usize>load<u32>(args, 12);
  const M = load<i32>(args, 16);
  const inner = load<i32>(args, 20);
  const Nout = load<i32>(args, 24);
  const B = <usize>load<u32>(args, 28);
  const scales = <usize>load<u32>(args, 32);
  const stride = load<i32>(args, 36);
  const C = <usize>load<u32>(args, 40);
  const ldc = <usize>load<u32>(args, 44) << 2;
  const acc0 = load<i32>(args, 48) != 0;
  const scratch = <usize>load<u32>(args, 52) + <usize>tid * <usize>load<u32>(args, 56);
  const tile = scratch + TILE;

  const panels = (Nout + 7) >> 3;
  const mblocks = (M + R - 1) / R;
  const fwd = mode <= FWD_Q4;
  const prepacked = mode == FWD_PANELS;
  // Threads share out the 8-column panels (wide outputs) or the 4-row blocks (few panels), and when there are
  // enough of both, whichever moves less: every chunk of panels packs all of A again (M x inner values, read and
  // written), every row block of MC rows, within a chunk of rows, passes over all of B's panels again (Nout x inner:
  // read and written when packed here, read when B came packed). With the training step's shapes (2,048 rows, 64-384
  // columns) sharing panels packed A 8 times on two threads and cost the weight gradient much of its second thread.
  // The outputs are the same either way (each tile the same operations in the same order).
  let byPanels = panels >= nth * 2 || mblocks < nth * 2;
  if (nth > 1 && mblocks >= nth * 2 && panels >= nth * 2) {
    const mcs = <i64>((mblocks + MC_BLOCKS - 1) / MC_BLOCKS);
    const aVals = <i64>2 * <i64>M * <i64>inner;
    const bVals = <i64>(prepacked ? 1 : 2) * <i64>Nout * <i64>inner;
    byPanels = <i64>chunkCount(panels, nth) * aVals + mcs * bVals <= aVals + (mcs + <i64>chunkCount(mblocks, nth)) * bVals;
  }
  const units = byPanels ? panels : mblocks;
  const chunks = chunkCount(units, nth);
  for (let ch = claim(args); ch < chunks; ch = claim(args)) {
    const u0 = chunkStart(units, ch, chunks);
    const u1 = chunkStart(units, ch + 1, chunks);
    const p0 = byPanels ? u0 : 0, p1 = byPanels ? u1 : panels;
    const m0 = byPanels ? 0 : u0, m1 = byPanels ? mblocks : u1;
    for (let k0 = 0; k0 < inner; k0 += KC) {
      const kk = min(KC, inner - k0);
      const acc = acc0 || k0 > 0;
      for (let mc = m0; mc < m1; mc += MC_BLOCKS) {
        const mcEnd = min(m1, mc + MC_BLOCKS);
        packA(A, astep, arow, M, mc * R, mcEnd * R, k0, kk, scratch + APACK);
        for (let p = p0; p < p1; p++) {
          const j0 = p << 3;
          let panel = scratch + PANEL;
          if (prepacked) panel = B + ((<usize>k0 * <usize>panels + <usize>p * <usize>kk) << 5);
          else if (fwd) packForward(mode, B, scales, stride, Nout, j0, k0, kk, scratch);
          else packRows(mode, B, scales, stride, Nout, j0, k0, kk, scratch);
          const cols = min(8, Nout - j0);
          for (let mb = mc; mb < mcEnd; mb++) {
            const m = mb * R;
            const ap = scratch + APACK + <usize>(mb - mc) * <usize>kk * (<usize>R << 2);
            const c = C + <usize>m * ldc + (<usize>j0 << 2);
            micro(ap, panel, kk, c, ldc, min(4, M - m), cols, acc, tile);
          }
        }
      }
    }
  }
}
