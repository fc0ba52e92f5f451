// How a finished rollout is scored under each reward rule (src/method/reward-rules.ts).
import { unconfirmedWrites } from '../env/confirmation';
import { EMPTY_RESPONSE_REWARD, judge, judgeOptions } from '../env/judge';
import { realReward } from '../env/reward';
import { defaultRewardRule, type RewardRule } from '../method/reward-rules';
import type { Episode } from './episode';
import type { RolloutDomain } from './rollout';

/** The reward of a finished episode under `rule` (default: the mode's, defaultRewardRule). */
export function rewardBy(rule: RewardRule | undefined, ep: Episode, domain: RolloutDomain): number {
  if (ep.end === 'empty') return EMPTY_RESPONSE_REWARD;
  if (ep.end === 'rehearse-invalid' || ep.terminated) return 0;
  // The confirmation rule (src/env/confirmation.ts) gates every rule alike, so no path pays for a write made
  // before the user's explicit yes to its details. Attempts count (C4): in an imagined trajectory the error
  // is the policy's own claim. Only conversations are gated: a one-message episode has nobody to ask, and its
  // reward stays what it always was.
  if (ep.conversation && (!domain.confirmation || unconfirmedWrites(ep.conversation.turns(ep.steps), domain.confirmation).length > 0)) return 0;
  if ((rule ?? defaultRewardRule(ep.mode)) === 'verifier') return realReward(() => domain.createEnv(), ep.task, ep.steps).reward;
  const env = ep.env;
  const r = judge(ep.task.checklist, ep.steps, judgeOptions(env, domain.normaliseArgs?.bind(domain))).reward;
  return rule === 'strict-checklist' ? (r === 1 ? 1 : 0) : r;
}

/** The lab's reward: the mode's own rule. */
export const defaultReward = (ep: Episode, domain: RolloutDomain): number => rewardBy(undefined, ep, domain);
