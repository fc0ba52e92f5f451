// Baselines and advantages of a group view, recomputed on the page with the trainer's own function
// (src/rl/advantage.ts), so toggling role-wise / pooled shows what the grouping changes instantly.
import { computeAdvantages, type AdvantageRow, type Baseline, type GroupMode } from '../rl/advantage';
import type { GroupView } from '../worker-protocol';

export interface GroupAdvantages {
  baselines: { role: 'act' | 'rehearse' | 'all'; value: number; rows: number }[];
  /** Per rollout: the advantage of its Act rows and of its Rehearse rows (null: it has none). */
  perRollout: { act: number | null; rehearse: number | null }[];
}

export function groupAdvantages(g: GroupView, mode: GroupMode, baseline: Baseline): GroupAdvantages {
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
