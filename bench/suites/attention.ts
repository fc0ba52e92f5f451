// attention suite: the CPU fast path's attention kernels, version 1 (simple, per row: kernels/attention1.ts),
// version 2 (tiled: kernels/attention2.ts) and version 3 (kernels/attention3.ts), forward and backward, side by side
// in one process: the versions alternate call by call on the same backend and inputs, so all see the same machine
// load, and a speedup is the median of the per-round ratios. GFLOP/s count 4 T_eff Hq D flops forward and 10
// backward (T_eff = sum over tokens of the keys they see), each record bounded by the wasm-simd multiply-add peak x
// threads measured beside it (bench/limits.ts); where a shape has a backward, forward+backward = 14 T_eff Hq D over
// the sum of the two medians. Then a whole training step of a model of the bundled policy's shape on one 2,048-token
// row, the versions alternating step by step. Where the engine has relaxed SIMD, versions 2 and 3 of the relaxed
// build (kernels/simd.ts: fused multiply-adds) take part too, on a second backend with its own copies of the
// inputs, in the same alternation.
import type { Tensor } from '../../src/engine/backend';
import { createCpuFastBackend, relaxedSimdAvailable, type CpuFastBackend } from '../../src/engine/cpu/fast/backend';
import { paramCount, type Qwen3Config } from '../../src/model/config';
import { randomWeights } from '../../src/model/random';
import { buildQwen3 } from '../../src/model/weights';
import { packBatch } from '../../src/train/batch';
import { Trainer } from '../../src/train/trainer';
import { Rng } from '../../src/util/rng';
import { median, type BenchContext, type BenchSuite } from '../lib';

/** The 4-layer mini policy's shape (models/default until 2026-12-05; the 8-layer policy bundled since has the same width, so per layer the same work). */
const BUNDLED_MODEL: Qwen3Config = {
  hiddenSize: 128, intermediateSize: 384, numLayers: 4, numHeads: 4, numKvHeads: 2, headDim: 32,
  rmsNormEps: 1e-6, ropeTheta: 10_000, vocabSize: 4096, tieWordEmbeddings: true, maxPositionEmbeddings: 2048,
};

/**
 * A full-parameter training step (forward, backward, AdamW) of a random model of the bundled policy's shape on one
 * row of `len` tokens, with attention v1 and v2 alternating step by step on the same trainer: where attention's share
 * of a step shows.
 */
async function trainStep(ctx: BenchContext, b: CpuFastBackend, r: CpuFastBackend | null, threads: number): Promise<void> {
  const len = ctx.quick ? 512 : 2048;
  const made = await Promise.all([b, ...(r ? [r] : [])].map(async (be) => {
    const { model } = await buildQwen3(be, BUNDLED_MODEL, randomWeights(BUNDLED_MODEL, 1, 'f32'), { format: 'f32' });
    return { be, model, tr: new Trainer(model, { mode: 'full', recompute: false, schedule: { kind: 'constant', lr: 1e-5 }, loss: { kind: 'ce' } }) };
  }));
  const rng = new Rng(5);
  const tokens = Array.from({ length: len }, () => rng.int(BUNDLED_MODEL.vocabSize));
  const batch = packBatch([{ tokens, mask: tokens.map(() => 1) }], 'seq-mean-token-mean');
  // variants: attention v1, v2 and v3 on the strict build, v2 and v3 on the relaxed one
  const variants = [
    { m: made[0], v: 1 as const, name: 'attention v1' },
    { m: made[0], v: 2 as const, name: 'attention v2' },
    { m: made[0], v: 3 as const, name: 'attention v3' },
    ...(made[1] ? [{ m: made[1], v: 2 as const, name: 'attention v2 relaxed' }, { m: made[1], v: 3 as const, name: 'attention v3 relaxed' }] : []),
  ];
  const step = async (i: number) => {
    const { m, v } = variants[i];
    m.be.attentionKernel = v;
    const t0 = performance.now();
    const res = await m.tr.trainStep([batch]);
    if (!res.applied) throw new Error(`bench step refused: ${res.refused}`);
    return (performance.now() - t0) / 1000;
  };
  try {
    for (let i = 0; i < variants.length; i++) await step(i);
    const times: number[][] = variants.map(() => []);
    for (let k = 0; k < (ctx.quick ? 2 : 5); k++)
      for (let j = 0; j < variants.length; j++) {
        const i = (j + k) % variants.length;
        times[i].push(await step(i));
      }
    const shape = `1x${len} tokens`;
    const name = `train step, full, 1x${len}`;
    // ~6 flops per parameter and token in the matmuls, plus attention's 14 T_eff Hq D per layer (forward 4 + backward 10)
    const keys = (len * (len + 1)) / 2;
    const flops = 6 * paramCount(BUNDLED_MODEL) * len + 14 * keys * BUNDLED_MODEL.numHeads * BUNDLED_MODEL.headDim * BUNDLED_MODEL.numLayers;
    variants.forEach(({ name: v }, i) => {
      const s = median(times[i]);
      ctx.record({ case: `${name}, ${v}`, backend: 'cpu-fast', metric: 'train_tok_s', value: len / s, unit: 'tok/s', threads, shape, model: 'bundled-shape random f32', bound: { kind: 'fma', use: flops / s / 1e9, best: flops / Math.min(...times[i]) / 1e9 } });
    });
    const ratio = (a: number, c: number) => median(times[a].map((t, k) => t / times[c][k]));
    for (const [what, a, c] of speedupPairs(!!made[1]))
      ctx.record({ case: `${name}, attention ${what}`, backend: 'cpu-fast', metric: 'speedup', value: ratio(c, a), unit: 'x', threads, shape, model: 'bundled-shape random f32' });
    ctx.log(`${threads}t ${name}: ${variants.map(({ name: v }, i) => `${v} ${median(times[i]).toFixed(2)} s`).join(', ')} a step (median of interleaved rounds)`);
  } finally {
    for (const m of made) {
      m.be.attentionKernel = 3; // the default
      m.tr.free();
      m.model.free();
    }
  }
}

interface Shape {
  name: string;
  model: string;
  Hq: number;
  Hkv: number;
  D: number;
  S: number;
  maxT: number;
  slot: (t: number) => number;
  pos: (t: number) => number;
  T: number;
  backward: boolean;
}

const BUNDLED = { model: 'bundled mini policy', Hq: 4, Hkv: 2, D: 32 };

function shapes(quick: boolean): Shape[] {
  const T = quick ? 512 : 2048;
  return [
    { name: `train 1x${T}`, ...BUNDLED, S: 1, maxT: T, T, slot: () => 0, pos: (t) => t, backward: true },
    // a GRPO update's layout (as bench/cpu-browser): tokens of 16 cached sequences interleaved
    { name: `grpo ${T} tokens over 16 slots`, ...BUNDLED, S: 16, maxT: 640, T, slot: (t) => t % 16, pos: (t) => (t * 7) % 640, backward: true },
    // one layer of a Qwen3-0.6B-shaped prefill (16 query heads, 8 kv heads, head size 128)
    { name: `prefill ${quick ? 128 : 512}`, model: 'qwen3-0.6b-shape', Hq: 16, Hkv: 8, D: 128, S: 1, maxT: quick ? 128 : 512, T: quick ? 128 : 512, slot: () => 0, pos: (t) => t, backward: false },
    // batched decode: one token in each of 16 slots, 1,024 keys deep (version 2 pads 2 rows to a 4-row tile)
    { name: 'decode 16 slots at depth 1024', ...BUNDLED, S: 16, maxT: 1025, T: 16, slot: (t) => t, pos: () => 1024, backward: false },
  ];
}

/**
 * The speedups both parts record, over the variants in their order (v1, v2, v3, then v2 and v3 relaxed where the
 * engine has relaxed SIMD): [name, variant index, the variant it is compared with].
 */
function speedupPairs(relaxed: boolean): [string, number, number][] {
  return [['v2 / v1', 1, 0], ['v3 / v2', 2, 1], ...(relaxed ? ([['v2 relaxed / v2', 3, 1], ['v3 relaxed / v2 relaxed', 4, 3]] as [string, number, number][]) : [])];
}

const suite: BenchSuite = {
  name: 'attention',
  async run(ctx) {
    const relaxed = await relaxedSimdAvailable();
    if (!relaxed) ctx.log('relaxed SIMD not available here: strict build only');
    for (const threads of [1, 2]) {
      const b = await createCpuFastBackend({ threads, simd: 'strict' });
      const rb = relaxed ? await createCpuFastBackend({ threads, simd: 'relaxed' }) : null;
      const bs = [b, ...(rb ? [rb] : [])];
      try {
        for (const sh of shapes(ctx.quick)) {
          const { Hq, Hkv, D, S, maxT, T } = sh;
          const wave = (n: number, f: number) => Float32Array.from({ length: n }, (_, i) => Math.sin(i * f) * 0.5);
          const slot = Int32Array.from({ length: T }, (_, t) => sh.slot(t));
          const pos = Int32Array.from({ length: T }, (_, t) => sh.pos(t));
          const data = { q: wave(T * Hq * D, 1.37), dOut: wave(T * Hq * D, 0.91), kc: wave(S * maxT * Hkv * D, 0.73), vc: wave(S * maxT * Hkv * D, 0.53) };
          const inputs = new Map(bs.map((be) => [be, {
            layout: { slot: be.tensor(slot, [T]), pos: be.tensor(pos, [T]) },
            q: be.tensor(data.q, [T, Hq, D]),
            dOut: be.tensor(data.dOut, [T, Hq, D]),
            kc: be.tensor(data.kc, [S, maxT, Hkv, D]),
            vc: be.tensor(data.vc, [S, maxT, Hkv, D]),
          }]));
          const keys = pos.reduce((a, p) => a + p + 1, 0);
          const shape = `T=${T} Hq=${Hq} Hkv=${Hkv} D=${D} cache ${S}x${maxT}`;
          const variants = [
            { be: b, v: 1 as const, name: 'v1' },
            { be: b, v: 2 as const, name: 'v2' },
            { be: b, v: 3 as const, name: 'v3' },
            ...(rb ? [{ be: rb, v: 2 as const, name: 'v2 relaxed' }, { be: rb, v: 3 as const, name: 'v3 relaxed' }] : []),
          ];
          const pairs = speedupPairs(!!rb);
          const passes: [string, number][] = [['forward', 4]];
          if (sh.backward) passes.push(['backward', 10]);
          const perPass: number[][][] = []; // per pass, per variant: seconds a call, round by round
          for (const [pass, flopsPer] of passes) {
            const flops = flopsPer * keys * Hq * D;
            // calls batched so a sample lasts >= 20 ms
            const calls = Math.max(1, Math.ceil(0.02 / (flops / 10e9)));
            const sample = (i: number) => {
              const { be, v } = variants[i];
              const x = inputs.get(be)!;
              be.attentionKernel = v;
              const free = (r: Tensor | Record<string, Tensor>) => ('shape' in r ? be.free(r as Tensor) : Object.values(r).forEach((t) => be.free(t as Tensor)));
              const t0 = performance.now();
              for (let k = 0; k < calls; k++)
                free(pass === 'forward' ? be.attention(x.q, x.kc, x.vc, x.layout) : be.train.attentionBackward(x.dOut, x.q, x.kc, x.vc, x.layout));
              return (performance.now() - t0) / 1000 / calls;
            };
            variants.forEach((_, i) => sample(i));
            const reps = ctx.quick ? 3 : T >= 2048 ? 7 : 9;
            const times: number[][] = variants.map(() => []);
            for (let k = 0; k < reps; k++)
              for (let j = 0; j < variants.length; j++) {
                const i = (j + k) % variants.length; // the order rotates round by round
                times[i].push(sample(i));
              }
            variants.forEach(({ name }, i) => {
              const s = median(times[i]);
              const g = flops / s / 1e9;
              const best = flops / Math.min(...times[i]) / 1e9;
              ctx.record({ case: `attention ${name} ${pass}, ${sh.name}`, backend: 'cpu-fast', metric: 'gflops', value: g, unit: 'GFLOP/s', threads, shape, model: sh.model, bound: { kind: 'fma', use: g, best } });
              ctx.record({ case: `attention ${name} ${pass}, ${sh.name}`, backend: 'cpu-fast', metric: 'ms', value: 1000 * s, unit: 'ms', threads, shape, model: sh.model });
            });
            const ratio = (a: number, c: number) => median(times[a].map((t, k) => t / times[c][k]));
            for (const [what, a, c] of pairs)
              ctx.record({ case: `attention ${what} ${pass}, ${sh.name}`, backend: 'cpu-fast', metric: 'speedup', value: ratio(c, a), unit: 'x', threads, shape, model: sh.model });
            perPass.push(times);
            ctx.log(`${threads}t ${pass} ${sh.name}: ${variants.map(({ name }, i) => `${name} ${(1000 * median(times[i])).toFixed(2)} ms`).join(', ')} (median of ${reps} rotating rounds)`);
          }
          if (perPass.length === 2) {
            // forward + backward: a training step's attention work; round k's forward and backward calls summed
            const [f, bw] = perPass;
            const both = variants.map((_, i) => f[i].map((t, k) => t + bw[i][k]));
            const flops = 14 * keys * Hq * D;
            variants.forEach(({ name }, i) => {
              const g = flops / (median(f[i]) + median(bw[i])) / 1e9;
              const best = flops / (Math.min(...f[i]) + Math.min(...bw[i])) / 1e9;
              ctx.record({ case: `attention ${name} forward+backward, ${sh.name}`, backend: 'cpu-fast', metric: 'gflops', value: g, unit: 'GFLOP/s', threads, shape, model: sh.model, bound: { kind: 'fma', use: g, best } });
            });
            for (const [what, a, c] of pairs)
              ctx.record({ case: `attention ${what} forward+backward, ${sh.name}`, backend: 'cpu-fast', metric: 'speedup', value: median(both[c].map((t, k) => t / both[a][k])), unit: 'x', threads, shape, model: sh.model });
          }
          for (const [be, x] of inputs) for (const t of [x.q, x.dOut, x.kc, x.vc, x.layout.slot, x.layout.pos]) be.free(t);
        }
        await trainStep(ctx, b, rb, threads);
      } finally {
        for (const be of bs) {
          be.attentionKernel = 3; // the default
          be.dispose();
        }
      }
    }
  },
};

export default suite;
