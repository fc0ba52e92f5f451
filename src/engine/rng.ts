// A counter-based random stream shared bit-for-bit by every backend (the WGSL copy lives in
// src/engine/webgpu and must stay identical): uniform(seed, step) depends only on its two u32 inputs,
// so sampling is reproducible, resumable and the same on CPU and GPU.

/** 32-bit integer hash (lowbias32, Chris Wellons). */
export function hash32(x: number): number {
  x >>>= 0;
  x ^= x >>> 16;
  x = Math.imul(x, 0x7feb352d);
  x ^= x >>> 15;
  x = Math.imul(x, 0x846ca68b);
  x ^= x >>> 16;
  return x >>> 0;
}

/** Uniform in [0, 1) with 24 bits, exactly representable in f32. */
export function uniform(seed: number, step: number): number {
  const h = hash32(hash32(seed >>> 0) ^ Math.imul(step >>> 0, 0x9e3779b9));
  return (h >>> 8) / 16777216;
}

/** A small seeded generator for host-side use (init, shuffles, task sampling). */
export class Rng {
  private step = 0;
  constructor(readonly seed: number) {}
  next(): number {
    return uniform(this.seed, this.step++);
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  /** Standard normal (Box-Muller). */
  normal(): number {
    const u = Math.max(this.next(), 1e-12);
    const v = this.next();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }
  get state(): { seed: number; step: number } {
    return { seed: this.seed, step: this.step };
  }
  /** Rebuilds a generator from `state`; a seed or step that is not an integer in range is refused (a bad one never advances). */
  static restore(s: { seed: number; step: number }): Rng {
    const ok = (v: unknown, max: number) => typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= max;
    if (!s || typeof s !== 'object' || !ok(s.seed, 0xffffffff) || !ok(s.step, Number.MAX_SAFE_INTEGER))
      throw new RangeError(`RNG state must be {seed: integer in [0, 2^32), step: integer >= 0}, got ${JSON.stringify(s)}`);
    const r = new Rng(s.seed);
    r.step = s.step;
    return r;
  }
}
