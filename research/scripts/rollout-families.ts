// node --import tsx research/scripts/rollout-families.ts RUN_DIR...
// Per task family, how many of a training run's rollouts succeeded (reward 1): reads each run's rollouts.jsonl
// and train-cli.json (written by `npm run train --out DIR`: the world, the training task count and task seed),
// regenerates those training tasks as the run did (src/rl/grpo-config.ts splitTasks) to learn each one's
// family, and prints one JSON line per run.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadWorldDomain } from '../../src/env/retail/node';
import { isWorldName } from '../../src/env/retail/worlds';
import { splitTasks } from '../../src/rl/grpo-config';
import { ArgError, HELP_FLAG, helpText, isEntry, parseFlags, processIo, runCli, type CliIo, type FlagSpec } from '../../src/cli/args';

export const ROLLOUT_FAMILIES_USAGE = 'usage: node --import tsx scripts/rollout-families.ts RUN_DIR...   (folders written by npm run train --out DIR)';
export const ROLLOUT_FAMILIES_FLAGS: FlagSpec = { help: HELP_FLAG };

export async function rolloutFamiliesCli(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  return runCli(io, ROLLOUT_FAMILIES_USAGE, async () => {
    const { values: v, positionals: dirs } = parseFlags(argv, ROLLOUT_FAMILIES_FLAGS, true);
    if (v.help) return void io.out(helpText(ROLLOUT_FAMILIES_USAGE, ROLLOUT_FAMILIES_FLAGS, 'Reads only; one JSON line per run on stdout. exit status: 0 ok, 1 failure, 2 usage error.'));
    if (dirs.length === 0) throw new ArgError('give one or more training run folders');
    for (const dir of dirs) {
      const cli = JSON.parse(readFileSync(join(dir, 'train-cli.json'), 'utf8')) as { world: string; trainTasks: number; taskSeed: number };
      if (!isWorldName(cli.world)) throw new Error(`${dir}/train-cli.json: unknown world ${JSON.stringify(cli.world)}`);
      const { train } = splitTasks(loadWorldDomain(cli.world), { train: cli.trainTasks, eval: 0, seed: cli.taskSeed });
      const family = new Map(train.map((t) => [t.id, (t as { family?: string }).family ?? '?']));
      const out: Record<string, { episodes: number; successes: number }> = {};
      for (const line of readFileSync(join(dir, 'rollouts.jsonl'), 'utf8').split('\n')) {
        if (!line.trim()) continue;
        const r = JSON.parse(line) as { taskId: string; reward: number };
        const f = family.get(r.taskId);
        if (f === undefined) throw new Error(`${dir}: task ${r.taskId} is not among the run's ${cli.trainTasks} training tasks (task seed ${cli.taskSeed})`);
        const c = (out[f] ??= { episodes: 0, successes: 0 });
        c.episodes++;
        if (r.reward === 1) c.successes++;
      }
      io.out(JSON.stringify({ run: dir, byFamily: out }) + '\n');
    }
  });
}

if (isEntry(import.meta.url)) process.exitCode = await rolloutFamiliesCli(process.argv.slice(2));
