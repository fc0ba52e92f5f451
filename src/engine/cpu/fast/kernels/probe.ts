// @ts-nocheck -- AssemblyScript (compiled by scripts/build-wasm.ts), not part of the TypeScript program.
//
// Probes of this machine's limits, for the benchmarks (bench/limits.ts): every figure `npm run bench` records
// is stated as a fraction of a limit measured in the same process, beside it. Not used by the backend.
import { madd } from './simd';

/**
 * The f32x4 multiply-add peak of one thread: `iters` rounds of 12 independent chains c = c * x + y (a multiply
 * and an add each, as the kernels issue them; 8 flops per chain and round). Returns a sum so nothing is dropped.
 */
export function probeMulAdd(iters: i32): f32 {
  const x = f32x4.splat(0.5), y = f32x4.splat(1);
  let c0 = f32x4.splat(0.1), c1 = f32x4.splat(0.2), c2 = f32x4.splat(0.3), c3 = f32x4.splat(0.4);
  let c4 = f32x4.splat(0.5), c5 = f32x4.splat(0.6), c6 = f32x4.splat(0.7), c7 = f32x4.splat(0.8);
  let c8 = f32x4.splat(0.9), c9 = f32x4.splat(1.1), c10 = f32x4.splat(1.2), c11 = f32x4.splat(1.3);
  for (let i = 0; i < iters; i++) {
    c0 = f32x4.add(f32x4.mul(c0, x), y); c1 = f32x4.add(f32x4.mul(c1, x), y);
    c2 = f32x4.add(f32x4.mul(c2, x), y); c3 = f32x4.add(f32x4.mul(c3, x), y);
    c4 = f32x4.add(f32x4.mul(c4, x), y); c5 = f32x4.add(f32x4.mul(c5, x), y);
    c6 = f32x4.add(f32x4.mul(c6, x), y); c7 = f32x4.add(f32x4.mul(c7, x), y);
    c8 = f32x4.add(f32x4.mul(c8, x), y); c9 = f32x4.add(f32x4.mul(c9, x), y);
    c10 = f32x4.add(f32x4.mul(c10, x), y); c11 = f32x4.add(f32x4.mul(c11, x), y);
  }
  const s = f32x4.add(f32x4.add(f32x4.add(c0, c1), f32x4.add(c2, c3)), f32x4.add(f32x4.add(f32x4.add(c4, c5), f32x4.add(c6, c7)), f32x4.add(f32x4.add(c8, c9), f32x4.add(c10, c11))));
  return f32x4.extract_lane(s, 0) + f32x4.extract_lane(s, 1) + f32x4.extract_lane(s, 2) + f32x4.extract_lane(s, 3);
}

/**
 * The same with `madd` (./simd.ts): in the relaxed build one f32x4.relaxed_madd per chain and round, which the
 * engine fuses where the machine has FMA, so this is the peak the relaxed kernels can reach (8 flops per chain
 * and round either way); in the strict build it equals probeMulAdd.
 */
export function probeMadd(iters: i32): f32 {
  const x = f32x4.splat(0.5), y = f32x4.splat(1);
  let c0 = f32x4.splat(0.1), c1 = f32x4.splat(0.2), c2 = f32x4.splat(0.3), c3 = f32x4.splat(0.4);
  let c4 = f32x4.splat(0.5), c5 = f32x4.splat(0.6), c6 = f32x4.splat(0.7), c7 = f32x4.splat(0.8);
  let c8 = f32x4.splat(0.9), c9 = f32x4.splat(1.1), c10 = f32x4.splat(1.2), c11 = f32x4.splat(1.3);
  for (let i = 0; i < iters; i++) {
    c0 = madd(c0, x, y); c1 = madd(c1, x, y); c2 = madd(c2, x, y); c3 = madd(c3, x, y);
    c4 = madd(c4, x, y); c5 = madd(c5, x, y); c6 = madd(c6, x, y); c7 = madd(c7, x, y);
    c8 = madd(c8, x, y); c9 = madd(c9, x, y); c10 = madd(c10, x, y); c11 = madd(c11, x, y);
  }
  const s = f32x4.add(f32x4.add(f32x4.add(c0, c1), f32x4.add(c2, c3)), f32x4.add(f32x4.add(f32x4.add(c4, c5), f32x4.add(c6, c7)), f32x4.add(f32x4.add(c8, c9), f32x4.add(c10, c11))));
  return f32x4.extract_lane(s, 0) + f32x4.extract_lane(s, 1) + f32x4.extract_lane(s, 2) + f32x4.extract_lane(s, 3);
}

/** a*b+c on lane 0 through `madd`: tells whether this module's multiply-add is fused here (one rounding). */
export function maddLane(a: f32, b: f32, c: f32): f32 {
  return f32x4.extract_lane(madd(f32x4.splat(a), f32x4.splat(b), f32x4.splat(c)), 0);
}

/** Reads `bytes` (a multiple of 64) at `ptr`, `reps` times, 16 bytes a load (4 independent sums). */
export function probeRead(ptr: usize, bytes: usize, reps: i32): f32 {
  let a = f32x4.splat(0), b = a, c = a, d = a;
  for (let r = 0; r < reps; r++) {
    for (let p = ptr, e = ptr + bytes; p < e; p += 64) {
      a = f32x4.add(a, v128.load(p));
      b = f32x4.add(b, v128.load(p, 16));
      c = f32x4.add(c, v128.load(p, 32));
      d = f32x4.add(d, v128.load(p, 48));
    }
  }
  const s = f32x4.add(f32x4.add(a, b), f32x4.add(c, d));
  return f32x4.extract_lane(s, 0) + f32x4.extract_lane(s, 1) + f32x4.extract_lane(s, 2) + f32x4.extract_lane(s, 3);
}

/** memory.copy of `bytes` from src to dst, `reps` times. */
export function probeCopy(dst: usize, src: usize, bytes: usize, reps: i32): void {
  for (let r = 0; r < reps; r++) memory.copy(dst, src, bytes);
}
