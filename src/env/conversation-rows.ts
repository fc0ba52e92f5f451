// Training rows from a conversation (issue 47): the rows.ts rules, with user turns in the history. Act rows
// at every agent call and every agent reply but the opening greeting (τ²'s orchestrator writes that one, the
// policy never does); Rehearse rows at every call, grounded by real triples of the same conversation. A user
// turn enters the history as a 'user' message; the user's closing stop token ends the conversation and enters
// no row. rows.ts's one-message episodes are left as they are (bit-exact reproductions depend on them).

import { AGENT_GREETING, type ChatMessage, type GroundingExample, type Row, type Turn } from './domain';
import { canonicalJson } from './json';
import { formatCall, formatObservation, serializeObservation } from './toolcall';

export function rowsFromConversation(taskId: string, turns: readonly Turn[], maxGrounding = 3): Row[] {
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
      if (!(t === 0 && turn.text === AGENT_GREETING)) rows.push({ role: 'act', taskId, messages, target: turn.text });
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
