// Host work of a steady decode step on WebGPU: with the pool's 'slot' reuse a step binds the very buffers the step
// before bound, so it creates no bind group; the first version ('lifo') binds other buffers step after step. The
// counters are what `npm run bench -- gpu` reports as dispatches_per_token and bind_groups_per_step.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildQwen3 } from '../../src/model/weights';
import { randomWeights } from '../../src/model/random';
import { forward, KvCache, type Qwen3Model } from '../../src/model/qwen3';
import type { WebGpuBackend } from '../../src/engine/webgpu/backend';
import { BufferPool } from '../../src/engine/webgpu/pool';
import { tinyConfig } from '../fixtures/tiny-model';
import { gpuAvailable } from '../helpers/gpu';
import { gpuBackend } from './webgpu-helpers';

const run = await gpuAvailable();
const cfg = tinyConfig({ hiddenSize: 64, numHeads: 4, numKvHeads: 2, intermediateSize: 96 });

describe.skipIf(!run)('WebGPU host work per decode step', () => {
  let gpu: WebGpuBackend;
  let model: Qwen3Model;
  beforeAll(async () => {
    gpu = await gpuBackend();
    model = (await buildQwen3(gpu, cfg, randomWeights(cfg, 5, 'f32'), { format: 'q4' })).model;
  });
  afterAll(() => {
    model?.free();
    gpu?.dispose();
  });

  /** Counters of each of `n` greedy decode steps after a 3-token prompt. */
  async function steps(n: number): Promise<{ dispatches: number; bindGroups: number }[]> {
    const cache = new KvCache(model, 1, n + 4);
    const out: { dispatches: number; bindGroups: number }[] = [];
    let token = 1;
    for (let i = 0; i < n + 1; i++) {
      const c0 = { ...gpu.ctx.counters };
      const ids = i === 0 ? Int32Array.from([1, 2, 3]) : Int32Array.from([token]);
      const pos = i === 0 ? Int32Array.from([0, 1, 2]) : Int32Array.from([2 + i]);
      const r = forward(model, cache, { ids, slot: new Int32Array(ids.length), pos }, { logitRows: Int32Array.from([ids.length - 1]) });
      const s = gpu.sample(r.logits, [{ temperature: 0, topP: 1, seed: 0, step: i }]);
      token = (await gpu.read(s.tokens))[0];
      for (const t of [r.logits, s.tokens, s.logprobs]) gpu.free(t);
      if (i > 0) out.push({ dispatches: gpu.ctx.counters.dispatches - c0.dispatches, bindGroups: gpu.ctx.counters.bindGroups - c0.bindGroups });
    }
    cache.free();
    return out;
  }

  it("'slot' reuse: after two steps a decode step creates no bind group; 'lifo' keeps creating them", async () => {
    gpu.ctx.bufferReuse = 'lifo';
    const lifo = await steps(6);
    gpu.ctx.bufferReuse = 'slot';
    const slot = await steps(6);
    const perStep = slot[0].dispatches;
    expect(perStep, 'a step dispatches every layer').toBeGreaterThan(cfg.numLayers * 10);
    for (const s of [...lifo, ...slot]) expect(s.dispatches, 'every step dispatches the same kernels').toBe(perStep);
    expect(slot.slice(2).map((s) => s.bindGroups)).toEqual([0, 0, 0, 0]);
    expect(lifo.slice(2).reduce((a, s) => a + s.bindGroups, 0), 'the first version binds other buffers (the counter counts)').toBeGreaterThan(0);
  });

  it("the pool hands out the lowest slot of a bucket under 'slot', the last one put under 'lifo'", () => {
    const bufs = [0, 1, 2].map((i) => ({ size: 256, destroy() {}, label: `b${i}` }) as unknown as GPUBuffer);
    const pool = new BufferPool(1 << 20);
    for (const b of bufs) pool.put(b); // slots 0, 1, 2
    expect(pool.take(256)).toBe(bufs[0]);
    expect(pool.take(256)).toBe(bufs[1]);
    pool.put(bufs[0]);
    expect(pool.take(256)).toBe(bufs[0]);
    pool.put(bufs[1]);
    pool.put(bufs[0]);
    pool.reuse = 'lifo';
    expect(pool.take(256)).toBe(bufs[0]);
    expect(pool.take(256)).toBe(bufs[1]);
    expect(pool.take(256)).toBe(bufs[2]);
    expect(pool.take(256)).toBeNull();
  });
});
