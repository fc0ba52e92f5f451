// The checklist judge for imagined (rehearsed) trajectories: rule-based and deterministic, so it can score
// rollouts whose observations were written by the policy itself, where the real database is never touched.
//
// Rules (EnvACE's checklist, made precise):
//  J1 Empty response. If the trajectory is empty, or any reply turn is empty (whitespace only), the
//     reward is -0.1, whatever else happened: an empty generation is the failure mode GRPO must push down.
//  J2 Turns. Each step is a turn: a call with its observation, or a reply. A call turn whose observation
//     is an error is zeroed: it satisfies no item and violates none (the call had no effect, real or
//     imagined). Trying, failing and fixing is therefore not punished by itself, but a required call that
//     only ever errored earns nothing.
//  J3 Required call (kind 'call'): satisfied when some non-zeroed call turn has the item's tool name and
//     arguments that include every argument of the item with an equal value (canonical JSON equality after
//     the domain's normaliseArgs, e.g. unordered id lists). Extra arguments are not checked here (the schema
//     already rejects unknown ones).
//  J4 Forbidden writes (kind 'no_forbidden_writes'): satisfied when no non-zeroed call turn is a write tool
//     call that matches no required-call item. Any write the task does not ask for is forbidden, so a wrong
//     order id, a wrong item or an extra write all break it.
//  J5 Fact (kind 'fact'): satisfied when some reply contains the text, case-insensitively, after removing
//     commas from the reply (τ²-bench's communicate rule).
//  J6 Reward = Σ weight·satisfied / Σ weight over the task's items, in [0, 1]; a task without items scores 1
//     unless J1 applies. The result lists each item with the turn that satisfied (or broke) it, so the lab can
//     show why a rollout scored what it did.

import type { ChecklistItem, Step } from './domain';
import { canonicalJson } from './json';
import { factStated } from './reward';

export interface JudgeOptions {
  isWrite(name: string): boolean;
  normaliseArgs?(name: string, args: Record<string, unknown>): Record<string, unknown>;
}

export interface ItemVerdict {
  item: ChecklistItem;
  satisfied: boolean;
  /** The turn that satisfied a call/fact item, or the first turn that broke no_forbidden_writes. */
  turn: number | null;
}

export interface JudgeResult {
  reward: number;
  items: ItemVerdict[];
  zeroedTurns: number[];
  empty: boolean;
}

export const EMPTY_RESPONSE_REWARD = -0.1;

function argsInclude(
  have: Record<string, unknown>,
  want: Record<string, unknown>,
): boolean {
  for (const k of Object.keys(want)) {
    if (!Object.hasOwn(have, k)) return false;
    if (canonicalJson(have[k]) !== canonicalJson(want[k])) return false;
  }
  return true;
}

export function judge(checklist: readonly ChecklistItem[], steps: readonly Step[], opts: JudgeOptions): JudgeResult {
  const norm = (name: string, a: Record<string, unknown>) => (opts.normaliseArgs ? opts.normaliseArgs(name, a) : a);
  const zeroedTurns: number[] = [];
  steps.forEach((s, i) => {
    if (s.kind === 'call' && !s.observation.ok) zeroedTurns.push(i);
  });
  const empty = steps.length === 0 || steps.some((s) => s.kind === 'reply' && s.text.trim() === '');
  const live = steps
    .map((s, i) => ({ s, i }))
    .filter(({ s }) => s.kind === 'call' && s.observation.ok) as { s: Extract<Step, { kind: 'call' }>; i: number }[];
  const callItems = checklist.filter((c): c is Extract<ChecklistItem, { kind: 'call' }> => c.kind === 'call');
  const matches = (c: Extract<ChecklistItem, { kind: 'call' }>, s: Extract<Step, { kind: 'call' }>) =>
    s.call.name === c.name && argsInclude(norm(s.call.name, s.call.arguments), norm(c.name, c.args));

  const items: ItemVerdict[] = checklist.map((item) => {
    switch (item.kind) {
      case 'call': {
        const hit = live.find(({ s }) => matches(item, s));
        return { item, satisfied: hit !== undefined, turn: hit?.i ?? null };
      }
      case 'no_forbidden_writes': {
        const bad = live.find(({ s }) => opts.isWrite(s.call.name) && !callItems.some((c) => matches(c, s)));
        return { item, satisfied: bad === undefined, turn: bad?.i ?? null };
      }
      case 'fact': {
        const i = steps.findIndex((s) => s.kind === 'reply' && factStated(item.text, [s.text]));
        return { item, satisfied: i >= 0, turn: i >= 0 ? i : null };
      }
    }
  });
  const total = items.reduce((a, v) => a + v.item.weight, 0);
  const got = items.reduce((a, v) => a + (v.satisfied ? v.item.weight : 0), 0);
  const reward = empty ? EMPTY_RESPONSE_REWARD : total > 0 ? got / total : 1;
  return { reward, items, zeroedTurns, empty };
}
