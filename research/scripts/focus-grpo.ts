// node --import tsx research/scripts/focus-grpo.ts --out DIR [--families cancel,...|all] [--seed S] [--steps N] [--lr LR]
//                                         [--k K] [--prompts P] [--temperature T] [--threads T] [--model DIR]
//                                         [--train-on held-out] (--help lists every flag)
// Can GRPO teach one skill at all in the lesson's budget? The lesson's run (real environment, the lab's
// defaults) but every training prompt is a task of the chosen families (from the mini world's training
// split), and the held-out evaluation (the same 100 tasks as `npm run eval -- --world mini --tasks test`)
// is broken down per family, at the start, halfway and at the end: does the trained family rise on held-out
// tasks, and what happens to the others?
// For cancellations it also reads the decision that fails most (docs/lesson.md): which reason the policy writes
// in cancel_pending_order against the reason the user gave, per quarter of the run, from the training rollouts.
// `--train-on held-out` is a diagnostic, not a result: GRPO then trains on the very held-out tasks it is
// evaluated on, which bounds what any run of these settings can show on them in the same number of steps.
// The run folder is a normal run (run.json, metrics.jsonl, rollouts.jsonl, ckpt/); focus.json holds the record.
import { writeFile } from 'node:fs/promises';
import {
  ArgError, checkOutput, enumFlag, HELP_FLAG, helpText, intFlag, isEntry, numFlag, openBackend, openModel, parseFlags, processIo, progress, runCli, strFlag, THREADS_FLAG, threadsFlag, WRITE_COMMITTED_FLAG, type CliIo, type FlagSpec,
} from '../../src/cli/args';
import { TRAIN_FLAGS } from '../../src/cli/train';
import { readRunFlags } from '../../src/cli/run-flags';
import { complete, RUN_SETTINGS, type RunValues } from '../../src/method/run-config';

const FOCUS_ROWS = RUN_SETTINGS.filter((r) => ['k', 'promptsPerStep', 'lr', 'temperature'].includes(r.name));
import { HELD_OUT_TASK_SEED, type Task } from '../../src/env/domain';
import { FAMILY_TIER } from '../../src/env/retail/index';
import { loadWorldDomain } from '../../src/env/retail/node';
import { DEFAULT_LIMITS, grpoRunConfig } from '../../src/rl/grpo-config';
import { GrpoRun } from '../../src/rl/run';
import { DirStore } from '../../src/rl/store-node';
import { tokenBudgets } from '../../src/rollout/budget';
import { recordCommand } from '../../src/util/record-path';

export const FOCUS_GRPO_USAGE = `usage: node --import tsx research/scripts/focus-grpo.ts --out DIR [--families cancel,...|all] [--seed S] [--steps N] [--lr LR]
  [--eval-tasks N] [--k K] [--prompts P] [--temperature T] [--threads T] [--model DIR] [--train-on train|held-out]`;

export const FOCUS_GRPO_FLAGS: FlagSpec = {
  out: { type: 'string', arg: 'DIR', help: 'the run folder (a normal run, and focus.json with the record); must not hold a run yet (required)' },
  families: { type: 'string', arg: 'F,...', help: `task families to train on, comma-separated (${Object.keys(FAMILY_TIER).join(', ')}), or all`, default: 'cancel' },
  seed: { type: 'string', arg: 'S', help: 'seed of the run and of the training task stream, 0..2^32-1', default: '1' },
  steps: { type: 'string', arg: 'N', help: 'GRPO steps, 1..1000000', default: '40' },
  'eval-tasks': { type: 'string', arg: 'N', help: 'held-out tasks of each evaluation (the first N of the 100 that `npm run eval -- --world mini --tasks test` runs), 1..100', default: '100' },
  // As `npm run train` takes them (meaning, bounds, defaults: src/method/run-config.ts).
  lr: TRAIN_FLAGS.lr,
  k: TRAIN_FLAGS.k,
  prompts: TRAIN_FLAGS.prompts,
  temperature: TRAIN_FLAGS.temperature,
  threads: THREADS_FLAG,
  model: { type: 'string', arg: 'DIR', help: 'model folder (config.json, model.safetensors, tokenizer)', default: "the mini world's bundled policy (models/default)" },
  'train-on': { type: 'string', arg: 'SET', help: 'train (the training split) or held-out (a diagnostic: GRPO trains on the very tasks it is evaluated on)', default: 'train' },
  'write-committed': WRITE_COMMITTED_FLAG,
  help: HELP_FLAG,
};

const REASONS = ['ordered by mistake', 'no longer needed'] as const;

export async function focusGrpoCli(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  return runCli(io, FOCUS_GRPO_USAGE, () => main(argv, io));
}

async function main(argv: readonly string[], io: CliIo): Promise<void> {
  const values = parseFlags(argv, FOCUS_GRPO_FLAGS);
  if (values.help) return void io.out(helpText(FOCUS_GRPO_USAGE, FOCUS_GRPO_FLAGS));
  const outNamed = strFlag(values, 'out');
  // A committed record (docs/…, models/…) is rewritten only with --write-committed.
  const out = outNamed === undefined ? undefined : checkOutput(outNamed, '--out', values);
  if (!out) throw new ArgError('--out DIR is required');
  const seed = intFlag(values, 'seed', 1, 0, 0xffffffff);
  const steps = intFlag(values, 'steps', 40, 1, 1_000_000);
  const evalTasks = intFlag(values, 'eval-tasks', 100, 1, 100);
  const given = complete(readRunFlags(values, FOCUS_ROWS), FOCUS_ROWS) as Pick<RunValues, 'k' | 'promptsPerStep' | 'lr' | 'temperature'>;
  const { k, promptsPerStep, lr, temperature } = given;
  const threads = threadsFlag(values);
  const model = strFlag(values, 'model');
  const familiesArg = strFlag(values, 'families', 'cancel')!;
  const all = familiesArg === 'all';
  const families = familiesArg.split(',');
  if (!all) for (const f of families) if (!Object.hasOwn(FAMILY_TIER, f)) throw new ArgError(`--families: unknown family ${JSON.stringify(f)} (one of ${Object.keys(FAMILY_TIER).join(', ')}, or all)`);
  const trainOn = enumFlag(values, 'train-on', ['train', 'held-out'] as const, 'train');
  const log = progress(io, 'focus');

  const domain = loadWorldDomain('mini');
  // The lesson's 200 training tasks come from a stream of the training split; here the first 200 of the
  // chosen families from a longer stream of the same split (held-out intents never appear in it).
  const heldOut = domain.tasks.generate({ split: 'test', count: 100, seed: HELD_OUT_TASK_SEED }).slice(0, evalTasks);
  const pool = trainOn === 'held-out' ? heldOut : domain.tasks.generate({ split: 'train', count: 4000, seed });
  const train = pool.filter((t) => all || families.includes(t.family ?? '')).slice(0, 200);
  if (train.length === 0) throw new Error(`no training task of families ${families.join(', ')}`);
  const backend = await openBackend('cpu-fast', threads);
  const policy = await openModel(model, backend, { world: 'mini' });
  const limits = { ...DEFAULT_LIMITS, maxRehearseTokens: tokenBudgets(domain, policy.tokenizer).rehearse };
  const config = grpoRunConfig({ mode: 'real', steps, seed, k, promptsPerStep, lr, rank: 8, evalEvery: 0, evalFidelityTokens: 0, ...limits, temperature });
  const store = new DirStore(out);
  if (await store.read('run.json')) throw new Error(`${out} already holds a run`);
  // The run evaluates on the held-out tasks only when asked (evalEvery 0): at the start (the adapter is fresh,
  // its LoRA delta zero, so this is the base policy), halfway and at the end.
  const run = await GrpoRun.open(policy.model, policy.tokenizer, domain, { train, eval: heldOut }, store, config);
  const t0 = performance.now();

  const evaluate = async () => {
    const e = await run.evaluate();
    const byFamily = Object.fromEntries(Object.entries(e.byFamily ?? {}).map(([f, g]) => [f, { tasks: g.tasks, solved: Math.round(g.success * g.tasks) }]));
    const count = (k: 'tasks' | 'solved', fs: readonly string[]) => fs.reduce((a, f) => a + (byFamily[f]?.[k] ?? 0), 0);
    log(`held-out @ ${e.step}: ${Math.round(e.success * heldOut.length)}/${heldOut.length} solved${all ? '' : ` (${families.join('+')}: ${count('solved', families)}/${count('tasks', families)})`}`);
    return { step: e.step, success: e.success, byFamily, wallS: (performance.now() - t0) / 1000 };
  };

  const evals = [await evaluate()];
  try {
    while (!run.done) {
      const m = await run.trainStep();
      log(`step ${m.step}/${steps}: reward ${m.rollouts.meanReward.toFixed(2)}, groups with a spread ${(100 * m.advantage.spread).toFixed(0)} %, ${(m.wallMs / 1000).toFixed(1)} s`);
      if (m.step === Math.floor(steps / 2) || run.done) evals.push(await evaluate());
    }
  } finally {
    run.free();
    policy.model.free();
    backend.dispose();
  }

  // The cancellation reason the policy wrote, against the one the request gave, per quarter of the run.
  const rollouts = (new TextDecoder().decode((await store.read('rollouts.jsonl')) ?? new Uint8Array()))
    .split('\n').filter(Boolean).map((l) => JSON.parse(l) as { step: number; taskId: string; messages: { role: string; content: string }[] });
  const taskById = new Map<string, Task>(train.map((t) => [t.id, t]));
  const quarters = [1, 2, 3, 4].map((q) => {
    const from = Math.floor(((q - 1) * steps) / 4) + 1;
    const to = Math.floor((q * steps) / 4);
    const table: Record<string, number> = {};
    for (const r of rollouts) {
      if (r.step < from || r.step > to) continue;
      const asked = REASONS.find((x) => taskById.get(r.taskId)?.userMessages.join(' ').includes(x));
      const call = r.messages.find((m) => m.role === 'assistant' && m.content.includes('"cancel_pending_order"'));
      if (!asked || !call) continue;
      const wrote = REASONS.find((x) => call.content.includes(x)) ?? 'other';
      table[`${asked} -> ${wrote}`] = (table[`${asked} -> ${wrote}`] ?? 0) + 1;
    }
    return { steps: [from, to], table };
  });
  const record = {
    command: recordCommand(`node --import tsx research/scripts/focus-grpo.ts ${argv.join(' ')}`),
    families, trainOn, trainTasks: train.length, config, evals, cancelReasons: quarters, wallS: (performance.now() - t0) / 1000,
  };
  await writeFile(`${out}/focus.json`, JSON.stringify(record, null, 1) + '\n');
  io.out(JSON.stringify(record.evals.map((e) => ({ step: e.step, success: e.success }))) + '\n');
}

if (isEntry(import.meta.url)) process.exitCode = await focusGrpoCli(process.argv.slice(2));
