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
