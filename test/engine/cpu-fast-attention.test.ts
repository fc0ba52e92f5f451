// The CPU fast path's attention kernels, version 1 (simple, per row), version 2 (tiled: key blocks of 32,
// blocks of up to 32 query rows, 4-row tiles) and version 3 (version 2's tiling, its own scratch layout and loops), against the f64 reference at shapes that are awkward for the
// tiling: sequence lengths that are not multiples of the key block or the row tile, GQA groups that do not
// divide 32 rows, odd head sizes (padded to 8 in scratch), continuation prefills and decode rows that start
// deep in the KV cache, tokens of several slots interleaved and out of position order.
//
// Tolerance: forward, softmax-weighted means of values in [-1, 1] (f32 against f64): 2e-6, as in
// cpu-fast.test.ts. Backward: a dk/dv row sums up to (tokens of the slot x group) products of such values, so
// 2e-7 per summed row plus 2e-6.
//
// Bit-exactness policy: each version is deterministic: the same bits whatever the thread count, and (version
// 2 and 3) a row's output does not depend on which other rows share its block, so a decode step gives the bits of
// the same token in a prefill. The versions may differ in the order of operations and are compared with the
// reference's tolerance, not bit for bit.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Backend, Tensor } from '../../src/engine/backend';
import { createCpuFastBackend, type CpuFastBackend } from '../../src/engine/cpu/fast/backend';
import { CpuRefBackend } from '../../src/engine/cpu/ref';
import { CpuRefTrainOps } from '../../src/engine/cpu/train-ops';
import { EngineError } from '../../src/engine/errors';
import { maxDiff, randn, rng } from '../helpers/numeric';

const ref = new CpuRefBackend();
const refTrain = new CpuRefTrainOps(ref);

interface Case {
  name: string;
  Hq: number;
  Hkv: number;
  D: number;
  S: number;
  maxT: number;
  slot: number[];
  pos: number[];
}

const range = (n: number, from = 0) => Array.from({ length: n }, (_, i) => from + i);

const CASES: Case[] = [
  // one sequence, T = 70: two full key blocks and a partial one; 35 row tiles of 4 (group 2)
  { name: 'prefill T=70 (not a multiple of 32), GQA 4/2, D=32', Hq: 4, Hkv: 2, D: 32, S: 1, maxT: 70, slot: range(70).map(() => 0), pos: range(70) },
  // group 6: blocks of 5 tokens = 30 rows, padded to 32
  { name: 'prefill T=41, GQA 6/1, D=17', Hq: 6, Hkv: 1, D: 17, S: 1, maxT: 48, slot: range(41).map(() => 0), pos: range(41) },
  // group 8 (4 tokens a block), D not a multiple of 8
  { name: 'prefill T=33, GQA 8/1, D=12', Hq: 8, Hkv: 1, D: 12, S: 1, maxT: 40, slot: range(33).map(() => 0), pos: range(33) },
  // no GQA, head size 5 (one 8-wide column tile, 3 of it padding)
  { name: 'prefill T=9, MHA 3/3, D=5', Hq: 3, Hkv: 3, D: 5, S: 1, maxT: 9, slot: range(9).map(() => 0), pos: range(9) },
  // a continuation prefill of 20 tokens after 45 cached ones, plus decode rows in other slots at the key-block edges
  {
    name: 'KV cache offsets: continuation at pos 45..64, decode at 0, 31, 32, 33, 63, 64, 99',
    Hq: 4,
    Hkv: 2,
    D: 24,
    S: 4,
    maxT: 100,
    slot: [...range(20).map(() => 0), 1, 1, 2, 2, 3, 3, 3],
    pos: [...range(20, 45), 0, 31, 32, 33, 63, 64, 99],
  },
  // tokens of three slots interleaved (t % 3) and, in slot 2, positions out of order and one repeated
  {
    name: 'interleaved slots, positions out of order, GQA 4/1, D=40',
    Hq: 4,
    Hkv: 1,
    D: 40,
    S: 3,
    maxT: 80,
    slot: range(60).map((t) => t % 3),
    pos: range(60).map((t) => (t % 3 === 2 ? (79 - 3 * Math.floor(t / 3)) % 80 : t % 3 === 1 ? Math.floor(t / 3) * 2 : t === 57 ? 0 : Math.floor(t / 3))),
  },
];

function inputs(c: Case, seed: number) {
  const r = rng(seed);
  const T = c.slot.length;
  return {
    T,
    q: randn(T * c.Hq * c.D, r),
    go: randn(T * c.Hq * c.D, r),
    kc: randn(c.S * c.maxT * c.Hkv * c.D, r),
    vc: randn(c.S * c.maxT * c.Hkv * c.D, r),
  };
}

function forward(b: Backend, c: Case, x: ReturnType<typeof inputs>, rows?: number[]): Promise<Float32Array> {
  const pick = rows ?? range(x.T);
  const T = pick.length;
  const q = new Float32Array(T * c.Hq * c.D);
  pick.forEach((t, i) => q.set(x.q.subarray(t * c.Hq * c.D, (t + 1) * c.Hq * c.D), i * c.Hq * c.D));
  const cache = [c.S, c.maxT, c.Hkv, c.D];
  return b.read(
    b.attention(b.tensor(q, [T, c.Hq, c.D]), b.tensor(x.kc, cache), b.tensor(x.vc, cache), {
      slot: b.tensor(Int32Array.from(pick.map((t) => c.slot[t])), [T]),
      pos: b.tensor(Int32Array.from(pick.map((t) => c.pos[t])), [T]),
    }),
  ) as Promise<Float32Array>;
}

async function backward(b: Backend, train: Pick<CpuRefTrainOps, 'attentionBackward'>, c: Case, x: ReturnType<typeof inputs>): Promise<Float32Array[]> {
  const cache = [c.S, c.maxT, c.Hkv, c.D];
  const g = train.attentionBackward(b.tensor(x.go, [x.T, c.Hq, c.D]), b.tensor(x.q, [x.T, c.Hq, c.D]), b.tensor(x.kc, cache), b.tensor(x.vc, cache), {
    slot: b.tensor(Int32Array.from(c.slot), [x.T]),
    pos: b.tensor(Int32Array.from(c.pos), [x.T]),
  });
  return [(await b.read(g.dq)) as Float32Array, (await b.read(g.dkCache)) as Float32Array, (await b.read(g.dvCache)) as Float32Array];
}

const rowsPerKey = (c: Case) => Math.max(...range(c.S).map((s) => c.slot.filter((x) => x === s).length)) * (c.Hq / c.Hkv);

describe.each([
  { label: 'version 2, 1 thread', version: 2 as const, threads: 1, shared: 'auto' as const },
  { label: 'version 2, 3 threads, all ops threaded', version: 2 as const, threads: 3, shared: 'auto' as const },
  { label: 'version 2, plain-memory fallback', version: 2 as const, threads: 1, shared: false as const },
  { label: 'version 1, 2 threads, all ops threaded', version: 1 as const, threads: 2, shared: 'auto' as const },
  // the relaxed build (f32x4.relaxed_madd, fused where the machine has FMA): other bits, the same tolerances
  { label: 'version 2, relaxed SIMD, 3 threads, all ops threaded', version: 2 as const, threads: 3, shared: 'auto' as const, simd: 'relaxed' as const },
  { label: 'version 3, 1 thread', version: 3 as const, threads: 1, shared: 'auto' as const },
  { label: 'version 3, 3 threads, all ops threaded', version: 3 as const, threads: 3, shared: 'auto' as const },
  { label: 'version 3, plain-memory fallback', version: 3 as const, threads: 1, shared: false as const },
  { label: 'version 3, relaxed SIMD, 1 thread', version: 3 as const, threads: 1, shared: 'auto' as const, simd: 'relaxed' as const },
  { label: 'version 3, relaxed SIMD, 3 threads, all ops threaded', version: 3 as const, threads: 3, shared: 'auto' as const, simd: 'relaxed' as const },
])('cpu-fast attention ($label)', ({ version, threads, shared, simd }: { version: 1 | 2 | 3; threads: number; shared: 'auto' | false; simd?: 'relaxed' }) => {
  let fast: CpuFastBackend;
  beforeAll(async () => {
    fast = await createCpuFastBackend({ threads, shared, parallelMinWork: 0, attentionKernel: version, simd });
  });
  afterAll(() => fast?.dispose());

  it('runs the asked version', () => expect(fast.attentionKernel).toBe(version));

  it.each(CASES.map((c, i) => [c.name, c, i] as const))('forward: %s matches the reference', async (_, c, i) => {
    const x = inputs(c, 100 + i);
    expect(maxDiff(await forward(fast, c, x), await forward(ref, c, x))).toBeLessThanOrEqual(2e-6);
  });

  it.each(CASES.map((c, i) => [c.name, c, i] as const))('backward: %s matches the reference TrainOps', async (_, c, i) => {
    const x = inputs(c, 200 + i);
    const want = await backward(ref, refTrain, c, x);
    const got = await backward(fast, fast.train, c, x);
    const tol = 2e-7 * rowsPerKey(c) + 2e-6;
    for (let k = 0; k < 3; k++) expect(maxDiff(got[k], want[k]), ['dq', 'dk', 'dv'][k]).toBeLessThanOrEqual(tol);
  });

  it('a token decoded alone gets the bits it gets inside a prefill (row results do not depend on the block)', async () => {
    const c = CASES[0];
    const x = inputs(c, 7);
    const all = await forward(fast, c, x);
    const w = c.Hq * c.D;
    for (const t of [0, 3, 31, 32, 33, 63, 69]) expect(await forward(fast, c, x, [t]), `token ${t}`).toEqual(all.subarray(t * w, (t + 1) * w));
    // a batch of a few rows in another order
    const some = [69, 5, 40, 41];
    const got = await forward(fast, c, x, some);
    some.forEach((t, i) => expect(got.subarray(i * w, (i + 1) * w), `token ${t} in a batch`).toEqual(all.subarray(t * w, (t + 1) * w)));
  });
});

describe('cpu-fast attention: versions and threads', () => {
  let one: CpuFastBackend;
  let three: CpuFastBackend;
  beforeAll(async () => {
    one = await createCpuFastBackend({ threads: 1 });
    three = await createCpuFastBackend({ threads: 3, parallelMinWork: 0 });
  });
  afterAll(() => {
    one?.dispose();
    three?.dispose();
  });

  it('version 3 is the default; the version can be switched and a bad one is refused', async () => {
    expect(one.attentionKernel).toBe(3);
    expect(() => (one.attentionKernel = 4 as never)).toThrow(EngineError);
    await expect(createCpuFastBackend({ threads: 1, attentionKernel: 0 as never })).rejects.toThrow(EngineError);
  });

  it('CPU_FAST_ATTENTION=1, 2 or 3 makes that version the default (to rerun records made with it); the option wins', async () => {
    const before = process.env.CPU_FAST_ATTENTION;
    try {
      for (const v of [1, 2, 3] as const) {
        process.env.CPU_FAST_ATTENTION = String(v);
        const a = await createCpuFastBackend({ threads: 1 });
        const other = v === 1 ? 2 : 1;
        const b = await createCpuFastBackend({ threads: 1, attentionKernel: other });
        expect([a.attentionKernel, b.attentionKernel]).toEqual([v, other]);
        a.dispose();
        b.dispose();
      }
      process.env.CPU_FAST_ATTENTION = '7';
      await expect(createCpuFastBackend({ threads: 1 })).rejects.toThrow(EngineError);
    } finally {
      if (before === undefined) delete process.env.CPU_FAST_ATTENTION;
      else process.env.CPU_FAST_ATTENTION = before;
    }
  });

  it('each version gives the same bits on 1 and 3 threads, forward and backward', async () => {
    for (const v of [1, 2, 3] as const) {
      one.attentionKernel = v;
      three.attentionKernel = v;
      for (const [i, c] of CASES.entries()) {
        const x = inputs(c, 300 + i);
        expect(await forward(three, c, x), `v${v} ${c.name}`).toEqual(await forward(one, c, x));
        const a = await backward(one, one.train, c, x);
        const b = await backward(three, three.train, c, x);
        for (let k = 0; k < 3; k++) expect(b[k], `v${v} ${c.name} ${['dq', 'dk', 'dv'][k]}`).toEqual(a[k]);
      }
    }
  });

  it('versions 1 and 2 agree within the reference tolerance on a longer sequence (T=300, D=64, GQA 4/2)', async () => {
    const c: Case = { name: 'T=300', Hq: 4, Hkv: 2, D: 64, S: 1, maxT: 300, slot: range(300).map(() => 0), pos: range(300) };
    const x = inputs(c, 9);
    one.attentionKernel = 1;
    const f1 = await forward(one, c, x);
    const b1 = await backward(one, one.train, c, x);
    one.attentionKernel = 2;
    const f2 = await forward(one, c, x);
    const b2 = await backward(one, one.train, c, x);
    expect(f2).not.toEqual(f1); // the switch really runs the other kernel (they round differently)
    expect(maxDiff(f2, f1)).toBeLessThanOrEqual(2e-6);
    for (let k = 0; k < 3; k++) expect(maxDiff(b2[k], b1[k]), ['dq', 'dk', 'dv'][k]).toBeLessThanOrEqual(2e-7 * rowsPerKey(c) + 2e-6);
    one.attentionKernel = 3;
    const f3 = await forward(one, c, x);
    const b3 = await backward(one, one.train, c, x);
    expect(maxDiff(f3, f1)).toBeLessThanOrEqual(2e-6);
    for (let k = 0; k < 3; k++) expect(maxDiff(b3[k], b1[k]), `v3 ${['dq', 'dk', 'dv'][k]}`).toBeLessThanOrEqual(2e-7 * rowsPerKey(c) + 2e-6);
    one.attentionKernel = 3; // the default, for the tests after this one
  });

  it('version 3 on a training-length row (T=600, GQA 4/2, D=32: many key blocks, 38 row tiles) matches the reference', async () => {
    const c: Case = { name: 'T=600', Hq: 4, Hkv: 2, D: 32, S: 1, maxT: 600, slot: range(600).map(() => 0), pos: range(600) };
    const x = inputs(c, 11);
    one.attentionKernel = 3;
    expect(maxDiff(await forward(one, c, x), await forward(ref, c, x))).toBeLessThanOrEqual(2e-6);
    const want = await backward(ref, refTrain, c, x);
    const got = await backward(one, one.train, c, x);
    for (let k = 0; k < 3; k++) expect(maxDiff(got[k], want[k]), ['dq', 'dk', 'dv'][k]).toBeLessThanOrEqual(2e-7 * rowsPerKey(c) + 2e-6);
  });
});
