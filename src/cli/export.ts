// npm run export -- --split train|test --format parquet|jsonl [--world mini|retail] [--count N] [--task-seed S] [--out FILE]
// npm run export -- --rollouts RUN/rollouts.jsonl --format parquet|jsonl [--world W] [--out FILE]
// npm run export -- --format tool-config [--mode real|simulate] [--base-url URL] [--simulator-url URL] [--simulator-model M] [--out FILE]
//   Tasks in the row layout of verl's RL datasets, the lab's rollouts in a flat schema, or verl's tool config
//   (src/server/export.ts documents the schemas). The generated splits are the ones `npm run serve` serves with
//   the same --world, --count and --task-seed (train: seed S, test: seed S + 1). stdout: {"out", "rows"}.
//   Without --out the file goes to runs/export/ (git-ignored); a file the repository commits needs --write-committed.
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { WORLD_NAMES } from '../env/retail/index';
import { loadWorldDomain } from '../env/retail/node';
import { jsonl, rolloutParquet, rolloutRow, taskParquet, taskRows, toolConfigYaml } from '../server/export';
import { loadTasks } from '../server/tasks';
import { writeFileAtomic } from '../util/atomic-file';
import {
  ArgError, checkOutput, enumFlag, HELP_FLAG, helpText, intFlag, isEntry, parseFlags, processIo, progress, runCli, runsPath, strFlag, WORLD_FLAG, WRITE_COMMITTED_FLAG, type CliIo, type FlagSpec, type FlagValues,
} from './args';

export const EXPORT_USAGE = `usage: npm run export -- --split train|test --format parquet|jsonl [--world mini|retail] [--count N] [--task-seed S] [--out FILE]
       npm run export -- --rollouts FILE.jsonl --format parquet|jsonl [--world mini|retail] [--out FILE]
       npm run export -- --format tool-config [--mode real|simulate] [--base-url URL] [--simulator-url URL] [--simulator-model M] [--out FILE]`;

export const EXPORT_FLAGS: FlagSpec = {
  format: { type: 'string', arg: 'F', help: 'parquet, jsonl, or tool-config (verl\'s tool config YAML) (required)' },
  split: { type: 'string', arg: 'S', help: 'generated task split to export: train or test (required unless --rollouts or tool-config)' },
  rollouts: { type: 'string', arg: 'FILE', help: 'export a run\'s rollouts.jsonl instead of tasks (exclusive with --split)' },
  world: WORLD_FLAG,
  count: { type: 'string', arg: 'N', help: 'tasks in the generated split, 1..100000', default: '200' },
  'task-seed': { type: 'string', arg: 'S', help: 'generator seed (train uses S, test S + 1, as npm run serve)', default: '0' },
  out: { type: 'string', arg: 'FILE', help: 'output file; one the repository commits needs --write-committed', default: 'runs/export/ (git-ignored): envace-<world>-<split>.<format>, rollouts.<format> or envace_<world>_tools_<mode>.yaml' },
  'write-committed': WRITE_COMMITTED_FLAG,
  'agent-loop': { type: 'string', arg: 'A', help: 'the rows\' agent_name: tool_agent (verl\'s, a fresh episode per call) or envace_agent (integrations/verl: one episode per trajectory)', default: 'tool_agent' },
  mode: { type: 'string', arg: 'M', help: 'tool-config: real (the served environment) or simulate (an LLM simulator)', default: 'real' },
  'base-url': { type: 'string', arg: 'URL', help: 'tool-config: the npm run serve address', default: 'http://127.0.0.1:8765' },
  'simulator-url': { type: 'string', arg: 'URL', help: 'tool-config, simulate: the simulator\'s OpenAI-compatible endpoint' },
  'simulator-model': { type: 'string', arg: 'M', help: 'tool-config, simulate: the simulator model name' },
  help: HELP_FLAG,
};

const EXPORT_NOTES = 'exit status: 0 ok, 1 failure, 2 usage error, 74 I/O error (the message names the file). Files are written atomically.';

/**
 * The output file: --out as given (refused if the repository commits it, unless --write-committed), or the default
 * name under runs/export/, which git ignores, so an export never leaves files in the checkout.
 */
function outPath(v: FlagValues, defaultName: string): string {
  const named = strFlag(v, 'out');
  return named === undefined ? runsPath(join('export', defaultName)) : checkOutput(named, '--out', v);
}

/** Writes the output whole or not at all (src/util/atomic-file.ts); returns its absolute path. */
async function write(path: string, data: string | Uint8Array): Promise<string> {
  const p = resolve(path);
  await writeFileAtomic(p, data);
  return p;
}

export async function exportMain(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  return runCli(io, EXPORT_USAGE, async () => {
    const v = parseFlags(argv, EXPORT_FLAGS);
    if (v.help) {
      io.out(helpText(EXPORT_USAGE, EXPORT_FLAGS, EXPORT_NOTES));
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
      const out = await write(outPath(v, `envace_${world}_tools_${mode}.yaml`), text);
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
      const out = await write(outPath(v, `rollouts.${format}`), format === 'parquet' ? rolloutParquet(rows) : jsonl(rows));
      log(`${rows.length} rollouts -> ${out}`);
      io.out(JSON.stringify({ out, rows: rows.length }) + '\n');
      return;
    }
    const split = enumFlag(v, 'split', ['train', 'test'] as const, undefined);
    if (!split) throw new ArgError('--split train|test is required (or --rollouts FILE)');
    const tasks = await loadTasks(domain, { tasks: split, count: intFlag(v, 'count', 200, 1, 100_000), seed: intFlag(v, 'task-seed', 0, 0, 0xfffffff0) });
    const rows = taskRows(domain, world, tasks, enumFlag(v, 'agent-loop', ['tool_agent', 'envace_agent'] as const, 'tool_agent'));
    const out = await write(outPath(v, `envace-${world}-${split}.${format}`), format === 'parquet' ? taskParquet(domain, rows) : jsonl(rows));
    log(`${rows.length} ${split} tasks (${world}) -> ${out}`);
    io.out(JSON.stringify({ out, rows: rows.length }) + '\n');
  });
}

if (isEntry(import.meta.url)) exportMain(process.argv.slice(2)).then((code) => process.exit(code));
