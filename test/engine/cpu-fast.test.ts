// The CPU fast path against the reference backend (the oracle), on random and odd shapes, on one and
// two threads and in the plain-memory fallback.
//
// Every configuration below runs the same checks: the strict build (multiply and add apart, the default) and the
// relaxed build (f32x4.relaxed_madd, fused where the machine has FMA: other bits, the same tolerances), each
// matmul kernel version. Versions 1 and 2 of the products give the same bits in one build (tested below).
//
// Tolerance: the kernels accumulate in f32 (in a different order), the reference in f64. With inputs
// in [-1, 1] each product is at most 1 and the f32 rounding error of a K-term sum stays below about
// K * 2^-24 per term magnitude; we allow 4e-7 * K + 1e-6 absolute. q8/q4 weights are dequantized by
// the same rule on both sides, so the same bound applies. Attention (softmax-weighted means of values
// in [-1, 1]): 2e-6 absolute.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Backend, Tensor } from '../../src/engine/backend';
import { createCpuFastBackend, relaxedSimdAvailable, type CpuFastBackend } from '../../src/engine/cpu/fast/backend';
import { CpuRefBackend } from '../../src/engine/cpu/ref';
import { CpuRefTrainOps } from '../../src/engine/cpu/train-ops';
import { EngineError } from '../../src/engine/errors';
import { createBackend } from '../../src/engine/index';
import { quantize, type QuantKind } from '../../src/engine/quant';
import { maxDiff, randn, rng } from '../helpers/numeric';

const ref = new CpuRefBackend();
const refTrain = new CpuRefTrainOps(ref);
const kinds: ('f32' | QuantKind)[] = ['f32', 'q8', 'q4'];
const weight = (b: Backend, w: Float32Array, N: number, K: number, kind: 'f32' | QuantKind): Tensor =>
  kind === 'f32' ? b.tensor(w, [N, K]) : b.uploadQuantized(quantize(w, N, K, kind));

// (M, K, N): decode rows (gemv), M % 4 != 0, K not a multiple of 4 or 32, K > 256 (inner blocking),
// M > 128 (row blocking), N not a multiple of 8, narrow N (threads split rows), >= 1 Mflop (threaded).
const SHAPES: [number, number, number][] = [
  [1, 1, 1],
  [1, 17, 33],
  [2, 3, 17],
  [3, 100, 7],
  [1, 1000, 600],
  [4, 33, 8],
  [5, 64, 300],
  [17, 33, 100],
  [33, 17, 3],
  [100, 513, 33],
  [133, 40, 20],
  [64, 300, 72],
];

// '3 threads, all ops threaded' sends even the smallest op through the workers (uneven and empty shares).
describe.each([
  { label: '1 thread', threads: 1, shared: 'auto' as const, parallelMinWork: undefined },
  { label: '2 threads', threads: 2, shared: 'auto' as const, parallelMinWork: undefined },
  { label: '3 threads, all ops threaded', threads: 3, shared: 'auto' as const, parallelMinWork: 0 },
  { label: 'plain-memory fallback', threads: 2, shared: false as const, parallelMinWork: undefined },
  { label: '2 threads, matmul v1', threads: 2, shared: 'auto' as const, parallelMinWork: undefined, matmulKernel: 1 as const },
  { label: '3 threads, all ops threaded, relaxed SIMD, matmul v2', threads: 3, shared: 'auto' as const, parallelMinWork: 0, simd: 'relaxed' as const, matmulKernel: 2 as const },
  { label: 'plain-memory fallback, relaxed SIMD', threads: 1, shared: false as const, parallelMinWork: undefined, simd: 'relaxed' as const },
])('cpu-fast ($label)', ({ threads, shared, parallelMinWork, simd, matmulKernel }: { threads: number; shared: 'auto' | false; parallelMinWork?: number; simd?: 'strict' | 'relaxed'; matmulKernel?: 1 | 2 }) => {
  let fast: CpuFastBackend;
  beforeAll(async () => {
    fast = await createCpuFastBackend({ threads, shared, parallelMinWork, simd, matmulKernel });
    expect(fast.simd).toBe(simd ?? 'strict');
    expect(fast.matmulKernel).toBe(matmulKernel ?? 2);
  });
  afterAll(() => fast?.dispose());

  it('runs the configured threads', () => {
    expect(fast.name).toBe('cpu-fast');
    expect(fast.sharedMemory).toBe(shared !== false);
    expect(fast.threads).toBe(shared === false ? 1 : threads);
  });

  it.each(SHAPES)('matmul x (%i,%i) W (%i,K) in f32, q8 and q4 matches the reference', async (M, K, N) => {
    const r = rng(M * 7919 + K * 31 + N);
    const x = randn(M * K, r);
    const w = randn(N * K, r);
    for (const kind of kinds) {
      const want = (await ref.read(ref.matmul(ref.tensor(x, [M, K]), weight(ref, w, N, K, kind)))) as Float32Array;
      const y = fast.matmul(fast.tensor(x, [M, K]), weight(fast, w, N, K, kind));
      expect(y.shape).toEqual([M, N]);
      expect(maxDiff(await fast.read(y), want), `${kind}`).toBeLessThanOrEqual(4e-7 * K + 1e-6);
      // Inputs that live on the JS heap (outputs of inherited ops, other backends' tensors) are copied in.
      const y2 = fast.matmul(ref.tensor(x, [M, K]), weight(ref, w, N, K, kind));
      expect(maxDiff(await fast.read(y2), want), `${kind}, JS-heap inputs`).toBeLessThanOrEqual(4e-7 * K + 1e-6);
    }
  });

  it.each(SHAPES)('matmulBackwardInput dy (%i,N) W (%i,K), N=%i, matches the reference', async (M, K, N) => {
    const r = rng(M * 13 + K * 17 + N * 19);
    const dy = randn(M * N, r);
    const w = randn(N * K, r);
    for (const kind of kinds) {
      const want = await ref.read(refTrain.matmulBackwardInput(ref.tensor(dy, [M, N]), weight(ref, w, N, K, kind)));
      const dx = fast.train.matmulBackwardInput(fast.tensor(dy, [M, N]), weight(fast, w, N, K, kind));
      expect(dx.shape).toEqual([M, K]);
      expect(maxDiff(await fast.read(dx), want), kind).toBeLessThanOrEqual(4e-7 * N + 1e-6);
    }
  });

  it.each(SHAPES)('matmulBackwardWeight dy (%i,N) x (M,%i) accumulates like the reference (N=%i)', async (M, K, N) => {
    const r = rng(M + K * 3 + N * 5);
    const dy = randn(M * N, r);
    const x = randn(M * K, r);
    const dw0 = randn(N * K, r);
    const want = ref.tensor(dw0, [N, K]);
    refTrain.matmulBackwardWeight(ref.tensor(dy, [M, N]), ref.tensor(x, [M, K]), want);
    for (const dw of [fast.tensor(dw0, [N, K]), ref.tensor(dw0, [N, K])]) {
      fast.train.matmulBackwardWeight(fast.tensor(dy, [M, N]), fast.tensor(x, [M, K]), dw);
      expect(maxDiff(await fast.read(dw), await ref.read(want))).toBeLessThanOrEqual(4e-7 * M + 1e-6);
    }
  });

  it.each([
    { Hq: 4, Hkv: 2, D: 8 },
    { Hq: 3, Hkv: 3, D: 5 },
    { Hq: 8, Hkv: 1, D: 64 },
    { Hq: 2, Hkv: 1, D: 17 },
  ])('attention Hq=$Hq Hkv=$Hkv D=$D matches the reference (prefill, decode, several slots)', async ({ Hq, Hkv, D }) => {
    const r = rng(Hq * 100 + Hkv * 10 + D);
    const S = 3;
    const maxT = 40;
    const kc = randn(S * maxT * Hkv * D, r);
    const vc = randn(S * maxT * Hkv * D, r);
    // slot 0: a prefill of 37 tokens; slots 1 and 2: one decode token each at different depths.
    const slot = Int32Array.from([...Array(37).fill(0), 1, 2]);
    const pos = Int32Array.from([...Array.from({ length: 37 }, (_, i) => i), 0, 39]);
    const T = slot.length;
    const q = randn(T * Hq * D, r);
    const run = (b: Backend) =>
      b.read(
        b.attention(b.tensor(q, [T, Hq, D]), b.tensor(kc, [S, maxT, Hkv, D]), b.tensor(vc, [S, maxT, Hkv, D]), {
          slot: b.tensor(slot, [T]),
          pos: b.tensor(pos, [T]),
        }),
      );
    expect(maxDiff(await run(fast), await run(ref))).toBeLessThanOrEqual(2e-6);
  });

  it.each([
    { Hq: 4, Hkv: 2, D: 8 },
    { Hq: 3, Hkv: 3, D: 5 },
    { Hq: 4, Hkv: 1, D: 33 },
  ])('attentionBackward Hq=$Hq Hkv=$Hkv D=$D matches the reference TrainOps', async ({ Hq, Hkv, D }) => {
    const r = rng(Hq * 31 + Hkv * 7 + D);
    const S = 3;
    const maxT = 24;
    const kc = randn(S * maxT * Hkv * D, r);
    const vc = randn(S * maxT * Hkv * D, r);
    // two sequences trained side by side (slots 0 and 2) plus one decode-like row in slot 1
    const slot = Int32Array.from([...Array(20).fill(0), ...Array(9).fill(2), 1]);
    const pos = Int32Array.from([...Array.from({ length: 20 }, (_, i) => i), ...Array.from({ length: 9 }, (_, i) => i + 3), 23]);
    const T = slot.length;
    const q = randn(T * Hq * D, r);
    const go = randn(T * Hq * D, r);
    const run = async (b: Backend, f: (...a: Parameters<CpuRefTrainOps['attentionBackward']>) => { dq: Tensor; dkCache: Tensor; dvCache: Tensor }) => {
      const g = f(b.tensor(go, [T, Hq, D]), b.tensor(q, [T, Hq, D]), b.tensor(kc, [S, maxT, Hkv, D]), b.tensor(vc, [S, maxT, Hkv, D]), {
        slot: b.tensor(slot, [T]),
        pos: b.tensor(pos, [T]),
      });
      return [await b.read(g.dq), await b.read(g.dkCache), await b.read(g.dvCache)];
    };
    const want = await run(ref, (...a) => refTrain.attentionBackward(...a));
    const got = await run(fast, (...a) => fast.train.attentionBackward(...a));
    // Gradients sum up to ~20 rows of products of values in [-1, 1] (f32 vs f64).
    for (let i = 0; i < 3; i++) expect(maxDiff(got[i], want[i]), ['dq', 'dk', 'dv'][i]).toBeLessThanOrEqual(1e-5);
  });

  it.each([
    [13, 37],
    [5, 1000],
    [40, 4096],
  ])('loss heads (cross-entropy; GRPO with clipping, dual clip and KL) on logits (%i,%i) match the reference', async (R, V) => {
    const r = rng(R * 7 + V);
    const logits = randn(R * V, r).map((v) => v * 6);
    const targets = Int32Array.from({ length: R }, () => Math.floor(r() * V));
    const weight = Float32Array.from({ length: R }, (_, i) => (i % 4 === 3 ? 0 : 0.1 + r()));
    // old/ref log-probs near the current ones so ratios fall on both sides of 1 +- clipEps
    const logp = Float32Array.from({ length: R }, (_, i) => {
      let m = -Infinity;
      for (let v = 0; v < V; v++) m = Math.max(m, logits[i * V + v]);
      let s = 0;
      for (let v = 0; v < V; v++) s += Math.exp(logits[i * V + v] - m);
      return logits[i * V + targets[i]] - m - Math.log(s);
    });
    const oldLogp = logp.map((v) => v + (r() - 0.5) * 0.8);
    const refLogp = logp.map((v) => v + (r() - 0.5) * 0.3);
    const advantage = Float32Array.from({ length: R }, () => (r() - 0.5) * 2);
    const heads = [
      { name: 'ce', run: (b: Backend, ops: { crossEntropy: CpuRefTrainOps['crossEntropy'] }) => ops.crossEntropy(b.tensor(logits, [R, V]), b.tensor(targets, [R]), b.tensor(weight, [R])) },
      ...[0, 0.05].map((klCoef) => ({
        name: `grpo kl=${klCoef}`,
        run: (b: Backend, ops: { grpo: CpuRefTrainOps['grpo'] }) =>
          ops.grpo(
            b.tensor(logits, [R, V]),
            b.tensor(targets, [R]),
            b.tensor(weight, [R]),
            { advantage: b.tensor(advantage, [R]), oldLogp: b.tensor(oldLogp, [R]), refLogp: klCoef ? b.tensor(refLogp, [R]) : null },
            { clipEps: 0.2, dualClip: 3, klCoef },
          ),
      })),
    ];
    for (const h of heads) {
      const want = h.run(ref, refTrain);
      const got = h.run(fast, fast.train);
      // f32 exp and softmax against f64: gradients are probabilities times weights <= ~1.1 and a few
      // factors of order 1 (ratio, A, dual clip): 2e-6; metrics are sums over rows: 1e-5 relative.
      expect(maxDiff(await fast.read(got.dLogits), await ref.read(want.dLogits)), h.name).toBeLessThanOrEqual(2e-6);
      const [gm, wm] = [await fast.read(got.metrics), await ref.read(want.metrics)];
      for (let i = 0; i < 4; i++) expect(Math.abs(gm[i] - wm[i]), `${h.name} metric ${i}`).toBeLessThanOrEqual(1e-5 * (1 + Math.abs(wm[i])));
    }
  });

  it.each([1, 7, 1000, 4099])('swigluBackward, adamw and sumSquares on %i values match the reference TrainOps', async (n) => {
    const r = rng(n);
    const [dy, gate, up, p0, g, m0] = Array.from({ length: 6 }, () => randn(n, r));
    const v0 = randn(n, r).map((x) => x * x);
    const ops = fast.train;
    const a = ops.swigluBackward(fast.tensor(dy, [n]), fast.tensor(gate.map((x) => x * 8), [n]), fast.tensor(up, [n]));
    const b = refTrain.swigluBackward(ref.tensor(dy, [n]), ref.tensor(gate.map((x) => x * 8), [n]), ref.tensor(up, [n]));
    expect(maxDiff(await fast.read(a.dGate), await ref.read(b.dGate))).toBeLessThanOrEqual(2e-6);
    expect(maxDiff(await fast.read(a.dUp), await ref.read(b.dUp))).toBeLessThanOrEqual(2e-6);
    const hp = { lr: 3e-3, beta1: 0.9, beta2: 0.98, eps: 1e-8, weightDecay: 0.05, step: 7, gradScale: 0.5 };
    // resident (fast.tensor) and JS-heap (ref.tensor) state: both must be updated in place
    for (const mk of [(x: Float32Array) => fast.tensor(x, [n]), (x: Float32Array) => ref.tensor(x, [n])]) {
      const st = [p0, g, m0, v0].map(mk);
      const want = [p0, g, m0, v0].map((x) => ref.tensor(x, [n]));
      ops.adamw(st[0], st[1], st[2], st[3], hp);
      refTrain.adamw(want[0], want[1], want[2], want[3], hp);
      // f32 update vs f64: the step is lr-sized (3e-3), its rounding ~1e-9; params/moments ~1.
      for (const i of [0, 2, 3]) expect(maxDiff(await fast.read(st[i]), await ref.read(want[i])), `adamw state ${i}`).toBeLessThanOrEqual(1e-6);
    }
    const ss = (t: Tensor[]) => ops.sumSquares(t);
    const got = (await fast.read(ss([fast.tensor(dy, [n]), fast.tensor(up, [n])])))[0];
    const exp = (await ref.read(refTrain.sumSquares([ref.tensor(dy, [n]), ref.tensor(up, [n])])))[0];
    expect(got).toBe(exp);
  });

  it.each([
    [1, 1],
    [3, 7],
    [17, 128],
    [64, 1000],
  ])('rmsnorm, swiglu, add, scale and rope on (%i,%i) match the reference', async (R, C) => {
    const r = rng(R * 1000 + C);
    const x = randn(R * C, r);
    const y = randn(R * C, r).map((v) => v * 8); // silu over [-8, 8]: both tails
    const w = randn(C, r);
    const both = async (f: (b: Backend) => Tensor) => maxDiff(await fast.read(f(fast)), await ref.read(f(ref)));
    // f32 row sums and f32 exp against f64: a few ulps of values <= ~8 in magnitude.
    expect(await both((b) => b.rmsnorm(b.tensor(x, [R, C]), b.tensor(w, [C]), 1e-6))).toBeLessThanOrEqual(1e-5);
    expect(await both((b) => b.swiglu(b.tensor(y, [R, C]), b.tensor(x, [R, C])))).toBeLessThanOrEqual(4e-6);
    expect(await both((b) => b.add(b.tensor(x, [R, C]), b.tensor(y, [R, C])))).toBeLessThanOrEqual(1e-6);
    expect(await both((b) => b.scale(b.tensor(x, [R, C]), 0.3))).toBeLessThanOrEqual(1e-7);
    if (C % 2 === 0) {
      const pos = Int32Array.from({ length: R }, (_, i) => i * 37);
      // Same f64 angles as the reference: bit-identical.
      expect(await both((b) => b.rope(b.tensor(x, [R, 2, C / 2]), b.tensor(pos, [R]), 10000))).toBe(0);
      for (const withDw of [false, true]) {
        const dwFast = fast.tensor(w, [C]);
        const dwRef = ref.tensor(w, [C]);
        const dx = fast.train.rmsnormBackward(fast.tensor(y, [R, C]), fast.tensor(x, [R, C]), fast.tensor(w, [C]), 1e-6, withDw ? dwFast : null);
        const want = refTrain.rmsnormBackward(ref.tensor(y, [R, C]), ref.tensor(x, [R, C]), ref.tensor(w, [C]), 1e-6, withDw ? dwRef : null);
        // the same f64 row math; dw sums rows in another order (per-thread partials)
        expect(maxDiff(await fast.read(dx), await ref.read(want))).toBeLessThanOrEqual(1e-6);
        expect(maxDiff(await fast.read(dwFast), await ref.read(dwRef))).toBeLessThanOrEqual(1e-5);
      }
      const back = (b: Backend) => (b === ref ? refTrain : fast.train).ropeBackward(b.tensor(x, [R, 2, C / 2]), b.tensor(pos, [R]), 10000);
      expect(await both(back)).toBe(0);
    }
  });

  it('refuses bad shapes and out-of-cache positions with an EngineError', () => {
    const x = fast.tensor(new Float32Array(6), [2, 3]);
    expect(() => fast.matmul(x, fast.tensor(new Float32Array(8), [2, 4]))).toThrow(EngineError);
    expect(() => fast.train.matmulBackwardInput(x, fast.tensor(new Float32Array(8), [4, 2]))).toThrow(EngineError);
    expect(() => fast.train.matmulBackwardWeight(x, x, fast.tensor(new Float32Array(10), [5, 2]))).toThrow(EngineError);
    const cache = fast.zeros([1, 4, 1, 2]);
    const q = fast.tensor(new Float32Array(2), [1, 1, 2]);
    const layout = { slot: fast.tensor(Int32Array.from([0]), [1]), pos: fast.tensor(Int32Array.from([4]), [1]) };
    expect(() => fast.attention(q, cache, cache, layout)).toThrow(/outside cache/);
    const badSlot = { slot: fast.tensor(Int32Array.from([1]), [1]), pos: fast.tensor(Int32Array.from([0]), [1]) };
    expect(() => fast.attention(q, cache, cache, badSlot)).toThrow(EngineError);
    expect(() => fast.rmsnorm(x, fast.tensor(new Float32Array(4), [4]), 1e-6)).toThrow(EngineError);
    expect(() => fast.swiglu(x, fast.tensor(new Float32Array(2), [2]))).toThrow(EngineError);
    expect(() => fast.add(x, fast.tensor(new Float32Array(2), [2]))).toThrow(EngineError);
    expect(() => fast.rope(x, fast.tensor(Int32Array.from([0, 1]), [2]), 1e4)).toThrow(EngineError);
  });

  if (shared !== false)
    it('refuses a tensor larger than the wasm memory with an out-of-memory EngineError', () => {
      expect(() => fast.zeros([2 ** 31])).toThrow(/out-of-memory/);
    });

  it('gives freed tensors back to the wasm heap', async () => {
    const before = fast.liveBytes;
    for (let i = 0; i < 3; i++) {
      const a = fast.tensor(randn(64 * 64, rng(i)), [64, 64]);
      const w = fast.uploadQuantized(quantize(randn(64 * 64, rng(i + 9)), 64, 64, 'q4'));
      const y = fast.matmul(a, w);
      await fast.read(y);
      for (const t of [a, w, y]) fast.free(t);
    }
    expect(fast.liveBytes).toBe(before);
  });

  if (threads > 1 && shared !== false)
    it('splits large products across the threads, and the workers take part', () => {
      const before = fast.parallelJobs;
      const joins = fast.workerJoins;
      const x = fast.tensor(randn(64 * 128, rng(1)), [64, 128]);
      const w = fast.tensor(randn(128 * 128, rng(2)), [128, 128]);
      fast.matmul(x, w);
      expect(fast.parallelJobs).toBe(before + 1);
      // A worker that wakes after the caller ran out of work skips the job, so on a busy machine one
      // product may be done by the caller alone; over a few larger ones a worker joins.
      const big = fast.tensor(randn(512 * 512, rng(3)), [512, 512]);
      for (let i = 0; i < 20 && fast.workerJoins === joins; i++) fast.free(fast.matmul(big, big));
      expect(fast.workerJoins).toBeGreaterThan(joins);
    });
});

describe('cpu-fast matmul versions', () => {
  it.each(['strict', 'relaxed'] as const)('versions 1 and 2 of the products (gemm, gemv) give the same bits (%s build)', async (simd) => {
    const fast = await createCpuFastBackend({ threads: 2, simd, parallelMinWork: 0 });
    try {
      for (const [M, K, N] of [...SHAPES, [300, 600, 130] as [number, number, number]]) {
        const r = rng(M * 3 + K * 5 + N * 7);
        const x = randn(M * K, r);
        const w = randn(N * K, r);
        const dw0 = randn(N * K, r);
        const dy = randn(M * N, r);
        const outs: Float32Array[][] = [];
        for (const v of [1, 2] as const) {
          fast.matmulKernel = v;
          const got: Float32Array[] = [];
          for (const kind of kinds) got.push((await fast.read(fast.matmul(fast.tensor(x, [M, K]), weight(fast, w, N, K, kind)))) as Float32Array);
          for (const kind of kinds) got.push((await fast.read(fast.train.matmulBackwardInput(fast.tensor(dy, [M, N]), weight(fast, w, N, K, kind)))) as Float32Array);
          const dw = fast.tensor(dw0, [N, K]);
          fast.train.matmulBackwardWeight(fast.tensor(dy, [M, N]), fast.tensor(x, [M, K]), dw);
          got.push((await fast.read(dw)) as Float32Array);
          outs.push(got);
        }
        outs[0].forEach((a, i) => expect(Buffer.from(outs[1][i].buffer).equals(Buffer.from(a.buffer)), `(${M},${K},${N}) output ${i}`).toBe(true));
      }
    } finally {
      fast.dispose();
    }
  });
});

describe('cpu-fast packed weights', () => {
  // A quantized or frozen f32 weight is packed once into the product's panels (kernels/gemm2.ts packPanels) and
  // read from there: the values each call would pack, so the same bits as packing per call.
  it.each([
    { label: '2 threads, relaxed', threads: 2, shared: 'auto' as const, simd: 'relaxed' as const },
    { label: 'plain memory, strict', threads: 1, shared: false as const, simd: 'strict' as const },
  ])('give the bits of packing per call, and hold their bytes until the weight is freed ($label)', async ({ threads, shared, simd }) => {
    const fast = await createCpuFastBackend({ threads, shared, simd, parallelMinWork: 0 });
    try {
      for (const [M, K, N] of [...SHAPES, [300, 600, 130] as [number, number, number]]) {
        const r = rng(M * 11 + K * 13 + N * 17);
        const x = fast.tensor(randn(M * K, r), [M, K]);
        const w = randn(N * K, r);
        for (const kind of kinds) {
          const wt = weight(fast, w, N, K, kind);
          if (kind === 'f32') fast.freeze(wt);
          fast.packWeights = false;
          const per = (await fast.read(fast.matmul(x, wt))) as Float32Array;
          expect(fast.packedBytes).toBe(0);
          fast.packWeights = true;
          const once = (await fast.read(fast.matmul(x, wt))) as Float32Array;
          const again = (await fast.read(fast.matmul(x, wt))) as Float32Array;
          expect(fast.packedBytes, `(${M},${K},${N}) ${kind}`).toBe(M >= 4 ? Math.ceil(N / 8) * 8 * K * 4 : 0);
          for (const got of [once, again]) expect(Buffer.from(got.buffer).equals(Buffer.from(per.buffer)), `(${M},${K},${N}) ${kind}`).toBe(true);
          fast.free(wt);
          expect(fast.packedBytes).toBe(0);
        }
      }
    } finally {
      fast.dispose();
    }
  });

  it('packs an f32 weight only when frozen, keeps to the budget, and AdamW refuses a frozen weight', async () => {
    const [M, K, N] = [16, 64, 40];
    const fast = await createCpuFastBackend({ threads: 1, packedWeightBytes: 48 * K * 4 });
    try {
      const r = rng(5);
      const x = fast.tensor(randn(M * K, r), [M, K]);
      const w = fast.tensor(randn(N * K, r), [N, K]);
      fast.matmul(x, w);
      expect(fast.packedBytes).toBe(0); // not frozen: the data may change, so it is packed per call
      fast.freeze(w);
      fast.matmul(x, w);
      expect(fast.packedBytes).toBe(40 * K * 4);
      const q = fast.uploadQuantized(quantize(randn(N * K, r), N, K, 'q8'));
      const before = (await fast.read(fast.matmul(x, q))) as Float32Array;
      expect(fast.packedBytes).toBe(40 * K * 4); // a second weight would pass the budget: packed per call
      fast.free(w);
      expect((await fast.read(fast.matmul(x, q))) as Float32Array).toEqual(before);
      expect(fast.packedBytes).toBe(40 * K * 4); // now the quantized one's panels fit
      const [g, m, v] = [0, 1, 2].map(() => fast.zeros([N, K]));
      const w2 = fast.tensor(randn(N * K, r), [N, K]);
      fast.freeze(w2);
      expect(() => fast.train.adamw(w2, g, m, v, { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0, gradScale: 1, step: 1 })).toThrow(EngineError);
      expect(() => fast.freeze(q)).toThrow(EngineError);
      await expect(createCpuFastBackend({ threads: 1, packedWeightBytes: -1 })).rejects.toThrow(EngineError);
    } finally {
      fast.dispose();
    }
  });
});

describe('cpu-fast wiring', () => {
  it('is built by the registry, has the fast training ops, and refuses work after dispose', async () => {
    const b = (await createBackend('cpu-fast', { threads: 2 })) as CpuFastBackend;
    try {
      expect(b.name).toBe('cpu-fast');
      expect(b.train.constructor.name).toBe('CpuFastTrainOps');
      const w = b.tensor(randn(12, rng(3)), [4, 3]);
      const dx = b.train.matmulBackwardInput(b.tensor(randn(8, rng(4)), [2, 4]), w);
      expect(dx.shape).toEqual([2, 3]);
    } finally {
      b.dispose();
    }
    expect(() => b.matmul(b.tensor(new Float32Array(3), [1, 3]), b.tensor(new Float32Array(3), [1, 3]))).toThrow(/disposed/);
  });

  it('rejects a bad thread count', async () => {
    await expect(createCpuFastBackend({ threads: 0 })).rejects.toThrow(EngineError);
    await expect(createCpuFastBackend({ threads: 1.5 })).rejects.toThrow(EngineError);
  });

  it('builds: strict by default, CPU_FAST_SIMD=relaxed selects the relaxed one (the option wins), a bad name is refused', async () => {
    expect(await relaxedSimdAvailable()).toBe(true); // Node 20 with the V8 flag it turns on
    const prev = process.env.CPU_FAST_SIMD;
    const made: CpuFastBackend[] = [];
    try {
      delete process.env.CPU_FAST_SIMD;
      made.push(await createCpuFastBackend({ threads: 1 }));
      process.env.CPU_FAST_SIMD = 'relaxed';
      made.push(await createCpuFastBackend({ threads: 1 }), await createCpuFastBackend({ threads: 1, simd: 'strict' }));
      expect(made.map((b) => b.simd)).toEqual(['strict', 'relaxed', 'strict']);
      process.env.CPU_FAST_SIMD = 'fast';
      await expect(createCpuFastBackend({ threads: 1 })).rejects.toThrow(EngineError);
    } finally {
      if (prev === undefined) delete process.env.CPU_FAST_SIMD;
      else process.env.CPU_FAST_SIMD = prev;
      for (const b of made) b.dispose();
    }
  });

  it('the matmul kernel version can be switched; a bad one is refused', async () => {
    const b = await createCpuFastBackend({ threads: 1 });
    try {
      expect(b.matmulKernel).toBe(2);
      b.matmulKernel = 1;
      expect(b.matmulKernel).toBe(1);
      expect(() => (b.matmulKernel = 3 as never)).toThrow(EngineError);
      await expect(createCpuFastBackend({ threads: 1, matmulKernel: 0 as never })).rejects.toThrow(EngineError);
    } finally {
      b.dispose();
    }
  });
});
