// Shared helpers of the WebGPU tests: one backend per test file, random data, tolerance checks.
import { expect } from 'vitest';
import { CpuRefBackend } from '../../src/engine/cpu/ref';
import { Rng } from '../../src/util/rng';
import { type WebGpuBackendOptions, createWebGpuBackend } from '../../src/engine/webgpu/backend';
import { nodeGpu } from '../helpers/gpu';

export const cpu = new CpuRefBackend();

export function gpuBackend(opts: WebGpuBackendOptions = {}) {
  return createWebGpuBackend({ gpu: nodeGpu(), ...opts });
}

export function randn(n: number, seed: number, scale = 1): Float32Array {
  const r = new Rng(seed);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = r.normal() * scale;
  return out;
}

export function randInt(n: number, max: number, seed: number): Int32Array {
  const r = new Rng(seed);
  return Int32Array.from({ length: n }, () => r.int(max));
}

/** Every element within atol + rtol * |expected|; reports the worst element on failure. */
export function expectClose(got: ArrayLike<number>, want: ArrayLike<number>, atol: number, rtol: number, what: string): void {
  expect(got.length, `${what}: length`).toBe(want.length);
  let worst = -1;
  let worstExcess = 0;
  for (let i = 0; i < want.length; i++) {
    const err = Math.abs(got[i] - want[i]);
    const excess = err - (atol + rtol * Math.abs(want[i]));
    if (!(excess <= 0) && (worst < 0 || excess > worstExcess || Number.isNaN(err))) {
      worst = i;
      worstExcess = excess;
    }
  }
  if (worst >= 0) expect.fail(`${what}: element ${worst} is ${got[worst]}, expected ${want[worst]} (atol ${atol}, rtol ${rtol})`);
}

/**
 * Each tensor's worst element error, relative to that tensor's largest |expected| value (at least `floor`),
 * below `tol`: for whole parameter or gradient sets, where small entries next to large ones need no rtol.
 */
export function expectCloseToScale(got: Float32Array[], want: Float32Array[], tol: number, what: string, floor: number): void {
  want.forEach((w, i) => {
    let scale = floor;
    let worst = 0;
    for (let j = 0; j < w.length; j++) scale = Math.max(scale, Math.abs(w[j]));
    for (let j = 0; j < w.length; j++) worst = Math.max(worst, Math.abs(got[i][j] - w[j]));
    expect(worst / scale, `${what} ${i}`).toBeLessThan(tol);
  });
}
