// The user's side of a conversation episode as the stepper shows it: each user turn placed before the Act turn
// that answered it, whether it is an explicit yes, how the user ended the call, and the writes the confirmation
// rule finds without a yes. Read from the rollout's own Conversation (src/rollout/conversation.ts): nothing is
// decided here that the reward does not decide the same way (src/rollout/reward-rule.ts).
import { isExplicitYes, unconfirmedWrites, type ConfirmationOptions, type UnconfirmedWrite } from '../../src/env/confirmation';
import { AGENT_GREETING } from '../../src/env/domain';
import { formatCall } from '../../src/env/toolcall';
import type { Episode } from '../../src/rollout/episode';
import type { ConversationView } from '../../src/worker-protocol';

/** The conversation of `ep` (a conversation episode) for the page. */
export function conversationView(ep: Episode, confirmation: ConfirmationOptions | undefined): ConversationView {
  const c = ep.conversation;
  if (!c) throw new Error('not a conversation episode');
  // A user turn said before step `at` precedes that step's Act turn; one said after the last step precedes the
  // next Act turn, not yet taken (the log's length).
  const userTurns = c.userTurns.map((u, i) => ({
    before: u.at < ep.steps.length ? ep.stepTurns[u.at] : ep.log.length,
    text: u.text,
    opening: i === 0,
    confirms: isExplicitYes(u.text),
  }));
  const turns = c.turns(ep.steps);
  // Without the rule the reward is 0 for any conversation (reward-rule.ts): every write is then unconfirmed.
  const found: UnconfirmedWrite[] = confirmation ? unconfirmedWrites(turns, confirmation) : [];
  // The rule numbers a call by its place in the whole conversation; the page numbers Act turns.
  const stepAt = turnToStep(turns);
  const unconfirmed = found.map((w) => ({ turn: ep.stepTurns[stepAt[w.turn]], call: formatCall(w.call), why: whyText(w) }));
  return { user: 'scripted', greeting: AGENT_GREETING, userTurns, stop: c.stop, unconfirmed };
}

/** For each index of a conversation's turns (greeting first), the index of that turn among the agent's steps. */
function turnToStep(turns: readonly { kind: string }[]): number[] {
  let s = -1;
  // turns[0] is the greeting, which is no step of the agent's.
  return turns.map((t, i) => (i > 0 && t.kind !== 'user' ? ++s : s));
}

function whyText(w: UnconfirmedWrite): string {
  const made = w.ok ? 'made' : 'attempted (it failed, and still counts)';
  return w.why === 'no-yes'
    ? `${w.call.name} was ${made} without the user's explicit yes just before it`
    : `${w.call.name} was ${made} after a yes to a proposal that did not state ${w.missing.join(', ')}`;
}
