// The user role's prompt (issue 47, "the policy plays the user"): a third role beside Act and Rehearse, with
// its own prompt, as τ²'s user simulator has one. The system message is a short account of τ²'s simulation
// guidelines (play the customer, one message at a time, disclose only when asked, never invent, confirm only
// what the scenario wants, the three stop tokens) and the task's instructions inside <scenario> tags, as τ²
// formats them. The conversation follows with the roles flipped, as τ²'s flip_roles does: the agent's replies
// are the "user" messages the model answers, its own earlier messages are "assistant" ones. A user sees only
// what an agent says, never calls or observations (UserSimulator's contract).
//
// The same messages go to an OpenAI-compatible endpoint (endpoint-user.ts), so the lab's own server renders a
// request for the user role byte for byte as the model user renders it here (renderChat, thinking off).
//
// What a user model writes is untrusted: readUserText turns any text into a message, one of τ²'s stops, or a
// failure (nothing usable), never an exception.
import { userViewOf } from '../env/conversation-rows';
import { userStopToken, type Turn, type UserAct, type UserFailure, type UserInstructions } from '../env/domain';
import { renderChat, type ChatMessage } from './chat';

export const USER_SYSTEM = [
  'You are playing a customer who contacts a customer service agent. Follow the scenario below.',
  'Write one message per turn, in your own words, as the customer only. Do not read the scenario out.',
  'Give information only when the agent asks for it. Never make up what the scenario does not give you: say you do not know.',
  'Say yes to an action only if it is exactly what the scenario wants; otherwise say no and say what you want.',
  'When everything you wanted is done or refused, write ###STOP###. If you are transferred to another agent, write ###TRANSFER###. If the scenario does not say what to do next, write ###OUT-OF-SCOPE###.',
].join('\n');

/** τ²'s layout of a task's instructions (fields it leaves empty are left out). */
export function formatInstructions(ins: UserInstructions): string {
  const fields: [string, string][] = [
    ['Reason for call', ins.reasonForCall],
    ['Known info', ins.knownInfo],
    ['Unknown info', ins.unknownInfo],
    ['Task instructions', ins.taskInstructions],
  ];
  return fields.filter(([, v]) => typeof v === 'string' && v.trim() !== '').map(([k, v]) => `${k}:\n${v.trim()}`).join('\n');
}

export function userSystemMessage(ins: UserInstructions): string {
  return `${USER_SYSTEM}\n\n<scenario>\n${formatInstructions(ins)}\n</scenario>`;
}

/** The conversation as the user sees it (src/env/conversation-rows.ts userViewOf: the rows train on the same view). */
export const userView = (conversation: readonly Turn[]): ChatMessage[] => userViewOf(conversation);

/** The whole prompt's messages: the system message, then the flipped conversation. */
export function userMessages(ins: UserInstructions, conversation: readonly Turn[]): ChatMessage[] {
  return [{ role: 'system', content: userSystemMessage(ins) }, ...userView(conversation)];
}

export function renderUserPrompt(messages: readonly ChatMessage[]): string {
  return renderChat(messages, { addGenerationPrompt: true, enableThinking: false });
}

/**
 * The prompt that fits: when the whole conversation does not (`fits` says no), the oldest exchanges are left
 * out, a pair at a time, so the view still opens with an agent message and ends with the latest one; the
 * scenario always stays. null when even the latest agent message alone does not fit.
 */
export function fitUserPrompt(ins: UserInstructions, conversation: readonly Turn[], fits: (text: string) => boolean): { messages: ChatMessage[]; text: string; dropped: number } | null {
  const view = userView(conversation);
  const system: ChatMessage = { role: 'system', content: userSystemMessage(ins) };
  for (let drop = 0; drop < view.length; drop += 2) {
    const messages = [system, ...view.slice(drop)];
    const text = renderUserPrompt(messages);
    if (fits(text)) return { messages, text, dropped: drop };
  }
  return null;
}

/** Longest user message kept (a runaway generation or endpoint answer is cut here). */
export const MAX_USER_CHARS = 4000;

// Chat-structure tokens would be parsed as special tokens when the text enters the agent's prompt: a user
// message must not open or close turns of someone else's context. Thinking blocks are not the message.
const SPECIAL = /<\|im_start\|>|<\|im_end\|>|<\|endoftext\|>/g;

/**
 * A generated user turn as an act: τ²'s is_stop (a stop token anywhere ends the conversation), else the
 * message; a text with nothing left once chat tokens and thinking are taken out is a failure.
 */
export function readUserText(raw: unknown): UserAct | UserFailure {
  const text = (typeof raw === 'string' ? raw : '').replace(/<think>[\s\S]*?(<\/think>|$)/g, '').replace(SPECIAL, '').trim().slice(0, MAX_USER_CHARS);
  const stop = userStopToken(text);
  if (stop !== null) return { kind: 'stop', token: stop, text };
  if (text === '') return { kind: 'error', error: 'the user wrote an empty message', text };
  return { kind: 'message', text };
}
