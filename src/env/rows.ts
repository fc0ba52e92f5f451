// Training rows from an executed episode, for both roles, as plain data (the rollout code renders them
// into prompts with the system prompt and tool list). Shape and rules are documented on Row in domain.ts:
//   act:      messages = the conversation before turn t (user message(s), then assistant calls and tool
//             observations), target = the turn's text (a <tool_call> block, or the final reply);
//   rehearse: messages = the same history, call = the call of turn t, target = the real observation as
//             <execution_result>…</execution_result>, grounding = up to maxGrounding real (name, arguments,
//             result) triples from other turns of the same episode, never one with the same call.

import type { ChatMessage, GroundingExample, Row, Step, Task } from './domain';
import { canonicalJson } from './json';
import { formatCall, formatObservation, serializeObservation } from './toolcall';

export function rowsFromEpisode(task: Pick<Task, 'id' | 'userMessages'>, steps: readonly Step[], maxGrounding = 3): Row[] {
  const rows: Row[] = [];
  const history: ChatMessage[] = task.userMessages.map((content) => ({ role: 'user', content }));
  const calls = steps.flatMap((s, i) => (s.kind === 'call' ? [{ s, i }] : []));
  steps.forEach((step, t) => {
    const messages = history.slice();
    if (step.kind === 'reply') {
      rows.push({ role: 'act', taskId: task.id, messages, target: step.text });
      history.push({ role: 'assistant', content: step.text });
      return;
    }
    const callText = formatCall(step.call);
    rows.push({ role: 'act', taskId: task.id, messages, target: callText });
    const key = step.call.name + canonicalJson(step.call.arguments);
    const grounding: GroundingExample[] = [];
    for (const { s, i } of calls) {
      if (grounding.length >= maxGrounding) break;
      if (i === t || s.kind !== 'call' || s.call.name + canonicalJson(s.call.arguments) === key) continue;
      grounding.push({ name: s.call.name, arguments: s.call.arguments, result: serializeObservation(s.observation) });
    }
    rows.push({ role: 'rehearse', taskId: task.id, messages, call: step.call, grounding, target: formatObservation(step.observation) });
    history.push({ role: 'assistant', content: callText }, { role: 'tool', content: serializeObservation(step.observation) });
  });
  return rows;
}
