// The checklist judge for imagined (rehearsed) trajectories: rule-based and deterministic, so it can score
// rollouts whose observations were written by the policy itself, where the real database is never touched.
//
// Rules (EnvACE's checklist, made precise):
//  J1 Empty response. If the trajectory is empty, or any reply turn is empty (whitespace only), the
//     reward is -0.1, whatever else happened: an empty generation is the failure mode GRPO must push down.
//  J2 Turns. Each step is a turn: a call with its observation, or a reply. The judge never reads an
//     observation: in an imagined trajectory the policy wrote it, and a policy paid for what its rehearsal
//     says would be paid for imagining (an imagined error once hid a forbidden write). A call turn counts
//     for nothing only when the call fails a check that needs no state (malformed, unknown tool, arguments
//     against the schema: JudgeOptions.staticError), because then it can have no effect on any database.
//     Every other call counts as made, whatever its observation says.
//  J3 Required call (kind 'call'): satisfied when some counted call turn has the item's tool name and
//     arguments that include every argument of the item with an equal value (canonical JSON equality after
//     the domain's normaliseArgs, e.g. unordered id lists). Extra arguments are not checked here (the schema
//     already rejects unknown ones).
//  J4 Forbidden writes (kind 'no_forbidden_writes'): satisfied when no counted call turn is a write tool
//     call that matches no required-call item. Any write the task does not ask for is forbidden, so a wrong
//     order id, a wrong item or an extra write all break it, whether its observation says it succeeded or
//     failed (stricter than the verifier, which replays it: a write the database would refuse is harmless
//     there, but the judge cannot know the database).
//  J5 Fact (kind 'fact'): satisfied when some reply contains the text, case-insensitively, after removing
//     commas from the reply (τ²-bench's communicate rule).
//  J6 Reward = Σ weight·satisfied / Σ weight over the task's items, in [0, 1]; a task without items scores 1
//     unless J1 applies. The result lists each item with the turn that satisfied (or broke) it, so the lab can
//     show why a rollout scored what it did.

import type { ChecklistItem, Observation, Step, ToolCall } from './domain';
import { canonicalJson } from './json';
import { factStated } from './reward';

export interface JudgeOptions {
  isWrite(name: string): boolean;
  normaliseArgs?(name: string, args: Record<string, unknown>): Record<string, unknown>;
  /** The state-free checks of a call (Environment.staticError); absent: only a nameless (malformed) call fails. */
  staticError?(call: ToolCall): Observation | null;
}

/** The judge's options for a domain's environment: its write tools, argument normaliser and static checks. */
export function judgeOptions(
  env: { isWrite(name: string): boolean; staticError(call: unknown): Observation | null },
  normaliseArgs?: JudgeOptions['normaliseArgs'],
): JudgeOptions {
  return { isWrite: (n) => env.isWrite(n), normaliseArgs, staticError: (c) => env.staticError(c) };
}

export interface ItemVerdict {
  item: ChecklistItem;
  satisfied: boolean;
  /** The step that satisfied a call/fact item, or the first step that broke no_forbidden_writes. */
  turn: number | null;
  /** Why, in words, naming the rule (the lab shows this text as it is). */
  reason: string;
}

export interface JudgeResult {
  reward: number;
  items: ItemVerdict[];
  /** Call turns that count for nothing: the call fails a state-free check (J2). */
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

const clip = (s: string, n = 120) => (s.length > n ? `${s.slice(0, n)}…` : s);

/** Why a required call is not satisfied: the closest call the trajectory made, or none. */
function missedCall(
  item: Extract<ChecklistItem, { kind: 'call' }>,
  live: readonly { s: Extract<Step, { kind: 'call' }>; i: number }[],
  steps: readonly Step[],
  norm: (name: string, a: Record<string, unknown>) => Record<string, unknown>,
  opts: JudgeOptions,
): string {
  const named = live.find(({ s }) => s.call.name === item.name);
  if (named) {
    const want = norm(item.name, item.args);
    const have = norm(named.s.call.name, named.s.call.arguments);
    const diff = Object.keys(want).filter((k) => !Object.hasOwn(have, k) || canonicalJson(have[k]) !== canonicalJson(want[k]));
    return `${item.name} was called with ${clip(canonicalJson(named.s.call.arguments))}, but the task needs ${clip(canonicalJson(item.args))} (differs in ${diff.join(', ')}) (rule J3)`;
  }
  const noOp = steps.find((s): s is Extract<Step, { kind: 'call' }> => s.kind === 'call' && s.call.name === item.name);
  if (noOp) {
    const err = opts.staticError?.(noOp.call);
    return `${item.name} was called, but the call fails a check that needs no state${err && !err.ok ? ` ("${clip(err.error)}")` : ''}, so it counts for nothing (rule J2)`;
  }
  return `no call to ${item.name} (rule J3)`;
}

export function judge(checklist: readonly ChecklistItem[], steps: readonly Step[], opts: JudgeOptions): JudgeResult {
  const norm = (name: string, a: Record<string, unknown>) => (opts.normaliseArgs ? opts.normaliseArgs(name, a) : a);
  const noOp = (c: ToolCall) => c.name === '' || (opts.staticError?.(c) ?? null) !== null;
  // One pass: each call is checked once, and is either zeroed or live.
  const zeroedTurns: number[] = [];
  const live: { s: Extract<Step, { kind: 'call' }>; i: number }[] = [];
  steps.forEach((s, i) => {
    if (s.kind !== 'call') return;
    if (noOp(s.call)) zeroedTurns.push(i);
    else live.push({ s, i });
  });
  const empty = steps.length === 0 || steps.some((s) => s.kind === 'reply' && s.text.trim() === '');
  const callItems = checklist.filter((c): c is Extract<ChecklistItem, { kind: 'call' }> => c.kind === 'call');
  const matches = (c: Extract<ChecklistItem, { kind: 'call' }>, s: Extract<Step, { kind: 'call' }>) =>
    s.call.name === c.name && argsInclude(norm(s.call.name, s.call.arguments), norm(c.name, c.args));

  const show = (c: ToolCall) => `${c.name}(${clip(canonicalJson(c.arguments))})`;
  const items: ItemVerdict[] = checklist.map((item) => {
    switch (item.kind) {
      case 'call': {
        const hit = live.find(({ s }) => matches(item, s));
        if (hit) return { item, satisfied: true, turn: hit.i, reason: `${item.name} was called with the required arguments (rule J3; the judge does not read its observation, rule J2)` };
        return { item, satisfied: false, turn: null, reason: missedCall(item, live, steps, norm, opts) };
      }
      case 'no_forbidden_writes': {
        const writes = live.filter(({ s }) => opts.isWrite(s.call.name));
        const bad = writes.find(({ s }) => !callItems.some((c) => matches(c, s)));
        if (bad) return { item, satisfied: false, turn: bad.i, reason: `the write ${show(bad.s.call)} is not one the task asks for; it counts whatever its observation says (rule J4)` };
        const reason = writes.length
          ? `every write made (${writes.map(({ s }) => s.call.name).join(', ')}) is one the task asks for (rule J4)`
          : 'no write was made (rule J4: only writes the task asks for are allowed)';
        return { item, satisfied: true, turn: null, reason };
      }
      case 'fact': {
        const i = steps.findIndex((s) => s.kind === 'reply' && factStated(item.text, [s.text]));
        if (i >= 0) return { item, satisfied: true, turn: i, reason: 'a reply states it (rule J5: case-insensitive, commas ignored)' };
        const replies = steps.filter((s): s is Extract<Step, { kind: 'reply' }> => s.kind === 'reply');
        const reason = replies.length
          ? `the reply ("${clip(replies[replies.length - 1].text, 80)}") does not state it (rule J5: case-insensitive, commas ignored)`
          : 'no reply was written (rule J5)';
        return { item, satisfied: false, turn: null, reason };
      }
    }
  });
  const total = items.reduce((a, v) => a + v.item.weight, 0);
  const got = items.reduce((a, v) => a + (v.satisfied ? v.item.weight : 0), 0);
  const reward = empty ? EMPTY_RESPONSE_REWARD : total > 0 ? got / total : 1;
  return { reward, items, zeroedTurns, empty };
}
