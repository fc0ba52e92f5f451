// One GRPO step of the bundled policy on the mini world, the parts the lab's Train button repeats:
// 4 prompts x K 4 rollouts (seeded; real mode and EnvACE rehearse mode), then
//  - update_s: one grpoUpdate of those rows (forward, loss, backward, AdamW) with whole rows (packBatch) and
//    with prefix-shared rows (packShared, the default), on a fresh LoRA adapter each time, median of reps;
//    fed_tokens: the tokens the forward feeds in each layout;
//  - encode_s: encoding every Act prompt of the batch's rollouts again, turn by turn as the rollout did,
//    with the memoizing Tokenizer and with transformers.js directly.
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { PreTrainedTokenizer } from '@huggingface/transformers';
import { createBackend } from '../../src/engine/index';
import { loadModel } from '../../src/model/load';
import { setting } from '../../src/method/run-config';
import { loadWorldDomain } from '../../src/env/retail/node';
import { createLoraAdapter } from '../../src/model/lora';
import { grpoUpdate, microBatches, rowToSequence } from '../../src/rl/grpo';
import { runRollouts } from '../../src/rollout/rollout';
import { DirSource } from '../../src/model/source-node';
import { Tokenizer } from '../../src/model/tokenizer';
import { Trainer } from '../../src/train/trainer';
import { timeIt, type BenchSuite } from '../lib';

/** The bundled mini-world policy (npm run bench runs from the repository root). */
const MODEL_DIR = 'models/default';

const suite: BenchSuite = {
  name: 'grpo',
  async run(ctx) {
    const threads = Number(process.env.BENCH_THREADS ?? Math.min(os.cpus().length, 4));
    const backend = await createBackend('cpu-fast', { threads });
    try {
      const { model, tokenizer } = await loadModel(new DirSource(MODEL_DIR), backend, { format: 'f32' });
      const domain = loadWorldDomain('mini');
      const tasks = domain.tasks.generate({ split: 'train', count: 200, seed: 1 });
      const picked = [tasks[5], tasks[50], tasks[99], tasks[150]];
      const reps = ctx.quick ? 1 : 3;
      for (const mode of ctx.quick ? (['real'] as const) : (['real', 'rehearse'] as const)) {
        const batch = await runRollouts({ model, tokenizer, adapter: null }, domain, picked, { mode, k: 4, seed: 3, limits: { maxTurns: 12, maxActTokens: 96, maxRehearseTokens: 641 }, temperature: 1, kvReuse: true });
        const shape = `${mode}: 4x4 rollouts, ${batch.rows.length} rows`;
        const seqs = batch.rows.map((r) => rowToSequence(r, 1));
        for (const share of [false, true]) {
          const layout = share ? 'shared prefixes' : 'whole rows';
          const fed = microBatches(seqs, 4096, 'seq-mean-token-mean', share).reduce((n, b) => n + b.ids.length, 0);
          const s = await timeIt(async () => {
            const adapter = createLoraAdapter(backend, model.config, { name: 'bench', rank: 8, alpha: 16, seed: 1 });
            const tr = new Trainer(model, { mode: 'lora', adapter, schedule: { kind: 'constant', lr: setting('lr').default }, loss: { kind: 'grpo', clipEps: 0.2, dualClip: 3, klCoef: 0 } });
            await grpoUpdate({ act: tr }, batch, mode, { sharePrefixes: share });
            tr.free();
            adapter.free(backend);
          }, reps, 0);
          ctx.record({ case: `grpo update, ${layout}`, backend: 'cpu-fast', metric: 'update_s', value: s, unit: 's', threads, shape, model: 'bundled mini policy' });
          ctx.record({ case: `grpo update, ${layout}`, backend: 'cpu-fast', metric: 'fed_tokens', value: fed, unit: 'tokens', threads, shape, model: 'bundled mini policy' });
          ctx.log(`${shape}, ${layout}: ${s.toFixed(2)} s, ${fed} tokens fed`);
        }
        if (mode !== 'real') continue;
        // The Act prompts as the rollouts saw them: each row's prompt, in row order (turn by turn).
        const prompts = batch.rows.filter((r) => r.role === 'act').map((r) => tokenizer.decode([...r.promptTokens]));
        const json = JSON.parse(readFileSync(join(MODEL_DIR, 'tokenizer.json'), 'utf8'));
        const config = JSON.parse(readFileSync(join(MODEL_DIR, 'tokenizer_config.json'), 'utf8'));
        const plain = new PreTrainedTokenizer(json, config);
        const memoized = await Tokenizer.load(new DirSource(MODEL_DIR)); // fresh: nothing in its memo yet
        const encoders = [
          ['transformers.js', (t: string) => plain.encode(t, { add_special_tokens: false })],
          ['memoized segments', (t: string) => memoized.encode(t)],
        ] as const;
        for (const [name, enc] of encoders) {
          const s = await timeIt(() => void prompts.forEach((p) => enc(p)), 1, 0);
          ctx.record({ case: `encode Act prompts, ${name}`, backend: 'node', metric: 'encode_s', value: s, unit: 's', threads: 1, shape: `${prompts.length} prompts of one step`, model: 'bundled mini tokenizer' });
          ctx.log(`encode ${prompts.length} prompts, ${name}: ${s.toFixed(3)} s`);
        }
      }
      model.free();
    } finally {
      backend.dispose();
    }
  },
};

export default suite;
