// Every elementwise / row-wise / gather op of the WebGPU backend against the CPU reference, on random
// inputs whose sizes are not multiples of any workgroup or tile size.
import { afterAll, beforeAll, describe, it } from 'vitest';
import type { WebGpuBackend } from '../../src/engine/webgpu/backend';
import { gpuAvailable } from '../helpers/gpu';
import { cpu, expectClose, gpuBackend, randInt, randn } from './webgpu-helpers';

const run = await gpuAvailable();

describe.skipIf(!run)('WebGPU ops vs CPU reference', () => {
  let gpu: WebGpuBackend;
  beforeAll(async () => {
    gpu = await gpuBackend();
  });
  afterAll(() => gpu?.dispose());

  const both = (data: Float32Array | Int32Array, shape: number[]) => [cpu.tensor(data, shape), gpu.tensor(data, shape)] as const;

  it('add, scale, swiglu (f32 elementwise: one rounding each, so 1e-6 relative; exp in swiglu: 1e-5)', async () => {
    for (const n of [1, 7, 33, 65, 130, 1000]) {
      const a = randn(n, n);
      const b = randn(n, n + 1, 3);
      const [ca, ga] = both(a, [n]);
      const [cb, gb] = both(b, [n]);
      expectClose(await gpu.read(gpu.add(ga, gb)), await cpu.read(cpu.add(ca, cb)), 1e-6, 1e-6, `add n=${n}`);
      expectClose(await gpu.read(gpu.scale(ga, -0.37)), await cpu.read(cpu.scale(ca, -0.37)), 1e-6, 1e-6, `scale n=${n}`);
      expectClose(await gpu.read(gpu.swiglu(ga, gb)), await cpu.read(cpu.swiglu(ca, cb)), 1e-6, 1e-5, `swiglu n=${n}`);
    }
  });

  it('rmsnorm (f32 sum of squares vs f64: 1e-5 relative), also as q/k-norm over (T,H,D)', async () => {
    for (const [r, c] of [[1, 1], [7, 33], [5, 130], [3, 1000]]) {
      const [cx, gx] = both(randn(r * c, r + c, 2), [r, c]);
      const [cw, gw] = both(randn(c, c + 9), [c]);
      expectClose(await gpu.read(gpu.rmsnorm(gx, gw, 1e-6)), await cpu.read(cpu.rmsnorm(cx, cw, 1e-6)), 1e-5, 1e-5, `rmsnorm ${r}x${c}`);
    }
    const [cx, gx] = both(randn(3 * 5 * 16, 4), [3, 5, 16]);
    const [cw, gw] = both(randn(16, 5), [16]);
    expectClose(await gpu.read(gpu.rmsnorm(gx, gw, 1e-6)), await cpu.read(cpu.rmsnorm(cx, cw, 1e-6)), 1e-5, 1e-5, 'qk-norm');
  });

  it('rope (angles to ~1e-6 rad by exact range reduction; values ~N(0,1): 1e-5 absolute) up to position 5000', async () => {
    for (const [t, h, d] of [[1, 1, 2], [7, 3, 10], [5, 2, 64], [3, 4, 128]]) {
      const pos = Int32Array.from({ length: t }, (_, i) => [0, 1, 17, 333, 4999, 2048, 77][i % 7]);
      const [cx, gx] = both(randn(t * h * d, t * d), [t, h, d]);
      const [cp, gp] = both(pos, [t]);
      for (const theta of [10000, 1000000])
        expectClose(await gpu.read(gpu.rope(gx, gp, theta)), await cpu.read(cpu.rope(cx, cp, theta)), 1e-5, 1e-5, `rope ${t}x${h}x${d} theta ${theta}`);
    }
  });

  it('logSoftmax (f32 reductions over up to 5000 logits: 1e-5 absolute on values ~ -10)', async () => {
    for (const [r, v] of [[1, 1], [7, 33], [3, 130], [2, 5000]]) {
      const [cx, gx] = both(randn(r * v, r * v, 4), [r, v]);
      expectClose(await gpu.read(gpu.logSoftmax(gx)), await cpu.read(cpu.logSoftmax(cx)), 1e-5, 1e-6, `logSoftmax ${r}x${v}`);
    }
  });

  it('gatherRows and embedding (f32 table) are exact copies', async () => {
    const [cx, gx] = both(randn(13 * 33, 2), [13, 33]);
    const rows = Int32Array.from([12, 0, 5, 5, 7]);
    const [cr, gr] = both(rows, [5]);
    expectClose(await gpu.read(gpu.gatherRows(gx, gr)), await cpu.read(cpu.gatherRows(cx, cr)), 0, 0, 'gatherRows');
    const ids = randInt(65, 13, 3);
    const [ci, gi] = both(ids, [65]);
    expectClose(await gpu.read(gpu.embedding(gx, gi)), await cpu.read(cpu.embedding(cx, ci)), 0, 0, 'embedding f32');
  });

  it('out-of-range ids and rows give zero rows (GPU indices cannot be checked on the host without a readback)', async () => {
    const x = gpu.tensor(randn(4 * 3, 5), [4, 3]);
    const rows = gpu.tensor(Int32Array.from([1, -1, 4, 3]), [4]);
    const got = await gpu.read(gpu.gatherRows(x, rows));
    const xs = await gpu.read(x);
    expectClose(got, [...xs.subarray(3, 6), 0, 0, 0, 0, 0, 0, ...xs.subarray(9, 12)], 0, 0, 'gatherRows out of range');
    const emb = await gpu.read(gpu.embedding(x, gpu.tensor(Int32Array.from([7, 0]), [2])));
    expectClose(emb, [0, 0, 0, ...xs.subarray(0, 3)], 0, 0, 'embedding out of range');
  });

  it('zeros, write, reshape and read round-trip', async () => {
    const z = gpu.zeros([7, 3]);
    expectClose(await gpu.read(z), new Float32Array(21), 0, 0, 'zeros');
    const data = randn(21, 8);
    gpu.write(z, data);
    const v = gpu.reshape(z, [3, 7]);
    expectClose(await gpu.read(v), data, 0, 0, 'write+reshape');
    // a (64,4) view of a (4,64) tensor fills its 1 KiB buffer exactly: reads must size copies by the view
    const big = randn(256, 12);
    expectClose(await gpu.read(gpu.reshape(gpu.tensor(big, [4, 64]), [64, 4])), big, 0, 0, 'reshape exact-size');
    expectClose(await gpu.read(gpu.reshape(gpu.tensor(big, [64, 4]), [256])), big, 0, 0, 'reshape to 1-D');
    const zi = gpu.zeros([5], 'i32');
    expectClose(await gpu.read(zi), new Int32Array(5), 0, 0, 'zeros i32');
  });
});
