// Success per group of held-out results (src/rollout/metrics.ts groupSuccess): only reward 1 counts as a
// success (a partial reward does not), results without a group are left out, groups come sorted by name.
import { describe, expect, it } from 'vitest';
import { groupSuccess } from '../../src/rollout/metrics';

describe('groupSuccess', () => {
  it('counts reward-1 results per group, skips results without one, sorts the groups', () => {
    const rs = [
      { reward: 1, g: 'status' },
      { reward: 0.5, g: 'status' },
      { reward: 0, g: 'cancel' },
      { reward: 1, g: 'cancel' },
      { reward: 1, g: 'cancel' },
      { reward: 1, g: null },
    ];
    const out = groupSuccess(rs, (r) => r.g);
    expect(Object.keys(out)).toEqual(['cancel', 'status']);
    expect(out.cancel.tasks).toBe(3);
    expect(out.cancel.success).toBeCloseTo(2 / 3, 12);
    expect(out.status).toEqual({ tasks: 2, success: 0.5 });
    expect(groupSuccess([], () => 'x')).toEqual({});
  });
});
