// @ts-nocheck -- AssemblyScript (compiled by scripts/build-wasm.ts), not part of the TypeScript program.
//
// Forward y = x W^T for a few rows (decode), version 2: the contract and argument block of version 1
// (./gemv.ts, which states them); f32 weights take 3 output columns at a time, where version 1 takes 4. V8
// (TurboFan) hoists a step's loads above its arithmetic, so a step's live registers are its accumulators plus
// its loads: version 1's 8 accumulators + 10 loads spill to the stack every step (18 of the 15 SIMD registers it
// allocates); 6 + 8 fit. The arithmetic of each column is version 1's, so both give the same bits (tested).
// q8 and q4 weights run version 1's dot products.
import { FWD_F32, FWD_Q8 } from './gemm';
import { dotQ4, dotQ8, hsum } from './gemv';
import { chunkCount, chunkStart, claim } from './sched';
import { madd } from './simd';

// One row x (K f32), 3 W rows -> 3 dot products stored at out[0..2], by version 1's arithmetic (./gemv.ts
// dotF32: per row, lanes k % 8 < 4 and >= 4 in two accumulators, their sum's horizontal sum, the scalar tail).
@inline
function dotF32x3(x: usize, w0: usize, w1: usize, w2: usize, K: i32, out: usize): void {
  let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0);
  let b0 = f32x4.splat(0), b1 = f32x4.splat(0), b2 = f32x4.splat(0);
  const K8 = K & ~7;
  const end = x + (<usize>K8 << 2);
  let xp = x;
  while (xp < end) {
    const x0 = v128.load(xp);
    const x1 = v128.load(xp, 16);
    a0 = madd(x0, v128.load(w0), a0);
    b0 = madd(x1, v128.load(w0, 16), b0);
    a1 = madd(x0, v128.load(w1), a1);
    b1 = madd(x1, v128.load(w1, 16), b1);
    a2 = madd(x0, v128.load(w2), a2);
    b2 = madd(x1, v128.load(w2, 16), b2);
    xp += 32;
    w0 += 32; w1 += 32; w2 += 32;
  }
  let s0 = hsum(f32x4.add(a0, b0)), s1 = hsum(f32x4.add(a1, b1)), s2 = hsum(f32x4.add(a2, b2));
  for (let k = K8; k < K; k++) {
    const xv = load<f32>(xp);
    s0 += xv * load<f32>(w0); s1 += xv * load<f32>(w1); s2 += xv * load<f32>(w2);
    xp += 4;
    w0 += 4; w1 += 4; w2 += 4;
  }
  store<f32>(out, s0); store<f32>(out, s1, 4); store<f32>(out, s2, 8);
}

// Same argument block as gemv (./gemv.ts).
export function gemv2(args: usize, tid: i32, nth: i32): void {
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
  const f32 = mode == FWD_F32;
  const G = f32 ? 3 : 4; // output columns per group
  const groups = (N + G - 1) / G;
  const chunks = chunkCount(groups, nth);
  const rowBytes: usize = f32 ? <usize>stride << 2 : mode == FWD_Q8 ? <usize>stride : <usize>stride >> 1;
  const sGroups = stride >> 5;
  for (let ch = claim(args); ch < chunks; ch = claim(args)) {
    const g0 = chunkStart(groups, ch, chunks);
    const g1 = chunkStart(groups, ch + 1, chunks);
    for (let m = 0; m < M; m++) {
      const x = X + <usize>m * (<usize>K << 2);
      if (!f32) {
        memory.copy(xpad, x, <usize>K << 2);
        memory.fill(xpad + (<usize>K << 2), 0, <usize>(stride - K) << 2);
      }
      for (let g = g0; g < g1; g++) {
        const j0 = g * G;
        const last = N - 1;
        const w0 = W + <usize>j0 * rowBytes, w1 = W + <usize>min(j0 + 1, last) * rowBytes;
        const w2 = W + <usize>min(j0 + 2, last) * rowBytes, w3 = W + <usize>min(j0 + 3, last) * rowBytes;
        if (f32) {
          dotF32x3(x, w0, w1, w2, K, out);
        } else if (mode == FWD_Q8) {
          const n1 = min(j0 + 1, last), n2 = min(j0 + 2, last), n3 = min(j0 + 3, last);
          dotQ8(xpad, w0, w1, w2, w3, stride, out);
          store<f32>(out, load<f32>(out) * load<f32>(S + (<usize>j0 << 2)));
          store<f32>(out, load<f32>(out, 4) * load<f32>(S + (<usize>n1 << 2)), 4);
          store<f32>(out, load<f32>(out, 8) * load<f32>(S + (<usize>n2 << 2)), 8);
          store<f32>(out, load<f32>(out, 12) * load<f32>(S + (<usize>n3 << 2)), 12);
        } else {
          const sb = <usize>sGroups << 2;
          const n1 = min(j0 + 1, last), n2 = min(j0 + 2, last), n3 = min(j0 + 3, last);
          dotQ4(xpad, w0, w1, w2, w3, S + <usize>j0 * sb, S + <usize>n1 * sb, S + <usize>n2 * sb, S + <usize>n3 * sb, stride, out);
        }
        const y = Y + <usize>m * ldc + (<usize>j0 << 2);
        const cols = min(G, N - j0);
        for (let c = 0; c < cols; c++) store<f32>(y + (<usize>c << 2), load<f32>(out + (<usize>c << 2)));
      }
    }
  }
}
