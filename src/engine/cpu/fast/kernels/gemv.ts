// @ts-nocheck -- AssemblyScript (compiled by scripts/build-wasm.ts), not part of the TypeScript program.
//
// Forward y = x W^T for a few rows (M <= 3: decode), where packing W would cost as much as the product.
// Dot products run along K on W's own row-major layout, 4 output columns at a time, dequantizing in
// registers. Threads claim chunks of 4-column groups (./sched.ts).
import { FWD_F32, FWD_Q8 } from './gemm';
import { q4Hi, q4Lo } from './dequant';
import { chunkCount, chunkStart, claim } from './sched';
import { madd } from './simd';

@inline
export function hsum(v: v128): f32 {
  return (f32x4.extract_lane(v, 0) + f32x4.extract_lane(v, 1)) + (f32x4.extract_lane(v, 2) + f32x4.extract_lane(v, 3));
}

@inline
function toF32(b16: v128, part: i32): v128 {
  // part 0..3 of 16 int8 lanes -> 4 f32
  const h = part < 2 ? i16x8.extend_low_i8x16_s(b16) : i16x8.extend_high_i8x16_s(b16);
  return f32x4.convert_i32x4_s((part & 1) == 0 ? i32x4.extend_low_i16x8_s(h) : i32x4.extend_high_i16x8_s(h));
}

// One row x (K f32), 4 W rows -> 4 dot products stored at out[0..3] (f32), for f32 weights.
@inline
function dotF32(x: usize, w0: usize, w1: usize, w2: usize, w3: usize, K: i32, out: usize): void {
  let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0), a3 = f32x4.splat(0);
  let b0 = f32x4.splat(0), b1 = f32x4.splat(0), b2 = f32x4.splat(0), b3 = f32x4.splat(0);
  let k = 0;
  for (; k + 8 <= K; k += 8) {
    const o = <usize>k << 2;
    const x0 = v128.load(x + o);
    const x1 = v128.load(x + o, 16);
    a0 = madd(x0, v128.load(w0 + o), a0);
    b0 = madd(x1, v128.load(w0 + o, 16), b0);
    a1 = madd(x0, v128.load(w1 + o), a1);
    b1 = madd(x1, v128.load(w1 + o, 16), b1);
    a2 = madd(x0, v128.load(w2 + o), a2);
    b2 = madd(x1, v128.load(w2 + o, 16), b2);
    a3 = madd(x0, v128.load(w3 + o), a3);
    b3 = madd(x1, v128.load(w3 + o, 16), b3);
  }
  let s0 = hsum(f32x4.add(a0, b0)), s1 = hsum(f32x4.add(a1, b1));
  let s2 = hsum(f32x4.add(a2, b2)), s3 = hsum(f32x4.add(a3, b3));
  for (; k < K; k++) {
    const o = <usize>k << 2;
    const xv = load<f32>(x + o);
    s0 += xv * load<f32>(w0 + o); s1 += xv * load<f32>(w1 + o);
    s2 += xv * load<f32>(w2 + o); s3 += xv * load<f32>(w3 + o);
  }
  store<f32>(out, s0); store<f32>(out, s1, 4); store<f32>(out, s2, 8); store<f32>(out, s3, 12);
}

// q8 rows (int8, padded to `stride`, a multiple of 4); x is zero-padded to stride. Unscaled sums.
@inline
export function dotQ8(x: usize, w0: usize, w1: usize, w2: usize, w3: usize, stride: i32, out: usize): void {
  let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0), a3 = f32x4.splat(0);
  let k = 0;
  for (; k + 16 <= stride; k += 16) {
    const xo = x + (<usize>k << 2);
    const x0 = v128.load(xo), x1 = v128.load(xo, 16), x2 = v128.load(xo, 32), x3 = v128.load(xo, 48);
    let b = v128.load(w0 + <usize>k);
    a0 = f32x4.add(a0, f32x4.add(f32x4.add(f32x4.mul(x0, toF32(b, 0)), f32x4.mul(x1, toF32(b, 1))), f32x4.add(f32x4.mul(x2, toF32(b, 2)), f32x4.mul(x3, toF32(b, 3)))));
    b = v128.load(w1 + <usize>k);
    a1 = f32x4.add(a1, f32x4.add(f32x4.add(f32x4.mul(x0, toF32(b, 0)), f32x4.mul(x1, toF32(b, 1))), f32x4.add(f32x4.mul(x2, toF32(b, 2)), f32x4.mul(x3, toF32(b, 3)))));
    b = v128.load(w2 + <usize>k);
    a2 = f32x4.add(a2, f32x4.add(f32x4.add(f32x4.mul(x0, toF32(b, 0)), f32x4.mul(x1, toF32(b, 1))), f32x4.add(f32x4.mul(x2, toF32(b, 2)), f32x4.mul(x3, toF32(b, 3)))));
    b = v128.load(w3 + <usize>k);
    a3 = f32x4.add(a3, f32x4.add(f32x4.add(f32x4.mul(x0, toF32(b, 0)), f32x4.mul(x1, toF32(b, 1))), f32x4.add(f32x4.mul(x2, toF32(b, 2)), f32x4.mul(x3, toF32(b, 3)))));
  }
  for (; k < stride; k += 4) {
    const xv = v128.load(x + (<usize>k << 2));
    a0 = f32x4.add(a0, f32x4.mul(xv, toF32(v128.load32_zero(w0 + <usize>k), 0)));
    a1 = f32x4.add(a1, f32x4.mul(xv, toF32(v128.load32_zero(w1 + <usize>k), 0)));
    a2 = f32x4.add(a2, f32x4.mul(xv, toF32(v128.load32_zero(w2 + <usize>k), 0)));
    a3 = f32x4.add(a3, f32x4.mul(xv, toF32(v128.load32_zero(w3 + <usize>k), 0)));
  }
  store<f32>(out, hsum(a0)); store<f32>(out, hsum(a1), 4); store<f32>(out, hsum(a2), 8); store<f32>(out, hsum(a3), 12);
}

@inline
function groupDot(x: usize, b: v128): v128 {
  const l = q4Lo(b);
  const h = q4Hi(b);
  const p0 = f32x4.add(f32x4.mul(v128.load(x), toF32(l, 0)), f32x4.mul(v128.load(x, 16), toF32(l, 1)));
  const p1 = f32x4.add(f32x4.mul(v128.load(x, 32), toF32(l, 2)), f32x4.mul(v128.load(x, 48), toF32(l, 3)));
  const p2 = f32x4.add(f32x4.mul(v128.load(x, 64), toF32(h, 0)), f32x4.mul(v128.load(x, 80), toF32(h, 1)));
  const p3 = f32x4.add(f32x4.mul(v128.load(x, 96), toF32(h, 2)), f32x4.mul(v128.load(x, 112), toF32(h, 3)));
  return f32x4.add(f32x4.add(p0, p1), f32x4.add(p2, p3));
}

// q4 rows (16 bytes per group of 32, a scale per group); x zero-padded to stride. Scaled sums.
@inline
export function dotQ4(x: usize, w0: usize, w1: usize, w2: usize, w3: usize, s0: usize, s1: usize, s2: usize, s3: usize, stride: i32, out: usize): void {
  let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0), a3 = f32x4.splat(0);
  for (let g = 0; g < stride >> 5; g++) {
    const xo = x + (<usize>g << 7);
    const wo = <usize>g << 4;
    const so = <usize>g << 2;
    a0 = f32x4.add(a0, f32x4.mul(groupDot(xo, v128.load(w0 + wo)), v128.load32_splat(s0 + so)));
    a1 = f32x4.add(a1, f32x4.mul(groupDot(xo, v128.load(w1 + wo)), v128.load32_splat(s1 + so)));
    a2 = f32x4.add(a2, f32x4.mul(groupDot(xo, v128.load(w2 + wo)), v128.load32_splat(s2 + so)));
    a3 = f32x4.add(a3, f32x4.mul(groupDot(xo, v128.load(w3 + wo)), v128.load32_splat(s3 + so)));
  }
  store<f32>(out, hsum(a0)); store<f32>(out, hsum(a1), 4); store<f32>(out, hsum(a2), 8); store<f32>(out, hsum(a3), 12);
}

// Same argument block as gemm (modes FWD_*); M <= 3 expected but any M works.
export function gemv(args: usize, tid: i32, nth: i32): void {
  const mode = load<i32>(args);
  const X = <usize>load<u32>(args, 4);
  const M = load<i32>(args, 16);
  const K = load<i32>(args, 20);
  const N = load<i32>(args, 24);
  const W = <usize>load<u32>(args, 28);
  const S = <usize>load<u32>(args, 32);
  const stride = load<i32>(args, 36);
  const Y = <usize>load<u32>(args, 40);
  const ldc = <usize>load<u32>(args, 44) << 2;
  const scratch = <usize>load<u32>(args, 52) + <usize>tid * <usize>load<u32>(args, 56);
  const out = scratch; // 4 f32
  const xpad = scratch + 64; // one x row zero-padded to stride
  const groups = (N + 3) >> 2;
  const chunks = chunkCount(groups, nth);
  const rowBytes: usize = mode == FWD_F32 ? <usize>stride << 2 : mode == FWD_Q8 ? <usize>stride : <usize>stride >> 1;
  const sGroups = stride >> 5;
  for (let ch = claim(args); ch < chunks; ch = claim(args)) {
    const g0 = chunkStart(groups, ch, chunks);
    const g1 = chunkStart(groups, ch + 1, chunks);
    for (let m = 0; m < M; m++) {
      const x = X + <usize>m * (<usize>K << 2);
      if (mode != FWD_F32) {
        memory.copy(xpad, x, <usize>K << 2);
        memory.fill(xpad + (<usize>K << 2), 0, <usize>(stride - K) << 2);
      }
      for (let g = g0; g < g1; g++) {
        const j0 = g << 2;
        const n0 = j0, n1 = min(j0 + 1, N - 1), n2 = min(j0 + 2, N - 1), n3 = min(j0 + 3, N - 1);
        const w0 = W + <usize>n0 * rowBytes, w1 = W + <usize>n1 * rowBytes, w2 = W + <usize>n2 * rowBytes, w3 = W + <usize>n3 * rowBytes;
        if (mode == FWD_F32) dotF32(x, w0, w1, w2, w3, K, out);
        else if (mode == FWD_Q8) {
          dotQ8(xpad, w0, w1, w2, w3, stride, out);
          store<f32>(out, load<f32>(out) * load<f32>(S + (<usize>n0 << 2)));
          store<f32>(out, load<f32>(out, 4) * load<f32>(S + (<usize>n1 << 2)), 4);
          store<f32>(out, load<f32>(out, 8) * load<f32>(S + (<usize>n2 << 2)), 8);
          store<f32>(out, load<f32>(out, 12) * load<f32>(S + (<usize>n3 << 2)), 12);
        } else {
          const sb = <usize>sGroups << 2;
          dotQ4(xpad, w0, w1, w2, w3, S + <usize>n0 * sb, S + <usize>n1 * sb, S + <usize>n2 * sb, S + <usize>n3 * sb, stride, out);
        }
        const y = Y + <usize>m * ldc + (<usize>j0 << 2);
        const cols = min(4, N - j0);
        for (let c = 0; c < cols; c++) store<f32>(y + (<usize>c << 2), load<f32>(out + (<usize>c << 2)));
      }
    }
  }
}
