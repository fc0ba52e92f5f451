// The WebGPU sampler on logits that make no distribution: it used to return token -1 (then reported far
// away as "token id -1 outside the vocabulary"); it now marks the row NON_FINITE_TOKEN with a NaN logprob,
// and generate() says the logits are not finite. -Inf logits (masking) stay legal.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WebGpuBackend } from '../../src/engine/webgpu/backend';
import { NON_FINITE_TOKEN } from '../../src/engine/webgpu/kernels/sample';
import { gpuAvailable } from '../helpers/gpu';
import { gpuBackend } from '../engine/webgpu-helpers';

const run = await gpuAvailable();

describe.skipIf(!run)('WebGPU sampler: non-finite distributions', () => {
  let gpu: WebGpuBackend;
  beforeAll(async () => {
    gpu = await gpuBackend();
  });
  afterAll(() => gpu?.dispose());

  it('NaN, +Inf and all -Inf rows are reported as such; a row with some -Inf samples normally', async () => {
    const v = 300;
    const rows = [
      new Float32Array(v).fill(NaN),
      Float32Array.from({ length: v }, (_, i) => (i === 17 ? Infinity : 0)),
      new Float32Array(v).fill(-Infinity),
      Float32Array.from({ length: v }, (_, i) => (i === 5 ? 2 : i % 2 ? -Infinity : 0)),
      Float32Array.from({ length: v }, (_, i) => (i === 123 ? NaN : 0)),
    ];
    const logits = new Float32Array(rows.length * v);
    rows.forEach((r, i) => logits.set(r, i * v));
    for (const temperature of [0, 1]) {
      const params = rows.map((_, i) => ({ temperature, topP: 1, seed: 7, step: i }));
      const out = gpu.sample(gpu.tensor(logits, [rows.length, v]), params);
      const tokens = Array.from(await gpu.read(out.tokens));
      const lps = Array.from(await gpu.read(out.logprobs));
      expect(tokens[0]).toBe(NON_FINITE_TOKEN);
      expect(tokens[1]).toBe(NON_FINITE_TOKEN);
      expect(tokens[2]).toBe(NON_FINITE_TOKEN);
      expect(tokens[4]).toBe(NON_FINITE_TOKEN);
      expect(Number.isNaN(lps[0])).toBe(true);
      expect(tokens[3] === 5 || (tokens[3] >= 0 && tokens[3] % 2 === 0)).toBe(true);
      if (temperature === 0) expect(tokens[3]).toBe(5);
      expect(Number.isFinite(lps[3])).toBe(true);
    }
  }, 60_000);
});
