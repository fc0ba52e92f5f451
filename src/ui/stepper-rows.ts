// The stepper's rows in the order things were said: in a conversation the agent's fixed greeting, then each user
// turn before the Act turn that answered it, the Act turns (with their calls and observations) between, and the
// user's stop last; a one-message episode is its Act turns alone.
import type { RolloutView, TurnView, UserTurnView } from '../worker-protocol';

export type StepperRow =
  | { kind: 'greeting'; text: string }
  | { kind: 'user'; turn: UserTurnView }
  | { kind: 'act'; turn: TurnView }
  | { kind: 'stop'; token: string };

export function stepperRows(r: Pick<RolloutView, 'turns' | 'conversation'>): StepperRow[] {
  const c = r.conversation;
  if (!c) return r.turns.map((turn) => ({ kind: 'act', turn }));
  const users = [...c.userTurns].sort((a, b) => a.before - b.before);
  const out: StepperRow[] = [{ kind: 'greeting', text: c.greeting }];
  let u = 0;
  for (const turn of r.turns) {
    while (u < users.length && users[u].before <= turn.index) out.push({ kind: 'user', turn: users[u++] });
    out.push({ kind: 'act', turn });
  }
  while (u < users.length) out.push({ kind: 'user', turn: users[u++] });
  if (c.stop !== null) out.push({ kind: 'stop', token: c.stop });
  return out;
}

/** A user's stop token in words (τ²'s three: the user is done, hands over to a person, or steps out of scope). */
export function stopText(token: string): string {
  const words: Record<string, string> = {
    '###STOP###': 'the user ends the call',
    '###TRANSFER###': 'the user ends the call: transferred to a human agent',
    '###OUT-OF-SCOPE###': 'the user ends the call: the request is out of scope',
  };
  return words[token] ?? `the user ends the call (${token})`;
}
