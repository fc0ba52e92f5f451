// The fused forward ops of the WebGPU backend (src/engine/webgpu/kernels/fused.ts), each against the unfused
// composition it replaces run on the CPU reference, on the fused GEMV (v6) and on its unfused fallback, f32/q8/q4,
// with and without subgroups; then whole decode steps of a model whose widths reach the fused GEMV: logits equal
// the CPU reference's with the fused ops on and off, with LoRA adapters on every projection or on some (those
// projections run unfused), and a step dispatches 9 ops per layer fewer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Backend, Tensor } from '../../src/engine/backend';
import { quantize } from '../../src/engine/quant';
import type { WebGpuBackend } from '../../src/engine/webgpu/backend';
import { gemvFusedFits } from '../../src/engine/webgpu/kernels/fused';
import { asGpu } from '../../src/engine/webgpu/tensor';
import { createLoraAdapter, type LoraTarget } from '../../src/model/lora';
import { forward, type ForwardOptions, KvCache, type Qwen3Model } from '../../src/model/qwen3';
import { randomWeights } from '../../src/model/random';
import { buildQwen3 } from '../../src/model/weights';
import { Rng } from '../../src/util/rng';
import { tinyConfig } from '../fixtures/tiny-model';
import { gpuAvailable } from '../helpers/gpu';
import { cpu, expectClose, expectCloseToScale, gpuBackend, randn } from './webgpu-helpers';

const run = await gpuAvailable();

type Dt = 'f32' | 'q8' | 'q4';
function weight(b: Backend, w: Float32Array, n: number, k: number, dtype: Dt): Tensor {
  return dtype === 'f32' ? b.tensor(w, [n, k]) : b.uploadQuantized(quantize(w, n, k, dtype));
}

/** Rows of (M, N_i) blocks side by side: (M, sum N_i). */
function concatCols(blocks: Float32Array[], m: number): Float32Array {
  const ns = blocks.map((b) => b.length / m);
  const total = ns.reduce((a, b) => a + b, 0);
  const out = new Float32Array(m * total);
  for (let r = 0; r < m; r++) {
    let c = 0;
    blocks.forEach((b, i) => {
      out.set(b.subarray(r * ns[i], (r + 1) * ns[i]), r * total + c);
      c += ns[i];
    });
  }
  return out;
}

describe.skipIf(!run)('WebGPU fused ops against the unfused composition on the CPU reference', { timeout: 900_000 }, () => {
  let gpu: WebGpuBackend;
  let noSubgroups: WebGpuBackend;
  beforeAll(async () => {
    gpu = await gpuBackend();
    noSubgroups = await gpuBackend({ subgroups: false });
  });
  afterAll(() => {
    gpu?.dispose();
    noSubgroups?.dispose();
  });

  // (M, K, [N_i]): K = 576 (> 512, a multiple of every word) reaches the fused GEMV for M <= 16 (M = 1: one row per
  // dispatch; 9: a full and a partly filled 8-row block); N_i not multiples of a workgroup's 8 rows, so a
  // workgroup's rows straddle two weights. M = 20 runs the unfused fallback (tiled, into column ranges) under v5, and
  // v7's tiles (fused, 8 rows of x per workgroup) under v7.
  const SHAPES: [number, number, number[]][] = [
    [1, 576, [20, 12, 12]],
    [9, 576, [8, 16]],
    [20, 576, [13, 7, 7]],
  ];
  // v6 (the fused v5) with and without subgroups, and v7 'gemv-lane' (whose workgroups of 128 rows straddle the
  // weights of these concatenations too)
  const backends = () => [
    ['subgroups', gpu, 'gemv2'],
    ['no subgroups', noSubgroups, 'gemv2'],
    ['gemv-lane', gpu, 'gemv-lane'],
  ] as const;

  for (const dtype of ['f32', 'q8', 'q4'] as const)
    it(`matmulConcat, matmulSwiglu, matmulAdd ${dtype}: fused GEMV (v6, v7) and fallback vs CPU matmuls (+ swiglu / add) (1e-4 abs + 1e-4 rel)`, async () => {
      for (const [label, b, gemv] of backends()) {
        if (label === 'subgroups' && !b.ctx.hasSubgroups) continue;
        b.gemvVersion = gemv;
        for (const [m, k, ns] of SHAPES) {
          const x = randn(m * k, m * 100 + k);
          const ws = ns.map((n, i) => randn(n * k, 7 * n + k + i, 0.5));
          const what = `${label} ${dtype} (${m},${k},[${ns}])`;
          // concat
          const cw = ws.map((w, i) => weight(cpu, w, ns[i], k, dtype));
          const gw = ws.map((w, i) => weight(b, w, ns[i], k, dtype));
          const cx = cpu.tensor(x, [m, k]);
          const gx = b.tensor(x, [m, k]);
          const parts = await Promise.all(cw.map((w) => cpu.read(cpu.matmul(cx, w)) as Promise<Float32Array>));
          const fused = b.fused!;
          expect(gemvFusedFits(asGpu(gx, 't'), gw.map((w) => asGpu(w, 't')), { version: 'auto', gemv }), `${what}: fused GEMV taken`).toBe(k > 512 && (m <= 16 || gemv === 'gemv-lane'));
          expectClose(await b.read(fused.matmulConcat(gx, gw)), concatCols(parts, m), 1e-4, 1e-4, `matmulConcat ${what}`);
          // swiglu over the first two (same N): gate = W0 rows, up = W0 rows of another draw
          const n0 = ns[0];
          const up = randn(n0 * k, 99 + k, 0.5);
          const cu = weight(cpu, up, n0, k, dtype);
          const gu = weight(b, up, n0, k, dtype);
          const want = await cpu.read(cpu.swiglu(cpu.matmul(cx, cw[0]), cpu.matmul(cx, cu)));
          expectClose(await b.read(fused.matmulSwiglu(gx, gw[0], gu)), want, 1e-4, 1e-4, `matmulSwiglu ${what}`);
          // residual
          const r = randn(m * n0, 5 + m);
          const wantAdd = await cpu.read(cpu.add(cpu.tensor(r, [m, n0]), cpu.matmul(cx, cw[0])));
          expectClose(await b.read(fused.matmulAdd(gx, gw[0], b.tensor(r, [m, n0]))), wantAdd, 1e-4, 1e-4, `matmulAdd ${what}`);
        }
      }
      gpu.gemvVersion = noSubgroups.gemvVersion = gpu.ctx.cpuAdapter ? 'gemv-lane' : 'gemv2';
    }, 900_000);

  it('the fused GEMV equals the unfused GEMV on the same device (v6 against v5, v7 against v7: same lanes, same order)', async () => {
    const before = gpu.gemvVersion;
    for (const gemv of ['gemv2', 'gemv-lane'] as const)
      for (const dtype of ['f32', 'q4'] as const) {
        gpu.gemvVersion = gemv;
        const [m, k, n] = [1, 1024, 40];
        const x = gpu.tensor(randn(m * k, 1), [m, k]);
        const w = [weight(gpu, randn(n * k, 2, 0.5), n, k, dtype), weight(gpu, randn(n * k, 3, 0.5), n, k, dtype)];
        const sep = await Promise.all(w.map((t) => gpu.read(gpu.matmul(x, t)) as Promise<Float32Array>));
        expectClose(await gpu.read(gpu.fused!.matmulConcat(x, w)), concatCols(sep, m), 1e-6, 1e-6, `concat ${gemv} ${dtype}`);
        const sw = await gpu.read(gpu.swiglu(gpu.matmul(x, w[0]), gpu.matmul(x, w[1])));
        expectClose(await gpu.read(gpu.fused!.matmulSwiglu(x, w[0], w[1])), sw, 1e-6, 1e-6, `swiglu ${gemv} ${dtype}`);
      }
    gpu.gemvVersion = before;
  });

  it('qkNormRope: q/k-norm + RoPE of each head and the v split vs CPU rmsnorm, rope (1e-5 abs + 1e-4 rel)', async () => {
    for (const [t, hq, hkv, d] of [
      [1, 16, 8, 128],
      [5, 4, 2, 8],
      [3, 6, 3, 64],
    ]) {
      const row = (hq + 2 * hkv) * d;
      const qkv = randn(t * row, t + hq + d, 2);
      const qNorm = randn(d, 11, 0.5).map((v) => 1 + v);
      const kNorm = randn(d, 12, 0.5).map((v) => 1 + v);
      const pos = Int32Array.from({ length: t }, (_, i) => 3 + 1000 * i);
      const q = new Float32Array(t * hq * d);
      const k = new Float32Array(t * hkv * d);
      const v = new Float32Array(t * hkv * d);
      for (let i = 0; i < t; i++) {
        q.set(qkv.subarray(i * row, i * row + hq * d), i * hq * d);
        k.set(qkv.subarray(i * row + hq * d, i * row + (hq + hkv) * d), i * hkv * d);
        v.set(qkv.subarray(i * row + (hq + hkv) * d, (i + 1) * row), i * hkv * d);
      }
      const cp = cpu.tensor(pos, [t]);
      const ref = (x: Float32Array, h: number, g: Float32Array) => cpu.read(cpu.rope(cpu.reshape(cpu.rmsnorm(cpu.tensor(x, [t * h, d]), cpu.tensor(g, [d]), 1e-6), [t, h, d]), cp, 1e6));
      const got = gpu.fused!.qkNormRope(gpu.tensor(qkv, [t, row]), gpu.tensor(qNorm, [d]), gpu.tensor(kNorm, [d]), gpu.tensor(pos, [t]), 1e-6, 1e6, { q: hq, kv: hkv });
      const what = `(${t},${hq},${hkv},${d})`;
      expect(got.q.shape).toEqual([t, hq, d]);
      expect(got.k.shape).toEqual([t, hkv, d]);
      expectClose(await gpu.read(got.q), await ref(q, hq, qNorm), 1e-5, 1e-4, `q ${what}`);
      expectClose(await gpu.read(got.k), await ref(k, hkv, kNorm), 1e-5, 1e-4, `k ${what}`);
      expect(Array.from(await gpu.read(got.v)), `v ${what}`).toEqual(Array.from(v));
    }
  });

  it('shape errors before dispatch', () => {
    const x = gpu.tensor(new Float32Array(8), [1, 8]);
    const w = gpu.tensor(new Float32Array(16), [2, 8]);
    const w2 = gpu.tensor(new Float32Array(18), [2, 9]);
    expect(() => gpu.fused!.matmulConcat(x, [w, w2])).toThrow();
    expect(() => gpu.fused!.matmulAdd(x, w, gpu.tensor(new Float32Array(3), [1, 3]))).toThrow();
    expect(() => gpu.fused!.qkNormRope(x, gpu.tensor(new Float32Array(2), [2]), gpu.tensor(new Float32Array(2), [2]), gpu.tensor(new Int32Array(1), [1]), 1e-6, 1e4, { q: 2, kv: 2 })).toThrow();
  });
});

// Widths past 512 so that every projection of a decode step takes the fused GEMV (q4: K a multiple of 32).
const cfg = tinyConfig({ hiddenSize: 576, numHeads: 10, numKvHeads: 2, headDim: 64, intermediateSize: 640, numLayers: 2 });

// software adapters on a loaded 2-core machine compile each kernel in seconds: generous timeouts
describe.skipIf(!run)('WebGPU decode with the fused ops: logits, LoRA, dispatches', { timeout: 900_000 }, () => {
  let gpu: WebGpuBackend;
  let gModel: Qwen3Model;
  let cModel: Qwen3Model;
  beforeAll(async () => {
    gpu = await gpuBackend();
    gModel = (await buildQwen3(gpu, cfg, randomWeights(cfg, 3, 'f32'), { format: 'q4' })).model;
    cModel = (await buildQwen3(cpu, cfg, randomWeights(cfg, 3, 'f32'), { format: 'q4' })).model;
  });
  afterAll(() => {
    gModel?.free();
    cModel?.free();
    gpu?.dispose();
  });

  /** Logits of a `prompt`-token prompt's last token, then of 3 decode steps. */
  async function logits(m: Qwen3Model, adapter: Pick<ForwardOptions, 'adapter'>, prompt = 5): Promise<Float32Array[]> {
    const cache = new KvCache(m, 1, prompt + 4);
    const out: Float32Array[] = [];
    const ids = Int32Array.from({ length: prompt }, (_, i) => (7 * i + 3) % cfg.vocabSize);
    let r = forward(m, cache, { ids, slot: new Int32Array(prompt), pos: Int32Array.from(ids, (_, i) => i) }, { ...adapter, logitRows: Int32Array.from([prompt - 1]) });
    out.push((await m.backend.read(r.logits)) as Float32Array);
    m.backend.free(r.logits);
    for (let s = 0; s < 3; s++) {
      r = forward(m, cache, { ids: Int32Array.from([(11 * s + 1) % cfg.vocabSize]), slot: new Int32Array(1), pos: Int32Array.from([prompt + s]) }, adapter);
      out.push((await m.backend.read(r.logits)) as Float32Array);
      m.backend.free(r.logits);
    }
    cache.free();
    return out;
  }

  it('logits equal the CPU reference with the fused ops on and off (prefill of 5 and 20 tokens, 3 decode steps)', async () => {
    for (const prompt of [5, 20]) {
      const want = await logits(cModel, {}, prompt);
      for (const fuse of [true, false]) {
        gpu.fuse = fuse;
        expectCloseToScale(await logits(gModel, {}, prompt), want, 1e-4, `fuse=${fuse} prompt=${prompt}`, 1e-3);
      }
    }
    gpu.fuse = true;
  });

  // every target, then pairs on o and down only (q/k/v and gate/up fused, o and down unfused), then on q and up
  // only (the attention projection and the MLP's gate/up unfused, o and down fused)
  const TARGET_SETS: LoraTarget[][] = [['q', 'k', 'v', 'o', 'gate', 'up', 'down'], ['o', 'down'], ['q', 'up']];
  for (const targets of TARGET_SETS)
    it(`a LoRA adapter on ${targets.join(', ')} (B != 0) gives the CPU reference's logits with the fused ops on`, async () => {
      const make = (b: Backend) => {
        const a = createLoraAdapter(b, cfg, { name: 't', rank: 4, alpha: 8, seed: 9, targets });
        const rng = new Rng(4);
        for (const [n, t] of a.parameters()) if (n.includes('lora_B')) b.write(t, Float32Array.from({ length: t.shape[0] * t.shape[1] }, () => 0.05 * rng.normal()));
        return a;
      };
      const ca = make(cpu);
      const ga = make(gpu);
      gpu.fuse = true;
      const want = await logits(cModel, { adapter: ca });
      const base = await logits(cModel, {});
      const got = await logits(gModel, { adapter: ga });
      expectCloseToScale(got, want, 1e-4, `adapter on ${targets}`, 1e-3);
      // the adapter moves the logits well past that tolerance: the test would see it dropped
      let moved = 0;
      for (let i = 0; i < want.length; i++) for (let j = 0; j < want[i].length; j++) moved = Math.max(moved, Math.abs(want[i][j] - base[i][j]));
      expect(moved).toBeGreaterThan(1e-2);
      ga.free(gpu);
    });

  it('a decode step dispatches 9 ops per layer fewer with the fused ops (18 -> 9)', async () => {
    const count = async (fuse: boolean) => {
      gpu.fuse = fuse;
      const cache = new KvCache(gModel, 1, 8);
      const c0 = gpu.ctx.counters.dispatches;
      const r = forward(gModel, cache, { ids: Int32Array.from([1]), slot: new Int32Array(1), pos: Int32Array.from([0]) });
      const n = gpu.ctx.counters.dispatches - c0;
      await gpu.read(r.logits);
      gpu.free(r.logits);
      cache.free();
      return n;
    };
    const [off, on] = [await count(false), await count(true)];
    expect(off - on).toBe(9 * cfg.numLayers);
    gpu.fuse = true;
  });
});
