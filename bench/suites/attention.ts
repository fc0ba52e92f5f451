// attention suite: the CPU fast path's attention kernels, version 1 (simple, per row: kernels/attention1.ts) and
// version 2 (tiled: kernels/attention2.ts), forward and backward, side by side in one process: the two versions
// alternate call by call on the same backend and inputs, so both see the same machine load, and the speedup is
// the median of the per-pair ratios. GFLOP/s count 4 T_eff Hq D flops forward and 10 backward (T_eff = sum over
// tokens of the keys they see; version 2's backward does 14, recomputing the scores in two passes), each record
// bounded by the wasm-simd mul+add peak x threads measured beside it (bench/limits.ts). Then a whole training step of
// a model of the bundled policy's shape on one 2,048-token row, v1 and v2 alternating step by step.
import type { Tensor } from '../../src/engine/backend';
import { createCpuFastBackend, type CpuFastBackend } from '../../src/engine/cpu/fast/backend';
import { paramCount, type Qwen3Config } from '../../src/model/config';
import { randomWeights } from '../../src/model/random';
import { buildQwen3 } from '../../src/model/weights';
import { packBatch } from '../../src/train/batch';
import { Trainer } from '../../src/train/trainer';
import { Rng } from '../../src/util/rng';
import type { BenchContext, BenchSuite } from '../lib';

/** The bundled policy's shape (models/default/config.json). */
const BUNDLED_MODEL: Qwen3Config = {
  hiddenSize: 128, intermediateSize: 384, numLayers: 4, numHeads: 4, numKvHeads: 2, headDim: 32,
  rmsNormEps: 1e-6, ropeTheta: 10_000, vocabSize: 4096, tieWordEmbeddings: true, maxPositionEmbeddings: 2048,
};

/**
 * A full-parameter training step (forward, backward, AdamW) of a random model of the bundled policy's shape on one
 * row of `len` tokens, with attention v1 and v2 alternating step by step on the same trainer: where attention's share
 * of a step shows.
 */
async function trainStep(ctx: BenchContext, b: CpuFastBackend, threads: number): Promise<void> {
  const len = ctx.quick ? 512 : 2048;
  const { model } = await buildQwen3(b, BUNDLED_MODEL, randomWeights(BUNDLED_MODEL, 1, 'f32'), { format: 'f32' });
  const tr = new Trainer(model, { mode: 'full', recompute: false, schedule: { kind: 'constant', lr: 1e-5 }, loss: { kind: 'ce' } });
  const rng = new Rng(5);
  const tokens = Array.from({ length: len }, () => rng.int(BUNDLED_MODEL.vocabSize));
  const batch = packBatch([{ tokens, mask: tokens.map(() => 1) }], 'seq-mean-token-mean');
  const step = async (v: 1 | 2) => {
    b.attentionKernel = v;
    const t0 = performance.now();
    const r = await tr.trainStep([batch]);
    if (!r.applied) throw new Error(`bench step refused: ${r.refused}`);
    return (performance.now() - t0) / 1000;
  };
  try {
    await step(1);
    await step(2);
    const s1: number[] = [];
    const s2: number[] = [];
    const ratio: number[] = [];
    for (let i = 0; i < (ctx.quick ? 2 : 5); i++) {
      const [a, c] = i % 2 ? [await step(2), await step(1)] : [await step(1), await step(2)];
      const [v1, v2] = i % 2 ? [c, a] : [a, c];
      s1.push(v1);
      s2.push(v2);
      ratio.push(v1 / v2);
    }
    const shape = `1x${len} tokens`;
    const name = `train step, full, 1x${len}`;
    // ~6 flops per parameter and token in the matmuls, plus attention's 14 T_eff Hq D per layer (forward 4 + backward 10)
    const keys = (len * (len + 1)) / 2;
    const flops = 6 * paramCount(BUNDLED_MODEL) * len + 14 * keys * BUNDLED_MODEL.numHeads * BUNDLED_MODEL.headDim * BUNDLED_MODEL.numLayers;
    for (const [v, s] of [[1, median(s1)], [2, median(s2)]] as const) {
      ctx.record({ case: `${name}, attention v${v}`, backend: 'cpu-fast', metric: 'train_tok_s', value: len / s, unit: 'tok/s', threads, shape, model: 'bundled-shape random f32', bound: { kind: 'fma', use: flops / s / 1e9 } });
    }
    const r = median(ratio);
    ctx.record({ case: `${name}, attention v2 / v1`, backend: 'cpu-fast', metric: 'speedup', value: r, unit: 'x', threads, shape, model: 'bundled-shape random f32' });
    ctx.log(`${threads}t ${name}: v1 ${median(s1).toFixed(2)} s, v2 ${median(s2).toFixed(2)} s a step, v2 ${r.toFixed(2)}x faster (median of interleaved pairs)`);
  } finally {
    b.attentionKernel = 2;
    tr.free();
    model.free();
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

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

const suite: BenchSuite = {
  name: 'attention',
  async run(ctx) {
    for (const threads of [1, 2]) {
      const b = await createCpuFastBackend({ threads });
      try {
        for (const sh of shapes(ctx.quick)) {
          const { Hq, Hkv, D, S, maxT, T } = sh;
          const wave = (n: number, f: number) => Float32Array.from({ length: n }, (_, i) => Math.sin(i * f) * 0.5);
          const slot = Int32Array.from({ length: T }, (_, t) => sh.slot(t));
          const pos = Int32Array.from({ length: T }, (_, t) => sh.pos(t));
          const layout = { slot: b.tensor(slot, [T]), pos: b.tensor(pos, [T]) };
          const q = b.tensor(wave(T * Hq * D, 1.37), [T, Hq, D]);
          const dOut = b.tensor(wave(T * Hq * D, 0.91), [T, Hq, D]);
          const kc = b.tensor(wave(S * maxT * Hkv * D, 0.73), [S, maxT, Hkv, D]);
          const vc = b.tensor(wave(S * maxT * Hkv * D, 0.53), [S, maxT, Hkv, D]);
          const keys = pos.reduce((a, p) => a + p + 1, 0);
          const shape = `T=${T} Hq=${Hq} Hkv=${Hkv} D=${D} cache ${S}x${maxT}`;
          const free = (r: Tensor | Record<string, Tensor>) => ('shape' in r ? b.free(r as Tensor) : Object.values(r).forEach((t) => b.free(t as Tensor)));
          const passes: [string, number, () => Tensor | Record<string, Tensor>][] = [['forward', 4, () => b.attention(q, kc, vc, layout)]];
          if (sh.backward) passes.push(['backward', 10, () => b.train.attentionBackward(dOut, q, kc, vc, layout)]);
          for (const [pass, flopsPer, f] of passes) {
            const flops = flopsPer * keys * Hq * D;
            // calls batched so a sample lasts >= 20 ms
            const calls = Math.max(1, Math.ceil(0.02 / (flops / 10e9)));
            const sample = (v: 1 | 2) => {
              b.attentionKernel = v;
              const t0 = performance.now();
              for (let i = 0; i < calls; i++) free(f());
              return (performance.now() - t0) / 1000 / calls;
            };
            sample(1);
            sample(2);
            const reps = ctx.quick ? 3 : T >= 2048 ? 7 : 9;
            const s1: number[] = [];
            const s2: number[] = [];
            const ratio: number[] = [];
            for (let i = 0; i < reps; i++) {
              // alternate which version goes first
              const [a, c] = i % 2 ? [sample(2), sample(1)] : [sample(1), sample(2)];
              const [v1, v2] = i % 2 ? [c, a] : [a, c];
              s1.push(v1);
              s2.push(v2);
              ratio.push(v1 / v2);
            }
            for (const [v, s] of [[1, median(s1)], [2, median(s2)]] as const) {
              const g = flops / s / 1e9;
              ctx.record({ case: `attention v${v} ${pass}, ${sh.name}`, backend: 'cpu-fast', metric: 'gflops', value: g, unit: 'GFLOP/s', threads, shape, model: sh.model, bound: { kind: 'fma', use: g } });
              ctx.record({ case: `attention v${v} ${pass}, ${sh.name}`, backend: 'cpu-fast', metric: 'ms', value: 1000 * s, unit: 'ms', threads, shape, model: sh.model });
            }
            const r = median(ratio);
            ctx.record({ case: `attention v2 / v1 ${pass}, ${sh.name}`, backend: 'cpu-fast', metric: 'speedup', value: r, unit: 'x', threads, shape, model: sh.model });
            ctx.log(`${threads}t ${pass} ${sh.name}: v1 ${(1000 * median(s1)).toFixed(2)} ms, v2 ${(1000 * median(s2)).toFixed(2)} ms, v2 ${r.toFixed(2)}x faster (median of ${reps} interleaved pairs)`);
          }
          for (const t of [q, dOut, kc, vc, layout.slot, layout.pos]) b.free(t);
        }
        await trainStep(ctx, b, threads);
      } finally {
        b.attentionKernel = 2;
        b.dispose();
      }
    }
  },
};

export default suite;
