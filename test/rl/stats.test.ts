// The tables' statistics (research/ablation/stats.ts) on hand-checkable cases: constant data give a zero-width interval,
// a constant shift is recovered exactly by the paired interval, the interval is deterministic per seed and
// covers the truth on a simulated case, the base policy's single seed pairs with every seed, t-intervals and
// pass@k match textbook values.
import { describe, expect, it } from 'vitest';
import { bootstrapMean, fmtDiff, fmtInterval, meanCI, pairDiffs, pairedBootstrap, PairingError, passAtK, quantile, t975, type Obs } from '../../research/ablation/stats';

const grid = (seeds: number, tasks: number, f: (s: number, t: number) => number): Obs[] =>
  Array.from({ length: seeds }, (_, s) => Array.from({ length: tasks }, (_, t) => ({ seed: s, task: `t${t}`, value: f(s, t) }))).flat();

describe('bootstrap statistics', () => {
  it('type-7 quantiles', () => {
    expect(quantile([1, 2, 3, 4], 0.5)).toBe(2.5);
    expect(quantile([1, 2, 3, 4], 0)).toBe(1);
    expect(quantile([1, 2, 3, 4], 1)).toBe(4);
    expect(quantile([10], 0.3)).toBe(10);
  });

  it('constant results: the interval has zero width at the value', () => {
    const x = bootstrapMean(grid(5, 100, () => 1), { reps: 200 });
    expect(x).toEqual({ mean: 1, lo: 1, hi: 1, n: 500, seeds: 5 });
  });

  it('all-equal pairs: the paired difference is exactly 0 [0, 0], not significant', () => {
    const a = grid(5, 20, (s, t) => (s + t) % 3 === 0 ? 1 : 0);
    const d = pairedBootstrap(a, a, { reps: 300 });
    expect([d.mean, d.lo, d.hi, d.n, d.significant]).toEqual([0, 0, 0, 100, false]);
  });

  it('a known shift: b = a + 0.02 everywhere gives +2 points with a zero-width interval, significant', () => {
    const a = grid(3, 40, (s, t) => ((s * 7 + t) % 4) / 8);
    const b = a.map((o) => ({ ...o, value: o.value + 0.02 }));
    const d = pairedBootstrap(b, a, { reps: 300 });
    expect(d.mean).toBeCloseTo(0.02, 12);
    expect(d.lo).toBeCloseTo(0.02, 12);
    expect(d.hi).toBeCloseTo(0.02, 12);
    expect(d.significant).toBe(true);
    // The unpaired intervals of a and b overlap; pairing removes the shared task difficulty.
    const ia = bootstrapMean(a, { reps: 300 });
    const ib = bootstrapMean(b, { reps: 300 });
    expect(ia.hi).toBeGreaterThan(ib.lo);
  });

  it('an interval whose end is zero up to float rounding holds zero: not significant', () => {
    // Five seeds × 100 tasks of 0/1 results where A beats B on a few tasks and ties elsewhere: some replicates'
    // differences cancel, and their float mean is ±1e-19, not 0 (the dyna-q-recall − real-q case of 2026-12-05).
    const a: Obs[] = [];
    const b: Obs[] = [];
    const wins = [3, 1, 4, 3, 4]; // and one loss per seed
    for (let seed = 0; seed < 5; seed++)
      for (let t = 0; t < 100; t++) {
        const [va, vb] = t < wins[seed] ? [1, 0] : t === 50 ? [0, 1] : [t % 2, t % 2];
        a.push({ seed, task: `t${t}`, value: va });
        b.push({ seed, task: `t${t}`, value: vb });
      }
    const d = pairedBootstrap(a, b, { reps: 2000, seed: 0 });
    expect(d.mean).toBeCloseTo(0.02, 12);
    // The lower end is float noise around zero (3.5e-19 here), and the interval holds zero.
    expect(d.lo).not.toBe(0);
    expect(Math.abs(d.lo)).toBeLessThan(1e-9);
    expect(d.significant).toBe(false);
  });

  it('is deterministic per seed and changes with the seed', () => {
    const a = grid(5, 50, (s, t) => ((s * 31 + t * 17) % 10 < 4 ? 1 : 0));
    expect(bootstrapMean(a, { seed: 3 })).toEqual(bootstrapMean(a, { seed: 3 }));
    const x = bootstrapMean(a, { seed: 3 });
    const y = bootstrapMean(a, { seed: 4 });
    expect(x.mean).toBe(y.mean);
    expect([x.lo, x.hi]).not.toEqual([y.lo, y.hi]);
    // Point estimate: the grand mean (equal tasks per seed); the interval contains it and is inside [0, 1].
    expect(x.mean).toBeCloseTo(a.reduce((s, o) => s + o.value, 0) / a.length, 12);
    expect(x.lo).toBeLessThan(x.mean);
    expect(x.hi).toBeGreaterThan(x.mean);
    expect(x.lo).toBeGreaterThanOrEqual(0);
    expect(x.hi).toBeLessThanOrEqual(1);
  });

  it('width shrinks like 1/sqrt(n): 400 tasks give about half the width of 100', () => {
    const mk = (n: number) => grid(1, n, (_, t) => (t % 10 < 3 ? 1 : 0));
    const w = (o: Obs[]) => {
      const i = bootstrapMean(o, { reps: 4000 });
      return i.hi - i.lo;
    };
    // Binomial: 2 × 1.96 × sqrt(0.3 × 0.7 / n) = 0.180 (n = 100), 0.090 (n = 400).
    expect(w(mk(100))).toBeGreaterThan(0.15);
    expect(w(mk(100))).toBeLessThan(0.21);
    expect(w(mk(400)) / w(mk(100))).toBeCloseTo(0.5, 1);
  });

  it('the base policy (one seed) pairs with every seed of a trained configuration, on the same task ids', () => {
    const base: Obs[] = [{ seed: 0, task: 'a', value: 0 }, { seed: 0, task: 'b', value: 1 }];
    const run: Obs[] = [
      { seed: 0, task: 'a', value: 1 }, { seed: 0, task: 'b', value: 1 },
      { seed: 1, task: 'a', value: 0 }, { seed: 1, task: 'b', value: 0 }, { seed: 1, task: 'c', value: 1 },
    ];
    expect(pairDiffs(run, base, { broadcast: true })).toEqual([
      { seed: 0, task: 'a', value: 1 }, { seed: 0, task: 'b', value: 0 }, { seed: 1, task: 'a', value: 0 }, { seed: 1, task: 'b', value: -1 },
    ]);
    // Two configurations with several seeds pair seed by seed.
    const other: Obs[] = [{ seed: 0, task: 'a', value: 1 }, { seed: 1, task: 'a', value: 1 }];
    expect(pairDiffs(run, other)).toEqual([{ seed: 0, task: 'a', value: 0 }, { seed: 1, task: 'a', value: -1 }]);
    // A trained configuration with one finished seed so far is not the base: it pairs with seed 0 only.
    expect(pairDiffs(run, base)).toEqual([{ seed: 0, task: 'a', value: 1 }, { seed: 0, task: 'b', value: 0 }]);
    expect(() => pairDiffs(run, other, { broadcast: true })).toThrow(PairingError);
  });

  it('empty input gives an empty interval, formatted as a dash', () => {
    const e = bootstrapMean([]);
    expect(e.n).toBe(0);
    expect(fmtInterval(e)).toBe('–');
    expect(pairedBootstrap([], []).significant).toBe(false);
  });
});

describe('per-seed metrics and formatting', () => {
  it('t-interval over seeds', () => {
    expect(t975(4)).toBe(2.776);
    expect(t975(100)).toBe(1.96);
    // mean 0.3, sd 0.1 (1 - 0.3... hand: values .2 .3 .4 → sd 0.1), half-width 4.303 × 0.1 / sqrt(3).
    const x = meanCI([0.2, 0.3, 0.4]);
    expect(x.mean).toBeCloseTo(0.3, 12);
    expect(x.hi - x.mean).toBeCloseTo((4.303 * 0.1) / Math.sqrt(3), 10);
    expect(meanCI([0.5]).lo).toBeNaN();
    expect(meanCI([NaN, 0.5, 0.5]).lo).toBe(0.5);
  });

  it('pass@k', () => {
    expect(passAtK(4, 0, 2)).toBe(0);
    expect(passAtK(4, 4, 1)).toBe(1);
    expect(passAtK(4, 1, 1)).toBeCloseTo(0.25, 12);
    expect(passAtK(4, 1, 2)).toBeCloseTo(0.5, 12); // 1 - C(3,2)/C(4,2) = 1 - 3/6
    expect(passAtK(5, 2, 2)).toBeCloseTo(0.7, 12); // 1 - C(3,2)/C(5,2) = 1 - 3/10
    expect(() => passAtK(3, 4, 1)).toThrow(RangeError);
  });

  it('formats intervals and signed differences in points', () => {
    expect(fmtInterval({ mean: 0.42, lo: 0.381, hi: 0.459, n: 500, seeds: 5 })).toBe('42.0 [38.1, 45.9]');
    expect(fmtInterval({ mean: 0.42, lo: NaN, hi: NaN, n: 100, seeds: 1 })).toBe('42.0');
    expect(fmtDiff({ mean: 0.03, lo: 0.005, hi: 0.055, n: 500, seeds: 5 })).toBe('+3.0 [+0.5, +5.5]');
    expect(fmtDiff({ mean: -0.01, lo: -0.04, hi: 0, n: 500, seeds: 5 })).toBe('-1.0 [-4.0, 0.0]');
    expect(fmtDiff({ mean: 0, lo: -0, hi: 0, n: 5, seeds: 5 })).toBe('0.0 [0.0, 0.0]');
  });
});
