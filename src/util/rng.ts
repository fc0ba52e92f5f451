// A counter-based random stream shared bit-for-bit by every backend (the WGSL copy lives in
// src/engine/webgpu and must stay identical): uniform(seed, step) depends only on its two u32 inputs,
// so sampling is reproducible, resumable and the same on CPU and GPU. Seeds of sub-streams (an episode's
// turn, a training step, an imagined attempt) are derived with deriveSeed, the one mixer every caller uses,
// so a checkpointed run resumes on exactly the seeds it would have drawn.

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

/** 2^32 / golden ratio: multiplying a counter by it spreads consecutive values over the whole word. */
const GOLDEN = 0x9e3779b9;

/** Uniform in [0, 1) with 24 bits, exactly representable in f32. */
export function uniform(seed: number, step: number): number {
  const h = hash32(hash32(seed >>> 0) ^ Math.imul(step >>> 0, GOLDEN));
  return (h >>> 8) / 16777216;
}

/**
 * A seed derived from `start` and a path of integer indices (episode, turn, attempt, …), one hash per index:
 * h ← hash32(h ^ (i + 1)·φ). The + 1 keeps index 0 from being a bare rehash. Callers pass either a raw
 * constant or hash32(seed) as `start`; the values are pinned by test/util/rng.test.ts, because saved runs
 * resume on them.
 */
export function deriveSeed(start: number, ...path: number[]): number {
  let h = start;
  for (const i of path) h = hash32(h ^ Math.imul(i + 1, GOLDEN));
  return h >>> 0;
}

/** A seed derived from `start` and a string (an id), one hash per UTF-16 code unit: h ← hash32(h ^ c). */
export function deriveSeedFromText(start: number, text: string): number {
  let h = start;
  for (let i = 0; i < text.length; i++) h = hash32(h ^ text.charCodeAt(i));
  return h >>> 0;
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
