// Finite-difference gradient checks of every CPU reference backward op and both loss heads.
import { describe, expect, it } from 'vitest';
import { CpuRefBackend } from '../../src/engine/cpu/ref';
import { quantize } from '../../src/engine/quant';
import { Rng } from '../../src/engine/rng';
import { trainOps, type GrpoOptions } from '../../src/engine/train';
import type { Tensor } from '../../src/engine/backend';
import { dot, fdCheck, randn } from './fd';

const be = new CpuRefBackend();
const ops = trainOps(be);
const rd = (t: Tensor) => (be as unknown as { read(t: Tensor): Promise<Float32Array> }).read(t);
// Forward ops run in f32, so central differences with h = 1e-2 are good to about 1e-3 relative.
const TOL = 3e-3;

describe('CPU reference backward ops vs finite differences', () => {
  it('embedding (scatter-add with repeated ids)', async () => {
    const rng = new Rng(1);
    const [V, C] = [7, 5];
    const table = randn(rng, V * C);
    const ids = Int32Array.of(3, 1, 3, 6, 0, 3);
    const R = randn(rng, ids.length * C);
    const dT = be.zeros([V, C]);
    ops.embeddingBackward(be.tensor(R, [ids.length, C]), ids, dT);
    const loss = () => dot(R, (be.embedding(be.tensor(table, [V, C]), be.tensor(ids, [ids.length])) as any).data);
    expect(fdCheck(table, await rd(dT), loss).relErr).toBeLessThan(TOL);
    expect(() => ops.embeddingBackward(be.tensor(R, [ids.length, C]), Int32Array.of(0, 1, 2, 3, 4, 7), dT)).toThrow(/outside/);
  });

  it('rmsnorm: x and w (also as q/k-norm over heads)', async () => {
    const rng = new Rng(2);
    const [Rw, C] = [5, 9];
    const x = randn(rng, Rw * C);
    const w = randn(rng, C);
    const R = randn(rng, Rw * C);
    const dw = be.tensor(Float32Array.from({ length: C }, () => 0.5), [C]);
    const dx = await rd(ops.rmsnormBackward(be.tensor(R, [Rw, C]), be.tensor(x, [Rw, C]), be.tensor(w, [C]), 1e-6, dw));
    const loss = () => dot(R, (be.rmsnorm(be.tensor(x, [Rw, C]), be.tensor(w, [C]), 1e-6) as any).data);
    expect(fdCheck(x, dx, loss).relErr).toBeLessThan(TOL);
    // dw accumulates on top of what was there (0.5)
    const dwv = Float32Array.from(await rd(dw), (v) => v - 0.5);
    expect(fdCheck(w, dwv, loss).relErr).toBeLessThan(TOL);
  });

  it('rope: inverse rotation', async () => {
    const rng = new Rng(3);
    const [T, H, D] = [4, 3, 8];
    const x = randn(rng, T * H * D);
    const pos = Int32Array.of(0, 5, 2, 17);
    const R = randn(rng, x.length);
    const dx = await rd(ops.ropeBackward(be.tensor(R, [T, H, D]), be.tensor(pos, [T]), 10000));
    const loss = () => dot(R, (be.rope(be.tensor(x, [T, H, D]), be.tensor(pos, [T]), 10000) as any).data);
    expect(fdCheck(x, dx, loss).relErr).toBeLessThan(TOL);
  });

  for (const kind of ['f32', 'q8', 'q4'] as const)
    it(`matmul: dx through a ${kind} weight${kind === 'f32' ? ', and dW' : ''}`, async () => {
      const rng = new Rng(4);
      const [M, K, N] = [3, 37, 5];
      const x = randn(rng, M * K);
      const w = randn(rng, N * K);
      const W = kind === 'f32' ? be.tensor(w, [N, K]) : be.uploadQuantized(quantize(w, N, K, kind));
      const R = randn(rng, M * N);
      const dx = await rd(ops.matmulBackwardInput(be.tensor(R, [M, N]), W));
      const loss = () => dot(R, (be.matmul(be.tensor(x, [M, K]), kind === 'f32' ? be.tensor(w, [N, K]) : W) as any).data);
      expect(fdCheck(x, dx, loss).relErr).toBeLessThan(TOL);
      if (kind === 'f32') {
        const dW = be.zeros([N, K]);
        ops.matmulBackwardWeight(be.tensor(R, [M, N]), be.tensor(x, [M, K]), dW);
        expect(fdCheck(w, await rd(dW), loss).relErr).toBeLessThan(TOL);
      }
    });

  it('swiglu: gate and up', async () => {
    const rng = new Rng(5);
    const n = 23;
    const g = randn(rng, n, 2);
    const u = randn(rng, n);
    const R = randn(rng, n);
    const { dGate, dUp } = ops.swigluBackward(be.tensor(R, [1, n]), be.tensor(g, [1, n]), be.tensor(u, [1, n]));
    const loss = () => dot(R, (be.swiglu(be.tensor(g, [1, n]), be.tensor(u, [1, n])) as any).data);
    expect(fdCheck(g, await rd(dGate), loss).relErr).toBeLessThan(TOL);
    expect(fdCheck(u, await rd(dUp), loss).relErr).toBeLessThan(TOL);
  });

  it('grouped-query causal attention through kvWrite (two sequences, odd lengths)', async () => {
    const rng = new Rng(6);
    const [Hq, Hkv, D, S, maxT] = [4, 2, 6, 2, 5];
    // sequence 0 has 3 tokens, sequence 1 has 5, interleaved in the flat batch
    const slot = Int32Array.of(0, 1, 1, 0, 1, 0, 1, 1);
    const pos = Int32Array.of(0, 0, 1, 1, 2, 2, 3, 4);
    const T = slot.length;
    const q = randn(rng, T * Hq * D);
    const k = randn(rng, T * Hkv * D);
    const v = randn(rng, T * Hkv * D);
    const R = randn(rng, T * Hq * D);
    const layout = { slot: be.tensor(slot, [T]), pos: be.tensor(pos, [T]) };
    const fwd = () => {
      const kc = be.zeros([S, maxT, Hkv, D]);
      const vc = be.zeros([S, maxT, Hkv, D]);
      be.kvWrite(kc, vc, be.tensor(k, [T, Hkv, D]), be.tensor(v, [T, Hkv, D]), layout);
      return { kc, vc, out: be.attention(be.tensor(q, [T, Hq, D]), kc, vc, layout) };
    };
    const { kc, vc } = fwd();
    const g = ops.attentionBackward(be.tensor(R, [T, Hq, D]), be.tensor(q, [T, Hq, D]), kc, vc, layout);
    const { dk, dv } = ops.kvWriteBackward(g.dkCache, g.dvCache, layout);
    const loss = () => dot(R, (fwd().out as any).data);
    expect(fdCheck(q, await rd(g.dq), loss, { count: 60 }).relErr).toBeLessThan(TOL);
    expect(fdCheck(k, await rd(dk), loss, { count: 60 }).relErr).toBeLessThan(TOL);
    expect(fdCheck(v, await rd(dv), loss, { count: 60 }).relErr).toBeLessThan(TOL);
  });

  it('log-softmax', async () => {
    const rng = new Rng(7);
    const [Rw, V] = [3, 11];
    const x = randn(rng, Rw * V);
    const R = randn(rng, Rw * V);
    const y = be.logSoftmax(be.tensor(x, [Rw, V]));
    const dx = await rd(ops.logSoftmaxBackward(be.tensor(R, [Rw, V]), y));
    const loss = () => dot(R, (be.logSoftmax(be.tensor(x, [Rw, V])) as any).data);
    expect(fdCheck(x, dx, loss).relErr).toBeLessThan(TOL);
  });
});

describe('loss heads vs finite differences', () => {
  const rng = new Rng(8);
  const [Rw, V] = [6, 13];
  const targets = Int32Array.of(1, 12, 0, 5, 5, 9);
  const weight = Float32Array.of(0.2, 0.3, 0, 0.1, 0.25, 0.15);

  it('token cross-entropy over masked rows', async () => {
    const x = randn(rng, Rw * V, 2);
    const run = () => ops.crossEntropy(be.tensor(x, [Rw, V]), be.tensor(targets, [Rw]), be.tensor(weight, [Rw]));
    const res = run();
    const dx = await rd(res.dLogits);
    expect(fdCheck(x, dx, () => (run().metrics as any).data[0]).relErr).toBeLessThan(TOL);
    // the masked row carries no gradient
    expect(dx.subarray(2 * V, 3 * V).every((v) => v === 0)).toBe(true);
    const m = await rd(res.metrics);
    expect(m[0]).toBeGreaterThan(0);
    expect(m[3]).toBeGreaterThan(0); // entropy
  });

  it('GRPO surrogate: clipped, dual-clipped and unclipped rows, with k3 KL', async () => {
    const x = randn(rng, Rw * V);
    const ls = await rd(be.logSoftmax(be.tensor(x, [Rw, V])));
    const logp = Array.from(targets, (t, r) => ls[r * V + t]);
    // ratio = exp(logp - old): row 0 1.05 (inside), row 1 1.5 with A>0 (clipped), row 3 0.5 with
    // A<0 (clipped at 1-eps), row 4 5.0 with A<0 (dual clip: -A*ratio > -A*c), row 5 0.9 with A<0
    const ratios = [1.05, 1.5, 1, 0.5, 5.0, 0.9];
    const adv = Float32Array.of(0.7, 0.4, 1, -0.6, -0.5, -0.3);
    const old = Float32Array.from(logp, (l, r) => l - Math.log(ratios[r]));
    const ref = Float32Array.from(logp, (l, r) => l + 0.3 * (r - 2.5));
    const opts: GrpoOptions = { clipEps: 0.2, dualClip: 3, klCoef: 0.05 };
    const run = () =>
      ops.grpo(be.tensor(x, [Rw, V]), be.tensor(targets, [Rw]), be.tensor(weight, [Rw]), {
        advantage: be.tensor(adv, [Rw]), oldLogp: be.tensor(old, [Rw]), refLogp: be.tensor(ref, [Rw]),
      }, opts);
    const res = run();
    const dx = await rd(res.dLogits);
    expect(fdCheck(x, dx, () => (run().metrics as any).data[0], { h: 1e-3, count: 100 }).relErr).toBeLessThan(TOL);
    const [loss, clipFrac, kl] = await rd(res.metrics);
    // rows 1, 3, 4 are clipped out of 5 weighted rows
    expect(clipFrac).toBeCloseTo(3 / 5, 6);
    expect(kl).toBeGreaterThan(0);
    // row 4 is dual-clipped: its loss is -A*c = 1.5 and it has no policy gradient, only the KL part
    expect(Number.isFinite(loss)).toBe(true);
    expect(() => ops.grpo(be.tensor(x, [Rw, V]), be.tensor(targets, [Rw]), be.tensor(weight, [Rw]), {
      advantage: be.tensor(adv, [Rw]), oldLogp: be.tensor(old, [Rw]), refLogp: null }, { ...opts, dualClip: 0.5 })).toThrow(/dualClip/);
  });

  it('GRPO with zero advantage and no KL has zero gradient', async () => {
    const x = randn(rng, Rw * V);
    const z = new Float32Array(Rw);
    const res = ops.grpo(be.tensor(x, [Rw, V]), be.tensor(targets, [Rw]), be.tensor(weight, [Rw]), {
      advantage: be.tensor(z, [Rw]), oldLogp: be.tensor(z, [Rw]), refLogp: null }, { clipEps: 0.2, dualClip: 3, klCoef: 0 });
    expect((await rd(res.dLogits)).every((v) => v === 0)).toBe(true);
  });
});
