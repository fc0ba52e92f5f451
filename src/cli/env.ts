// npm run env -- replay <tasks.json> [--trace FILE] [--gold FILE]
//   Replays each task's reference actions in a fresh retail environment. stdout: one JSON line per task
//   {"id","ok","reward","error"?} and a final "N passed, M failed"; exit status 1 if any failed.
//   A task fails when a reference action is rejected before reaching the tool (unknown tool, invalid
//   arguments, internal error; a tool's own error is expected and fine), when the real-execution reward of
//   the replay (with a reply stating every fact) is not 1, or, with --gold, when its trace differs from
//   the gold line with the same id. --trace writes trace lines in the gold-train.jsonl format.

import { readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import type { Step } from '../env/domain';
import { realReward } from '../env/reward';
import { RETAIL_FLOAT_KEYS, retailEnvFactory } from '../env/retail/index';
import { loadRetailBase } from '../env/retail/node';
import { loadTau2Tasks } from '../env/tau2';
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
  const tasks = loadTau2Tasks(tasksText);
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

async function main(): Promise<number> {
  const [cmd, ...rest] = process.argv.slice(2);
  switch (cmd) {
    case 'replay':
      return replay(rest);
    default:
      fail('usage: env replay <tasks.json> [--trace FILE] [--gold FILE]');
  }
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`env: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exit(2);
  },
);
