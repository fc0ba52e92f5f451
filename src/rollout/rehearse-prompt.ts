// The Rehearse prompt: for each pending tool call, a fresh prompt of its own, in which the same
// policy plays the environment. Sections: simulator instructions (validate, then simulate), the tool
// schemas, grounding examples (real (name, arguments, result) triples from the task's reference
// trajectory), the conversation so far, and the call. Target (src/env/toolcall.ts formatObservation):
//   <execution_result>\n{"result":…} or {"error":"…"}\n</execution_result>
// and `parseExecutionResult`, the strict reader of that output (model output is untrusted), with a
// typed reason for every rejection.
//
// Compactness is a design rule here, not polish: the bundled policy is tiny, every prompt token costs a
// forward pass on a laptop, and a Rehearse prompt is built for every single call. So the schemas, examples
// and history are compact JSON (no spaces), tool-call markup is shortened, and examples and history are
// cut to character budgets (whole items only, never a truncated JSON).
import type { GroundingExample, Observation, ToolCall } from '../env/domain';
import { canonicalJson } from '../env/json';
import { formatObservation, MAX_TEXT, safeJsonParse } from '../env/toolcall';
import { renderChat, type ChatMessage, type ToolDefinition } from './chat';
import type { RehearseDecoding } from '../method/run-config';

export type { GroundingExample } from '../env/domain';

export interface RehearsePromptInput {
  tools: readonly ToolDefinition[];
  grounding: readonly GroundingExample[];
  /** The Act conversation before the assistant turn that made the call (system messages are skipped). */
  history: readonly ChatMessage[];
  /** The call Act wrote, already parsed (a block that is not even a call never reaches Rehearse). */
  call: ToolCall;
}

export interface RehearsePromptOptions {
  /** Character budget of the grounding section (default 1600). */
  maxGroundingChars?: number;
  /** Character budget of the conversation section (default 1600). */
  maxHistoryChars?: number;
  /** Same switch as the Act prompt; default false (the small policy does not think). */
  enableThinking?: boolean;
  /**
   * Leave out examples of the very call being simulated (same name and arguments), as the expert rows do
   * (src/env/rows.ts): then a faithful rehearsal must come from the dynamics, not from copying. Default false:
   * rollouts ground on the whole reference trajectory, as the method describes.
   */
  excludeSameCall?: boolean;
  /**
   * 'called' (default): the full schema of the called tool only, and the other tools by name (enough to
   * validate existence and arguments; on retail tasks the prompt drops from ~2350 to ~710 Qwen3 tokens).
   * 'all': every schema, as the reference implementation's prompt has them.
   */
  toolSchemas?: 'called' | 'all';
  /**
   * How the rehearsal is decoded. 'structured' (default): only tokens that keep the text a possible
   * observation, with a loop guard (src/rollout/rehearse-constraint.ts). 'free': whatever the policy writes,
   * which is what measures the policy alone.
   */
  decoding?: RehearseDecoding;
}

// The choices are the run settings' table's (src/method/run-config.ts), declared once there.
export { REHEARSE_DECODINGS, type RehearseDecoding } from '../method/run-config';

export const REHEARSE_SYSTEM =
  'You are the environment. Given tool schemas, real example executions, a conversation and one tool call, ' +
  'write what the environment returns for that call.\n' +
  'First validate the call: the tool exists, every required argument is present, no unknown arguments, ' +
  'types match the schema. If invalid, or if the environment would refuse it, write {"error":"<reason>"}.\n' +
  'Otherwise write {"result":<what the tool returns>}, consistent with the examples and the conversation.\n' +
  'Answer exactly:\n<execution_result>\n{JSON}\n</execution_result>';

export const RESULT_OPEN = '<execution_result>';
export const RESULT_CLOSE = '</execution_result>';

/** The target text of a Rehearse row for an observation (the env's format, so expert rows agree). */
export function rehearseTarget(o: Observation): string {
  return formatObservation(o);
}

const callJson = (name: string, args: unknown) => JSON.stringify({ name, arguments: args });

/** A tool definition in OpenAI format is shown as its inner function object (the wrapper carries nothing). */
function toolFunction(t: ToolDefinition): { name?: unknown } {
  const o = t as { type?: unknown; function?: unknown };
  return (o.type === 'function' && o.function && typeof o.function === 'object' ? o.function : t) as { name?: unknown };
}

/** The tools section: schemas as compact JSON lines; with 'called', other tools by name only. */
export function toolsSection(tools: readonly ToolDefinition[], callName: string, mode: 'called' | 'all'): string {
  const fns = tools.map(toolFunction);
  if (mode === 'all') return fns.map((f) => JSON.stringify(f)).join('\n');
  const called = fns.filter((f) => f.name === callName);
  const others = fns.filter((f) => f.name !== callName).map((f) => String(f.name));
  return [...called.map((f) => JSON.stringify(f)), ...(others.length ? ['Other tools: ' + others.join(', ')] : [])].join('\n');
}

function exampleText(e: GroundingExample): string {
  return 'call ' + callJson(e.name, e.arguments) + '\nresult ' + e.result;
}

/**
 * Grounding examples within a character budget: examples of the called tool first (they show the exact
 * result shape), then the others, each in trajectory order; duplicates and examples that do not fit whole
 * are skipped.
 */
export function selectGrounding(examples: readonly GroundingExample[], callName: string, maxChars: number, exclude?: ToolCall): string[] {
  const key = (name: string, args: unknown) => name + '\u0000' + canonicalJson(args);
  const skip = exclude ? key(exclude.name, exclude.arguments) : null;
  const usable = skip === null ? examples : examples.filter((e) => key(e.name, e.arguments) !== skip);
  const ordered = [...usable.filter((e) => e.name === callName), ...usable.filter((e) => e.name !== callName)];
  const out: string[] = [];
  const seen = new Set<string>();
  let used = 0;
  for (const e of ordered) {
    const s = exampleText(e);
    if (seen.has(s) || used + s.length + 1 > maxChars) continue;
    seen.add(s);
    out.push(s);
    used += s.length + 1;
  }
  return out;
}

/** Replaces Qwen tool-call markup with a short `call {...}` line. */
function shortenCalls(text: string): string {
  return text.replace(/<tool_call>\s*([\s\S]*?)\s*<\/tool_call>/g, (_, body: string) => 'call ' + body.trim());
}

function messageLine(m: ChatMessage): string {
  if (m.role === 'assistant') {
    const calls = (m.toolCalls ?? []).map((c) => '\ncall ' + callJson(c.name, c.arguments));
    return 'assistant: ' + shortenCalls(m.content).trim() + calls.join('');
  }
  return m.role + ': ' + m.content;
}

/**
 * The conversation within a character budget: the first user message (it states the task) and then the
 * most recent messages that fit; a marker says how many were left out between them.
 */
export function serializeHistory(history: readonly ChatMessage[], maxChars: number): string {
  const msgs = history.filter((m) => m.role !== 'system');
  if (msgs.length === 0) return '(empty)';
  const lines = msgs.map(messageLine);
  const firstUser = msgs.findIndex((m) => m.role === 'user');
  const head = firstUser >= 0 && lines[firstUser].length <= maxChars ? firstUser : -1;
  let used = head >= 0 ? lines[head].length + 1 : 0;
  const tail: number[] = [];
  for (let i = lines.length - 1; i > head; i--) {
    if (used + lines[i].length + 1 > maxChars) break;
    tail.unshift(i);
    used += lines[i].length + 1;
  }
  const keep = head >= 0 ? [head, ...tail] : tail;
  const out: string[] = [];
  keep.forEach((i, k) => {
    const prev = k === 0 ? -1 : keep[k - 1];
    const gap = i - prev - 1;
    if (gap > 0) out.push(`(${gap} earlier message${gap > 1 ? 's' : ''} omitted)`);
    out.push(lines[i]);
  });
  if (keep.length === 0) out.push(`(${lines.length} message${lines.length > 1 ? 's' : ''} omitted)`);
  return out.join('\n');
}

/** The Rehearse prompt as chat messages and as rendered text (ends with the generation prompt). */
export function buildRehearsePrompt(input: RehearsePromptInput, opts: RehearsePromptOptions = {}): { messages: ChatMessage[]; text: string } {
  const examples = selectGrounding(input.grounding, input.call.name, opts.maxGroundingChars ?? 1600, opts.excludeSameCall ? input.call : undefined);
  const user =
    '# Tools\n' +
    toolsSection(input.tools, input.call.name, opts.toolSchemas ?? 'called') +
    '\n# Examples\n' +
    (examples.length > 0 ? examples.join('\n') : '(none)') +
    '\n# Conversation\n' +
    serializeHistory(input.history, opts.maxHistoryChars ?? 1600) +
    '\n# Call\n' +
    callJson(input.call.name, input.call.arguments);
  const messages: ChatMessage[] = [
    { role: 'system', content: REHEARSE_SYSTEM },
    { role: 'user', content: user },
  ];
  const text = renderChat(messages, { addGenerationPrompt: true, enableThinking: opts.enableThinking ?? false });
  return { messages, text };
}

export type RehearseParseFailure =
  | 'empty' // nothing but whitespace / end tokens
  | 'too-long' // more than MAX_TEXT characters
  | 'no-open-tag' // does not start with <execution_result>
  | 'no-close-tag' // the block is not closed (e.g. cut by the token limit)
  | 'trailing-text' // anything after </execution_result>
  | 'invalid-json' // the block's body is not one JSON value (or is too deep / too long)
  | 'bad-shape'; // JSON, but not {"result": …} or {"error": "<string>"}

export class RehearseParseError extends Error {
  override readonly name = 'RehearseParseError';
  constructor(
    readonly code: RehearseParseFailure,
    detail: string,
  ) {
    super(`rehearsal output rejected (${code}): ${detail}`);
  }
}

export type ParsedRehearsal = { ok: true; observation: Observation } | { ok: false; error: RehearseParseError };

const END_TOKENS = /(?:\s*(?:<\|im_end\|>|<\|endoftext\|>))+\s*$/;
const LEADING_THINK = /^<think>[\s\S]*?<\/think>\s*/;

/**
 * Strict reader of a Rehearse generation for a call to tool `name`. Accepted: optional leading whitespace
 * and one leading think block, then `<execution_result>`, {"result": …} or {"error": "…"}, then
 * `</execution_result>` and only whitespace or end tokens. Everything else is a typed failure (the
 * rollout ends that episode with reward 0). Never throws. Agrees with src/env/toolcall.ts
 * parseObservation on what it accepts; this one also says why it rejects.
 */
export function parseExecutionResult(raw: string, name: string): ParsedRehearsal {
  const failWith = (code: RehearseParseFailure, detail: string): ParsedRehearsal => ({ ok: false, error: new RehearseParseError(code, detail) });
  if (typeof raw !== 'string') return failWith('empty', 'not text');
  if (raw.length > MAX_TEXT) return failWith('too-long', `${raw.length} > ${MAX_TEXT} characters`);
  const s = raw.replace(END_TOKENS, '').trimStart().replace(LEADING_THINK, '');
  if (s.trim() === '') return failWith('empty', 'no output');
  if (!s.startsWith(RESULT_OPEN)) return failWith('no-open-tag', JSON.stringify(s.slice(0, 40)));
  const close = s.indexOf(RESULT_CLOSE, RESULT_OPEN.length);
  if (close < 0) return failWith('no-close-tag', `${s.length} characters without ${RESULT_CLOSE}`);
  const after = s.slice(close + RESULT_CLOSE.length);
  if (after.trim() !== '') return failWith('trailing-text', JSON.stringify(after.slice(0, 40)));
  const p = safeJsonParse(s.slice(RESULT_OPEN.length, close).trim(), MAX_TEXT);
  if (!p.ok) return failWith('invalid-json', p.error);
  const v = p.value;
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return failWith('bad-shape', 'not a JSON object');
  const o = v as Record<string, unknown>;
  const keys = Object.keys(o);
  if (keys.length === 1 && keys[0] === 'result') return { ok: true, observation: { ok: true, name, result: o.result } };
  if (keys.length === 1 && keys[0] === 'error' && typeof o.error === 'string') {
    return { ok: true, observation: { ok: false, name, error: o.error, code: 'tool' } };
  }
  return failWith('bad-shape', `keys ${JSON.stringify(keys.slice(0, 4))}, expected "result" or "error"`);
}
