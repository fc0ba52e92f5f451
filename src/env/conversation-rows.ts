// Training rows from a conversation (issue 47): the rows.ts rules, with user turns in the history. Act rows
// at every agent call and every agent reply but the opening greeting (τ²'s orchestrator writes that one, the
// policy never does); Rehearse rows at every call, grounded by real triples of the same conversation. A user
// turn enters the history as a 'user' message; the user's closing stop token ends the conversation and enters
// no row. rows.ts's one-message episodes are left as they are (bit-exact reproductions depend on them).
//
// User rows (userRowsFromConversation) are the third role's: at every user turn of a conversation (the
// opening, each answer, the closing stop), what the user had seen (agent replies only, roles flipped as τ²'s
// user simulator sees them: the agent's messages are 'user', its own 'assistant') and what it said. Rendered
// with the user-role prompt (src/rollout/user-prompt.ts), they teach the policy to play the scripted user.

import { AGENT_GREETING, type ChatMessage, type GroundingExample, type Row, type Turn, type UserInstructions } from './domain';
import { canonicalJson } from './json';
import { formatCall, formatObservation, serializeObservation } from './toolcall';

/**
 * `notTargets` are turn indices whose Act row is left out (a demonstrator's deliberate wrong proposal): they stay in
 * the history of the rows after them, so the policy learns to recover from them without learning to write them.
 */
export function rowsFromConversation(taskId: string, turns: readonly Turn[], maxGrounding = 3, notTargets: readonly number[] = []): Row[] {
  const rows: Row[] = [];
  const history: ChatMessage[] = [];
  const calls = turns.flatMap((s, i) => (s.kind === 'call' ? [{ s, i }] : []));
  turns.forEach((turn, t) => {
    if (turn.kind === 'user') {
      history.push({ role: 'user', content: turn.text });
      return;
    }
    const messages = history.slice();
    if (turn.kind === 'reply') {
      if (!(t === 0 && turn.text === AGENT_GREETING) && !notTargets.includes(t)) rows.push({ role: 'act', taskId, messages, target: turn.text });
      history.push({ role: 'assistant', content: turn.text });
      return;
    }
    const callText = formatCall(turn.call);
    rows.push({ role: 'act', taskId, messages, target: callText });
    const key = turn.call.name + canonicalJson(turn.call.arguments);
    const grounding: GroundingExample[] = [];
    for (const { s, i } of calls) {
      if (grounding.length >= maxGrounding) break;
      if (i === t || s.kind !== 'call' || s.call.name + canonicalJson(s.call.arguments) === key) continue;
      grounding.push({ name: s.call.name, arguments: s.call.arguments, result: serializeObservation(s.observation) });
    }
    rows.push({ role: 'rehearse', taskId, messages, call: turn.call, grounding, target: formatObservation(turn.observation) });
    history.push({ role: 'assistant', content: callText }, { role: 'tool', content: serializeObservation(turn.observation) });
  });
  return rows;
}

/**
 * A conversation as its user saw it, roles flipped: each run of agent replies between two user turns is one
 * 'user' message (joined by a newline, as the scripted user reads them), each user turn an 'assistant' one.
 * Calls and observations are not there: a user never sees them. An empty conversation is the greeting alone.
 */
export function userViewOf(conversation: readonly Turn[]): ChatMessage[] {
  const out: ChatMessage[] = [];
  let heard: string[] = [];
  const flush = () => {
    if (heard.length) out.push({ role: 'user', content: heard.join('\n') });
    heard = [];
  };
  for (const t of conversation) {
    if (t.kind === 'reply') heard.push(typeof t.text === 'string' ? t.text : '');
    else if (t.kind === 'user') {
      flush();
      out.push({ role: 'assistant', content: typeof t.text === 'string' ? t.text : '' });
    }
  }
  flush();
  if (out.length === 0) out.push({ role: 'user', content: AGENT_GREETING });
  return out;
}

/** A user-role training row: the user's view of the conversation before its turn, and the turn (a stop token included). */
export interface UserRow {
  role: 'user';
  taskId: string;
  instructions: UserInstructions;
  messages: ChatMessage[];
  target: string;
}

/** One user row per user turn of a conversation (a scripted user's, whose turns are the targets). */
export function userRowsFromConversation(taskId: string, turns: readonly Turn[], instructions: UserInstructions): UserRow[] {
  return turns.flatMap((t, i) => (t.kind === 'user' ? [{ role: 'user' as const, taskId, instructions, messages: userViewOf(turns.slice(0, i)), target: t.text }] : []));
}
