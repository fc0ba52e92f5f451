// node --import tsx scripts/focus-grpo.ts --out DIR [--families cancel,...|all] [--seed S] [--steps N] [--lr LR]
//                                         [--k K] [--prompts P] [--temperature T] [--threads T] [--model DIR]
//                                         [--train-on held-out]
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
import { parseArgs } from 'node:util';
import { openBackend, openModel } from '../src/cli/args';
import { HELD_OUT_TASK_SEED, type Task } from '../src/env/domain';
import { loadWorldDomain } from '../src/env/retail/node';
import { DEFAULT_LIMITS, grpoRunConfig } from '../src/rl/grpo-config';
import { GrpoRun } from '../src/rl/run';
import { DirStore } from '../src/rl/store-node';
import { tokenBudgets } from '../src/rollout/budget';

const REASONS = ['ordered by mistake', 'no longer needed'] as const;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      out: { type: 'string' }, families: { type: 'string', default: 'cancel' }, seed: { type: 'string', default: '1' },
      steps: { type: 'string', default: '40' }, lr: { type: 'string', default: '0.001' }, k: { type: 'string', default: '4' },
      prompts: { type: 'string', default: '4' }, temperature: { type: 'string', default: '1' }, threads: { type: 'string' },
      model: { type: 'string' }, 'train-on': { type: 'string', default: 'train' },
    },
  });
  if (!values.out) throw new Error('--out DIR is required');
  const num = (name: string, v: string | undefined, ok: (n: number) => boolean) => {
    const n = Number(v);
    if (!ok(n)) throw new Error(`--${name}: bad value ${JSON.stringify(v)}`);
    return n;
  };
  const posInt = (n: number) => Number.isInteger(n) && n >= 1;
  const seed = num('seed', values.seed, (n) => Number.isInteger(n) && n >= 0);
  const steps = num('steps', values.steps, posInt);
  const all = values.families === 'all';
  const families = values.families!.split(',');
  const trainOn = values['train-on'];
  if (trainOn !== 'train' && trainOn !== 'held-out') throw new Error(`--train-on must be train or held-out, got ${JSON.stringify(trainOn)}`);
  const log = (s: string) => process.stderr.write(`[focus ${new Date().toISOString().slice(11, 19)}] ${s}\n`);

  const domain = loadWorldDomain('mini');
  // The lesson's 200 training tasks come from a stream of the training split; here the first 200 of the
  // chosen families from a longer stream of the same split (held-out intents never appear in it).
  const heldOut = domain.tasks.generate({ split: 'test', count: 100, seed: HELD_OUT_TASK_SEED });
  const pool = trainOn === 'held-out' ? heldOut : domain.tasks.generate({ split: 'train', count: 4000, seed });
  const train = pool.filter((t) => all || families.includes(t.family ?? '')).slice(0, 200);
  if (train.length === 0) throw new Error(`no training task of families ${families.join(', ')}`);
  const backend = await openBackend('cpu-fast', values.threads ? num('threads', values.threads, posInt) : undefined);
  const policy = await openModel(values.model, backend, { world: 'mini' });
  const limits = { ...DEFAULT_LIMITS, maxRehearseTokens: tokenBudgets(domain, policy.tokenizer).rehearse };
  const config = grpoRunConfig({
    mode: 'real', steps, seed, k: num('k', values.k, posInt), promptsPerStep: num('prompts', values.prompts, posInt),
    lr: num('lr', values.lr, (n) => n > 0), rank: 8, evalEvery: 0, evalFidelityTokens: 0, limits,
    temperature: num('temperature', values.temperature, (n) => n > 0),
  });
  const store = new DirStore(values.out);
  if (await store.read('run.json')) throw new Error(`${values.out} already holds a run`);
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
    command: `node --import tsx scripts/focus-grpo.ts ${process.argv.slice(2).join(' ')}`,
    families, trainOn, trainTasks: train.length, config, evals, cancelReasons: quarters, wallS: (performance.now() - t0) / 1000,
  };
  await writeFile(`${values.out}/focus.json`, JSON.stringify(record, null, 1) + '\n');
  process.stdout.write(JSON.stringify(record.evals.map((e) => ({ step: e.step, success: e.success }))) + '\n');
}

main().catch((e: unknown) => {
  process.stderr.write(`focus-grpo failed: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
