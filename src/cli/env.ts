// npm run env -- replay <tasks.json> [--trace FILE] [--gold FILE]
//   Replays each task's reference actions in a fresh retail environment (τ²-bench task files, or files
//   written by `generate`). stdout: one JSON line per task
//   {"id","ok","reward","error"?} and a final "N passed, M failed"; exit status 1 if any failed.
//   A task fails when a reference action is rejected before reaching the tool (unknown tool, invalid
//   arguments, internal error; a tool's own error is expected and fine), when the real-execution reward of
//   the replay (with a reply stating every fact) is not 1, or, with --gold, when its trace differs from
//   the gold line with the same id. --trace writes trace lines in the gold-train.jsonl format.
// npm run env -- generate [--world mini|retail] [--split train|test] [--count N] [--seed S] [--out FILE]
//   Writes generated retail tasks (JSON array) to FILE or stdout.
// npm run env -- expert [--world mini|retail] [--split train|test] [--count N] [--seed S] [--mistakes RATE] [--rows FILE]
//   Runs the scripted expert on generated tasks in the real environment; one JSON line per task
//   {"id","family","ok","reward","judge","mistakes"}, a summary line, exit 1 if any task failed; --rows
//   writes the Act/Rehearse rows as JSONL (the train split only: test-split rows are never written).

import { readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import type { Step } from '../env/domain';
import { judge } from '../env/judge';
import { realReward } from '../env/reward';
import { isWorldName, RETAIL_FLOAT_KEYS, retailEnvFactory, WORLD_NAMES } from '../env/retail/index';
import { loadRetailBase, loadWorldDomain } from '../env/retail/node';
import { loadTaskFile } from '../env/tau2';
import { jsonDiff, replayTask, traceLineText } from '../env/trace';

function fail(msg: string): never {
  process.stderr.write(`env: ${msg}\n`);
  process.exit(2);
}

function replay(argv: string[]): number {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { trace: { type: 'string' }, gold: { type: 'string' }, db: { type: 'string' } },
  });
  if (positionals.length !== 1) fail('usage: replay <tasks.json> [--trace FILE] [--gold FILE] [--db FILE]');
  let tasksText: string;
  try {
    tasksText = readFileSync(positionals[0], 'utf8');
  } catch (e) {
    fail(`cannot read ${positionals[0]}: ${(e as Error).message}`);
  }
  const tasks = loadTaskFile(tasksText);
  const gold = new Map<string, unknown>();
  if (values.gold) {
    for (const line of readFileSync(values.gold, 'utf8').split('\n')) {
      if (!line.trim()) continue;
      const g = JSON.parse(line) as { id: string };
      gold.set(String(g.id), g);
    }
  }
  const fresh = retailEnvFactory(loadRetailBase(values.db));
  const traceLines: string[] = [];
  let passed = 0;
  let failed = 0;
  tasks.forEach((task, i) => {
    process.stderr.write(`\r[${i + 1}/${tasks.length}] task ${task.id}   `);
    const r = replayTask(fresh(), task);
    traceLines.push(traceLineText(r.trace, RETAIL_FLOAT_KEYS));
    const steps: Step[] = task.referenceActions.map((call, k) => ({ kind: 'call', call, observation: r.observations[k] }));
    steps.push({ kind: 'reply', text: task.facts.join('\n') });
    const reward = realReward(fresh, task, steps).reward;
    let error: string | undefined;
    const rejected = r.observations.find((o) => !o.ok && o.code !== 'tool');
    if (rejected && !rejected.ok) error = `action ${rejected.name}: ${rejected.error}`;
    else if (reward !== 1) error = 'replay reward is not 1';
    else if (values.gold) {
      const g = gold.get(task.id);
      const d = g === undefined ? 'no gold line for this id' : jsonDiff(JSON.parse(traceLines[i]), g);
      if (d) error = `trace differs from gold: ${d}`;
    }
    const ok = error === undefined;
    if (ok) passed++;
    else failed++;
    process.stdout.write(JSON.stringify(ok ? { id: task.id, ok, reward } : { id: task.id, ok, reward, error }) + '\n');
  });
  process.stderr.write('\n');
  if (values.trace) writeFileSync(values.trace, traceLines.map((l) => l + '\n').join(''));
  process.stdout.write(`${passed} passed, ${failed} failed\n`);
  return failed > 0 ? 1 : 0;
}

function genOptions(argv: string[], extra: Record<string, { type: 'string' }>) {
  const { values } = parseArgs({
    args: argv,
    options: { world: { type: 'string', default: 'mini' }, split: { type: 'string', default: 'train' }, count: { type: 'string', default: '100' }, seed: { type: 'string', default: '0' }, ...extra },
  });
  if (!isWorldName(values.world)) fail(`--world must be one of ${WORLD_NAMES.join(', ')}`);
  const split = values.split;
  if (split !== 'train' && split !== 'test') fail('--split must be train or test');
  const count = Number(values.count);
  const seed = Number(values.seed);
  if (!Number.isInteger(count) || count < 1 || !Number.isInteger(seed)) fail('--count and --seed must be integers');
  return { values: values as Record<string, string | undefined>, world: values.world, split: split as 'train' | 'test', count, seed };
}

function generate(argv: string[]): number {
  const { values, world, split, count, seed } = genOptions(argv, { out: { type: 'string' } });
  const tasks = loadWorldDomain(world).tasks.generate({ split, count, seed });
  const text = JSON.stringify(tasks, null, 1) + '\n';
  if (values.out) writeFileSync(values.out, text);
  else process.stdout.write(text);
  process.stderr.write(`generated ${tasks.length} ${split} tasks (seed ${seed})\n`);
  return 0;
}

function expert(argv: string[]): number {
  const { values, world, split, count, seed } = genOptions(argv, { mistakes: { type: 'string' }, rows: { type: 'string' } });
  const rate = Number(values.mistakes ?? '0');
  if (!(rate >= 0 && rate <= 1)) fail('--mistakes must be in [0, 1]');
  if (values.rows && split === 'test') fail('refusing to write rows for the test split (it is never used for training)');
  const domain = loadWorldDomain(world);
  const tasks = domain.tasks.generate({ split, count, seed });
  const rows: string[] = [];
  let passed = 0;
  tasks.forEach((task, i) => {
    process.stderr.write(`\r[${i + 1}/${tasks.length}]   `);
    const env = domain.createEnv();
    const r = domain.expert(task, env, { mistakeRate: rate, seed });
    const reward = realReward(domain.createEnv, task, r.steps).reward;
    const j = judge(task.checklist, r.steps, { isWrite: (n) => env.isWrite(n), normaliseArgs: domain.normaliseArgs }).reward;
    const ok = reward === 1 && j === 1;
    if (ok) passed++;
    for (const row of r.rows) rows.push(JSON.stringify(row));
    process.stdout.write(JSON.stringify({ id: task.id, family: task.family, ok, reward, judge: j, mistakes: r.mistakes }) + '\n');
  });
  process.stderr.write('\n');
  if (values.rows) writeFileSync(values.rows, rows.map((l) => l + '\n').join(''));
  process.stdout.write(`${passed} passed, ${tasks.length - passed} failed\n`);
  return passed === tasks.length ? 0 : 1;
}

async function main(): Promise<number> {
  const [cmd, ...rest] = process.argv.slice(2);
  switch (cmd) {
    case 'replay':
      return replay(rest);
    case 'generate':
      return generate(rest);
    case 'expert':
      return expert(rest);
    default:
      fail('usage: env replay <tasks.json> [--trace FILE] [--gold FILE] | generate [...] | expert [...]');
  }
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`env: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exit(2);
  },
);
