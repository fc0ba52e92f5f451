// @ts-nocheck -- AssemblyScript (compiled by scripts/build-wasm.ts), not part of the TypeScript program.
//
// SIMD helpers shared by the kernels.
//
// `madd(a, b, c)` = a*b + c on 4 f32 lanes. The module is built twice (scripts/build-wasm.ts): the strict build
// (the default) issues a separate f32x4.mul and f32x4.add, rounded twice, the same bits on every machine and
// engine; the relaxed build (`simd: 'relaxed'`, src/engine/cpu/fast/backend.ts) issues f32x4.relaxed_madd,
// which an engine may fuse (one rounding: V8 does on x86-64 with FMA3 and on arm64) or not, so its bits depend
// on the machine. Both are checked against the f64 reference with the same tolerances
// (test/engine/cpu-fast*.test.ts).
@inline
export function madd(a: v128, b: v128, c: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) return f32x4.relaxed_madd(a, b, c);
  return f32x4.add(f32x4.mul(a, b), c);
}

/**
 * e^x on 4 f32 lanes for any x, Cephes' expf: n = nearest(x log2 e), r = x - n ln 2 in two parts (exact for the n
 * that occur), e^r by a degree-6 polynomial, 2^n added to the exponent; within ~2 ulps of the correctly rounded
 * value. Below -87.3 it gives 0 (e^x would be subnormal; -inf gives 0), above 88.72 inf (e^x overflows f32), as
 * a scalar expf rounds them; NaN stays NaN.
 */
@inline
export function vexp(v: v128): v128 {
  const x = f32x4.min(f32x4.max(v, f32x4.splat(-87.3)), f32x4.splat(88));
  const n = f32x4.nearest(f32x4.mul(x, f32x4.splat(1.44269504088896341)));
  let r = madd(n, f32x4.splat(-0.693359375), x);
  r = madd(n, f32x4.splat(2.12194440e-4), r);
  let y = f32x4.splat(1.9875691500e-4);
  y = madd(y, r, f32x4.splat(1.3981999507e-3));
  y = madd(y, r, f32x4.splat(8.3334519073e-3));
  y = madd(y, r, f32x4.splat(4.1665795894e-2));
  y = madd(y, r, f32x4.splat(1.6666665459e-1));
  y = madd(y, r, f32x4.splat(5.0000001201e-1));
  y = madd(y, f32x4.mul(r, r), f32x4.add(r, f32x4.splat(1)));
  const p2 = i32x4.shl(i32x4.add(i32x4.trunc_sat_f32x4_s(n), i32x4.splat(127)), 23);
  // lanes below the range become 0 and those above it inf (NaN lanes compare false both ways and stay NaN)
  const e = v128.andnot(f32x4.mul(y, p2), f32x4.lt(v, f32x4.splat(-87.3)));
  return v128.bitselect(f32x4.splat(Infinity), e, f32x4.gt(v, f32x4.splat(88.72283)));
}
