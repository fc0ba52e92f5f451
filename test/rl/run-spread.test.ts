// The per-step fraction of advantage groups with a non-zero reward spread (StepMetrics.advantage.spread,
// src/rl/run.ts): hand-built rows under role-wise, pooled and standard grouping and both baselines.
import { describe, expect, it } from 'vitest';
import { computeAdvantages, type AdvantageRow } from '../../src/method/advantage';
import { spreadFraction } from '../../src/rl/run';

const row = (promptId: string, rolloutId: string, role: 'act' | 'rehearse', reward: number): AdvantageRow => ({ promptId, rolloutId, role, reward });

// Prompt p: both rollouts 0.1 (no spread, a float mean that is not exactly 0.1). Prompt q: rewards 0 and 1 on
// Act, but its Rehearse rows only come from the rollout with reward 1 (no spread in that role's group).
const rows = [
  row('p', 'p:0', 'act', 0.1), row('p', 'p:0', 'act', 0.1), row('p', 'p:1', 'act', 0.1), row('p', 'p:1', 'rehearse', 0.1),
  row('q', 'q:0', 'act', 0), row('q', 'q:1', 'act', 1), row('q', 'q:1', 'rehearse', 1), row('q', 'q:1', 'rehearse', 1),
];

describe('spreadFraction', () => {
  it('role-wise: 1 of 4 groups (q/act) has a spread', () => {
    for (const b of ['row-weighted', 'rollout-mean'] as const) expect(spreadFraction(rows, computeAdvantages(rows, 'role-wise', b))).toBe(0.25);
  });
  it('pooled: q has a spread, p none', () => {
    expect(spreadFraction(rows, computeAdvantages(rows, 'pooled'))).toBe(0.5);
  });
  it('standard: Act groups only', () => {
    expect(spreadFraction(rows, computeAdvantages(rows, 'standard'))).toBe(0.5);
  });
  it('no rows: 0', () => {
    expect(spreadFraction([], computeAdvantages([], 'role-wise'))).toBe(0);
  });
});
