// Matmul (every kernel version x f32/q8/q4) and embedding (f32/q8/q4 tables) vs the CPU reference on the
// same quantized weights, plus row-sharded weights/tables equal to unsharded ones.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Tensor } from '../../src/engine/backend';
import { quantize } from '../../src/engine/quant';
import { MATMUL_VERSIONS } from '../../src/engine/webgpu/kernels/matmul';
import type { WebGpuBackend } from '../../src/engine/webgpu/backend';
import { gpuAvailable } from '../helpers/gpu';
import { cpu, expectClose, gpuBackend, randInt, randn } from './webgpu-helpers';

const run = await gpuAvailable();
// (M,K,N): none a multiple of the 64x64x16 tile, the 8-row gemv block or the 8-value q4 word; M = 1, 2, 3,
// 7, 9, 33, 65 reach both gemv row counts (1, 8), partly filled 8-row blocks and chunking
const SHAPES: [number, number, number][] = [
  [1, 7, 33],
  [2, 33, 7],
  [3, 65, 9],
  [7, 33, 65],
  [65, 130, 7],
  [9, 64, 130],
  [33, 65, 1],
];

describe.skipIf(!run)('WebGPU matmul and embedding', () => {
  let gpu: WebGpuBackend;
  let sharded: WebGpuBackend;
  beforeAll(async () => {
    gpu = await gpuBackend();
    // 512 bytes: a (65,33) f32 weight becomes 17 shards, a q4 one 5 (kept tiny so shapes stay small)
    sharded = await gpuBackend({ maxBufferBytes: 512 });
  });
  afterAll(() => {
    gpu?.dispose();
    sharded?.dispose();
  });

  function weights(b: { tensor(d: Float32Array, s: number[]): Tensor; uploadQuantized: typeof cpu.uploadQuantized }, w: Float32Array, n: number, k: number, dtype: string) {
    return dtype === 'f32' ? b.tensor(w, [n, k]) : b.uploadQuantized(quantize(w, n, k, dtype as 'q8' | 'q4'));
  }

  for (const dtype of ['f32', 'q8', 'q4'])
    for (const version of MATMUL_VERSIONS)
      it(`matmul ${version} ${dtype} (f32 accumulation over K <= 130 terms ~N(0,1): 1e-4 abs + 1e-4 rel)`, async () => {
        for (const [m, k, n] of SHAPES) {
          const x = randn(m * k, m * 1000 + k);
          const w = randn(n * k, n * 1000 + k + 1, 0.5);
          const want = await cpu.read(cpu.matmul(cpu.tensor(x, [m, k]), weights(cpu, w, n, k, dtype)));
          gpu.matmulVersion = version;
          const got = await gpu.read(gpu.matmul(gpu.tensor(x, [m, k]), weights(gpu, w, n, k, dtype)));
          expectClose(got, want, 1e-4, 1e-4, `${version} ${dtype} (${m},${k},${n})`);
        }
        gpu.matmulVersion = 'auto';
      });

  it('matmul rejects mismatched shapes before dispatch', () => {
    const x = gpu.tensor(randn(6, 1), [2, 3]);
    const w = gpu.tensor(randn(8, 2), [2, 4]);
    expect(() => gpu.matmul(x, w)).toThrow(expect.objectContaining({ code: 'shape' }));
    expect(() => gpu.add(x, w)).toThrow(expect.objectContaining({ code: 'shape' }));
    expect(() => gpu.embedding(w, x)).toThrow(expect.objectContaining({ code: 'shape' }));
  });

  for (const dtype of ['f32', 'q8', 'q4'])
    it(`embedding ${dtype} table is an exact row copy of the dequantized table`, async () => {
      const [v, c] = [37, 65];
      const table = randn(v * c, 77);
      const ids = randInt(33, v, 5);
      const want = await cpu.read(cpu.embedding(weights(cpu, table, v, c, dtype), cpu.tensor(ids, [33])));
      const got = await gpu.read(gpu.embedding(weights(gpu, table, v, c, dtype), gpu.tensor(ids, [33])));
      expectClose(got, want, 0, 0, `embedding ${dtype}`);
    });

  for (const dtype of ['f32', 'q8', 'q4'])
    it(`sharded ${dtype} weight: matmul (every version) and embedding equal the unsharded results exactly`, async () => {
      const [m, k, n] = [3, 33, 65];
      const x = randn(m * k, 9);
      const w = randn(n * k, 10);
      const ws = weights(sharded, w, n, k, dtype) as unknown as { parts: unknown[] };
      expect(ws.parts.length, 'the weight is really sharded').toBeGreaterThan(3);
      for (const version of MATMUL_VERSIONS) {
        gpu.matmulVersion = sharded.matmulVersion = version;
        const want = await gpu.read(gpu.matmul(gpu.tensor(x, [m, k]), weights(gpu, w, n, k, dtype)));
        const got = await sharded.read(sharded.matmul(sharded.tensor(x, [m, k]), ws as unknown as Tensor));
        expectClose(got, want, 0, 0, `sharded ${version} ${dtype}`);
      }
      gpu.matmulVersion = sharded.matmulVersion = 'auto';
      const ids = Int32Array.from([0, 64, 17, 33, 2, 64]);
      const want = await gpu.read(gpu.embedding(weights(gpu, w, n, k, dtype), gpu.tensor(ids, [6])));
      const got = await sharded.read(sharded.embedding(ws as unknown as Tensor, sharded.tensor(ids, [6])));
      expectClose(got, want, 0, 0, `sharded embedding ${dtype}`);
      if (dtype === 'f32') expectClose(await sharded.read(ws as unknown as Tensor), w, 0, 0, 'sharded read');
    });
});
