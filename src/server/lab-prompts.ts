// The endpoint's "lab prompts" (`npm run serve -- --openai --prompt lab`, issue 47 item 5): an external
// harness such as τ²-bench sends its own system prompts (τ²'s agent prompt carries the whole retail policy,
// its user-simulator prompt the whole simulation guidelines), which a small lab model was never trained on
// and which do not fit its 2,048-token context. Under lab prompts each served role renders a request as the
// lab renders that role itself, keeping only what the request says about this conversation:
//   - the agent (Act) role: the client's system messages give way to the world's own policy, and its tool
//     definitions to the world's (the rollout loop's buildActPrompt); the conversation stays as sent;
//   - the user role: the scenario is read from the client's system message (τ²'s `<scenario>` block:
//     Reason for call, Known info, Unknown info, Task instructions), the conversation (already flipped by the
//     client, as τ²'s user simulator flips it) is read back into turns, and the prompt is the model user's
//     (src/rollout/user-prompt.ts fitUserPrompt: oldest exchanges dropped a pair at a time to fit).
import type { Turn, UserInstructions } from '../env/domain';
import type { ChatMessage } from '../rollout/chat';

const FIELDS: [keyof UserInstructions, string][] = [
  ['reasonForCall', 'Reason for call'],
  ['knownInfo', 'Known info'],
  ['unknownInfo', 'Unknown info'],
  ['taskInstructions', 'Task instructions'],
];

/**
 * The user instructions in a user-simulator system prompt: the fields of its `<scenario>` block as τ²
 * writes them (`Reason for call:\n\t...`, lines indented by a tab; `Domain:` and any other line ignored).
 * Without a scenario block, or with none of the four fields in it, the whole text (or block) is the reason
 * for the call: a client's own free-form scenario still reaches the model.
 */
export function scenarioInstructions(system: string): UserInstructions {
  const m = /<scenario>([\s\S]*?)<\/scenario>/.exec(system);
  const block = (m ? m[1] : system).trim();
  const out: UserInstructions = { reasonForCall: '', knownInfo: '', unknownInfo: '', taskInstructions: '' };
  let field: keyof UserInstructions | null = null;
  let found = false;
  for (const line of block.split('\n')) {
    const head = FIELDS.find(([, label]) => line.trim() === `${label}:`);
    if (head) {
      field = head[0];
      found = true;
      continue;
    }
    if (/^[A-Z][A-Za-z ]*:/.test(line)) {
      field = null; // another heading (Domain: retail, Persona: ...)
      continue;
    }
    if (field) out[field] = out[field] ? `${out[field]}\n${line.replace(/^\t/, '')}` : line.replace(/^\t/, '');
  }
  if (!found) return { ...out, reasonForCall: block };
  for (const [k] of FIELDS) out[k] = out[k].trim();
  return out;
}

/**
 * A user-role request's conversation (no system message; roles as the user sees them: the agent's words are
 * 'user', the user's own 'assistant') read back into turns: each agent message a reply, each of the user's a
 * user turn. userViewOf(turns) gives the same messages back, so the model user's prompt is rendered from it.
 */
export function turnsOfUserView(messages: readonly ChatMessage[]): Turn[] {
  return messages.flatMap((m): Turn[] => {
    if (m.role === 'assistant') return [{ kind: 'user', text: m.content }];
    if (m.role === 'user') return [{ kind: 'reply', text: m.content }];
    return [];
  });
}
