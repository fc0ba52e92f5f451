// The group view's advantages (src/ui/advantages.ts), role-wise and pooled, against numbers worked out by
// hand, and the words it says about them.
import { describe, expect, it } from 'vitest';
import { explainGroup, groupAdvantages, WORKED_EXAMPLE } from '../../src/ui/advantages';
import type { GroupRow } from '../../src/worker-protocol';

const row = (rollout: number, reward: number, actRows: number, rehearseRows: number): GroupRow =>
  ({ rollout, reward, actRows, rehearseRows, passed: [], failed: [], endReason: '', turns: actRows });

// Rollout 1: R = 1, 1 Act row, 1 Rehearse row. Rollout 2: R = 0, 3 Act rows, 1 Rehearse row.
const g = { taskId: 't', k: 2, rows: [row(0, 1, 1, 1), row(1, 0, 3, 1)] };

describe('group view advantages', () => {
  it('role-wise, row-weighted: μ(act) = (1 + 0 + 0 + 0) / 4 = 0.25, μ(rehearse) = (1 + 0) / 2 = 0.5', () => {
    const a = groupAdvantages(g, 'role-wise', 'row-weighted');
    expect(a.baselines).toEqual([
      { role: 'act', value: 0.25, rows: 4 },
      { role: 'rehearse', value: 0.5, rows: 2 },
    ]);
    expect(a.perRollout).toEqual([
      { act: 0.75, rehearse: 0.5 },
      { act: -0.25, rehearse: -0.5 },
    ]);
  });

  it('pooled, row-weighted: one μ = (1 + 1 + 0·4) / 6 = 1/3 for both roles', () => {
    const a = groupAdvantages(g, 'pooled', 'row-weighted');
    expect(a.baselines).toHaveLength(1);
    expect(a.baselines[0].role).toBe('all');
    expect(a.baselines[0].rows).toBe(6);
    expect(a.baselines[0].value).toBeCloseTo(1 / 3, 12);
    expect(a.perRollout[0].act).toBeCloseTo(2 / 3, 12);
    expect(a.perRollout[0].rehearse).toBeCloseTo(2 / 3, 12);
    expect(a.perRollout[1].act).toBeCloseTo(-1 / 3, 12);
    expect(a.perRollout[1].rehearse).toBeCloseTo(-1 / 3, 12);
  });

  it('rollout-mean: each rollout counts once, so every group has μ = (1 + 0) / 2 and role-wise equals pooled', () => {
    for (const mode of ['role-wise', 'pooled'] as const) {
      const a = groupAdvantages(g, mode, 'rollout-mean');
      for (const b of a.baselines) expect(b.value).toBe(0.5);
      expect(a.perRollout).toEqual([
        { act: 0.5, rehearse: 0.5 },
        { act: -0.5, rehearse: -0.5 },
      ]);
    }
  });

  it('a rollout without Rehearse rows has no Rehearse advantage', () => {
    const a = groupAdvantages({ taskId: 't', rows: [row(0, 1, 2, 0), row(1, 0, 2, 2)] }, 'role-wise', 'row-weighted');
    expect(a.baselines.find((b) => b.role === 'rehearse')).toEqual({ role: 'rehearse', value: 0, rows: 2 });
    expect(a.perRollout[0]).toEqual({ act: 0.5, rehearse: null });
  });

  it('says in words when a group teaches nothing, and why role-wise differs from pooled when it does', () => {
    const flat = explainGroup({ taskId: 't', k: 4, rows: [0, 1, 2, 3].map((i) => row(i, 0, 2, 2)) }, 'row-weighted');
    expect(flat[0]).toBe('All 4 rollouts scored 0.00, so every baseline is 0.00 and every advantage is 0: this prompt teaches nothing this step.');
    const why = explainGroup(g, 'row-weighted');
    expect(why[0]).toMatch(/^Rewards range from 0\.00 to 1\.00/);
    expect(why[1]).toContain('μ(x, act) = 0.250 and μ(x, rehearse) = 0.500; pooled, one μ(x) = 0.333');
    expect(why[1]).toContain("rollout 1's Act rows get +0.750 role-wise but +0.667 pooled, its Rehearse rows +0.500 vs +0.667.");
    expect(explainGroup(g, 'rollout-mean')[1]).toMatch(/^Role-wise and pooled give the same numbers here/);
    // The shipped worked example is a group where they differ.
    expect(explainGroup(WORKED_EXAMPLE, 'row-weighted')[1]).toMatch(/^Role-wise and pooled differ here/);
  });
});
