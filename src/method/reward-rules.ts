// The reward rules a run can train on, and the one each mode uses by default. Names only (no scoring: that is
// src/rollout/reward-rule.ts), so the lab's settings and the worker protocol can share them.
import { rehearses, type RolloutMode } from './modes';

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
