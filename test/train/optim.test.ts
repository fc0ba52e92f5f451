// AdamW, grad-norm clipping, LR schedules and loss aggregation weights (CPU reference).
import { describe, expect, it } from 'vitest';
import { CpuRefBackend } from '../../src/engine/cpu/ref';
import type { AdamWStep } from '../../src/engine/train';
import { tokenWeights } from '../../src/train/batch';
import { clipFactor, lrAt } from '../../src/train/trainer';

const be = new CpuRefBackend();
const ops = be.train;
const hp: AdamWStep = { lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.1, step: 1, gradScale: 1 };

describe('AdamW (CPU reference)', () => {
  it('first step moves each weight by lr * sign(g) after decoupled decay', async () => {
    const p0 = Float32Array.of(1, -2, 0.5, 3);
    const g = Float32Array.of(0.3, -4, 1e-3, 0);
    const p = be.tensor(p0, [4]);
    ops.adamw(p, be.tensor(g, [4]), be.zeros([4]), be.zeros([4]), hp);
    const out = (await be.read(p)) as Float32Array;
    for (let i = 0; i < 4; i++) {
      const expected = p0[i] * (1 - hp.lr * hp.weightDecay) - (g[i] === 0 ? 0 : hp.lr * Math.sign(g[i]));
      expect(out[i]).toBeCloseTo(expected, 5);
    }
  });

  it('a zero gradient only applies weight decay, and gradScale scales the moments', async () => {
    const p = be.tensor(Float32Array.of(2, -1), [2]);
    const m = be.zeros([2]);
    const v = be.zeros([2]);
    ops.adamw(p, be.zeros([2]), m, v, { ...hp, step: 7 });
    expect(Array.from((await be.read(p)) as Float32Array)).toEqual([Math.fround(2 * 0.999), Math.fround(-1 * 0.999)]);
    ops.adamw(p, be.tensor(Float32Array.of(1, 1), [2]), m, v, { ...hp, gradScale: 0.5 });
    expect(((await be.read(m)) as Float32Array)[0]).toBeCloseTo(0.05, 7);
    expect(((await be.read(v)) as Float32Array)[0]).toBeCloseTo(0.001 * 0.25, 9);
  });

  it('sumSquares and clipFactor give a global norm clip', async () => {
    const ss = (await be.read(ops.sumSquares([be.tensor(Float32Array.of(3), [1]), be.tensor(Float32Array.of(4, 0), [2])])))[0];
    expect(ss).toBe(25);
    expect(clipFactor(ss, 1)).toBeCloseTo(0.2, 6);
    expect(clipFactor(ss, 10)).toBe(1);
    const bad = (await be.read(ops.sumSquares([be.tensor(Float32Array.of(NaN, 1), [2])])))[0];
    expect(Number.isNaN(bad)).toBe(true);
  });
});

describe('schedules and aggregation', () => {
  it('warmup + cosine', () => {
    const s = { kind: 'warmup-cosine' as const, lr: 1, warmupSteps: 10, totalSteps: 110, minLr: 0.1 };
    expect(lrAt(s, 5)).toBeCloseTo(0.5);
    expect(lrAt(s, 10)).toBeCloseTo(1);
    expect(lrAt(s, 60)).toBeCloseTo(0.55);
    expect(lrAt(s, 110)).toBeCloseTo(0.1);
    expect(lrAt(s, 500)).toBeCloseTo(0.1);
    expect(lrAt({ kind: 'constant', lr: 3e-4 }, 99)).toBe(3e-4);
  });

  it('token weights for the three aggregation modes', () => {
    // seq 0: 1 masked token, seq 1: 3 masked tokens, seq 2: none
    const mask = [0, 1, 1, 1, 1, 0, 0];
    const seq = [0, 0, 1, 1, 1, 2, 2];
    expect(Array.from(tokenWeights(mask, seq, 'token-mean'))).toEqual([0, 0.25, 0.25, 0.25, 0.25, 0, 0]);
    const smtm = tokenWeights(mask, seq, 'seq-mean-token-mean');
    expect(smtm[1]).toBeCloseTo(0.5);
    expect(smtm[2]).toBeCloseTo(1 / 6);
    expect(Array.from(tokenWeights(mask, seq, 'seq-mean-token-sum', 0.5))).toEqual([0, 0.25, 0.25, 0.25, 0.25, 0, 0]);
  });
});
