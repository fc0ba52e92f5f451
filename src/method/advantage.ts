// Role-Wise GRPO advantages. Every row (one Act or one Rehearse generation) carries the
// trajectory reward R of its rollout. Rows are grouped, each group gets a baseline μ, and A = R − μ
// (no division by the standard deviation, as in the paper).
//
// Groups:
//   role-wise (default): G_{x,r} = all role-r rows of the K rollouts of prompt x.
//   pooled (ablation):   all rows of prompt x, both roles together.
//   standard (GRPO):     Act rows of prompt x only; Rehearse rows get no advantage (no loss).
// Baselines:
//   row-weighted:  μ = mean over the group's rows. The reference code does this, so a rollout with more
//                  rows (more turns) weighs more in its own group's baseline.
//   rollout-mean:  μ = mean over the group's rollouts of each rollout's mean row reward: each rollout
//                  counts once, however many rows it contributed.
import { BASELINES, DEFAULT_BASELINE, type Baseline } from './run-config';

export type Role = 'act' | 'rehearse';
export type GroupMode = 'role-wise' | 'pooled' | 'standard';
export type { Baseline } from './run-config';

export interface AdvantageRow {
  promptId: string;
  rolloutId: string;
  role: Role;
  reward: number;
}

export interface GroupStat {
  promptId: string;
  /** The role of a role-wise/standard group, 'all' for a pooled one. */
  role: Role | 'all';
  rows: number;
  rollouts: number;
  baseline: number;
}

export interface Advantages {
  /** One per input row, same order; null = this row carries no loss. */
  advantage: (number | null)[];
  groups: GroupStat[];
  mode: GroupMode;
  baseline: Baseline;
}

export class AdvantageError extends Error {
  override readonly name = 'AdvantageError';
}

export function computeAdvantages(rows: readonly AdvantageRow[], mode: GroupMode = 'role-wise', baseline: Baseline = DEFAULT_BASELINE): Advantages {
  if (mode !== 'role-wise' && mode !== 'pooled' && mode !== 'standard') throw new AdvantageError(`unknown group mode ${String(mode)}`);
  if (!BASELINES.includes(baseline)) throw new AdvantageError(`unknown baseline ${String(baseline)}`);

  // group key -> indices of its rows, in input order.
  const groups = new Map<string, { promptId: string; role: Role | 'all'; idx: number[] }>();
  rows.forEach((r, i) => {
    if (r.role !== 'act' && r.role !== 'rehearse') throw new AdvantageError(`row ${i}: unknown role ${String(r.role)}`);
    if (!Number.isFinite(r.reward)) throw new AdvantageError(`row ${i}: reward ${r.reward} is not finite`);
    if (mode === 'standard' && r.role !== 'act') return;
    const role: Role | 'all' = mode === 'pooled' ? 'all' : r.role;
    // JSON keeps arbitrary id strings from colliding with the separator.
    const key = JSON.stringify([r.promptId, role]);
    let g = groups.get(key);
    if (!g) groups.set(key, (g = { promptId: r.promptId, role, idx: [] }));
    g.idx.push(i);
  });

  const advantage: (number | null)[] = rows.map(() => null);
  const stats: GroupStat[] = [];
  for (const g of groups.values()) {
    const perRollout = new Map<string, { sum: number; n: number }>();
    let sum = 0;
    for (const i of g.idx) {
      const r = rows[i];
      sum += r.reward;
      const s = perRollout.get(r.rolloutId) ?? { sum: 0, n: 0 };
      s.sum += r.reward;
      s.n++;
      perRollout.set(r.rolloutId, s);
    }
    let mu: number;
    if (baseline !== 'rollout-mean') mu = sum / g.idx.length;
    else {
      let t = 0;
      for (const s of perRollout.values()) t += s.sum / s.n;
      mu = t / perRollout.size;
    }
    for (const i of g.idx) advantage[i] = rows[i].reward - mu;
    stats.push({ promptId: g.promptId, role: g.role, rows: g.idx.length, rollouts: perRollout.size, baseline: mu });
  }
  return { advantage, groups: stats, mode, baseline };
}
