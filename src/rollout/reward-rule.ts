// How a finished rollout is scored: the rules a run can train on, and the one each mode uses by default.
import { EMPTY_RESPONSE_REWARD, judge } from '../env/judge';
import { realReward } from '../env/reward';
import { rehearses, type RolloutMode } from '../method/modes';
import type { Episode } from './episode';
import type { RolloutDomain } from './rollout';

/**
 * How a finished rollout is scored. `verifier`: τ²-bench's DB × COMMUNICATE on the rollout's calls replayed
 * against a fresh real database, 0 or 1. `checklist`: the rule-based judge (src/env/judge.ts), partial credit
 * in [0, 1] per satisfied item. `strict-checklist`: the same judge, all or nothing (1 only when every item is
 * satisfied): no credit for stopping short of a write, as the verifier, without touching the real database.
 * A real-mode run defaults to the verifier, a rehearsing run to the checklist (it must not touch the real
 * database); any can be chosen for any mode, so the judge's effect can be told apart from the rehearsal's. All
 * give an empty response −0.1 and a cut or invalid episode 0.
 */
export const REWARD_RULES = ['verifier', 'checklist', 'strict-checklist'] as const;
export type RewardRule = (typeof REWARD_RULES)[number];

/** The rule a mode uses when none is chosen. */
export const defaultRewardRule = (mode: RolloutMode): RewardRule => (rehearses(mode) ? 'checklist' : 'verifier');

/** The reward of a finished episode under `rule` (default: the mode's, defaultRewardRule). */
export function rewardBy(rule: RewardRule | undefined, ep: Episode, domain: RolloutDomain): number {
  if (ep.end === 'empty') return EMPTY_RESPONSE_REWARD;
  if (ep.end === 'rehearse-invalid' || ep.terminated) return 0;
  if ((rule ?? defaultRewardRule(ep.mode)) === 'verifier') return realReward(() => domain.createEnv(), ep.task, ep.steps).reward;
  const env = ep.env;
  const r = judge(ep.task.checklist, ep.steps, { isWrite: (n) => env.isWrite(n), normaliseArgs: domain.normaliseArgs?.bind(domain) }).reward;
  return rule === 'strict-checklist' ? (r === 1 ? 1 : 0) : r;
}

/** The lab's reward: the mode's own rule. */
export const defaultReward = (ep: Episode, domain: RolloutDomain): number => rewardBy(undefined, ep, domain);
