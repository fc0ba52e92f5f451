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
// Every command takes --help; output files are written atomically, and one the repository commits (data/…) only
// with --write-committed; exit 0 ok, 1 failure, 2 usage error,
// 74 I/O error naming the file.

import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { Step } from '../env/domain';
import { judge, judgeOptions } from '../env/judge';
import { realReward } from '../env/reward';
import { RETAIL_FLOAT_KEYS, retailEnvFactory, WORLD_NAMES } from '../env/retail/index';
import { loadRetailBase, loadWorldDomain } from '../env/retail/node';
import { loadTaskFile } from '../env/tau2';
import { jsonDiff, replayTask, traceLineText } from '../env/trace';
import { checkWritablePath, IoError, parseJsonl, writeFileAtomic } from '../util/atomic-file';
import {
  ArgError, checkOutput, enumFlag, HELP_FLAG, helpText, intFlag, isEntry, numFlag, parseFlags, processIo, runCli, strFlag, WORLD_FLAG, WRITE_COMMITTED_FLAG, type CliIo, type FlagSpec, type FlagValues,
} from './args';

/** Tasks a single generate/expert call may produce: the generators enumerate real records, far fewer than this. */
export const MAX_COUNT = 100_000;

export const ENV_USAGE = `usage: npm run env -- replay <tasks.json> [--trace FILE] [--gold FILE] [--db FILE]
       npm run env -- generate [--world mini|retail] [--split train|test] [--count N] [--seed S] [--out FILE]
       npm run env -- expert [--world mini|retail] [--split train|test] [--count N] [--seed S] [--mistakes RATE] [--rows FILE]`;

const GEN_FLAGS: FlagSpec = {
  world: WORLD_FLAG,
  split: { type: 'string', arg: 'S', help: 'train or test (the test split holds out intents or users)', default: 'train' },
  count: { type: 'string', arg: 'N', help: `tasks to generate, 1..${MAX_COUNT}`, default: '100' },
  seed: { type: 'string', arg: 'S', help: 'generator seed, 0..2^32-1', default: '0' },
};

export const ENV_FLAGS: Record<'replay' | 'generate' | 'expert', FlagSpec> = {
  replay: {
    trace: { type: 'string', arg: 'FILE', help: 'write the replay trace in the gold-train.jsonl format' },
    gold: { type: 'string', arg: 'FILE', help: 'compare each task\'s trace with the gold line of the same id' },
    db: { type: 'string', arg: 'FILE', help: 'retail database to replay on', default: 'the bundled τ²-bench retail db.json' },
    'write-committed': WRITE_COMMITTED_FLAG,
    help: HELP_FLAG,
  },
  generate: { ...GEN_FLAGS, out: { type: 'string', arg: 'FILE', help: 'write the tasks (JSON array) to FILE', default: 'stdout' }, 'write-committed': WRITE_COMMITTED_FLAG, help: HELP_FLAG },
  expert: {
    ...GEN_FLAGS,
    mistakes: { type: 'string', arg: 'RATE', help: 'rate of scripted expert mistakes (recovered from), 0..1', default: '0' },
    rows: { type: 'string', arg: 'FILE', help: 'write the Act/Rehearse rows as JSONL (train split only)' },
    'write-committed': WRITE_COMMITTED_FLAG,
    help: HELP_FLAG,
  },
};

const ENV_NOTES = `replay: one JSON line per task {"id","ok","reward","error"?} and "N passed, M failed"; exit 1 if any failed.
generate: writes generated tasks. expert: runs the scripted expert, one JSON line per task and a summary; exit 1 if any failed.
exit status: 0 ok, 1 failure, 2 usage error, 74 I/O error (the message names the file).`;

export function envHelp(): string {
  return [
    ENV_USAGE,
    ...(['replay', 'generate', 'expert'] as const).map((c) => helpText(`${c}:`, ENV_FLAGS[c]).trimEnd()),
    ENV_NOTES,
  ].join('\n\n') + '\n';
}

async function readText(file: string, what: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (e) {
    throw new IoError(resolve(file), 'read', (e as NodeJS.ErrnoException).code, `${what}: ${(e as Error).message}`);
  }
}

async function replay(argv: readonly string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags(argv, ENV_FLAGS.replay, true);
  if (values.help) return help(io);
  if (positionals.length !== 1) throw new ArgError('replay needs exactly one task file');
  const trace = strFlag(values, 'trace');
  if (trace) await checkWritablePath(checkOutput(trace, '--trace', values), '--trace');
  const tasks = loadTaskFile(await readText(positionals[0], 'the task file'));
  if (tasks.length === 0) throw new Error(`${resolve(positionals[0])}: the task file holds no tasks (nothing to replay)`);
  const gold = new Map<string, unknown>();
  const goldFile = strFlag(values, 'gold');
  if (goldFile) {
    for (const g of parseJsonl(await readText(goldFile, '--gold'), resolve(goldFile)) as { id: string }[]) gold.set(String(g.id), g);
  }
  const fresh = retailEnvFactory(loadRetailBase(strFlag(values, 'db')));
  const traceLines: string[] = [];
  let passed = 0;
  let failed = 0;
  tasks.forEach((task, i) => {
    io.err(`\r[${i + 1}/${tasks.length}] task ${task.id}   `);
    const r = replayTask(fresh(), task);
    traceLines.push(traceLineText(r.trace, RETAIL_FLOAT_KEYS));
    const steps: Step[] = task.referenceActions.map((call, k) => ({ kind: 'call', call, observation: r.observations[k] }));
    steps.push({ kind: 'reply', text: task.facts.join('\n') });
    const reward = realReward(fresh, task, steps).reward;
    let error: string | undefined;
    const rejected = r.observations.find((o) => !o.ok && o.code !== 'tool');
    if (rejected && !rejected.ok) error = `action ${rejected.name}: ${rejected.error}`;
    else if (reward !== 1) error = 'replay reward is not 1';
    else if (goldFile) {
      const g = gold.get(task.id);
      const d = g === undefined ? 'no gold line for this id' : jsonDiff(JSON.parse(traceLines[i]), g);
      if (d) error = `trace differs from gold: ${d}`;
    }
    const ok = error === undefined;
    if (ok) passed++;
    else failed++;
    io.out(JSON.stringify(ok ? { id: task.id, ok, reward } : { id: task.id, ok, reward, error }) + '\n');
  });
  io.err('\n');
  if (trace) await writeFileAtomic(trace, traceLines.map((l) => l + '\n').join(''));
  io.out(`${passed} passed, ${failed} failed\n`);
  return failed > 0 ? 1 : 0;
}

function genOptions(values: FlagValues) {
  return {
    world: enumFlag(values, 'world', WORLD_NAMES, 'mini'),
    split: enumFlag(values, 'split', ['train', 'test'] as const, 'train'),
    count: intFlag(values, 'count', 100, 1, MAX_COUNT),
    seed: intFlag(values, 'seed', 0, 0, 0xffffffff),
  };
}

async function generate(argv: readonly string[], io: CliIo): Promise<number> {
  const values = parseFlags(argv, ENV_FLAGS.generate);
  if (values.help) return help(io);
  const { world, split, count, seed } = genOptions(values);
  const out = strFlag(values, 'out');
  if (out) await checkWritablePath(checkOutput(out, '--out', values), '--out');
  const tasks = loadWorldDomain(world).tasks.generate({ split, count, seed });
  const text = JSON.stringify(tasks, null, 1) + '\n';
  if (out) await writeFileAtomic(out, text);
  else io.out(text);
  io.err(`generated ${tasks.length} ${split} tasks (seed ${seed})\n`);
  return 0;
}

async function expert(argv: readonly string[], io: CliIo): Promise<number> {
  const values = parseFlags(argv, ENV_FLAGS.expert);
  if (values.help) return help(io);
  const { world, split, count, seed } = genOptions(values);
  const rate = values.mistakes === undefined ? 0 : numFlag(values, 'mistakes', 0, 0, true);
  if (rate > 1) throw new ArgError(`--mistakes must be in [0, 1], got ${JSON.stringify(values.mistakes)}`);
  const rowsFile = strFlag(values, 'rows');
  if (rowsFile && split === 'test') throw new ArgError('refusing to write rows for the test split (it is never used for training)');
  if (rowsFile) await checkWritablePath(checkOutput(rowsFile, '--rows', values), '--rows');
  const domain = loadWorldDomain(world);
  const tasks = domain.tasks.generate({ split, count, seed });
  const rows: string[] = [];
  let passed = 0;
  tasks.forEach((task, i) => {
    io.err(`\r[${i + 1}/${tasks.length}]   `);
    const env = domain.createEnv();
    const r = domain.expert(task, env, { mistakeRate: rate, seed });
    const reward = realReward(domain.createEnv, task, r.steps).reward;
    const j = judge(task.checklist, r.steps, judgeOptions(env, domain.normaliseArgs)).reward;
    const ok = reward === 1 && j === 1;
    if (ok) passed++;
    for (const row of r.rows) rows.push(JSON.stringify(row));
    io.out(JSON.stringify({ id: task.id, family: task.family, ok, reward, judge: j, mistakes: r.mistakes }) + '\n');
  });
  io.err('\n');
  if (rowsFile) await writeFileAtomic(rowsFile, rows.map((l) => l + '\n').join(''));
  io.out(`${passed} passed, ${tasks.length - passed} failed\n`);
  return passed === tasks.length ? 0 : 1;
}

function help(io: CliIo): number {
  io.out(envHelp());
  return 0;
}

export async function envCli(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  let status = 0;
  const code = await runCli(io, ENV_USAGE, async () => {
    const [cmd, ...rest] = argv;
    if (cmd === undefined || cmd === '--help' || cmd === '-h' || cmd === 'help') {
      status = help(io);
      return;
    }
    if (cmd === 'replay') status = await replay(rest, io);
    else if (cmd === 'generate') status = await generate(rest, io);
    else if (cmd === 'expert') status = await expert(rest, io);
    else throw new ArgError(`unknown command ${JSON.stringify(cmd)} (replay, generate or expert)`);
  });
  return code !== 0 ? code : status;
}

if (isEntry(import.meta.url)) process.exitCode = await envCli(process.argv.slice(2));
