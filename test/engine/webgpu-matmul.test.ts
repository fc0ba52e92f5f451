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
  let noSubgroups: WebGpuBackend;
  beforeAll(async () => {
    gpu = await gpuBackend();
    noSubgroups = await gpuBackend({ subgroups: false });
    // 512 bytes: a (65,33) f32 weight becomes 17 shards, a q4 one 5 (kept tiny so shapes stay small)
    sharded = await gpuBackend({ maxBufferBytes: 512 });
  });
  afterAll(() => {
    gpu?.dispose();
    sharded?.dispose();
    noSubgroups?.dispose();
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

  // v5 'gemv2' takes K a multiple of its 16-byte word (32 q4, 16 q8, 4 f32; other K run v3, as in the loop
  // above): these shapes reach it with fewer groups than lanes (K = 64 q4: 2 groups for a subgroup of 8), several
  // groups per lane (K = 1024), both row counts (1, 8), partly filled 8-row blocks (M = 3, 9), a partly filled
  // last workgroup of 8 outputs (N = 9, 17, 65, 130), and a row count past one workgroup's rows.
  const GEMV_SHAPES: [number, number, number][] = [
    [1, 64, 33],
    [3, 96, 9],
    [9, 128, 130],
    [1, 1024, 17],
    [16, 256, 65],
  ];
  for (const subgroups of [true, false])
    for (const dtype of ['f32', 'q8', 'q4'])
      it(`matmul gemv2 ${dtype} ${subgroups ? 'with subgroupAdd' : 'without subgroups (workgroup-memory reduction)'}, and gemv (v3) and gemv-lane (v7) on the same shapes (f32 accumulation over K <= 1024 terms ~N(0,1)/2: 1e-4 abs + 1e-4 rel)`, async () => {
        const b = subgroups ? gpu : noSubgroups;
        if (subgroups && !gpu.ctx.hasSubgroups) {
          console.warn('this adapter has no subgroups: the subgroupAdd variant is not tested here');
          return;
        }
        for (const version of ['gemv', 'gemv2', 'gemv-lane'] as const)
          for (const [m, k, n] of GEMV_SHAPES) {
            const x = randn(m * k, m * 1000 + k);
            const w = randn(n * k, n * 1000 + k + 1, 0.5);
            const want = await cpu.read(cpu.matmul(cpu.tensor(x, [m, k]), weights(cpu, w, n, k, dtype)));
            b.matmulVersion = version;
            const got = await b.read(b.matmul(b.tensor(x, [m, k]), weights(b, w, n, k, dtype)));
            expectClose(got, want, 1e-4, 1e-4, `${version} ${dtype} (${m},${k},${n}) subgroups ${b.ctx.hasSubgroups}`);
          }
        b.matmulVersion = 'auto';
      });

  it("'auto' decodes with the backend's GEMV (gemv-lane on a CPU adapter, gemv2 on a GPU; gemv when asked): each gives the reference's result", async () => {
    const [m, k, n] = [2, 1024, 40];
    const x = randn(m * k, 3);
    const w = randn(n * k, 4, 0.5);
    const want = await cpu.read(cpu.matmul(cpu.tensor(x, [m, k]), weights(cpu, w, n, k, 'q4')));
    const before = gpu.gemvVersion;
    expect(before).toBe(gpu.ctx.cpuAdapter ? 'gemv-lane' : 'gemv2');
    for (const gemv of ['gemv', 'gemv2', 'gemv-lane'] as const) {
      gpu.gemvVersion = gemv;
      const got = await gpu.read(gpu.matmul(gpu.tensor(x, [m, k]), weights(gpu, w, n, k, 'q4')));
      expectClose(got, want, 1e-4, 1e-4, `auto with ${gemv}`);
    }
    gpu.gemvVersion = before;
  });

  // v7 with more rows than one workgroup's 128 and a last, partial workgroup; a 151936-row q8 table (the 0.6B
  // shape's tied LM head is larger still) is out of reach of a quick test, so sharding stands in for its shards.
  // M = 40: five blocks of 8 rows of x in the grid's z (the tile 'auto' takes for every M on a CPU adapter)
  it('gemv-lane over several workgroups, M = 1, 9 and 40, f32 / q8 / q4 (1e-4 abs + 1e-4 rel)', async () => {
    for (const dtype of ['f32', 'q8', 'q4'])
      for (const [m, k, n] of [[1, 576, 300], [9, 64, 257], [40, 96, 130]] as const) {
        const x = randn(m * k, m + k);
        const w = randn(n * k, n + k, 0.5);
        const want = await cpu.read(cpu.matmul(cpu.tensor(x, [m, k]), weights(cpu, w, n, k, dtype)));
        gpu.matmulVersion = 'gemv-lane';
        const got = await gpu.read(gpu.matmul(gpu.tensor(x, [m, k]), weights(gpu, w, n, k, dtype)));
        expectClose(got, want, 1e-4, 1e-4, `gemv-lane ${dtype} (${m},${k},${n})`);
      }
    gpu.matmulVersion = 'auto';
  });

  for (const version of ['gemv2', 'gemv-lane'] as const)
    it(`sharded weights under ${version} equal the unsharded results exactly`, async () => {
      const [m, k, n] = [3, 32, 65]; // x (3,32) f32 stays in one 512-byte buffer
      const x = randn(m * k, 11);
      const w = randn(n * k, 12);
      for (const dtype of ['f32', 'q8', 'q4']) {
        const ws = weights(sharded, w, n, k, dtype) as unknown as { parts: unknown[] };
        expect(ws.parts.length, 'the weight is really sharded').toBeGreaterThan(1);
        gpu.matmulVersion = sharded.matmulVersion = version;
        const want = await gpu.read(gpu.matmul(gpu.tensor(x, [m, k]), weights(gpu, w, n, k, dtype)));
        const got = await sharded.read(sharded.matmul(sharded.tensor(x, [m, k]), ws as unknown as Tensor));
        expectClose(got, want, 0, 0, `sharded ${version} ${dtype}`);
      }
      gpu.matmulVersion = sharded.matmulVersion = 'auto';
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
