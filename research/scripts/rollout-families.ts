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

const dirs = process.argv.slice(2);
if (dirs.length === 0) throw new Error('usage: rollout-families.ts RUN_DIR...');
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
  process.stdout.write(JSON.stringify({ run: dir, byFamily: out }) + '\n');
}
