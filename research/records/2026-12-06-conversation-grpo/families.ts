// Training rollouts of a run by task family: how many groups (a task at a step, K rollouts) had a reward spread
// (the only groups that carry a GRPO gradient) and the rollouts' success. Reads the run folder's rollouts.jsonl
// (not committed: tens of MB) and regenerates the run's training tasks (train split, the run's seed).
//   node --import tsx research/records/2026-12-06-conversation-grpo/families.ts runs/cgrpo-t1.0-s1 SEED
import { readFileSync } from 'node:fs';
import { loadWorldDomain } from '../../../src/env/retail/node';
const [run, seed] = [process.argv[2], Number(process.argv[3])];
const mini = await loadWorldDomain('mini');
const tasks = mini.tasks.generate({ split: 'train', count: 1000, seed });
const fam = new Map(tasks.map((t) => [t.id, `${t.family}`]));
const groups = new Map<string, number[]>();
for (const l of readFileSync(`${run}/rollouts.jsonl`, 'utf8').split('\n')) {
  if (!l) continue;
  const r = JSON.parse(l);
  const k = `${r.step}|${r.taskId}`;
  (groups.get(k) ?? groups.set(k, []).get(k)!).push(r.reward);
}
const by = new Map<string, { groups: number; anySuccess: number; spread: number; rollouts: number; wins: number }>();
for (const [k, rs] of groups) {
  const id = k.split('|')[1];
  const f = `${fam.get(id)}`;
  const s = by.get(f) ?? { groups: 0, anySuccess: 0, spread: 0, rollouts: 0, wins: 0 };
  s.groups++; s.rollouts += rs.length; s.wins += rs.filter((x) => x === 1).length;
  if (rs.some((x) => x === 1)) s.anySuccess++;
  if (new Set(rs).size > 1) s.spread++;
  by.set(f, s);
}
for (const [f, s] of [...by].sort()) console.log(f.padEnd(22), `groups ${s.groups}`, `spread ${(s.spread / s.groups).toFixed(2)}`, `success ${(s.wins / s.rollouts).toFixed(3)}`);
