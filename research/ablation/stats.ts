// Statistics for the ablation and private-rehearsal tables: success with a 95 % bootstrap
// confidence interval over tasks and seeds, paired differences between configurations evaluated on the same
// tasks and seeds, and mean ± t-interval for per-seed metrics. Pure and deterministic (a seeded counter-based
// generator, the same on every machine); browser-safe.
//
// The bootstrap is two-level: a replicate draws S seeds with replacement from the S seeds, and for each drawn
// seed draws its T task results with replacement; the replicate's statistic is the mean over drawn seeds of
// the per-seed mean. The interval is the percentile interval of the replicates (type-7 quantiles). This
// carries both sources of noise the tables have: which held-out tasks were drawn, and which training seed.
// For a paired difference the two configurations' results are first matched on (seed, task) and the
// bootstrap runs on the differences, so the task difficulty common to both cancels.
import { Rng } from '../../src/util/rng';

/** One task's result in one seed's run (value: 1/0 success, or a reward in [0, 1]). */
export interface Obs {
  seed: number;
  task: string;
  value: number;
}

export interface Interval {
  /** The point estimate (mean over seeds of each seed's mean; the grand mean when seeds have equal tasks). */
  mean: number;
  lo: number;
  hi: number;
  /** Observations (tasks × seeds) behind it. */
  n: number;
  seeds: number;
}

export interface PairedInterval extends Interval {
  /** The 95 % interval lies entirely above or below zero. */
  significant: boolean;
}

export interface BootstrapOptions {
  /** Replicates (default 2000). */
  reps?: number;
  /** Seed of the resampling stream (default 0): the same inputs and seed give the same interval. */
  seed?: number;
  /** Coverage (default 0.95). */
  level?: number;
}

const EMPTY: Interval = { mean: NaN, lo: NaN, hi: NaN, n: 0, seeds: 0 };

/** Type-7 (linear interpolation) quantile of sorted values. */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return NaN;
  const h = (sorted.length - 1) * q;
  const i = Math.floor(h);
  const f = h - i;
  return i + 1 < sorted.length ? sorted[i] + f * (sorted[i + 1] - sorted[i]) : sorted[i];
}

/** Values grouped by seed (ascending seed, tasks in input order). */
function bySeed(obs: readonly Obs[]): number[][] {
  const m = new Map<number, number[]>();
  for (const o of obs) {
    if (!Number.isFinite(o.value)) continue;
    let v = m.get(o.seed);
    if (!v) m.set(o.seed, (v = []));
    v.push(o.value);
  }
  return [...m.entries()].sort((a, b) => a[0] - b[0]).map((e) => e[1]);
}

const meanOf = (xs: readonly number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;

/** Mean with a two-level (seeds, then tasks within a seed) percentile bootstrap interval. */
export function bootstrapMean(obs: readonly Obs[], opts: BootstrapOptions = {}): Interval {
  const groups = bySeed(obs);
  if (groups.length === 0) return { ...EMPTY };
  const reps = opts.reps ?? 2000;
  const level = opts.level ?? 0.95;
  const rng = new Rng((opts.seed ?? 0) >>> 0);
  const S = groups.length;
  const mean = meanOf(groups.map(meanOf));
  const out = new Float64Array(reps);
  for (let r = 0; r < reps; r++) {
    let acc = 0;
    for (let s = 0; s < S; s++) {
      const g = groups[S === 1 ? 0 : rng.int(S)];
      let t = 0;
      for (let i = 0; i < g.length; i++) t += g[rng.int(g.length)];
      acc += t / g.length;
    }
    out[r] = acc / S;
  }
  const sorted = Array.from(out).sort((a, b) => a - b);
  const a = (1 - level) / 2;
  // Clamp to the observed range: interpolation cannot leave it, but float sums of equal values can wobble.
  const lo = Math.min(quantile(sorted, a), mean);
  const hi = Math.max(quantile(sorted, 1 - a), mean);
  return { mean, lo, hi, n: groups.reduce((n, g) => n + g.length, 0), seeds: S };
}

export interface PairOptions {
  /**
   * b is one deterministic run (the base policy under greedy evaluation) that stands for every seed of a. Only
   * the caller knows this: a trained configuration with one finished seed so far must still pair seed by seed.
   */
  broadcast?: boolean;
}

export class PairingError extends Error {
  override readonly name = 'PairingError';
}

/** Differences a − b matched on (seed, task); unmatched results are dropped. */
export function pairDiffs(a: readonly Obs[], b: readonly Obs[], opts: PairOptions = {}): Obs[] {
  const broadcast = opts.broadcast ?? false;
  const bSeeds = new Set(b.map((o) => o.seed));
  if (broadcast && bSeeds.size > 1) throw new PairingError(`broadcast pairing needs one run of b, got seeds ${[...bSeeds].join(', ')}`);
  const key = (seed: number, task: string) => JSON.stringify([seed, task]);
  const bv = new Map(b.map((o) => [key(broadcast ? 0 : o.seed, o.task), o.value]));
  const out: Obs[] = [];
  for (const o of a) {
    const v = bv.get(key(broadcast ? 0 : o.seed, o.task));
    if (v !== undefined) out.push({ seed: o.seed, task: o.task, value: o.value - v });
  }
  return out;
}

/**
 * An interval end within this of zero holds zero. A replicate's mean is a float sum of fractions such as 1/100, so
 * a replicate whose differences cancel exactly comes out as ±1e-19 or so, not 0: without the tolerance an interval
 * that ends at zero (2026-12-05: dyna-q-recall − real-q, lower end 6.9e-19) read as excluding it. The smallest real
 * difference of means over fewer than 10^6 results is 1e-6, far above it.
 */
export const SIGNIFICANCE_EPS = 1e-9;

/** The paired bootstrap interval of mean(a − b) on matched (seed, task) results. */
export function pairedBootstrap(a: readonly Obs[], b: readonly Obs[], opts: BootstrapOptions & PairOptions = {}): PairedInterval {
  const d = bootstrapMean(pairDiffs(a, b, opts), opts);
  return { ...d, significant: d.n > 0 && (d.lo > SIGNIFICANCE_EPS || d.hi < -SIGNIFICANCE_EPS) };
}

/** Two-sided 97.5 % quantiles of Student's t, df 1..30. */
const T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.16, 2.145, 2.131, 2.12, 2.11, 2.101, 2.093, 2.086, 2.08, 2.074, 2.069, 2.064, 2.06, 2.056, 2.052, 2.048, 2.045, 2.042];

/** t quantile for a 95 % two-sided interval with df degrees of freedom (1.96 beyond 30). */
export function t975(df: number): number {
  return df >= 1 && df <= 30 ? T975[df - 1] : df > 30 ? 1.96 : NaN;
}

/**
 * Mean of per-seed values (e.g. fidelity, training reward, wall-clock) with a 95 % t-interval over seeds;
 * lo = hi = NaN with fewer than two values. Non-finite values are ignored.
 */
export function meanCI(xs: readonly number[]): Interval {
  const v = xs.filter((x) => Number.isFinite(x));
  const n = v.length;
  if (n === 0) return { ...EMPTY };
  const mean = meanOf(v);
  if (n === 1) return { mean, lo: NaN, hi: NaN, n, seeds: n };
  const sd = Math.sqrt(v.reduce((s, x) => s + (x - mean) ** 2, 0) / (n - 1));
  const h = (t975(n - 1) * sd) / Math.sqrt(n);
  return { mean, lo: mean - h, hi: mean + h, n, seeds: n };
}

/**
 * Unbiased pass@k from n samples of which c succeeded: 1 − C(n−c, k) / C(n, k) (Chen et al. 2021).
 */
export function passAtK(n: number, c: number, k: number): number {
  if (!(Number.isInteger(n) && Number.isInteger(c) && Number.isInteger(k) && n >= 1 && c >= 0 && c <= n && k >= 1 && k <= n)) {
    throw new RangeError(`passAtK: need integers 0 <= c <= n, 1 <= k <= n; got n ${n}, c ${c}, k ${k}`);
  }
  if (n - c < k) return 1;
  let p = 1;
  for (let i = n - c + 1; i <= n; i++) p *= 1 - k / i;
  return 1 - p;
}

/** "42.0 [38.1, 45.9]" (scaled; "–" when empty; the point alone when there is no interval). */
export function fmtInterval(x: Interval, scale = 100, digits = 1): string {
  if (x.n === 0 || !Number.isFinite(x.mean)) return '–';
  const f = (v: number) => {
    const s = (v * scale).toFixed(digits);
    return Number(s) === 0 ? (0).toFixed(digits) : s;
  };
  return Number.isFinite(x.lo) ? `${f(x.mean)} [${f(x.lo)}, ${f(x.hi)}]` : f(x.mean);
}

/** A signed difference: "+3.0 [+0.5, +5.5]". */
export function fmtDiff(x: Interval, scale = 100, digits = 1): string {
  if (x.n === 0 || !Number.isFinite(x.mean)) return '–';
  const f = (v: number) => {
    const s = (v * scale).toFixed(digits);
    return Number(s) === 0 ? (0).toFixed(digits) : v > 0 ? `+${s}` : s;
  };
  return Number.isFinite(x.lo) ? `${f(x.mean)} [${f(x.lo)}, ${f(x.hi)}]` : f(x.mean);
}
