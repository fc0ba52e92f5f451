// @ts-nocheck -- AssemblyScript (compiled by scripts/build-wasm.ts), not part of the TypeScript program.
//
// Dequantization of the formats in src/engine/quant.ts into f32, 16 values per SIMD step.

// q8: `count` (a multiple of 4) int8 values at src -> f32 at dst, times the row's scale.
export function dequantQ8Run(src: usize, scale: f32, count: i32, dst: usize): void {
  const s = f32x4.splat(scale);
  let i = 0;
  for (; i + 16 <= count; i += 16) {
    const b = v128.load(src + <usize>i);
    const lo = i16x8.extend_low_i8x16_s(b);
    const hi = i16x8.extend_high_i8x16_s(b);
    const d = dst + (<usize>i << 2);
    v128.store(d, f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(lo)), s));
    v128.store(d, f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(lo)), s), 16);
    v128.store(d, f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(hi)), s), 32);
    v128.store(d, f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(hi)), s), 48);
  }
  for (; i < count; i += 4) {
    const b = i16x8.extend_low_i8x16_s(v128.load32_zero(src + <usize>i));
    v128.store(dst + (<usize>i << 2), f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(b)), s));
  }
}

// q4 nibbles of one group (16 bytes: byte b holds k = 2b in its low nibble and 2b+1 in its high one,
// stored as q+8) -> the 32 signed values in natural k order as two i8x16 vectors.
@inline
export function q4Lo(b: v128): v128 {
  const lo = i8x16.sub(v128.and(b, i8x16.splat(15)), i8x16.splat(8));
  const hi = i8x16.sub(i8x16.shr_u(b, 4), i8x16.splat(8));
  return i8x16.shuffle(lo, hi, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
}
@inline
export function q4Hi(b: v128): v128 {
  const lo = i8x16.sub(v128.and(b, i8x16.splat(15)), i8x16.splat(8));
  const hi = i8x16.sub(i8x16.shr_u(b, 4), i8x16.splat(8));
  return i8x16.shuffle(lo, hi, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
}

@inline
function store16(v: v128, s: v128, d: usize): void {
  const lo = i16x8.extend_low_i8x16_s(v);
  const hi = i16x8.extend_high_i8x16_s(v);
  v128.store(d, f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(lo)), s));
  v128.store(d, f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(lo)), s), 16);
  v128.store(d, f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(hi)), s), 32);
  v128.store(d, f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(hi)), s), 48);
}

// q4: one group of 32 values at src (16 bytes) -> 32 f32 at dst, times the group's scale.
export function dequantQ4Group(src: usize, scale: f32, dst: usize): void {
  const b = v128.load(src);
  const s = f32x4.splat(scale);
  store16(q4Lo(b), s, dst);
  store16(q4Hi(b), s, dst + 64);
}
