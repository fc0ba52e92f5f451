// Where cpu-fast's second thread goes on the bundled mini policy (issue 51: "a second thread bought nothing on a short
// lesson"). The three parts of the lab's training loop, each at 1 and at 2 threads in the same process, rounds
// interleaved (1 then 2, then 2 then 1, ...):
//  - episodes_s: the held-out evaluation's episodes (40 test tasks, greedy, real environment, KV reuse);
//  - fidelity_s: the held-out fidelity check on 10 test tasks (every reference call rehearsed);
//  - update_s: one GRPO update of a rehearse-mode batch (4 prompts x K 4) on a fresh LoRA adapter.
// Each part also records kernel_share: the fraction of its wall-clock spent inside the wasm kernels (the rest is JS on
// the calling thread, which a second thread cannot shorten), and `2 threads / 1 thread` as a speedup.
import { HELD_OUT_TASK_SEED } from '../../src/env/domain';
import { loadWorldDomain } from '../../src/env/retail/node';
import { createCpuFastBackend, type CpuFastBackend } from '../../src/engine/cpu/fast/backend';
import type { Backend } from '../../src/engine/backend';
import { loadModel } from '../../src/model/load';
import { createLoraAdapter } from '../../src/model/lora';
import { setting } from '../../src/method/run-config';
import { grpoUpdate } from '../../src/rl/grpo';
import { evalRehearsalFidelity } from '../../src/rollout/fidelity-eval';
import { runRollouts } from '../../src/rollout/rollout';
import { DirSource } from '../../src/model/source-node';
import { Trainer } from '../../src/train/trainer';
import { median, type BenchSuite } from '../lib';

const MODEL_DIR = 'models/default';
const LIMITS = { maxTurns: 12, maxActTokens: 96, maxRehearseTokens: 641 };
const THREADS = [1, 2] as const;


const suite: BenchSuite = {
  name: 'threads',
  async run(ctx) {
    const domain = loadWorldDomain('mini');
    const held = domain.tasks.generate({ split: 'test', count: ctx.quick ? 8 : 40, seed: HELD_OUT_TASK_SEED });
    const train = domain.tasks.generate({ split: 'train', count: 200, seed: 1 });
    const picked = [train[5], train[50], train[99], train[150]];
    const lanes = await Promise.all(
      THREADS.map(async (threads) => {
        const b = (await createCpuFastBackend({ threads })) as Backend & CpuFastBackend;
        const { model, tokenizer } = await loadModel(new DirSource(MODEL_DIR), b, { format: 'f32' });
        return { threads, b, model, tokenizer };
      }),
    );
    try {
      const first = lanes[0];
      const batch = await runRollouts({ model: first.model, tokenizer: first.tokenizer, adapter: null }, domain, picked, { mode: 'rehearse', k: 4, seed: 3, limits: LIMITS, temperature: 1, kvReuse: true });
      type Lane = (typeof lanes)[number];
      const parts: { name: string; metric: string; shape: string; run: (l: Lane) => Promise<void> }[] = [
        {
          name: 'held-out episodes', metric: 'episodes_s', shape: `${held.length} test tasks, greedy, real`,
          run: async (l) => void (await runRollouts({ model: l.model, tokenizer: l.tokenizer, adapter: null }, domain, held, { mode: 'real', k: 1, seed: 1, limits: LIMITS, temperature: 0, kvReuse: true })),
        },
        {
          name: 'held-out fidelity check', metric: 'fidelity_s', shape: `${ctx.quick ? 2 : 10} test tasks, every reference call`,
          run: async (l) => void (await evalRehearsalFidelity(l.model, l.tokenizer, null, domain, held.slice(0, ctx.quick ? 2 : 10), { maxRehearseTokens: LIMITS.maxRehearseTokens })),
        },
        {
          name: 'grpo update', metric: 'update_s', shape: `rehearse: 4x4 rollouts, ${batch.rows.length} rows`,
          run: async (l) => {
            const adapter = createLoraAdapter(l.b, l.model.config, { name: 'bench', rank: 8, alpha: 16, seed: 1 });
            const tr = new Trainer(l.model, { mode: 'lora', adapter, schedule: { kind: 'constant', lr: setting('lr').default }, loss: { kind: 'grpo', clipEps: 0.2, dualClip: 3, klCoef: 0 } });
            await grpoUpdate({ act: tr }, batch, 'rehearse', {});
            tr.free();
            adapter.free(l.b);
          },
        },
      ];
      const reps = ctx.quick ? 1 : 3;
      for (const part of parts) {
        const wall = new Map<number, number[]>(THREADS.map((t) => [t, []]));
        const kernel = new Map<number, number[]>(THREADS.map((t) => [t, []]));
        for (let r = 0; r < reps; r++) {
          for (const l of r % 2 === 0 ? lanes : [...lanes].reverse()) {
            const k0 = l.b.kernelMs;
            const t0 = performance.now();
            await part.run(l);
            const ms = performance.now() - t0;
            wall.get(l.threads)!.push(ms / 1000);
            kernel.get(l.threads)!.push((l.b.kernelMs - k0) / ms);
          }
        }
        const common = { case: part.name, backend: 'cpu-fast' as const, shape: part.shape, model: 'bundled mini policy' };
        for (const t of THREADS) {
          ctx.record({ ...common, metric: part.metric, value: median(wall.get(t)!), unit: 's', threads: t });
          ctx.record({ ...common, metric: 'kernel_share', value: median(kernel.get(t)!), unit: 'fraction', threads: t });
        }
        const speedup = median(wall.get(1)!) / median(wall.get(2)!);
        ctx.record({ ...common, case: `${part.name}: 2 threads / 1 thread`, metric: 'speedup', value: speedup, unit: 'x', threads: 2 });
        ctx.log(`${part.name}: ${THREADS.map((t) => `${t}t ${median(wall.get(t)!).toFixed(2)} s (kernels ${(100 * median(kernel.get(t)!)).toFixed(0)} %)`).join(', ')}; 2 threads ${speedup.toFixed(2)}x`);
      }
    } finally {
      for (const l of lanes) {
        l.model.free();
        l.b.dispose();
      }
    }
  },
};

export default suite;
