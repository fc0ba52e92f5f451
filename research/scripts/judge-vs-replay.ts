// Was the training reward of a rehearsed episode the reward the real environment would have given? For each run
// folder's rollouts.jsonl: every rehearsed rollout's training reward (the judge on the imagined episode) against the
// verifier's reward on the same calls replayed on a fresh real database and the same reply (src/env/reward.ts, as
// held-out evaluation scores), and within each group whether the two rewards give each rollout an advantage of the
// same sign. Real rollouts are counted beside them. Prints a markdown table; writes nothing.
// usage: node --import tsx research/scripts/judge-vs-replay.ts [--world mini|retail] RUN_DIR...
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadWorldDomain } from '../../src/env/retail/node';
import type { Step, Task } from '../../src/env';

interface Rollout { promptId: string; taskId: string; mode: string; reward: number; steps: Step[] }

const args = process.argv.slice(2);
const wi = args.indexOf('--world');
const world = wi >= 0 ? args.splice(wi, 2)[1] : 'mini';
if (world !== 'mini' && world !== 'retail') throw new Error(`--world must be mini or retail, got ${world}`);
if (!args.length) {
  console.error('usage: node --import tsx research/scripts/judge-vs-replay.ts [--world mini|retail] RUN_DIR...');
  process.exit(2);
}
const domain = loadWorldDomain(world);
// Training tasks are generated from the train split under the run's task seed; a rollout names its task.
const taskCache = new Map<string, Task>();
function task(id: string): Task {
  const m = /^train-(\d+)-(\d+)$/.exec(id);
  if (!m) throw new Error(`not a train-split task id: ${id}`);
  if (!taskCache.has(id)) for (const t of domain.tasks.generate({ split: 'train', count: Number(m[2]) + 1, seed: Number(m[1]) })) taskCache.set(t.id, t);
  const t = taskCache.get(id);
  if (!t) throw new Error(`task ${id} not generated`);
  return t;
}

const pct = (a: number, n: number) => (n ? `${((100 * a) / n).toFixed(1)}` : '–');
console.log('| run | real rollouts: success % | rehearsed rollouts | judge 1, replay 1 | judge 1, replay 0 | judge 0, replay 1 | judge 0, replay 0 | judge success % | replay success % | advantage signs: same / opposite / judge only / replay only |');
console.log('|---|---|---|---|---|---|---|---|---|---|');
for (const dir of args) {
  const rows: Rollout[] = readFileSync(join(dir, 'rollouts.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  const real = rows.filter((r) => r.mode === 'real');
  const c = { j1r1: 0, j1r0: 0, j0r1: 0, j0r0: 0 };
  const groups = new Map<string, { j: number; r: number }[]>();
  for (const r of rows.filter((x) => x.mode !== 'real')) {
    const replay = domain.realReward(task(r.taskId) as never, r.steps);
    const j = r.reward >= 1 ? 1 : 0; // the strict judge's 1 (a partial credit counts as not solved)
    c[`j${j}r${replay}` as keyof typeof c]++;
    groups.set(r.promptId, [...(groups.get(r.promptId) ?? []), { j: r.reward, r: replay }]);
  }
  const s = { same: 0, opposite: 0, judge: 0, replay: 0 };
  for (const g of groups.values()) {
    const mj = g.reduce((a, x) => a + x.j, 0) / g.length;
    const mr = g.reduce((a, x) => a + x.r, 0) / g.length;
    for (const x of g) {
      const aj = Math.sign(x.j - mj);
      const ar = Math.sign(x.r - mr);
      if (aj === 0 && ar === 0) continue;
      if (aj === ar) s.same++;
      else if (aj !== 0 && ar !== 0) s.opposite++;
      else if (aj !== 0) s.judge++;
      else s.replay++;
    }
  }
  const n = c.j1r1 + c.j1r0 + c.j0r1 + c.j0r0;
  const realOk = real.filter((r) => r.reward >= 1).length;
  console.log(`| ${dir} | ${pct(realOk, real.length)} (${real.length}) | ${n} | ${c.j1r1} | ${c.j1r0} | ${c.j0r1} | ${c.j0r0} | ${pct(c.j1r1 + c.j1r0, n)} | ${pct(c.j1r1 + c.j0r1, n)} | ${s.same} / ${s.opposite} / ${s.judge} / ${s.replay} |`);
}
