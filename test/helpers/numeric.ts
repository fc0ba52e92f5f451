// Seeded random tensors and the largest elementwise difference, for the kernel tests that compare a backend
// with the CPU reference (a fixed mulberry32 stream, so every test sees the same numbers on every run).
import { expect } from 'vitest';

export function rng(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
export const randn = (n: number, r: () => number) => Float32Array.from({ length: n }, () => r() * 2 - 1);

export function maxDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}
