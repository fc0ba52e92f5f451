// Finite-difference gradient checks of every CPU reference backward op and both loss heads, and the GRPO
// surrogate's loss, clip and KL values against hand-computed ones (each clip case alone).
import { describe, expect, it } from 'vitest';
import { CpuRefBackend } from '../../src/engine/cpu/ref';
import { quantize } from '../../src/engine/quant';
import { Rng } from '../../src/util/rng';
import type { GrpoOptions } from '../../src/engine/train';
import type { Tensor } from '../../src/engine/backend';
import { dot, fdCheck, randn } from './fd';

const be = new CpuRefBackend();
const ops = be.train;
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
    // The loss and the mean KL, hand-computed (per-row values in the next test): sum over rows of
    // w * (pg + 0.05 k3) = 0.2(-0.735 + 0.05*0.2223665527) + 0.3(-0.48 + 0.05*0.0876281516)
    //   + 0.1(0.48 + 0.05*0.0118342427) + 0.25(1.5 + 0.05*0.1183121855) + 0.15(0.27 + 0.05*0.3670000166)
    //   = 0.1725 + 0.05 * 0.1565732292 = 0.1803286615; mean k3 over the 5 weighted rows = 0.1614282298.
    expect(loss).toBeCloseTo(0.1803286615, 5);
    expect(kl).toBeCloseTo(0.1614282298, 5);
    expect(() => ops.grpo(be.tensor(x, [Rw, V]), be.tensor(targets, [Rw]), be.tensor(weight, [Rw]), {
      advantage: be.tensor(adv, [Rw]), oldLogp: be.tensor(old, [Rw]), refLogp: null }, { ...opts, dualClip: 0.5 })).toThrow(/dualClip/);
  });

  // Each case of the surrogate alone: the same six rows, one at a time (weight 1 on that row only), so
  // each row's loss, clip flag, KL and gradient are the head's metrics. Expected values by hand from
  // ratio r, advantage A, eps = 0.2, c = 3: pg = max(-A r, -A clamp(r, 0.8, 1.2)), then min(pg, -A c) for
  // A < 0; k3 = e^d - d - 1 with d = ref - logp = 0.3 (row - 2.5).
  it('GRPO surrogate values, case by case: inside, clipped above and below, dual-clipped, and the k3 KL', async () => {
    const x = randn(new Rng(81), Rw * V);
    const ls = await rd(be.logSoftmax(be.tensor(x, [Rw, V])));
    const logp = Array.from(targets, (t, r) => ls[r * V + t]);
    const ratios = [1.05, 1.5, 1, 0.5, 5.0, 0.9];
    const adv = Float32Array.of(0.7, 0.4, 1, -0.6, -0.5, -0.3);
    const old = Float32Array.from(logp, (l, r) => l - Math.log(ratios[r]));
    const ref = Float32Array.from(logp, (l, r) => l + 0.3 * (r - 2.5));
    const cases = [
      // row, pg (hand), clipped, k3 = e^d - d - 1 (hand)
      { row: 0, pg: -0.735, clipped: 0, k3: 0.2223665527 }, // r 1.05 inside: -0.7 * 1.05
      { row: 1, pg: -0.48, clipped: 1, k3: 0.0876281516 }, // A > 0, r 1.5 clipped to 1.2: max(-0.6, -0.48)
      { row: 2, pg: -1, clipped: 0, k3: 0.0107079764 }, // r 1, A 1: -1 (d = -0.15)
      { row: 3, pg: 0.48, clipped: 1, k3: 0.0118342427 }, // A < 0, r 0.5 clipped to 0.8: max(0.3, 0.48)
      { row: 4, pg: 1.5, clipped: 1, k3: 0.1183121855 }, // A < 0, r 5: max(2.5, 0.6) = 2.5, dual cap 0.5 * 3 = 1.5
      { row: 5, pg: 0.27, clipped: 0, k3: 0.3670000166 }, // A < 0, r 0.9 inside: 0.3 * 0.9
    ];
    const head = (row: number, kl: boolean) =>
      ops.grpo(be.tensor(x, [Rw, V]), be.tensor(targets, [Rw]), be.tensor(Float32Array.from({ length: Rw }, (_, r) => (r === row ? 1 : 0)), [Rw]), {
        advantage: be.tensor(adv, [Rw]), oldLogp: be.tensor(old, [Rw]), refLogp: kl ? be.tensor(ref, [Rw]) : null,
      }, { clipEps: 0.2, dualClip: 3, klCoef: kl ? 0.05 : 0 });
    for (const c of cases) {
      const plain = head(c.row, false);
      const [loss, clipFrac, kl] = await rd(plain.metrics);
      expect(loss, `row ${c.row} loss`).toBeCloseTo(c.pg, 5);
      expect(clipFrac, `row ${c.row} clipped`).toBe(c.clipped);
      expect(kl).toBe(0);
      // The gradient flows only through the unclipped branch: d loss / d logit[target] = -A r (1 - p).
      const g = (await rd(plain.dLogits)).subarray(c.row * V, (c.row + 1) * V);
      const t = targets[c.row];
      const want = c.clipped ? 0 : -adv[c.row] * ratios[c.row] * (1 - Math.exp(logp[c.row]));
      expect(g[t], `row ${c.row} gradient`).toBeCloseTo(want, 5);
      if (c.clipped) expect(g.every((v) => v === 0)).toBe(true);

      const withKl = head(c.row, true);
      const [lossKl, , klv] = await rd(withKl.metrics);
      expect(klv, `row ${c.row} k3`).toBeCloseTo(c.k3, 6);
      expect(lossKl, `row ${c.row} loss + KL`).toBeCloseTo(c.pg + 0.05 * c.k3, 5);
      // The KL's own gradient, d(0.05 k3)/d logp = 0.05 (1 - e^d), is there even on clipped rows.
      const d = 0.3 * (c.row - 2.5);
      const gk = (await rd(withKl.dLogits))[c.row * V + t];
      expect(gk, `row ${c.row} gradient with KL`).toBeCloseTo(want + 0.05 * (1 - Math.exp(d)) * (1 - Math.exp(logp[c.row])), 5);
    }
  });

  it('GRPO with zero advantage and no KL has zero gradient', async () => {
    const x = randn(rng, Rw * V);
    const z = new Float32Array(Rw);
    const res = ops.grpo(be.tensor(x, [Rw, V]), be.tensor(targets, [Rw]), be.tensor(weight, [Rw]), {
      advantage: be.tensor(z, [Rw]), oldLogp: be.tensor(z, [Rw]), refLogp: null }, { clipEps: 0.2, dualClip: 3, klCoef: 0 });
    expect((await rd(res.dLogits)).every((v) => v === 0)).toBe(true);
  });
});
