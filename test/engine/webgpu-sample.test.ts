// The WGSL sampler against the CPU rule (src/engine/sampling.ts): the same tokens for greedy, temperature
// and top-p on random logits, logprobs within f32 rounding, and reproducible for a (seed, step).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SampleParams } from '../../src/engine/backend';
import { sampleRow } from '../../src/engine/sampling';
import type { WebGpuBackend } from '../../src/engine/webgpu/backend';
import { gpuAvailable } from '../helpers/gpu';
import { expectClose, gpuBackend, randn } from './webgpu-helpers';

const run = await gpuAvailable();

describe.skipIf(!run)('WebGPU sampling', () => {
  let gpu: WebGpuBackend;
  beforeAll(async () => {
    gpu = await gpuBackend();
  });
  afterAll(() => gpu?.dispose());

  async function both(logits: Float32Array, v: number, params: SampleParams[]) {
    const r = params.length;
    const { tokens, logprobs } = gpu.sample(gpu.tensor(logits, [r, v]), params);
    const cpuRows = params.map((p, i) => sampleRow(logits.subarray(i * v, (i + 1) * v), p));
    return {
      tokens: Array.from(await gpu.read(tokens)),
      logprobs: (await gpu.read(logprobs)) as Float32Array,
      want: cpuRows.map((c) => c.token),
      wantLogp: Float32Array.from(cpuRows.map((c) => c.logprob)),
    };
  }

  const settings: [number, number][] = [
    [0, 1], // greedy
    [1, 1],
    [0.7, 1],
    [1.3, 0.9],
    [1, 0.5],
    [0.8, 0.1],
  ];

  for (const v of [1, 7, 33, 130, 1000])
    it(`same tokens as the CPU rule, V=${v} (logprob: f32 log-sum-exp vs f64, 2e-5 abs + 1e-5 rel)`, async () => {
      const params: SampleParams[] = [];
      for (let i = 0; i < 24; i++) {
        const [temperature, topP] = settings[i % settings.length];
        params.push({ temperature, topP, seed: 1000 + i * 7919, step: i * 3 });
      }
      const logits = randn(params.length * v, v, 2.5);
      const r = await both(logits, v, params);
      expect(r.tokens).toEqual(r.want);
      expectClose(r.logprobs, r.wantLogp, 2e-5, 1e-5, `logprobs V=${v}`);
    });

  it('Qwen-sized vocabulary (V=151936): same tokens as the CPU rule on peaked logits', async () => {
    // Agreement is exact except when the target falls within the f32 resolution of probabilities (~1e-9)
    // of a cumulative boundary: on flat random logits that happens in ~1% of draws at this V. Peaked
    // (model-like) logits make it rarer still; this deterministic case has none on lavapipe.
    const v = 151936;
    const params = settings.map(([temperature, topP], i) => ({ temperature, topP, seed: 31 + i, step: 2 }));
    const logits = randn(params.length * v, 17, 1.5);
    for (let r = 0; r < params.length; r++) for (let j = 0; j < 40; j++) logits[r * v + ((j * 7919 + r) % v)] += 8 - j / 8;
    const r = await both(logits, v, params);
    expect(r.tokens).toEqual(r.want);
    expectClose(r.logprobs, r.wantLogp, 2e-5, 1e-5, 'logprobs V=151936');
  });

  it('splits rows over several dispatches when the probability scratch would pass maxBufferBytes', async () => {
    const small = await gpuBackend({ maxBufferBytes: 512 }); // V=33: 3 rows per dispatch
    try {
      const v = 33;
      const params = Array.from({ length: 7 }, (_, i) => ({ temperature: 1, topP: 0.8, seed: i, step: 1 }));
      const logits = randn(7 * v, 99, 2);
      // logits come from an op (ops allocate one buffer; only uploads are sharded): I (7,7) x L^T, L (33,7)
      const eye = new Float32Array(49).map((_, i) => (i % 8 === 0 ? 1 : 0));
      const lt = new Float32Array(v * 7);
      for (let r = 0; r < 7; r++) for (let c = 0; c < v; c++) lt[c * 7 + r] = logits[r * v + c];
      const l = small.matmul(small.tensor(eye, [7, 7]), small.tensor(lt, [v, 7]));
      const { tokens } = small.sample(l, params);
      const want = params.map((p, r) => sampleRow(logits.subarray(r * v, (r + 1) * v), p).token);
      expect(Array.from(await small.read(tokens))).toEqual(want);
    } finally {
      small.dispose();
    }
  });

  it('greedy breaks ties to the lowest index; nucleus keeps every token tied at the threshold', async () => {
    const v = 6;
    const logits = Float32Array.from([0, 3, 1, 3, 3, -1, /* row 2 */ 2, 2, 2, 1, 1, 0]);
    const params: SampleParams[] = [
      { temperature: 0, topP: 1, seed: 1, step: 0 },
      ...Array.from({ length: 30 }, (_, i) => ({ temperature: 1, topP: 0.3, seed: 9, step: i })),
    ];
    const data = new Float32Array(params.length * v);
    data.set(logits.subarray(0, 6));
    for (let i = 1; i < params.length; i++) data.set(logits.subarray(6, 12), i * v);
    const r = await both(data, v, params);
    expect(r.tokens[0]).toBe(1);
    expect(r.tokens).toEqual(r.want);
    // topP 0.3 reaches its mass at the first of the three tied tokens; all three stay in the nucleus
    expect(new Set(r.tokens.slice(1))).toEqual(new Set([0, 1, 2]));
  });

  it('is reproducible for a (seed, step) and the stream moves with step', async () => {
    const v = 130;
    const logits = new Float32Array(40 * v); // flat: every token equally likely
    const params = (step: number) => Array.from({ length: 40 }, (_, i) => ({ temperature: 1, topP: 1, seed: 42 + i, step }));
    const a = await both(logits, v, params(5));
    const b = await both(logits, v, params(5));
    const c = await both(logits, v, params(6));
    expect(a.tokens).toEqual(b.tokens);
    expect(a.tokens).toEqual(a.want);
    expect(c.tokens).toEqual(c.want);
    expect(c.tokens).not.toEqual(a.tokens);
    expect(new Set(a.tokens).size).toBeGreaterThan(20); // 40 draws over 130 equal tokens
  });

  it('rejects bad parameters before dispatch', () => {
    const x = gpu.zeros([2, 5]);
    expect(() => gpu.sample(x, [{ temperature: 1, topP: 1, seed: 0, step: 0 }])).toThrow(expect.objectContaining({ code: 'shape' }));
    const p = { temperature: 1, topP: 0, seed: 0, step: 0 };
    expect(() => gpu.sample(x, [p, p])).toThrow(expect.objectContaining({ code: 'shape' }));
  });
});
