// @ts-nocheck -- AssemblyScript (compiled by scripts/build-wasm.ts), not part of the TypeScript program.
//
// Blocked matrix product C (M,Nout) (+)= A (M,inner) . B (inner,Nout) for every matmul shape the engine
// needs, sharing one 4x8 register-blocked SIMD micro-kernel:
//   forward     y = x W^T     A = x (M,K),   B = W^T: column j of B is row j of W (f32|q8|q4)
//   transposed  dx = dy W     A = dy (M,N),  B = W (N,K) read by rows (f32|q8|q4)
//   weight grad dW += dy^T x  A = dy^T (strided: astep = N*4), B = x (M,K) read by rows
// B is consumed in panels of 8 output columns x KC inner steps, packed (and dequantized) into a
// per-thread scratch buffer so the micro-kernel reads it contiguously from L1; A is read in place.
// Threads claim chunks of panels (or, for narrow outputs, of rows) from a shared counter (./sched.ts).
import { dequantQ4Group, dequantQ8Run } from './dequant';
import { chunkCount, chunkStart, claim } from './sched';
import { madd } from './simd';

// Inner-dimension block: B panel 8 x KC f32 = 8 KiB and four A rows of KC = 4 KiB stay in L1 (32 KiB).
// A multiple of 32 so q4 groups never straddle a block.
export const KC: i32 = 256;

// Row block: MC rows x KC of A = 128 KiB stay in L2 while every panel of the thread passes over them
// (re-packing each panel once per row block costs 1/MC of the product).
const MC_BLOCKS: i32 = 32; // 4-row blocks, MC = 128

// Pack modes (arg slot 0).
export const FWD_F32: i32 = 0;
export const FWD_Q8: i32 = 1;
export const FWD_Q4: i32 = 2;
export const ROWS_F32: i32 = 3;
export const ROWS_Q8: i32 = 4;
export const ROWS_Q4: i32 = 5;

// Per-thread scratch layout (bytes from the thread's base).
export const PANEL: usize = 0; // KC x 8 f32
const ROWTMP: usize = 8192; // 8 x KC f32 (dequantized W rows before the transposing pack)
export const TILE: usize = 16384; // 4 x 8 f32 (edge tiles)
export const GEMM_SCRATCH: i32 = 16384 + 192;

// C tile (rows<=4, cols<=8) at c (row stride ldc bytes) (+)= A rows (4 x kk) . panel (kk x 8).
// Rows past `rows` repeat the last valid row (harmless reads, never stored).
@inline
function micro(a: usize, astep: usize, arow: usize, rows: i32, b: usize, kk: i32, c: usize, ldc: usize, cols: i32, acc: bool, tile: usize): void {
  const a0 = a;
  const a1 = rows > 1 ? a0 + arow : a0;
  const a2 = rows > 2 ? a1 + arow : a1;
  const a3 = rows > 3 ? a2 + arow : a2;
  let c00 = f32x4.splat(0), c01 = f32x4.splat(0);
  let c10 = f32x4.splat(0), c11 = f32x4.splat(0);
  let c20 = f32x4.splat(0), c21 = f32x4.splat(0);
  let c30 = f32x4.splat(0), c31 = f32x4.splat(0);
  let o: usize = 0;
  for (let k = 0; k < kk; k++) {
    const b0 = v128.load(b);
    const b1 = v128.load(b, 16);
    b += 32;
    let x = v128.load32_splat(a0 + o);
    c00 = madd(x, b0, c00);
    c01 = madd(x, b1, c01);
    x = v128.load32_splat(a1 + o);
    c10 = madd(x, b0, c10);
    c11 = madd(x, b1, c11);
    x = v128.load32_splat(a2 + o);
    c20 = madd(x, b0, c20);
    c21 = madd(x, b1, c21);
    x = v128.load32_splat(a3 + o);
    c30 = madd(x, b0, c30);
    c31 = madd(x, b1, c31);
    o += astep;
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

// 4x4 transpose of (r0,r1,r2,r3) -> columns, stored as the low (off 0) or high (off 16) half of 4 panel rows.
@inline
function transposeStore(r0: v128, r1: v128, r2: v128, r3: v128, dst: usize): void {
  const t0 = i32x4.shuffle(r0, r1, 0, 4, 1, 5);
  const t1 = i32x4.shuffle(r2, r3, 0, 4, 1, 5);
  const t2 = i32x4.shuffle(r0, r1, 2, 6, 3, 7);
  const t3 = i32x4.shuffle(r2, r3, 2, 6, 3, 7);
  v128.store(dst, i64x2.shuffle(t0, t1, 0, 2));
  v128.store(dst, i64x2.shuffle(t0, t1, 1, 3), 32);
  v128.store(dst, i64x2.shuffle(t2, t3, 0, 2), 64);
  v128.store(dst, i64x2.shuffle(t2, t3, 1, 3), 96);
}

// Panel (kk x 8) from 8 f32 rows (row j at src + j*rowBytes, elements contiguous): panel[k][j] = row_j[k].
function packTransposed(src: usize, rowBytes: usize, kk: i32, panel: usize): void {
  const s0 = src, s1 = src + rowBytes, s2 = src + 2 * rowBytes, s3 = src + 3 * rowBytes;
  const s4 = src + 4 * rowBytes, s5 = src + 5 * rowBytes, s6 = src + 6 * rowBytes, s7 = src + 7 * rowBytes;
  let k = 0;
  for (; k + 4 <= kk; k += 4) {
    const o = <usize>k << 2;
    const d = panel + (<usize>k << 5);
    transposeStore(v128.load(s0 + o), v128.load(s1 + o), v128.load(s2 + o), v128.load(s3 + o), d);
    transposeStore(v128.load(s4 + o), v128.load(s5 + o), v128.load(s6 + o), v128.load(s7 + o), d + 16);
  }
  for (; k < kk; k++) {
    const o = <usize>k << 2;
    const d = panel + (<usize>k << 5);
    store<f32>(d, load<f32>(s0 + o)); store<f32>(d, load<f32>(s1 + o), 4);
    store<f32>(d, load<f32>(s2 + o), 8); store<f32>(d, load<f32>(s3 + o), 12);
    store<f32>(d, load<f32>(s4 + o), 16); store<f32>(d, load<f32>(s5 + o), 20);
    store<f32>(d, load<f32>(s6 + o), 24); store<f32>(d, load<f32>(s7 + o), 28);
  }
}

// Forward pack: panel of output columns j0..j0+7 (rows of W, clamped to N-1), inner k0..k0+kk-1.
export function packForward(mode: i32, w: usize, scales: usize, stride: i32, N: i32, j0: i32, k0: i32, kk: i32, scratch: usize): void {
  const panel = scratch + PANEL;
  if (mode == FWD_F32 && j0 + 8 <= N) {
    packTransposed(w + ((<usize>j0 * stride + k0) << 2), <usize>stride << 2, kk, panel);
    return;
  }
  // Dequantize (or copy) the 8 rows into ROWTMP (row stride KC), then transpose from there.
  const tmp = scratch + ROWTMP;
  const kpad = mode == FWD_Q4 ? (kk + 31) & ~31 : (kk + 3) & ~3;
  for (let j = 0; j < 8; j++) {
    const n = min(j0 + j, N - 1);
    const dst = tmp + (<usize>(j * KC) << 2);
    if (mode == FWD_F32) {
      memory.copy(dst, w + ((<usize>n * stride + k0) << 2), <usize>kk << 2);
    } else if (mode == FWD_Q8) {
      dequantQ8Run(w + <usize>n * stride + k0, load<f32>(scales + (<usize>n << 2)), kpad, dst);
    } else {
      const groups = stride >> 5;
      for (let g = 0; g < kpad; g += 32) {
        const s = load<f32>(scales + ((<usize>(n * groups + ((k0 + g) >> 5))) << 2));
        dequantQ4Group(w + ((<usize>n * stride + k0 + g) >> 1), s, dst + (<usize>g << 2));
      }
    }
  }
  packTransposed(tmp, <usize>KC << 2, kk, panel);
}

// Row pack: panel[i][j] = B[k0+i][j0+j] for B stored by rows (row index = inner), columns past Nout are 0.
export function packRows(mode: i32, w: usize, scales: usize, stride: i32, Nout: i32, j0: i32, k0: i32, kk: i32, scratch: usize): void {
  const panel = scratch + PANEL;
  const full = j0 + 8 <= Nout;
  const groups = stride >> 5;
  for (let i = 0; i < kk; i++) {
    const n = k0 + i;
    const d = panel + (<usize>i << 5);
    if (full && mode == ROWS_F32) {
      const s = w + ((<usize>n * stride + j0) << 2);
      v128.store(d, v128.load(s));
      v128.store(d, v128.load(s, 16), 16);
    } else if (full && mode == ROWS_Q8) {
      const sc = f32x4.splat(load<f32>(scales + (<usize>n << 2)));
      const b = v128.load8x8_s(w + <usize>n * stride + j0); // 8 x i16
      v128.store(d, f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(b)), sc));
      v128.store(d, f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(b)), sc), 16);
    } else if (full && mode == ROWS_Q4) {
      // 8 nibbles = one u32 (j0 is a multiple of 8), lowest nibble first, stored as q+8.
      const sc = f32x4.splat(load<f32>(scales + ((<usize>(n * groups + (j0 >> 5))) << 2)));
      const u = load<u32>(w + ((<usize>n * stride + j0) >> 1));
      const lo = i32x4(<i32>(u & 15), <i32>((u >> 4) & 15), <i32>((u >> 8) & 15), <i32>((u >> 12) & 15));
      const hi = i32x4(<i32>((u >> 16) & 15), <i32>((u >> 20) & 15), <i32>((u >> 24) & 15), <i32>(u >> 28));
      const eight = i32x4.splat(8);
      v128.store(d, f32x4.mul(f32x4.convert_i32x4_s(i32x4.sub(lo, eight)), sc));
      v128.store(d, f32x4.mul(f32x4.convert_i32x4_s(i32x4.sub(hi, eight)), sc), 16);
    } else {
      for (let j = 0; j < 8; j++) {
        const col = j0 + j;
        let v: f32 = 0;
        if (col < Nout) {
          const idx = <usize>n * stride + col;
          if (mode == ROWS_F32) v = load<f32>(w + (idx << 2));
          else if (mode == ROWS_Q8) v = <f32>load<i8>(w + idx) * load<f32>(scales + (<usize>n << 2));
          else {
            const nib = (<u32>load<u8>(w + (idx >> 1)) >> (<u32>(idx & 1) << 2)) & 15;
            v = <f32>(<i32>nib - 8) * load<f32>(scales + ((<usize>(n * groups + (col >> 5))) << 2));
          }
        }
        store<f32>(d + (<usize>j << 2), v);
      }
    }
  }
}

// args (i32 slots): 0 mode, 1 A, 2 astep (bytes), 3 arow (bytes), 4 M, 5 inner, 6 Nout, 7 B, 8 B scales,
// 9 B stride (elements per stored row), 10 C, 11 ldc (elements), 12 accumulate (0|1), 13 scratch base,
// 14 scratch bytes per thread.
export function gemm(args: usize, tid: i32, nth: i32): void {
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

  // Wide outputs: share out the 8-column panels; narrow ones (few panels): the 4-row blocks.
  const panels = (Nout + 7) >> 3;
  const mblocks = (M + 3) >> 2;
  const byPanels = panels >= nth * 2 || mblocks < nth * 2;
  const units = byPanels ? panels : mblocks;
  const chunks = chunkCount(units, nth);
  const fwd = mode <= FWD_Q4;
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
        for (let p = p0; p < p1; p++) {
          const j0 = p << 3;
          if (fwd) packForward(mode, B, scales, stride, Nout, j0, k0, kk, scratch);
          else packRows(mode, B, scales, stride, Nout, j0, k0, kk, scratch);
          const cols = min(8, Nout - j0);
          for (let mb = mc; mb < mcEnd; mb++) {
            const m = mb << 2;
            micro(A + <usize>m * arow + <usize>k0 * astep, astep, arow, min(4, M - m), scratch + PANEL, kk,
              C + <usize>m * ldc + (<usize>j0 << 2), ldc, cols, acc, tile);
          }
        }
      }
    }
  }
}
