// Training speed and memory.
//
// train_tok_s: one full optimizer step (forward + loss + backward + AdamW, including the guard's
// read-backs) on a tiny random model, tokens/s = tokens in the batch / step time; LoRA on a q4 base and
// full-parameter f32, per backend.
// gpu_bytes_predicted / gpu_bytes_measured: a LoRA step (recomputation on) of
//  - a mid-size q4 model, measured in process: the bytes of every GPUBuffer alive during a real step
//    (after a warm-up step), against predictTrainBytes;
//  - the Qwen3-0.6B-shaped q4 model at 1024 tokens: predicted, and measured (not in --quick; skip with
//    BENCH_TRAIN_MEM_06B=0) by a child process that counts the buffers alive while the step is recorded,
//    after a 4-token warm-up step that compiles every pipeline; allocation does not depend on when the
//    GPU executes the work. About 4 minutes on the software GPU (lavapipe), mostly building the model.
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import type { Backend, BackendName } from '../../src/engine/backend';
import { CpuRefBackend } from '../../src/engine/cpu/ref';
import { createBackend } from '../../src/engine/index';
import { Rng } from '../../src/util/rng';
import { paramCount, type Qwen3Config } from '../../src/model/config';
import { createLoraAdapter } from '../../src/model/lora';
import type { WeightFormat } from '../../src/model/qwen3';
import { randomWeights } from '../../src/model/random';
import { buildQwen3 } from '../../src/model/weights';
import { packBatch } from '../../src/train/batch';
import { trackDeviceBytes } from '../../src/train/measure';
import { predictTrainBytes } from '../../src/train/memory';
import { Trainer } from '../../src/train/trainer';
import { nodeAdapter, nodeGpu } from '../gpu';
import { timeIt, type BenchContext, type BenchSuite } from '../lib';

const TINY: Qwen3Config = {
  hiddenSize: 128, intermediateSize: 384, numLayers: 4, numHeads: 4, numKvHeads: 2, headDim: 32,
  rmsNormEps: 1e-6, ropeTheta: 1_000_000, vocabSize: 4096, tieWordEmbeddings: true, maxPositionEmbeddings: 1024,
};
const QWEN3_06B: Qwen3Config = {
  hiddenSize: 1024, intermediateSize: 3072, numLayers: 28, numHeads: 16, numKvHeads: 8, headDim: 128,
  rmsNormEps: 1e-6, ropeTheta: 1_000_000, vocabSize: 151936, tieWordEmbeddings: true, maxPositionEmbeddings: 40960,
};
const MEM_TOKENS = 1024;
// embedFormat q4: randomWeights(…, 'q4') hands the loader a q4 table, which it keeps as it is
const MEM_OPTS = { format: 'q4' as const, embedFormat: 'q4' as const, mode: 'lora' as const, rank: 16, recompute: true, headChunk: 64 };

function batchOf(c: Qwen3Config, seqs: number, len: number, seed: number) {
  const rng = new Rng(seed);
  return packBatch(
    Array.from({ length: seqs }, () => {
      const tokens = Array.from({ length: len }, () => rng.int(c.vocabSize));
      return { tokens, mask: tokens.map((_, i) => (i >= len / 2 ? 1 : 0)) };
    }),
    'seq-mean-token-mean',
  );
}

async function trainTokS(b: Backend, mode: 'lora' | 'full', format: WeightFormat, seqs: number, len: number, reps: number): Promise<number> {
  const { model } = await buildQwen3(b, TINY, randomWeights(TINY, 1, format), { format });
  const adapter = mode === 'lora' ? createLoraAdapter(b, TINY, { name: 'bench', rank: 8, alpha: 16, seed: 2 }) : undefined;
  const tr = new Trainer(model, { mode, adapter, recompute: false, schedule: { kind: 'constant', lr: 1e-4 }, loss: { kind: 'ce' } });
  const batch = batchOf(TINY, seqs, len, 3);
  const s = await timeIt(async () => {
    const r = await tr.trainStep([batch]);
    if (!r.applied) throw new Error(`bench step refused: ${r.refused}`);
  }, reps, 1);
  tr.free();
  model.free();
  return (seqs * len) / s;
}

/** Child process: peak GPU bytes while one 0.6B-shaped LoRA step is recorded; prints JSON, then exits. */
async function memoryChild(): Promise<void> {
  const b = (await createBackend('webgpu', { gpu: nodeGpu() })) as Backend & { ctx: { device: GPUDevice; flush(): void } };
  const track = trackDeviceBytes(b.ctx.device);
  const t0 = performance.now();
  const log = (m: string) => process.stderr.write(`[memory child] ${((performance.now() - t0) / 1000).toFixed(1)}s ${m}\n`);
  const { model } = await buildQwen3(b, QWEN3_06B, randomWeights(QWEN3_06B, 1, 'q4'), { format: 'q4' });
  log('model built');
  const adapter = createLoraAdapter(b, QWEN3_06B, { name: 'mem', rank: MEM_OPTS.rank, alpha: 32, seed: 2 });
  const tr = new Trainer(model, { mode: 'lora', adapter, recompute: true, headChunk: MEM_OPTS.headChunk, schedule: { kind: 'constant', lr: 1e-4 }, loss: { kind: 'ce' } });
  // Warm-up on 4 tokens (executed): compiles every pipeline first, because lavapipe blocks pipeline
  // creation while it executes earlier work, which would serialize the recording behind the execution.
  await tr.trainStep([batchOf(QWEN3_06B, 1, 4, 5)]);
  log('warm-up step done');
  track.resetPeak();
  const resident = track.live();
  tr.lossAndGrad(batchOf(QWEN3_06B, 1, MEM_TOKENS, 4));
  b.ctx.flush();
  log('step recorded');
  process.stdout.write(JSON.stringify({ peak: track.peak(), resident }) + '\n', () => process.exit(0));
}

const MID: Qwen3Config = { ...TINY, hiddenSize: 256, intermediateSize: 768, numLayers: 4, numHeads: 8, numKvHeads: 4, headDim: 32, vocabSize: 8192 };

/** Predicted vs measured bytes of a real LoRA step of MID on WebGPU. */
async function midMemory(ctx: BenchContext): Promise<void> {
  const b = (await createBackend('webgpu', { gpu: nodeGpu() })) as Backend & { ctx: { device: GPUDevice } };
  try {
    const track = trackDeviceBytes(b.ctx.device);
    const tokens = ctx.quick ? 64 : 256;
    const opts = { format: 'q4' as const, embedFormat: 'q4' as const, mode: 'lora' as const, rank: 16, recompute: true, headChunk: 64 }; // a q4 table, as randomWeights hands over
    const { model } = await buildQwen3(b, MID, randomWeights(MID, 1, 'q4'), { format: 'q4' });
    const adapter = createLoraAdapter(b, MID, { name: 'mem', rank: opts.rank, alpha: 32, seed: 2 });
    const tr = new Trainer(model, { mode: 'lora', adapter, recompute: true, headChunk: opts.headChunk, schedule: { kind: 'constant', lr: 1e-4 }, loss: { kind: 'ce' } });
    const batch = batchOf(MID, 1, tokens, 4);
    await tr.trainStep([batch]); // warm-up: pipelines, uniform ring, pool
    track.resetPeak();
    await tr.trainStep([batch]);
    const pred = predictTrainBytes(MID, { tokens, slots: 1, maxT: tokens, lossRows: tokens / 2 - 1 }, opts);
    const m = `mid-${(paramCount(MID) / 1e6).toFixed(1)}M-q4`;
    const shape = `${tokens} tokens, LoRA r${opts.rank}, recompute, head chunk ${opts.headChunk}`;
    ctx.record({ case: 'lora step memory', backend: 'webgpu', metric: 'gpu_bytes_predicted', value: pred.total, unit: 'bytes', threads: 1, shape, model: m });
    ctx.record({ case: 'lora step memory', backend: 'webgpu', metric: 'gpu_bytes_measured', value: track.peak(), unit: 'bytes', threads: 1, shape, model: m });
    ctx.log(`${m}: predicted ${(pred.total / 2 ** 20).toFixed(1)} MiB, measured peak ${(track.peak() / 2 ** 20).toFixed(1)} MiB (includes the buffer pool and uniform ring)`);
  } finally {
    b.dispose();
  }
}

async function measureInChild(ctx: BenchContext): Promise<{ peak: number; resident: number } | null> {
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'bench/suites/training.ts', '--train-memory-child'], {
    encoding: 'utf8', timeout: 900_000, killSignal: 'SIGKILL', env: { ...process.env, XDG_RUNTIME_DIR: process.env.XDG_RUNTIME_DIR ?? '/tmp' },
  });
  const line = (r.stdout ?? '').split('\n').find((l) => l.startsWith('{'));
  if (!line) {
    ctx.log(`memory child failed (status ${r.status}, signal ${r.signal}): ${(r.stderr ?? '').split('\n').filter((l) => !l.startsWith('Warning')).slice(-5).join(' | ')}`);
    return null;
  }
  return JSON.parse(line);
}

const suite: BenchSuite = {
  name: 'training',
  async run(ctx) {
    const threads = Number(process.env.BENCH_THREADS ?? Math.min(os.cpus().length, 4));
    const list: { name: BackendName; make: () => Promise<Backend>; threads: number }[] = [
      { name: 'cpu-ref', make: async () => new CpuRefBackend(), threads: 1 },
      { name: 'cpu-fast', make: () => createBackend('cpu-fast', { threads }), threads },
    ];
    if (await nodeAdapter()) list.push({ name: 'webgpu', make: () => createBackend('webgpu', { gpu: nodeGpu() }), threads: 1 });
    else ctx.log('no WebGPU adapter: webgpu skipped');
    const model = `tiny-${(paramCount(TINY) / 1e6).toFixed(1)}M`;
    const [seqs, len, reps] = ctx.quick ? [2, 32, 2] : [4, 64, 3];
    for (const be of list) {
      for (const [mode, format] of [['lora', 'q4'], ['full', 'f32']] as const) {
        let b: Backend | null = null;
        try {
          b = await be.make();
          const v = await trainTokS(b, mode, format, seqs, len, reps);
          const c = `train step ${mode} ${format}`;
          // Limit: the wasm-simd mul+add peak per thread (bench/limits.ts), against the matmul flops of a token:
          // ~6 per parameter in full training (forward 2, backward 4), ~4 with a frozen base (LoRA: no weight
          // gradients); attention and the rest are left out, so the fraction is a slight underestimate. WebGPU: none.
          const flops = (mode === 'full' ? 6 : 4) * paramCount(TINY) * v;
          const bound = be.name === 'webgpu' ? undefined : { kind: 'fma' as const, use: flops / 1e9 };
          ctx.record({ case: c, backend: be.name, metric: 'train_tok_s', value: v, unit: 'tok/s', threads: be.threads, shape: `${seqs}x${len} tokens`, model, bound });
          ctx.log(`${c} ${be.name}: ${v.toPrecision(3)} tok/s`);
        } catch (e) {
          ctx.log(`${be.name} ${mode}: failed: ${(e as Error).message}`);
        } finally {
          b?.dispose();
        }
      }
    }
    if (await nodeAdapter()) await midMemory(ctx);
    const shape = `${MEM_TOKENS} tokens, LoRA r${MEM_OPTS.rank}, recompute, head chunk ${MEM_OPTS.headChunk}`;
    const pred = predictTrainBytes(QWEN3_06B, { tokens: MEM_TOKENS, slots: 1, maxT: MEM_TOKENS, lossRows: MEM_TOKENS / 2 - 1 }, MEM_OPTS);
    ctx.record({ case: 'lora step memory', backend: 'webgpu', metric: 'gpu_bytes_predicted', value: pred.total, unit: 'bytes', threads: 1, shape, model: 'qwen3-0.6b-shape-q4' });
    ctx.log(`predicted ${(pred.total / 2 ** 30).toFixed(2)} GiB: ${JSON.stringify(pred)}`);
    if (ctx.quick || process.env.BENCH_TRAIN_MEM_06B === '0' || !(await nodeAdapter())) return;
    const m = await measureInChild(ctx);
    if (m) {
      ctx.record({ case: 'lora step memory', backend: 'webgpu', metric: 'gpu_bytes_measured', value: m.peak, unit: 'bytes', threads: 1, shape, model: 'qwen3-0.6b-shape-q4' });
      ctx.log(`measured peak ${(m.peak / 2 ** 30).toFixed(2)} GiB (resident before the step ${(m.resident / 2 ** 30).toFixed(2)} GiB)`);
    }
  },
};

export default suite;

if (process.argv.includes('--train-memory-child')) void memoryChild();
