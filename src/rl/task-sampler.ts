// Which training tasks a GRPO step rolls out.
//
// GRPO learns only from groups whose K rewards differ: a task every sample solves, or none does, costs its
// rollouts and moves nothing. 'uniform' draws the step's tasks uniformly from the pool (every family in
// proportion to its share). 'signal' draws each task with probability proportional to the chance that a
// group of K rollouts of its family carries a learning signal, 1 − p^K − (1 − p)^K, where p is the family's
// success estimated from this run's own rollouts so far (mean reward with one success and one failure as a
// prior, so a family not yet seen counts as p = 1/2, the most informative). A family the policy always or
// never solves is drawn less, never not at all: a small floor keeps it in the mix, so a family that starts to
// succeed is noticed. Families keep their share of the pool under both: a rare family is not made common.
// The estimates are part of the run's state (saved in run.json), so a resumed run draws the same tasks.
import type { Task } from '../env/domain';
import type { Rng } from '../util/rng';
import { TASK_SAMPLINGS, type TaskSampling } from '../method/run-config';

// The choices are the run settings' table's (src/method/run-config.ts), declared once there.
export { TASK_SAMPLINGS, type TaskSampling } from '../method/run-config';

/** Per task family: training episodes so far and the sum of their rewards. */
export type FamilyStats = Record<string, { episodes: number; reward: number }>;

/** Weight a family keeps however sure its estimate is (relative to 1, a family at p = 1/2 with large K). */
export const SIGNAL_FLOOR = 0.05;

export class TaskSamplingError extends Error {
  override readonly name = 'TaskSamplingError';
}

/** The family a task is counted under ('' for a task file's tasks, which name none: one family, uniform). */
export const familyOf = (t: Pick<Task, 'family'>): string => t.family ?? '';

/** P(a group of k rollouts has rewards that are not all equal), for a family with `s` stats (Beta(1,1) prior). */
export function signalChance(s: { episodes: number; reward: number } | undefined, k: number): number {
  const p = ((s?.reward ?? 0) + 1) / ((s?.episodes ?? 0) + 2);
  return 1 - p ** k - (1 - p) ** k;
}

/** The sampling weight of each family present in `tasks` (for logs and the lab's dashboard). */
export function familyWeights(stats: FamilyStats, tasks: readonly Pick<Task, 'family'>[], k: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const t of tasks) out[familyOf(t)] ??= SIGNAL_FLOOR + signalChance(stats[familyOf(t)], k);
  return out;
}

/**
 * `want` distinct task indices of `tasks` (all of them when the pool is smaller). 'uniform' is the draw the
 * run has always made (the same RNG calls, so earlier runs replay bit for bit); 'signal' draws each task with
 * its family's weight in `weights` (familyWeights).
 */
export function sampleTaskIndices(rng: Rng, tasks: readonly Pick<Task, 'family'>[], want: number, how: TaskSampling = 'uniform', weights: Record<string, number> = {}): number[] {
  const n = tasks.length;
  const m = Math.min(want, n);
  if (how === 'uniform') {
    const picked = new Set<number>();
    // A sound stream fills the set in about n·ln(n) draws; the bound turns a broken one into an error.
    const maxDraws = 1000 + 100 * n * Math.ceil(Math.log2(n + 1));
    for (let draws = 0; picked.size < m; draws++) {
      if (draws >= maxDraws) throw new TaskSamplingError(`task sampling drew ${draws} times without finding ${m} distinct tasks of ${n} (RNG state ${JSON.stringify(rng.state)})`);
      const i = rng.int(n);
      if (!(i >= 0 && i < n)) throw new TaskSamplingError(`task sampling drew index ${i}, outside [0, ${n}) (RNG state ${JSON.stringify(rng.state)})`);
      picked.add(i);
    }
    return [...picked];
  }
  if (how !== 'signal') throw new TaskSamplingError(`task sampling must be one of ${TASK_SAMPLINGS.join(', ')}, got ${String(how)}`);
  const w = tasks.map((t) => {
    const x = weights[familyOf(t)];
    if (!(x >= 0)) throw new TaskSamplingError(`no sampling weight for task family ${JSON.stringify(familyOf(t))} (got ${x})`);
    return x;
  });
  const picked: number[] = [];
  for (let j = 0; j < m; j++) {
    let total = 0;
    for (const x of w) total += x;
    let r = rng.next() * total;
    let i = 0;
    // The last task with weight left takes any rounding remainder.
    let last = -1;
    for (; i < n; i++) {
      if (w[i] <= 0) continue;
      last = i;
      if ((r -= w[i]) < 0) break;
    }
    if (i >= n) i = last;
    if (i < 0) throw new TaskSamplingError(`task sampling found no task with weight left after ${picked.length} of ${m}`);
    picked.push(i);
    w[i] = 0;
  }
  return picked;
}

/** Adds a step's finished episodes to the per-family estimates (returns a new object; `stats` is kept). */
export function addEpisodes(stats: FamilyStats, episodes: readonly { taskId: string; reward: number }[], familyOfTask: (id: string) => string | undefined): FamilyStats {
  const out: FamilyStats = Object.fromEntries(Object.entries(stats).map(([f, s]) => [f, { ...s }]));
  for (const e of episodes) {
    const f = familyOfTask(e.taskId);
    if (f === undefined) continue;
    if (!Number.isFinite(e.reward)) throw new TaskSamplingError(`episode of task ${e.taskId}: reward ${e.reward} is not finite`);
    const s = (out[f] ??= { episodes: 0, reward: 0 });
    s.episodes++;
    s.reward += Math.min(1, Math.max(0, e.reward));
  }
  return out;
}
