import { describe, expect, it } from 'vitest';
import { AdvantageError, computeAdvantages, type AdvantageRow, type Role } from '../../src/method/advantage';

// Prompt x, K = 3 rollouts with uneven row counts; prompt y, a single rollout with a single row.
//   r1: R = 1.0, 3 act rows, 2 rehearse rows
//   r2: R = 0.0, 1 act row,  0 rehearse rows
//   r3: R = 0.2, 2 act rows, 2 rehearse rows
//   y/r1: R = 0.3, 1 act row (a group of one)
function rowsOf(): AdvantageRow[] {
  const out: AdvantageRow[] = [];
  const add = (promptId: string, rolloutId: string, role: Role, reward: number, n: number) => {
    for (let i = 0; i < n; i++) out.push({ promptId, rolloutId, role, reward });
  };
  add('x', 'r1', 'act', 1, 3);
  add('x', 'r1', 'rehearse', 1, 2);
  add('x', 'r2', 'act', 0, 1);
  add('x', 'r3', 'act', 0.2, 2);
  add('x', 'r3', 'rehearse', 0.2, 2);
  add('y', 'r1', 'act', 0.3, 1); // same rollout id as x/r1: must not merge with it
  return out;
}

/** Advantage of the first row matching (prompt, rollout, role). */
function adv(a: ReturnType<typeof computeAdvantages>, rows: AdvantageRow[], p: string, r: string, role: Role) {
  return a.advantage[rows.findIndex((x) => x.promptId === p && x.rolloutId === r && x.role === role)];
}

describe('Role-Wise GRPO advantages', () => {
  const rows = rowsOf();

  it('role-wise, row-weighted (the reference code)', () => {
    const a = computeAdvantages(rows, 'role-wise', 'row-weighted');
    // act x: (1+1+1+0+0.2+0.2)/6 = 3.4/6; rehearse x: (1+1+0.2+0.2)/4 = 0.6
    const muAct = 3.4 / 6;
    expect(adv(a, rows, 'x', 'r1', 'act')).toBeCloseTo(1 - muAct, 12);
    expect(adv(a, rows, 'x', 'r2', 'act')).toBeCloseTo(0 - muAct, 12);
    expect(adv(a, rows, 'x', 'r3', 'act')).toBeCloseTo(0.2 - muAct, 12);
    expect(adv(a, rows, 'x', 'r1', 'rehearse')).toBeCloseTo(0.4, 12);
    expect(adv(a, rows, 'x', 'r3', 'rehearse')).toBeCloseTo(-0.4, 12);
    // A group of one has advantage 0 (nothing to compare with).
    expect(adv(a, rows, 'y', 'r1', 'act')).toBe(0);
    expect(a.advantage.every((v) => v !== null)).toBe(true);
    expect(a.groups).toEqual([
      { promptId: 'x', role: 'act', rows: 6, rollouts: 3, baseline: expect.closeTo(muAct, 12) },
      { promptId: 'x', role: 'rehearse', rows: 4, rollouts: 2, baseline: expect.closeTo(0.6, 12) },
      { promptId: 'y', role: 'act', rows: 1, rollouts: 1, baseline: 0.3 },
    ]);
  });

  it('role-wise, rollout-mean: each rollout counts once', () => {
    const a = computeAdvantages(rows, 'role-wise', 'rollout-mean');
    // act x: (1 + 0 + 0.2)/3 = 0.4 (row-weighted gave 0.5667: r1's three rows pulled it up)
    expect(adv(a, rows, 'x', 'r1', 'act')).toBeCloseTo(0.6, 12);
    expect(adv(a, rows, 'x', 'r2', 'act')).toBeCloseTo(-0.4, 12);
    expect(adv(a, rows, 'x', 'r3', 'act')).toBeCloseTo(-0.2, 12);
    // rehearse x: r2 has no rehearse rows, so only r1 and r3 form the group: (1 + 0.2)/2 = 0.6
    expect(adv(a, rows, 'x', 'r1', 'rehearse')).toBeCloseTo(0.4, 12);
    expect(adv(a, rows, 'x', 'r3', 'rehearse')).toBeCloseTo(-0.4, 12);
    expect(adv(a, rows, 'y', 'r1', 'act')).toBe(0);
  });

  it('pooled (ablation): both roles of a prompt in one group', () => {
    const rw = computeAdvantages(rows, 'pooled', 'row-weighted');
    // x: 5 rows of 1, 1 row of 0, 4 rows of 0.2 -> 5.8/10
    expect(adv(rw, rows, 'x', 'r1', 'rehearse')).toBeCloseTo(1 - 0.58, 12);
    expect(adv(rw, rows, 'x', 'r1', 'act')).toBeCloseTo(1 - 0.58, 12);
    expect(adv(rw, rows, 'x', 'r2', 'act')).toBeCloseTo(-0.58, 12);
    expect(rw.groups.map((g) => [g.promptId, g.role, g.rows, g.rollouts])).toEqual([
      ['x', 'all', 10, 3],
      ['y', 'all', 1, 1],
    ]);
    const rm = computeAdvantages(rows, 'pooled', 'rollout-mean');
    expect(adv(rm, rows, 'x', 'r3', 'rehearse')).toBeCloseTo(0.2 - 0.4, 12);
  });

  it('standard GRPO: Act rows only, Rehearse rows carry no loss', () => {
    const a = computeAdvantages(rows, 'standard', 'row-weighted');
    rows.forEach((r, i) => {
      if (r.role === 'rehearse') expect(a.advantage[i]).toBeNull();
      else expect(a.advantage[i]).not.toBeNull();
    });
    expect(adv(a, rows, 'x', 'r2', 'act')).toBeCloseTo(-3.4 / 6, 12);
    expect(a.groups.every((g) => g.role === 'act')).toBe(true);
  });

  it('rollout-mean averages a rollout whose rows carry different rewards (e.g. an empty-response penalty)', () => {
    const r: AdvantageRow[] = [
      { promptId: 'p', rolloutId: 'a', role: 'act', reward: 1 },
      { promptId: 'p', rolloutId: 'a', role: 'act', reward: -0.1 },
      { promptId: 'p', rolloutId: 'b', role: 'act', reward: 0 },
    ];
    // rollout a: 0.45, rollout b: 0 -> mu 0.225
    const a = computeAdvantages(r, 'role-wise', 'rollout-mean');
    expect(a.advantage.map((v) => Number(v!.toFixed(12)))).toEqual([0.775, -0.325, -0.225]);
  });

  it('sums to zero within a row-weighted group and rejects bad input', () => {
    const a = computeAdvantages(rows, 'role-wise', 'row-weighted');
    const actX = rows.map((r, i) => (r.promptId === 'x' && r.role === 'act' ? a.advantage[i]! : 0)).reduce((s, v) => s + v, 0);
    expect(actX).toBeCloseTo(0, 12);
    expect(computeAdvantages([]).advantage).toEqual([]);
    expect(() => computeAdvantages([{ promptId: 'p', rolloutId: 'a', role: 'act', reward: NaN }])).toThrow(AdvantageError);
    expect(() => computeAdvantages([{ promptId: 'p', rolloutId: 'a', role: 'judge' as Role, reward: 0 }])).toThrow(AdvantageError);
    expect(() => computeAdvantages(rows, 'grouped' as never)).toThrow(AdvantageError);
    expect(() => computeAdvantages(rows, 'role-wise', 'median' as never)).toThrow(AdvantageError);
  });
});
