// Finite-difference helpers for the gradient checks.
import { Rng } from '../../src/util/rng';

export function randn(rng: Rng, n: number, scale = 1): Float32Array {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = rng.normal() * scale;
  return a;
}

/** f64 dot of two arrays (the scalar loss sum(out * R)). */
export function dot(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
}

/**
 * Central differences of loss(x) w.r.t. x at `count` indices (all if count >= x.length), compared with
 * `analytic`. Returns the worst error relative to the largest analytic entry checked.
 */
export function fdCheck(x: Float32Array, analytic: ArrayLike<number>, loss: () => number, opts: { h?: number; count?: number; rng?: Rng } = {}): { relErr: number; checked: number; maxAbs: number } {
  const h = opts.h ?? 1e-2;
  const rng = opts.rng ?? new Rng(99);
  const n = x.length;
  const idx = n <= (opts.count ?? 48) ? [...Array(n).keys()] : Array.from({ length: opts.count ?? 48 }, () => rng.int(n));
  let worst = 0;
  let maxAbs = 0;
  for (const i of idx) maxAbs = Math.max(maxAbs, Math.abs(analytic[i]));
  for (const i of idx) {
    const x0 = x[i];
    x[i] = x0 + h;
    const lp = loss();
    x[i] = x0 - h;
    const lm = loss();
    x[i] = x0;
    const fd = (lp - lm) / (2 * h);
    worst = Math.max(worst, Math.abs(fd - analytic[i]));
  }
  return { relErr: worst / Math.max(maxAbs, 1e-6), checked: idx.length, maxAbs };
}
