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
 * e^x on 4 f32 lanes (Cephes' expf: range reduction by ln 2 in two parts, a degree-5 polynomial, the exponent added
 * as an integer); about 1 ulp on [-87.3, 88.4], within 2 ulps of the correctly rounded e^x over [-100, 100].
 * Below -87.33654 (e^x subnormal), -inf and NaN give exactly 0; above 88.72283 (e^x overflows f32) inf; between
 * 88.37626 and that, e^88.37626. Shared by attention version 2 (whose arguments are <= 0), swiglu and its
 * backward, and the loss heads' softmax: a NaN argument there still gives NaN outputs (through the other operand
 * or the row's max).
 */
@inline
export function vexp(v: v128): v128 {
  const keep = f32x4.ge(v, f32x4.splat(-87.33654));
  const x = f32x4.pmin(f32x4.pmax(v, f32x4.splat(-87.33654)), f32x4.splat(88.37626));
  const fx = f32x4.nearest(f32x4.mul(x, f32x4.splat(1.44269504088896341)));
  let r = f32x4.sub(x, f32x4.mul(fx, f32x4.splat(0.693359375)));
  r = f32x4.sub(r, f32x4.mul(fx, f32x4.splat(-2.12194440e-4)));
  let y = f32x4.splat(1.9875691500e-4);
  y = madd(y, r, f32x4.splat(1.3981999507e-3));
  y = madd(y, r, f32x4.splat(8.3334519073e-3));
  y = madd(y, r, f32x4.splat(4.1665795894e-2));
  y = madd(y, r, f32x4.splat(1.6666665459e-1));
  y = madd(y, r, f32x4.splat(5.0000001201e-1));
  y = madd(y, f32x4.mul(r, r), f32x4.add(r, f32x4.splat(1)));
  const p2 = i32x4.shl(i32x4.add(i32x4.trunc_sat_f32x4_s(fx), i32x4.splat(127)), 23);
  return v128.bitselect(f32x4.splat(Infinity), v128.and(f32x4.mul(y, p2), keep), f32x4.gt(v, f32x4.splat(88.72283)));
}
