// Baselines and advantages of a group view, recomputed on the page with the trainer's own function
// (src/method/advantage.ts), so toggling role-wise / pooled shows what the grouping changes instantly; and the
// same numbers said in words: what the advantages mean for this group, and why role-wise and pooled differ
// (or do not) on it.
import { computeAdvantages, type AdvantageRow, type Baseline, type GroupMode } from '../method/advantage';
import type { GroupRow, GroupView } from '../worker-protocol';

export interface GroupAdvantages {
  baselines: { role: 'act' | 'rehearse' | 'all'; value: number; rows: number }[];
  /** Per rollout: the advantage of its Act rows and of its Rehearse rows (null: it has none). */
  perRollout: { act: number | null; rehearse: number | null }[];
}

export function groupAdvantages(g: Pick<GroupView, 'taskId' | 'rows'>, mode: GroupMode, baseline: Baseline): GroupAdvantages {
  const rows: AdvantageRow[] = [];
  const first: { act: number; rehearse: number }[] = [];
  for (const r of g.rows) {
    const idx = { act: -1, rehearse: -1 };
    for (const [role, n] of [['act', r.actRows], ['rehearse', r.rehearseRows]] as const)
      for (let i = 0; i < n; i++) {
        if (i === 0) idx[role] = rows.length;
        rows.push({ promptId: g.taskId, rolloutId: String(r.rollout), role, reward: r.reward });
      }
    first.push(idx);
  }
  const adv = computeAdvantages(rows, mode, baseline);
  return {
    baselines: adv.groups.map((x) => ({ role: x.role, value: x.baseline, rows: x.rows })),
    // Every row of one rollout and role has the same advantage (same R, same group).
    perRollout: first.map((f) => ({ act: f.act < 0 ? null : adv.advantage[f.act], rehearse: f.rehearse < 0 ? null : adv.advantage[f.rehearse] })),
  };
}

const f3 = (x: number) => (x >= 0 ? '+' : '') + x.toFixed(3);
const EPS = 1e-9;

/** What the advantages of this group mean, in sentences a student can read beside the table. */
export function explainGroup(g: Pick<GroupView, 'taskId' | 'rows' | 'k'>, baseline: Baseline): string[] {
  const rewards = g.rows.map((r) => r.reward);
  const n = rewards.length;
  if (n === 0) return [];
  const lo = Math.min(...rewards);
  const hi = Math.max(...rewards);
  if (hi - lo <= EPS) {
    return [
      `All ${n} rollouts scored ${lo.toFixed(2)}, so every baseline is ${lo.toFixed(2)} and every advantage is 0: this prompt teaches nothing this step.`,
      'GRPO learns only from differences between rollouts of the same prompt. What would change it: a rollout that does better or worse than the others — more rollouts (K), a higher temperature, another seed, or a task the policy sometimes solves.',
    ];
  }
  const best = g.rows.filter((r) => r.reward >= hi - EPS).map((r) => r.rollout + 1);
  const worst = g.rows.filter((r) => r.reward <= lo + EPS).map((r) => r.rollout + 1);
  const out = [
    `Rewards range from ${lo.toFixed(2)} to ${hi.toFixed(2)}. Rows of rollouts above their group's baseline get a positive advantage (the update makes their tokens more likely: rollout ${best.join(', ')}), rows below it a negative one (less likely: rollout ${worst.join(', ')}).`,
  ];
  const rw = groupAdvantages(g, 'role-wise', baseline);
  const po = groupAdvantages(g, 'pooled', baseline);
  const mu = (a: GroupAdvantages, role: string) => a.baselines.find((b) => b.role === role)?.value;
  const differ = g.rows.some((r, i) => {
    const p = po.perRollout[i];
    const w = rw.perRollout[i];
    return (w.act !== null && p.act !== null && Math.abs(w.act - p.act) > EPS) || (w.rehearse !== null && p.rehearse !== null && Math.abs(w.rehearse - p.rehearse) > EPS);
  });
  const muA = mu(rw, 'act');
  const muR = mu(rw, 'rehearse');
  const muP = mu(po, 'all');
  if (differ && muA !== undefined && muR !== undefined && muP !== undefined) {
    // The rollout whose Act advantage moves most between the two groupings.
    let i = 0;
    let d = -1;
    g.rows.forEach((_, j) => {
      const x = Math.abs((rw.perRollout[j].act ?? 0) - (po.perRollout[j].act ?? 0)) + Math.abs((rw.perRollout[j].rehearse ?? 0) - (po.perRollout[j].rehearse ?? 0));
      if (x > d) [i, d] = [j, x];
    });
    const r = g.rows[i];
    out.push(
      `Role-wise and pooled differ here because the rollouts wrote different numbers of Act and Rehearse rows (${g.rows.map((x) => `#${x.rollout + 1}: ${x.actRows} Act / ${x.rehearseRows} Rehearse`).join(', ')})` +
        (baseline !== 'rollout-mean' ? ' and a row-weighted baseline counts every row' : ', and a rollout without Rehearse rows is absent from the Rehearse group') +
        `: role-wise, μ(x, act) = ${muA.toFixed(3)} and μ(x, rehearse) = ${muR.toFixed(3)}; pooled, one μ(x) = ${muP.toFixed(3)}. ` +
        `So rollout ${r.rollout + 1}'s Act rows get ${f3(rw.perRollout[i].act ?? 0)} role-wise but ${f3(po.perRollout[i].act ?? 0)} pooled` +
        (r.rehearseRows > 0 ? `, its Rehearse rows ${f3(rw.perRollout[i].rehearse ?? 0)} vs ${f3(po.perRollout[i].rehearse ?? 0)}.` : '.'),
    );
  } else
    out.push(
      baseline === 'rollout-mean'
        ? 'Role-wise and pooled give the same numbers here: with rollout-mean baselines every rollout counts once in each group, and every rollout has rows of each role.'
        : 'Role-wise and pooled give the same numbers here: every rollout wrote Act and Rehearse rows in the same proportion, so both roles’ baselines equal the pooled one.',
    );
  return out;
}

/**
 * A worked example (hand-made, labelled so on the page) of a group where role-wise and pooled differ: the
 * successful rollout was short (2 calls), the failed ones long, so rows — not rollouts — decide a
 * row-weighted baseline, and the roles' row counts differ.
 */
export const WORKED_EXAMPLE: Pick<GroupView, 'taskId' | 'rows' | 'k'> = {
  taskId: 'worked-example',
  k: 3,
  rows: ([
    [1, 3, 2],
    [0, 6, 5],
    [0.5, 4, 1],
  ] as const).map(([reward, actRows, rehearseRows], rollout): GroupRow => ({
    rollout, reward, actRows, rehearseRows, passed: [], failed: [], endReason: 'worked example', turns: actRows,
  })),
};
