// npm run export -- --split train|test --format parquet|jsonl [--world mini|retail] [--count N] [--task-seed S] [--out FILE]
// npm run export -- --rollouts RUN/rollouts.jsonl --format parquet|jsonl [--world W] [--out FILE]
// npm run export -- --format tool-config [--mode real|simulate] [--base-url URL] [--simulator-url URL] [--simulator-model M] [--out FILE]
//   Tasks in the row layout of verl's RL datasets, the lab's rollouts in a flat schema, or verl's tool config
//   (src/server/export.ts documents the schemas). The generated splits are the ones `npm run serve` serves with
//   the same --world, --count and --task-seed (train: seed S, test: seed S + 1). stdout: {"out", "rows"}.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { WORLD_NAMES } from '../env/retail/index';
import { loadWorldDomain } from '../env/retail/node';
import { jsonl, rolloutParquet, rolloutRow, taskParquet, taskRows, toolConfigYaml } from '../server/export';
import { loadTasks } from '../server/tasks';
import { ArgError, enumFlag, intFlag, isEntry, parseFlags, processIo, progress, runCli, strFlag, type CliIo, type FlagSpec } from './args';

export const EXPORT_USAGE = `usage: npm run export -- --split train|test --format parquet|jsonl [--world mini|retail] [--count N] [--task-seed S] [--out FILE]
       npm run export -- --rollouts FILE.jsonl --format parquet|jsonl [--world mini|retail] [--out FILE]
       npm run export -- --format tool-config [--mode real|simulate] [--base-url URL] [--simulator-url URL] [--simulator-model M] [--out FILE]`;

const FLAGS: FlagSpec = {
  split: { type: 'string' }, format: { type: 'string' }, world: { type: 'string' }, count: { type: 'string' }, 'task-seed': { type: 'string' },
  out: { type: 'string' }, rollouts: { type: 'string' }, mode: { type: 'string' }, 'base-url': { type: 'string' },
  'simulator-url': { type: 'string' }, 'simulator-model': { type: 'string' }, help: { type: 'boolean', short: 'h' },
};

function write(path: string, data: string | Uint8Array): string {
  const p = resolve(path);
  mkdirSync(dirname(p), { recursive: true });
  writeFileSync(p, data);
  return p;
}

export async function exportMain(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  return runCli(io, EXPORT_USAGE, async () => {
    const v = parseFlags(argv, FLAGS);
    if (v.help) {
      io.out(EXPORT_USAGE + '\n');
      return;
    }
    const log = progress(io, 'export');
    const format = enumFlag(v, 'format', ['parquet', 'jsonl', 'tool-config'] as const, undefined);
    if (!format) throw new ArgError('--format is required (parquet, jsonl or tool-config)');
    const world = enumFlag(v, 'world', WORLD_NAMES, 'mini');
    const domain = loadWorldDomain(world);
    if (format === 'tool-config') {
      const mode = enumFlag(v, 'mode', ['real', 'simulate'] as const, 'real');
      const text = toolConfigYaml(domain, { mode, baseUrl: strFlag(v, 'base-url', 'http://127.0.0.1:8765')!, simulatorUrl: strFlag(v, 'simulator-url'), simulatorModel: strFlag(v, 'simulator-model') });
      const out = write(strFlag(v, 'out', `envace_${world}_tools_${mode}.yaml`)!, text);
      io.out(JSON.stringify({ out, tools: domain.definitions().length }) + '\n');
      return;
    }
    const rolloutsFile = strFlag(v, 'rollouts');
    if (rolloutsFile) {
      if (v.split !== undefined) throw new ArgError('--rollouts and --split are exclusive');
      let text: string;
      try {
        text = readFileSync(resolve(rolloutsFile), 'utf8');
      } catch (e) {
        throw new ArgError(`--rollouts ${rolloutsFile}: ${(e as Error).message}`);
      }
      const rows = text.split('\n').filter((l) => l.trim()).map((l, i) => {
        try {
          return rolloutRow(domain, world, JSON.parse(l));
        } catch (e) {
          throw new Error(`${rolloutsFile} line ${i + 1}: ${(e as Error).message}`);
        }
      });
      const out = write(strFlag(v, 'out', `rollouts.${format}`)!, format === 'parquet' ? rolloutParquet(rows) : jsonl(rows));
      log(`${rows.length} rollouts -> ${out}`);
      io.out(JSON.stringify({ out, rows: rows.length }) + '\n');
      return;
    }
    const split = enumFlag(v, 'split', ['train', 'test'] as const, undefined);
    if (!split) throw new ArgError('--split train|test is required (or --rollouts FILE)');
    const tasks = await loadTasks(domain, { tasks: split, count: intFlag(v, 'count', 200, 1, 100_000), seed: intFlag(v, 'task-seed', 0, 0, 0xfffffff0) });
    const rows = taskRows(domain, world, tasks);
    const out = write(strFlag(v, 'out', `envace-${world}-${split}.${format}`)!, format === 'parquet' ? taskParquet(domain, rows) : jsonl(rows));
    log(`${rows.length} ${split} tasks (${world}) -> ${out}`);
    io.out(JSON.stringify({ out, rows: rows.length }) + '\n');
  });
}

if (isEntry(import.meta.url)) exportMain(process.argv.slice(2)).then((code) => process.exit(code));
