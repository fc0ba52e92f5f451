// WGSL training kernels against the CPU reference (itself checked by finite differences in
// ref-grad.test.ts), on random shapes with sizes that are not multiples of any tile or workgroup.
// Tolerance: worst |gpu - cpu| <= TOL * max |cpu| per output (f32 on the GPU vs f64 accumulation).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Backend, Tensor } from '../../src/engine/backend';
import { quantize } from '../../src/engine/quant';
import { Rng } from '../../src/util/rng';
import type { GrpoOptions } from '../../src/engine/train';
import type { WebGpuBackend } from '../../src/engine/webgpu/backend';
import { gpuAvailable } from '../helpers/gpu';
import { cpu, gpuBackend, randInt, randn } from '../engine/webgpu-helpers';

const run = await gpuAvailable();
const TOL = 2e-5;

function near(got: ArrayLike<number>, want: ArrayLike<number>, what: string, tol = TOL): void {
  expect(got.length, `${what}: length`).toBe(want.length);
  let scale = 0;
  let worst = 0;
  for (let i = 0; i < want.length; i++) scale = Math.max(scale, Math.abs(want[i]));
  for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i] - want[i]));
  expect(Number.isFinite(worst) && worst <= tol * Math.max(scale, 1e-6), `${what}: worst error ${worst} vs max ${scale}`).toBe(true);
}

describe.skipIf(!run)('WGSL training kernels vs CPU reference', () => {
  let gpu: WebGpuBackend;
  beforeAll(async () => {
    gpu = await gpuBackend();
  });
  afterAll(() => gpu?.dispose());
  const ops = (b: Backend) => b.train;
  // the same host data on both backends
  const on = (data: Float32Array | Int32Array, shape: number[]) => [cpu.tensor(data, shape), gpu.tensor(data, shape)] as const;
  const both = async (f: (b: Backend, i: 0 | 1) => Tensor, what: string, tol = TOL) =>
    near(await gpu.read(f(gpu, 1)), await cpu.read(f(cpu, 0)), what, tol);

  it('matmul dX through f32 / q8 / q4 weights, and dW accumulation', async () => {
    for (const [M, K, N] of [[1, 5, 3], [7, 37, 19], [70, 130, 67]]) {
      const w = randn(N * K, N + K);
      const dy = on(randn(M * N, M), [M, N]);
      const x = on(randn(M * K, K), [M, K]);
      for (const kind of ['f32', 'q8', 'q4'] as const) {
        const W = kind === 'f32' ? on(w, [N, K]) : ([cpu.uploadQuantized(quantize(w, N, K, kind)), gpu.uploadQuantized(quantize(w, N, K, kind))] as const);
        await both((b, i) => ops(b).matmulBackwardInput(dy[i], W[i]), `dX ${kind} (${M},${K},${N})`);
      }
      const dw0 = randn(N * K, 5);
      await both((b, i) => {
        const dw = b.tensor(dw0, [N, K]);
        ops(b).matmulBackwardWeight(dy[i], x[i], dw);
        return dw;
      }, `dW (${M},${K},${N})`);
    }
  });

  it('random shapes (seeded): matmul dX/dW, rmsnorm, attention', async () => {
    const rng = new Rng(77);
    const dim = (max: number) => 1 + rng.int(max);
    for (let trial = 0; trial < 4; trial++) {
      const [M, K, N] = [dim(80), dim(100), dim(90)];
      const kind = (['f32', 'q8', 'q4'] as const)[trial % 3];
      const w = randn(N * K, 100 + trial);
      const W = kind === 'f32' ? on(w, [N, K]) : ([cpu.uploadQuantized(quantize(w, N, K, kind)), gpu.uploadQuantized(quantize(w, N, K, kind))] as const);
      const dy = on(randn(M * N, 200 + trial), [M, N]);
      const x = on(randn(M * K, 300 + trial), [M, K]);
      await both((b, i) => ops(b).matmulBackwardInput(dy[i], W[i]), `dX ${kind} (${M},${K},${N})`);
      await both((b, i) => {
        const dw = b.zeros([N, K]);
        ops(b).matmulBackwardWeight(dy[i], x[i], dw);
        return dw;
      }, `dW (${M},${K},${N})`);
      await both((b, i) => ops(b).rmsnormBackward(dy[i], dy[i], b.tensor(randn(N, 400 + trial), [N]), 1e-6, null), `rmsnorm (${M},${N})`);
      // head sizes of the other attention test: each new D compiles two pipelines, slow on lavapipe
      const [Hkv, group, D] = [dim(3), dim(3), [6, 16][trial % 2]];
      const Hq = Hkv * group;
      const lens = [dim(9), dim(9)];
      const slot = Int32Array.from(lens.flatMap((n, s) => Array.from({ length: n }, () => s)));
      const pos = Int32Array.from(lens.flatMap((n) => Array.from({ length: n }, (_, i) => i)));
      const T = slot.length;
      const maxT = Math.max(...lens);
      const q = randn(T * Hq * D, 500 + trial);
      const k = randn(T * Hkv * D, 600 + trial);
      const dO = randn(T * Hq * D, 700 + trial);
      const res = [cpu, gpu].map((b: Backend) => {
        const lay = { slot: b.tensor(slot, [T]), pos: b.tensor(pos, [T]) };
        const kc = b.zeros([2, maxT, Hkv, D]);
        const vc = b.zeros([2, maxT, Hkv, D]);
        b.kvWrite(kc, vc, b.tensor(k, [T, Hkv, D]), b.tensor(k, [T, Hkv, D]), lay);
        const g = ops(b).attentionBackward(b.tensor(dO, [T, Hq, D]), b.tensor(q, [T, Hq, D]), kc, vc, lay);
        return { dq: g.dq, ...ops(b).kvWriteBackward(g.dkCache, g.dvCache, lay) };
      });
      for (const key of ['dq', 'dk', 'dv'] as const) near(await gpu.read(res[1][key]), await cpu.read(res[0][key]), `attention ${key} T=${T} Hq=${Hq} Hkv=${Hkv} D=${D}`, 1e-4);
    }
  });

  it('matmul dX through a q4 weight sharded by rows (several buffers)', async () => {
    const small = await gpuBackend({ maxBufferBytes: 1024 });
    try {
      const [M, K, N] = [5, 64, 41];
      const w = randn(N * K, 7);
      const W = small.uploadQuantized(quantize(w, N, K, 'q4'));
      expect((W as unknown as { parts: unknown[] }).parts.length).toBeGreaterThan(1);
      const dy = randn(M * N, 8);
      const got = await small.read(small.train.matmulBackwardInput(small.tensor(dy, [M, N]), W));
      const want = await cpu.read(cpu.train.matmulBackwardInput(cpu.tensor(dy, [M, N]), cpu.uploadQuantized(quantize(w, N, K, 'q4'))));
      near(got, want, 'sharded dX');
    } finally {
      small.dispose();
    }
  });

  it('rmsnorm (dx and dw), rope, swiglu, log-softmax', async () => {
    for (const [R, C] of [[1, 7], [5, 33], [3, 300], [130, 9]]) {
      const dy = on(randn(R * C, 1), [R, C]);
      const x = on(randn(R * C, 2), [R, C]);
      const w = on(randn(C, 3), [C]);
      await both((b, i) => ops(b).rmsnormBackward(dy[i], x[i], w[i], 1e-6, null), `rmsnorm dx (${R},${C})`);
      await both((b, i) => {
        const dw = b.tensor(new Float32Array(C).fill(0.25), [C]);
        ops(b).rmsnormBackward(dy[i], x[i], w[i], 1e-6, dw);
        return dw;
      }, `rmsnorm dw (${R},${C})`);
      await both((b, i) => ops(b).swigluBackward(dy[i], x[i], x[i]).dGate, `swiglu dGate (${R},${C})`);
      await both((b, i) => ops(b).swigluBackward(dy[i], x[i], dy[i]).dUp, `swiglu dUp (${R},${C})`);
      await both((b, i) => ops(b).logSoftmaxBackward(dy[i], b.logSoftmax(x[i])), `logSoftmax (${R},${C})`);
    }
    const [T, H, D] = [5, 3, 10];
    const dy = on(randn(T * H * D, 4), [T, H, D]);
    const pos = on(Int32Array.of(0, 3, 17, 900, 31000), [T]);
    await both((b, i) => ops(b).ropeBackward(dy[i], pos[i], 1e6), 'rope', 1e-5);
  });

  it('attention + kvWrite backward (GQA, two interleaved sequences, odd sizes)', async () => {
    for (const [Hq, Hkv, D] of [[4, 2, 6], [3, 1, 16]]) {
      const slot = Int32Array.of(0, 1, 1, 0, 1, 0, 1, 1, 1);
      const pos = Int32Array.of(0, 0, 1, 1, 2, 2, 3, 4, 5);
      const [T, S, maxT] = [slot.length, 2, 7];
      const lay = [0, 1].map((i) => ({ slot: on(slot, [T])[i], pos: on(pos, [T])[i] }));
      const q = on(randn(T * Hq * D, 10), [T, Hq, D]);
      const k = on(randn(T * Hkv * D, 11), [T, Hkv, D]);
      const v = on(randn(T * Hkv * D, 12), [T, Hkv, D]);
      const dO = on(randn(T * Hq * D, 13), [T, Hq, D]);
      const res = [cpu, gpu].map((b: Backend, i) => {
        const kc = b.zeros([S, maxT, Hkv, D]);
        const vc = b.zeros([S, maxT, Hkv, D]);
        b.kvWrite(kc, vc, k[i], v[i], lay[i]);
        const g = ops(b).attentionBackward(dO[i], q[i], kc, vc, lay[i]);
        return { ...g, ...ops(b).kvWriteBackward(g.dkCache, g.dvCache, lay[i]) };
      });
      for (const key of ['dq', 'dkCache', 'dvCache', 'dk', 'dv'] as const)
        near(await gpu.read(res[1][key]), await cpu.read(res[0][key]), `attention ${key} Hq=${Hq} Hkv=${Hkv} D=${D}`, 1e-4);
    }
  });

  it('attention backward over KV caches sharded by slots', async () => {
    const [Hq, Hkv, D, S, maxT] = [4, 2, 8, 3, 12];
    // one slot per buffer (768 bytes, also the size of q): the caches (S,maxT,Hkv,D) become three shards
    const small = await gpuBackend({ maxBufferBytes: maxT * Hkv * D * 4 });
    try {
      const slot = Int32Array.of(2, 0, 2, 1, 0, 2);
      const pos = Int32Array.of(0, 0, 1, 0, 1, 2);
      const T = slot.length;
      const data = { q: randn(T * Hq * D, 40), k: randn(T * Hkv * D, 41), v: randn(T * Hkv * D, 42), dO: randn(T * Hq * D, 43) };
      const res = [cpu, small].map((b: Backend) => {
        const lay = { slot: b.tensor(slot, [T]), pos: b.tensor(pos, [T]) };
        const kc = b.zeros([S, maxT, Hkv, D]);
        const vc = b.zeros([S, maxT, Hkv, D]);
        b.kvWrite(kc, vc, b.tensor(data.k, [T, Hkv, D]), b.tensor(data.v, [T, Hkv, D]), lay);
        const g = ops(b).attentionBackward(b.tensor(data.dO, [T, Hq, D]), b.tensor(data.q, [T, Hq, D]), kc, vc, lay);
        return { parts: (kc as unknown as { parts?: unknown[] }).parts?.length ?? 1, dq: g.dq, ...ops(b).kvWriteBackward(g.dkCache, g.dvCache, lay) };
      });
      expect(res[1].parts).toBe(3);
      for (const key of ['dq', 'dk', 'dv'] as const) near(await small.read(res[1][key]), await cpu.read(res[0][key]), `sharded attention ${key}`, 1e-4);
    } finally {
      small.dispose();
    }
  });

  it('embedding scatter-add, accumulate, fill, sumSquares, AdamW', async () => {
    const [V, C] = [11, 9];
    const ids = Int32Array.of(3, 1, 3, 10, 0, 3, 7);
    const dy = on(randn(ids.length * C, 20), [ids.length, C]);
    const t0 = randn(V * C, 21);
    await both((b, i) => {
      const dT = b.tensor(t0, [V, C]);
      ops(b).embeddingBackward(dy[i], ids, dT);
      return dT;
    }, 'embedding backward');
    const n = 1000;
    const [p0, g0, m0, v0] = [randn(n, 22), randn(n, 23), randn(n, 24, 0.1), Float32Array.from(randn(n, 25), (x) => x * x)];
    await both((b) => {
      const d = b.tensor(p0, [n]);
      ops(b).accumulate(d, b.tensor(g0, [n]), -0.3);
      return d;
    }, 'accumulate');
    const f = gpu.tensor(p0, [n]);
    ops(gpu).fill(f, 0);
    expect((await gpu.read(f)).every((x) => x === 0)).toBe(true);
    await both((b) => ops(b).sumSquares([b.tensor(p0, [n]), b.tensor(g0, [10, 100]), b.tensor(m0, [n])]), 'sumSquares', 1e-5);
    const hp = { lr: 1e-2, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, step: 3, gradScale: 0.7 };
    const res = [cpu, gpu].map((b: Backend) => {
      const [p, m, v] = [b.tensor(p0, [n]), b.tensor(m0, [n]), b.tensor(v0, [n])];
      ops(b).adamw(p, b.tensor(g0, [n]), m, v, hp);
      return [p, m, v];
    });
    for (let j = 0; j < 3; j++) near(await gpu.read(res[1][j]), await cpu.read(res[0][j]), `adamw ${['p', 'm', 'v'][j]}`, 1e-5);
  });

  it('cross-entropy and GRPO heads: dLogits and metrics', async () => {
    const [R, V] = [9, 301];
    const x = randn(R * V, 30, 2);
    const tg = randInt(R, V, 31);
    const wt = Float32Array.from({ length: R }, (_, r) => (r % 4 === 2 ? 0 : 0.1 + r / 50));
    const lg = on(x, [R, V]);
    const [tt, wtt] = [on(tg, [R]), on(wt, [R])];
    const ce = [cpu, gpu].map((b: Backend, i) => ops(b).crossEntropy(lg[i], tt[i], wtt[i]));
    near(await gpu.read(ce[1].dLogits), await cpu.read(ce[0].dLogits), 'CE dLogits');
    near(await gpu.read(ce[1].metrics), await cpu.read(ce[0].metrics), 'CE metrics', 1e-5);
    const ls = (await cpu.read(cpu.logSoftmax(lg[0]))) as Float32Array;
    const logp = Array.from(tg, (t, r) => ls[r * V + t]);
    const ratios = [1.05, 1.5, 1, 0.5, 5, 0.9, 1.3, 0.7, 1.1];
    const adv = on(Float32Array.from({ length: R }, (_, r) => (r % 2 ? -0.5 : 0.8)), [R]);
    const old = on(Float32Array.from(logp, (l, r) => l - Math.log(ratios[r])), [R]);
    const ref = on(Float32Array.from(logp, (l, r) => l + 0.2 * (r - 4)), [R]);
    const opts: GrpoOptions = { clipEps: 0.2, dualClip: 3, klCoef: 0.1 };
    const gr = [cpu, gpu].map((b: Backend, i) => ops(b).grpo(lg[i], tt[i], wtt[i], { advantage: adv[i], oldLogp: old[i], refLogp: ref[i] }, opts));
    near(await gpu.read(gr[1].dLogits), await cpu.read(gr[0].dLogits), 'GRPO dLogits');
    near(await gpu.read(gr[1].metrics), await cpu.read(gr[0].metrics), 'GRPO metrics', 1e-5);
  });
});
