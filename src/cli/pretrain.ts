// npm run pretrain -- [--seed S] [--steps N] [--out DIR] [--backend cpu-fast|cpu-ref|webgpu] [--threads T]
//                     [--quick] [--eval N] [--init DIR] [--lr LR] [--review-tasks N] [--swap-share X] [--copy-drills N]
//        npm run pretrain -- --time-grpo [--out DIR] [--backend ...]   (times one GRPO step of a trained folder,
//                                                                     writes grpo-timing-<backend>.json)
//        npm run pretrain -- --probe-copy [--out DIR]   (does the folder's policy copy values? copy-probe.json)
//        npm run pretrain -- --card [--out DIR] [--commit C]  (writes README.md from the folder's records)
// Trains the bundled default policy from scratch on the retail expert's Act and Rehearse rows and writes a
// Hugging Face folder (config.json, model.safetensors, tokenizer.json, tokenizer_config.json,
// generation_config.json, pretrain.json). With --eval N > 0 it then reloads the folder from disk and
// evaluates N held-out test-split tasks in the real environment (eval.json). Progress on stderr, the
// result JSON on stdout, exit code 1 on failure.
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { cpus } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { Backend, BackendName } from '../engine/backend';
import { createBackend } from '../engine/index';
import { isWorldName, WORLD_NAMES } from '../env/retail/index';
import { loadWorldDomain } from '../env/retail/node';
import { DirSource } from '../model/source-node';
import { Tokenizer } from '../model/tokenizer';
import { loadQwen3 } from '../model/weights';
import { modelCard, type CardInputs } from '../pretrain/card';
import { evaluatePolicy, type EvalReport } from '../pretrain/evaluate';
import { copyProbe, type CopyProbe } from '../pretrain/copy-probe';
import { timeGrpoStep, type GrpoTiming } from '../pretrain/grpo-timing';
import { FULL_SPEC, MINI_SPEC, pretrain, QUICK_SPEC } from '../pretrain/pipeline';

const BACKENDS = ['cpu-fast', 'cpu-ref', 'webgpu'] as const;

async function makeBackend(name: (typeof BACKENDS)[number], threads: number | undefined): Promise<Backend> {
  if (name !== 'webgpu') return createBackend(name as BackendName, { threads });
  const { create, globals } = await import('webgpu');
  Object.assign(globalThis, globals);
  const b = await createBackend('webgpu', { gpu: create([]) });
  await import('../engine/webgpu/train/index').catch(() => {
    throw new Error('WebGPU training ops are not available (src/engine/webgpu/train)');
  });
  return b;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      seed: { type: 'string', default: '0' },
      world: { type: 'string', default: 'mini' },
      steps: { type: 'string' },
      out: { type: 'string' },
      backend: { type: 'string', default: 'cpu-fast' },
      threads: { type: 'string' },
      quick: { type: 'boolean', default: false },
      eval: { type: 'string' },
      'time-grpo': { type: 'boolean', default: false },
      card: { type: 'boolean', default: false },
      commit: { type: 'string', default: 'unknown' },
      init: { type: 'string' },
      lr: { type: 'string' },
      'review-tasks': { type: 'string' },
      'swap-share': { type: 'string' },
      'copy-drills': { type: 'string' },
      'span-steps': { type: 'string' },
      'act-weight': { type: 'string' },
      'act-only-tasks': { type: 'string' },
      'prompt-loss': { type: 'string' },
      'train-tasks': { type: 'string' },
      'probe-copy': { type: 'boolean', default: false },
    },
    strict: true,
  });
  const int = (name: string, v: string | undefined, min: number): number | undefined => {
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be an integer >= ${min}, got ${JSON.stringify(v)}`);
    return n;
  };
  const backendName = values.backend as (typeof BACKENDS)[number];
  if (!BACKENDS.includes(backendName)) throw new Error(`--backend must be one of ${BACKENDS.join(', ')}, got ${JSON.stringify(values.backend)}`);
  const seed = int('seed', values.seed, 0)!;
  const world = values.world;
  if (!isWorldName(world)) throw new Error(`--world must be one of ${WORLD_NAMES.join(', ')}, got ${JSON.stringify(world)}`);
  const base = values.quick ? QUICK_SPEC : world === 'mini' ? MINI_SPEC : FULL_SPEC;
  const share = (v: string | undefined): number | undefined => {
    if (v === undefined) return undefined;
    const x = Number(v);
    if (!(x >= 0 && x <= 1)) throw new Error(`--swap-share must be a number in [0,1], got ${JSON.stringify(v)}`);
    return x;
  };
  const positive = (name: string, v: string): number => {
    const x = Number(v);
    if (!(x > 0 && x <= 100)) throw new Error(`--${name} must be a number in (0, 100], got ${JSON.stringify(v)}`);
    return x;
  };
  const lr = values.lr === undefined ? undefined : Number(values.lr);
  if (lr !== undefined && !(lr > 0 && lr < 1)) throw new Error(`--lr must be a number in (0,1), got ${JSON.stringify(values.lr)}`);
  const spec = { ...base, steps: int('steps', values.steps, 1) ?? base.steps, lr: lr ?? base.lr, reviewTasks: int('review-tasks', values['review-tasks'], 0) ?? base.reviewTasks, swapShare: share(values['swap-share']) ?? base.swapShare, copyDrills: int('copy-drills', values['copy-drills'], 0) ?? base.copyDrills, spanSteps: int('span-steps', values['span-steps'], 0) ?? base.spanSteps, actOnlyTasks: int('act-only-tasks', values['act-only-tasks'], 0) ?? base.actOnlyTasks, actLossWeight: values['act-weight'] === undefined ? base.actLossWeight : positive('act-weight', values['act-weight']), promptLossWeight: values['prompt-loss'] === undefined ? base.promptLossWeight : share(values['prompt-loss'])!, trainTasks: int('train-tasks', values['train-tasks'], 1) ?? base.trainTasks };
  const evalTasks = int('eval', values.eval, 0) ?? (values.quick ? 0 : 40);
  const out = resolve(values.out ?? (values.quick ? 'models/quick' : 'models/default'));
  const log = (s: string) => process.stderr.write(`[pretrain ${new Date().toISOString().slice(11, 19)}] ${s}\n`);

  if (values.card) {
    const read = async (name: string) => JSON.parse(await readFile(join(out, name), 'utf8')) as unknown;
    const names = await readdir(out);
    const card = modelCard({
      run: (await read('pretrain.json')) as CardInputs['run'],
      evaluation: names.includes('eval.json') ? ((await read('eval.json')) as EvalReport) : null,
      grpo: await Promise.all(names.filter((n) => /^grpo-timing-.*\.json$/.test(n)).sort().map(async (n) => (await read(n)) as GrpoTiming)),
      sizing: names.includes('sizing.json') ? ((await read('sizing.json')) as CardInputs['sizing']) : [],
      stage1: names.includes('pretrain-stage1.json') ? ((await read('pretrain-stage1.json')) as CardInputs['run']) : undefined,
      copy: names.includes('copy-probe.json') ? ((await read('copy-probe.json')) as CopyProbe) : undefined,
      attempts: names.includes('attempts.json') ? ((await read('attempts.json')) as CardInputs['attempts']) : [],
      commit: values.commit!,
      machine: `${cpus().length} CPU cores (${cpus()[0]?.model ?? 'unknown CPU'}), Node ${process.version}`,
    });
    await writeFile(join(out, 'README.md'), card);
    log(`wrote ${join(out, 'README.md')}`);
    return;
  }
  const domain = loadWorldDomain(world);
  const b = await makeBackend(backendName, int('threads', values.threads, 1));
  try {
    if (values['probe-copy']) {
      const src = new DirSource(out);
      const { model } = await loadQwen3(src, b, { format: 'f32' });
      const tokenizer = await Tokenizer.load(src);
      const probe = await copyProbe({ model, tokenizer }, domain, { tasks: 40, drills: 40, seed: 5 });
      await writeFile(join(out, 'copy-probe.json'), JSON.stringify(probe, null, 1) + '\n');
      process.stdout.write(JSON.stringify(probe) + '\n');
      return;
    }
    if (values['time-grpo']) {
      const src = new DirSource(out);
      const { model } = await loadQwen3(src, b, { format: 'f32' });
      const tokenizer = await Tokenizer.load(src);
      const tasks = domain.tasks.generate({ split: 'train', count: 16, seed: 99 });
      const timing = await timeGrpoStep(model, tokenizer, domain, tasks, { promptsPerStep: 2, k: 4, seed });
      await writeFile(join(out, `grpo-timing-${b.name}.json`), JSON.stringify(timing, null, 1) + '\n');
      process.stdout.write(JSON.stringify(timing) + '\n');
      return;
    }
    const t0 = performance.now();
    const init = values.init ? resolve(values.init) : undefined;
    // Stage 2 reads the init folder before anything is written (it may be the output folder itself).
    const result = await pretrain(b, domain, spec, { seed, out, log, init });
    const command = `npm run pretrain -- --world ${world} --seed ${seed} --steps ${spec.steps} --backend ${backendName}${values.quick ? ' --quick' : ''}${values.init ? ` --init ${values.init}` : ''}${values.lr ? ` --lr ${values.lr}` : ''}${spec.reviewTasks !== base.reviewTasks ? ` --review-tasks ${spec.reviewTasks}` : ''}${spec.swapShare !== base.swapShare ? ` --swap-share ${spec.swapShare}` : ''}${spec.copyDrills !== base.copyDrills ? ` --copy-drills ${spec.copyDrills}` : ''}${spec.spanSteps !== base.spanSteps ? ` --span-steps ${spec.spanSteps}` : ''}${spec.trainTasks !== base.trainTasks ? ` --train-tasks ${spec.trainTasks}` : ''}${spec.actLossWeight !== base.actLossWeight ? ` --act-weight ${spec.actLossWeight}` : ''}${spec.actOnlyTasks !== base.actOnlyTasks ? ` --act-only-tasks ${spec.actOnlyTasks}` : ''}${spec.promptLossWeight !== base.promptLossWeight ? ` --prompt-loss ${spec.promptLossWeight}` : ''}`;
    await writeFile(join(out, 'pretrain.json'), JSON.stringify({ command, ...result }, null, 1) + '\n');
    let evaluation = null;
    if (evalTasks > 0) {
      // Evaluate what was written, through the same loader and tokenizer the lab uses.
      const src = new DirSource(out);
      const { model } = await loadQwen3(src, b, { format: 'f32' });
      const tokenizer = await Tokenizer.load(src);
      const tasks = domain.tasks.generate({ split: 'test', count: evalTasks, seed: 1 });
      evaluation = await evaluatePolicy({ model, tokenizer }, domain, tasks, { seed, log });
      model.free();
      await writeFile(join(out, 'eval.json'), JSON.stringify(evaluation, null, 1) + '\n');
    }
    const { losses, ...summary } = result;
    void losses;
    process.stdout.write(JSON.stringify({ command, ...summary, wallSeconds: (performance.now() - t0) / 1000, eval: evaluation && { tasks: evaluation.tasks, real: evaluation.real, rehearsal: evaluation.rehearsal } }, null, 1) + '\n');
  } finally {
    b.dispose();
  }
}

main().catch((e: unknown) => {
  process.stderr.write(`pretrain failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
});
