// Why each checklist item passed or failed, in words: which call (turn and arguments), which observation
// (real, or rehearsed by the policy / written by the expert), and which of the judge's rules decided it
// (src/env/judge.ts J2–J5). The verdicts themselves are the judge's; this only explains them, from the same
// steps plus the episode's turn log (which also holds calls whose rehearsal never came back).
import type { ChecklistItem, Step, ToolCall } from '../../src/env/domain';
import type { ItemVerdict } from '../../src/env/judge';
import { canonicalJson } from '../../src/env/json';
import type { TurnRecord } from '../../src/rollout/episode';

export interface VerdictContext {
  /** The episode's steps (what the judge scored). */
  steps: readonly Step[];
  /** The episode's turns, with every call and its observation (null: never answered). */
  log: readonly TurnRecord[];
  /** 'rehearsed' in rehearse mode (the policy wrote the observations), 'real' in real mode. */
  observations: 'rehearsed' | 'real' | 'expert-written';
  /** The true end in words, when the episode did not end with a reply. */
  endedEarly: string | null;
  isWrite(name: string): boolean;
  normaliseArgs?(name: string, args: Record<string, unknown>): Record<string, unknown>;
}

const args = (a: Record<string, unknown>) => canonicalJson(a);
const clip = (s: string, n = 120) => (s.length > n ? `${s.slice(0, n)}…` : s);

/** Turn (1-based, as the stepper shows it) of each call step, in step order. */
function callTurns(log: readonly TurnRecord[]): { turn: number; call: ToolCall; obs: TurnRecord['calls'][number]['obs'] }[] {
  return log.flatMap((t) => t.calls.map((c) => ({ turn: t.turn + 1, call: c.call, obs: c.obs })));
}

export function verdictReason(v: ItemVerdict, all: readonly ChecklistItem[], cx: VerdictContext): string {
  const norm = (name: string, a: Record<string, unknown>) => (cx.normaliseArgs ? cx.normaliseArgs(name, a) : a);
  const calls = callTurns(cx.log);
  const obsWord = cx.observations;
  const it = v.item;
  switch (it.kind) {
    case 'call': {
      const want = norm(it.name, it.args);
      const same = (c: ToolCall) => c.name === it.name && Object.keys(want).every((k) => Object.hasOwn(norm(c.name, c.arguments), k) && canonicalJson(norm(c.name, c.arguments)[k]) === canonicalJson(want[k]));
      if (v.satisfied) {
        const hit = calls.find((c) => same(c.call) && c.obs?.ok);
        return `turn ${hit?.turn ?? '?'}: ${it.name} called with these arguments and its ${obsWord} observation is a result, not an error (rule: a required call counts when it ran without error)`;
      }
      const exact = calls.filter((c) => same(c.call));
      const errored = exact.find((c) => c.obs && !c.obs.ok);
      if (errored && errored.obs && !errored.obs.ok)
        return `turn ${errored.turn}: the call was made, but its ${obsWord} observation is an error ("${clip(errored.obs.error)}"); a failed call satisfies nothing (rule J2)`;
      const unanswered = exact.find((c) => c.obs === null);
      if (unanswered) return `turn ${unanswered.turn}: the call was made, but it never got an observation: ${cx.endedEarly ?? 'the episode ended first'}`;
      const named = calls.filter((c) => c.call.name === it.name);
      if (named.length) {
        const c = named[0];
        const have = norm(c.call.name, c.call.arguments);
        const diff = Object.keys(want).filter((k) => !Object.hasOwn(have, k) || canonicalJson(have[k]) !== canonicalJson(want[k]));
        return `turn ${c.turn}: ${it.name} was called with ${clip(args(c.call.arguments))}, but the task needs ${clip(args(it.args))} (differs in ${diff.join(', ')}) (rule J3: the arguments must include the required ones)`;
      }
      return cx.endedEarly ? `never called: the episode ended first (${cx.endedEarly})` : `never called: no turn called ${it.name}`;
    }
    case 'no_forbidden_writes': {
      const callItems = all.filter((c): c is Extract<ChecklistItem, { kind: 'call' }> => c.kind === 'call');
      const writes = calls.filter((c) => cx.isWrite(c.call.name) && c.obs?.ok);
      if (v.satisfied)
        return writes.length
          ? `every write that ran (${writes.map((w) => w.call.name).join(', ')}) is one the task asks for (rule J4)`
          : 'no write call ran without error (rule J4: only writes the task asks for are allowed)';
      const bad = writes.find((w) => !callItems.some((c) => c.name === w.call.name && Object.keys(c.args).every((k) => canonicalJson(norm(w.call.name, w.call.arguments)[k]) === canonicalJson(norm(c.name, c.args)[k]))));
      return bad
        ? `turn ${bad.turn}: the write ${bad.call.name}(${clip(args(bad.call.arguments))}) ran, but the task does not ask for it (rule J4: any write not on the checklist is forbidden)`
        : 'a write the task does not ask for ran (rule J4)';
    }
    case 'fact': {
      const replies = cx.steps.filter((s): s is Extract<Step, { kind: 'reply' }> => s.kind === 'reply');
      if (v.satisfied) return 'a reply states it (rule J5: case-insensitive, commas ignored)';
      if (replies.length === 0) return cx.endedEarly ? `no reply: the episode ended first (${cx.endedEarly})` : 'no reply was written';
      return `the reply ("${clip(replies[replies.length - 1].text, 80)}") does not state it (rule J5: case-insensitive, commas ignored)`;
    }
  }
}

/** Reasons for the real environment's two checks (τ²-bench's DB × communicate reward). */
export function realReasons(db: boolean, missing: readonly string[], facts: readonly string[], cx: VerdictContext): { db: string; facts: string[] } {
  const writes = callTurns(cx.log).filter((c) => cx.isWrite(c.call.name) && c.obs?.ok);
  const done = writes.length ? `writes that ran: ${writes.map((w) => `${w.call.name} (turn ${w.turn})`).join(', ')}` : 'no write ran';
  return {
    db: db
      ? `replaying the episode's calls gives the same database as the reference actions (${done})`
      : `the database after the episode differs from the one after the reference actions: a write is missing, wrong or extra (${done})`,
    facts: facts.map((f) =>
      missing.includes(f)
        ? cx.steps.some((s) => s.kind === 'reply') ? 'no reply states it (case-insensitive, commas ignored)' : `no reply${cx.endedEarly ? `: the episode ended first (${cx.endedEarly})` : ''}`
        : 'a reply states it',
    ),
  };
}
