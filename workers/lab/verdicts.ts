// Why each checklist item passed or failed, in words. The reasons are the judge's own (src/env/judge.ts
// ItemVerdict.reason); this file only numbers them by the stepper's turns and adds what the judge cannot see
// from the steps: calls whose rehearsal never came back, and episodes that ended early.
import type { Step, ToolCall } from '../../src/env/domain';
import type { ItemVerdict } from '../../src/env/judge';
import type { TurnRecord } from '../../src/rollout/episode';

export interface VerdictContext {
  /** The episode's steps (what the judge scored). */
  steps: readonly Step[];
  /** The 0-based Act turn of each step (Episode.stepTurns). */
  stepTurns: readonly number[];
  /** The episode's turns, with every call and its observation (null: never answered). */
  log: readonly TurnRecord[];
  /** 'rehearsed' in rehearse mode (the policy wrote the observations), 'real' in real mode. */
  observations: 'rehearsed' | 'real' | 'expert-written';
  /** The true end in words, when the episode did not end with a reply. */
  endedEarly: string | null;
  isWrite(name: string): boolean;
}

/** Turn (1-based, as the stepper shows it) of each call in the log, answered or not. */
function callTurns(log: readonly TurnRecord[]): { turn: number; call: ToolCall; obs: TurnRecord['calls'][number]['obs'] }[] {
  return log.flatMap((t) => t.calls.map((c) => ({ turn: t.turn + 1, call: c.call, obs: c.obs })));
}

/**
 * The judge's own reason, numbered by the turn the stepper shows, plus what only the episode knows: a
 * call that never got its observation, or an episode that ended before the item could be met.
 */
export function verdictReason(v: ItemVerdict, cx: VerdictContext): string {
  const at = v.turn !== null && cx.stepTurns[v.turn] !== undefined ? `turn ${cx.stepTurns[v.turn] + 1}: ` : '';
  if (v.satisfied || v.item.kind === 'no_forbidden_writes') return at + v.reason;
  if (v.item.kind === 'call') {
    const name = v.item.name;
    const unanswered = callTurns(cx.log).find((c) => c.call.name === name && c.obs === null);
    if (unanswered) return `turn ${unanswered.turn}: the call was made, but it never got an observation: ${cx.endedEarly ?? 'the episode ended first'}`;
  }
  return cx.endedEarly ? `${at}${v.reason}; the episode ended first (${cx.endedEarly})` : at + v.reason;
}

/**
 * Reasons for the real environment's two checks (τ²-bench's DB × communicate reward). When the database
 * differs, the judge's verdicts on the same steps say which write: the one whose arguments differ, the one
 * never made, or the one the task does not ask for.
 */
export function realReasons(db: boolean, missing: readonly string[], facts: readonly string[], judged: readonly ItemVerdict[], cx: VerdictContext): { db: string; facts: string[] } {
  const writes = callTurns(cx.log).filter((c) => cx.isWrite(c.call.name) && c.obs?.ok);
  const done = writes.length ? `writes that ran: ${writes.map((w) => `${w.call.name} (turn ${w.turn})`).join(', ')}` : 'no write ran';
  const why = judged
    .filter((v) => !v.satisfied && (v.item.kind === 'no_forbidden_writes' || (v.item.kind === 'call' && cx.isWrite(v.item.name))))
    .map((v) => verdictReason(v, cx));
  return {
    db: db
      ? `replaying the episode's calls gives the same database as the reference actions (${done})`
      : `the database after the episode differs from the one after the reference actions (${done})${why.length ? `: ${why.join('; ')}` : ''}`,
    facts: facts.map((f) =>
      missing.includes(f)
        ? cx.steps.some((s) => s.kind === 'reply') ? 'no reply states it (case-insensitive, commas ignored)' : `no reply${cx.endedEarly ? `: the episode ended first (${cx.endedEarly})` : ''}`
        : 'a reply states it',
    ),
  };
}
