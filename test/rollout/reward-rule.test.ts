// The reward rules on the same real trajectories of the mini world (src/rollout/reward-rule.ts): the
// verifier gives 1 only when the database and every fact are right; the checklist judge gives partial credit, and
// rewards stopping short of a write above writing it wrong; the strict checklist is the judge all or nothing.
// Each mode's default rule, and the option's path into a run's configuration (recorded only when it differs
// from the mode's rule).
import { describe, expect, it } from 'vitest';
import type { Task, ToolCall } from '../../src/env/domain';
import { loadWorldDomain } from '../../src/env/retail/node';
import { formatCall } from '../../src/env/toolcall';
import { grpoRunConfig, TrainOptionsError } from '../../src/rl/grpo-config';
import { Episode } from '../../src/rollout/episode';
import { defaultRewardRule } from '../../src/method/reward-rules';
import { defaultReward, rewardBy } from '../../src/rollout/reward-rule';

const domain = await loadWorldDomain('mini');
const cancel = domain.tasks.generate({ split: 'train', count: 200, seed: 1 }).find((t) => t.family === 'cancel')!;

/** A real-mode episode of `task`: each call answered by the real environment, then one reply. */
function played(task: Task, calls: readonly ToolCall[], reply: string, mode: 'real' | 'rehearse' = 'real'): Episode {
  const ep = new Episode(task.id, `${task.id}:0`, task, mode, domain.createEnv(), [], 12);
  for (const c of calls) ep.applyAct(formatCall(c));
  ep.applyAct(reply);
  return ep;
}

const lookups = (t: Task) => t.referenceActions.filter((a) => !domain.createEnv().isWrite(a.name));
const writeOf = (t: Task) => t.referenceActions.find((a) => domain.createEnv().isWrite(a.name))!;

describe('reward rules', () => {
  it('the expert trajectory scores 1 under both; lookups alone score 0 under the verifier and partial credit under the checklist', () => {
    expect(cancel, 'the mini world has cancellation tasks').toBeDefined();
    const full = played(cancel, cancel.referenceActions, cancel.facts.join('. ') || 'Done.');
    expect(rewardBy('verifier', full, domain)).toBe(1);
    expect(rewardBy('checklist', full, domain)).toBe(1);

    const timid = played(cancel, lookups(cancel), 'I cannot do that.');
    expect(rewardBy('verifier', timid, domain)).toBe(0);
    const partial = rewardBy('checklist', timid, domain);
    expect(partial).toBeGreaterThan(0);
    expect(partial).toBeLessThan(1);
  });

  it('the checklist ranks stopping short of the write above the write with a wrong argument; the verifier scores both 0', () => {
    const w = writeOf(cancel);
    const reason = w.arguments.reason === 'no longer needed' ? 'ordered by mistake' : 'no longer needed';
    const wrong = played(cancel, [...lookups(cancel), { ...w, arguments: { ...w.arguments, reason } }], cancel.facts.join('. ') || 'Done.');
    const timid = played(cancel, lookups(cancel), 'I cannot do that.');
    expect(rewardBy('verifier', wrong, domain)).toBe(0);
    expect(rewardBy('checklist', timid, domain)).toBeGreaterThan(rewardBy('checklist', wrong, domain));
    // All or nothing: neither earns anything, as under the verifier; the expert's trajectory still earns 1.
    expect(rewardBy('strict-checklist', timid, domain)).toBe(0);
    expect(rewardBy('strict-checklist', wrong, domain)).toBe(0);
    expect(rewardBy('strict-checklist', played(cancel, cancel.referenceActions, cancel.facts.join('. ')), domain)).toBe(1);
    // Rehearse mode scores by the judge unless told otherwise.
    const rehearsed = played(cancel, [], 'I cannot do that.', 'rehearse');
    expect(defaultReward(rehearsed, domain)).toBe(rewardBy('checklist', rehearsed, domain));
  });

  it("each mode's own rule is the default: verifier in the real environment, checklist when rehearsing", () => {
    expect(defaultRewardRule('real')).toBe('verifier');
    for (const m of ['rehearse', 'per-role', 'frozen-simulator'] as const) expect(defaultRewardRule(m)).toBe('checklist');
    const timid = played(cancel, lookups(cancel), 'I cannot do that.');
    expect(defaultReward(timid, domain)).toBe(rewardBy('verifier', timid, domain));
    // An empty reply is -0.1 under either rule.
    const empty = played(cancel, [], '');
    expect(rewardBy('verifier', empty, domain)).toBe(-0.1);
    expect(rewardBy('checklist', empty, domain)).toBe(-0.1);
  });

  it('a run records the rule only when it differs from the mode\'s, and refuses an unknown one', () => {
    const base = { steps: 1, seed: 0 } as const;
    expect(grpoRunConfig({ ...base, mode: 'real', reward: 'checklist' }).reward).toBe('checklist');
    expect('reward' in grpoRunConfig({ ...base, mode: 'real', reward: 'verifier' })).toBe(false);
    expect('reward' in grpoRunConfig({ ...base, mode: 'rehearse' })).toBe(false);
    expect(grpoRunConfig({ ...base, mode: 'rehearse', reward: 'verifier' }).reward).toBe('verifier');
    expect(() => grpoRunConfig({ ...base, mode: 'real', reward: 'judge' as never })).toThrow(TrainOptionsError);
  });
});
