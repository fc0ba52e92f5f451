// Model output is untrusted input. This module turns a policy generation into tool calls (Qwen/Hermes
// convention) and a reply, and turns observations into the text the policy reads or rehearses. It never
// throws and never evaluates anything: every problem becomes a structured error that the caller feeds back
// as an error observation.
//
// Call format: `<tool_call>\n{"name": "...", "arguments": {...}}\n</tool_call>`. A block may also hold a
// JSON list of such objects, and a generation may hold several blocks; calls keep their text order.
// `arguments` may be an object, a JSON string encoding an object (OpenAI style), or absent ({}).
// `<think>…</think>` spans are dropped. Text outside the blocks is the reply. A generation with no block
// at all is a plain reply, which ends the episode (endsEpisode()). An unterminated last block is accepted
// if its content parses (generation often stops at the closing tag), else it is an error.
// Limits: MAX_TEXT characters per generation, MAX_BLOCK per block, MAX_DEPTH bracket nesting (checked by a
// linear scan before JSON.parse, so hostile nesting cannot exhaust the stack), MAX_CALLS per generation.

import { parse as scanJson, printParseErrorCode, type ParseError } from 'jsonc-parser';
import type { Environment } from './env';
import type { Observation, ToolCall } from './domain';
import { canonicalJson, compactJson } from './json';

export const MAX_TEXT = 65536;
export const MAX_BLOCK = 16384;
export const MAX_DEPTH = 16;
export const MAX_CALLS = 8;

const OPEN = '<tool_call>';
const CLOSE = '</tool_call>';

export interface CallParseError {
  error: string;
  code: 'parse';
  /** The offending text, cut to 200 characters. */
  raw: string;
}

export type ParsedPart = { kind: 'call'; call: ToolCall } | { kind: 'error'; error: CallParseError };

export interface ParseResult {
  calls: ToolCall[];
  /** Text outside tool-call blocks and think spans, trimmed ('' when there is none). */
  reply: string;
  errors: CallParseError[];
  /** Calls and errors in text order (what the caller executes / reports, in turn). */
  parts: ParsedPart[];
}

const cut = (s: string) => (s.length > 200 ? s.slice(0, 200) + '…' : s);
const perr = (error: string, raw: string): CallParseError => ({ error, code: 'parse', raw: cut(raw) });

/** Deepest bracket nesting outside JSON strings; stops counting once past `limit`. */
export function jsonDepth(s: string, limit = MAX_DEPTH): number {
  let depth = 0;
  let max = 0;
  let inStr = false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (inStr) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inStr = false;
    } else if (c === 0x22) inStr = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > max) max = depth;
      if (max > limit) return max;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return max;
}

/** Parses untrusted JSON text with size and depth limits; returns the value or an error message. */
export function safeJsonParse(s: string, maxLen = MAX_BLOCK): { ok: true; value: unknown } | { ok: false; error: string } {
  if (s.length > maxLen) return { ok: false, error: `JSON too long (${s.length} > ${maxLen} characters)` };
  if (jsonDepth(s) > MAX_DEPTH) return { ok: false, error: `JSON nested too deeply (more than ${MAX_DEPTH} levels)` };
  try {
    return { ok: true, value: JSON.parse(s) };
  } catch {
    return { ok: false, error: `invalid JSON: ${describeJsonError(s)}` };
  }
}

// What the policy reads about its malformed call must not depend on the JavaScript engine: JSON.parse's
// messages differ between V8 versions (Node 20: "... at position 56"; Chromium: "... (line 1 column 57)"),
// so the lab in a browser and the CLI in Node fed different observations to the same rollout (found by
// test/e2e/lesson-trace.test.ts). The first error of a strict scan (no comments, no trailing commas) says it.
const JSON_ERRORS: Record<string, string> = {
  InvalidSymbol: 'unexpected character',
  InvalidNumberFormat: 'malformed number',
  PropertyNameExpected: 'expected a property name in double quotes',
  ValueExpected: 'expected a value',
  ColonExpected: "expected ':'",
  CommaExpected: "expected ',' or a closing bracket",
  CloseBraceExpected: "expected '}'",
  CloseBracketExpected: "expected ']'",
  EndOfFileExpected: 'unexpected text after the JSON value',
  InvalidCommentToken: 'comments are not JSON',
  UnexpectedEndOfComment: 'comments are not JSON',
  UnexpectedEndOfString: 'unterminated string',
  UnexpectedEndOfNumber: 'malformed number',
  InvalidUnicode: 'malformed \\u escape',
  InvalidEscapeCharacter: 'malformed escape',
  InvalidCharacter: 'control character in a string',
};

/** The first syntax error of `s` in fixed words, with its 0-based character position. */
export function describeJsonError(s: string): string {
  const errors: ParseError[] = [];
  scanJson(s, errors, { disallowComments: true, allowTrailingComma: false, allowEmptyContent: false });
  const e = errors[0];
  if (!e) return 'not valid JSON';
  return `${JSON_ERRORS[printParseErrorCode(e.error)] ?? 'syntax error'} at position ${e.offset}`;
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

function toCall(v: unknown, raw: string): ToolCall | CallParseError {
  if (!isObject(v)) return perr('a tool call must be a JSON object with "name" and "arguments"', raw);
  const name = Object.hasOwn(v, 'name') ? v.name : undefined;
  if (typeof name !== 'string' || name.length === 0) return perr('the tool call has no "name" string', raw);
  if (name.length > 100) return perr('the tool name is too long', raw);
  let args: unknown = Object.hasOwn(v, 'arguments') ? v.arguments : {};
  if (typeof args === 'string') {
    const p = safeJsonParse(args);
    if (!p.ok) return perr(`"arguments" is a string that is not a JSON object (${p.error})`, raw);
    args = p.value;
  }
  if (!isObject(args)) return perr('"arguments" must be a JSON object', raw);
  return { name, arguments: args };
}

function parseBlock(content: string, parts: ParsedPart[]): void {
  const body = content.trim();
  const p = safeJsonParse(body);
  if (!p.ok) {
    parts.push({ kind: 'error', error: perr(p.error, body) });
    return;
  }
  const items = Array.isArray(p.value) ? p.value : [p.value];
  if (items.length === 0) parts.push({ kind: 'error', error: perr('empty list of tool calls', body) });
  for (const it of items) {
    const c = toCall(it, body);
    parts.push('error' in c ? { kind: 'error', error: c } : { kind: 'call', call: c });
  }
}

/**
 * Drops <think>…</think> spans, and everything from an unterminated <think>. Linear: the lazy regex it
 * replaces rescanned to the end of the text from every unclosed '<think>' (quadratic on adversarial text).
 */
export function stripThink(text: string): string {
  const OPEN_T = '<think>';
  const CLOSE_T = '</think>';
  let out = '';
  let i = 0;
  for (;;) {
    const a = text.indexOf(OPEN_T, i);
    if (a < 0) {
      out += text.slice(i);
      break;
    }
    out += text.slice(i, a);
    const b = text.indexOf(CLOSE_T, a + OPEN_T.length);
    if (b < 0) break;
    i = b + CLOSE_T.length;
  }
  // Removing spans can join "<thi" + "nk>" into a new opening tag; as before, it cuts the rest.
  const open = out.indexOf(OPEN_T);
  return open >= 0 ? out.slice(0, open) : out;
}

export function parse(text: unknown): ParseResult {
  const parts: ParsedPart[] = [];
  let reply = '';
  if (typeof text !== 'string') {
    parts.push({ kind: 'error', error: perr('the generation is not text', String(text)) });
  } else if (text.length > MAX_TEXT) {
    parts.push({ kind: 'error', error: perr(`the generation is too long (${text.length} > ${MAX_TEXT} characters)`, text) });
  } else {
    const s = stripThink(text);
    const outside: string[] = [];
    let i = 0;
    while (i < s.length) {
      const a = s.indexOf(OPEN, i);
      if (a < 0) {
        outside.push(s.slice(i));
        break;
      }
      outside.push(s.slice(i, a));
      const b = s.indexOf(CLOSE, a + OPEN.length);
      if (b < 0) {
        const rest = s.slice(a + OPEN.length);
        const before = parts.length;
        parseBlock(rest, parts);
        if (parts.slice(before).some((p) => p.kind === 'error')) {
          parts.splice(before, parts.length - before, { kind: 'error', error: perr(`unterminated ${OPEN} block`, rest) });
        }
        break;
      }
      parseBlock(s.slice(a + OPEN.length, b), parts);
      i = b + CLOSE.length;
    }
    reply = outside.join('').replaceAll(CLOSE, '').trim();
  }
  const callCount = parts.filter((p) => p.kind === 'call').length;
  if (callCount > MAX_CALLS) {
    const kept: ParsedPart[] = [];
    let n = 0;
    for (const p of parts) if (p.kind === 'error' || ++n <= MAX_CALLS) kept.push(p);
    kept.push({ kind: 'error', error: perr(`too many tool calls (${callCount} > ${MAX_CALLS}); the rest were ignored`, '') });
    parts.splice(0, parts.length, ...kept);
  }
  return {
    calls: parts.flatMap((p) => (p.kind === 'call' ? [p.call] : [])),
    errors: parts.flatMap((p) => (p.kind === 'error' ? [p.error] : [])),
    reply,
    parts,
  };
}

/** A generation with neither a call nor a malformed call block is the final reply to the user. */
export function endsEpisode(r: ParseResult): boolean {
  return r.parts.length === 0;
}

/** Executes the parsed parts in order; parse errors become error observations. Never throws. */
export function executeParsed(env: Environment, r: ParseResult): Observation[] {
  return r.parts.map((p) =>
    p.kind === 'call' ? env.execute(p.call) : { ok: false, name: '', error: p.error.error, code: 'parse' as const },
  );
}

/** JSON with Python's default separators (", ", ": "), as Qwen's chat template writes tool calls. */
function spacedJson(v: unknown): string {
  if (v !== null && typeof v === 'object') {
    if (Array.isArray(v)) return '[' + v.map(spacedJson).join(', ') + ']';
    const o = v as Record<string, unknown>;
    return '{' + Object.keys(o).map((k) => JSON.stringify(k) + ': ' + spacedJson(o[k])).join(', ') + '}';
  }
  return JSON.stringify(v) ?? 'null';
}

/** The text the policy writes for a call (the Act target). */
export function formatCall(call: ToolCall): string {
  return `${OPEN}\n{"name": ${JSON.stringify(call.name)}, "arguments": ${spacedJson(call.arguments)}}\n${CLOSE}`;
}

/** Compact JSON of an observation: {"result": …} or {"error": "…"} (what the tool message holds). */
/** A call's identity: its tool and its arguments in canonical order (two calls with one key do the same). */
export const callKey = (c: ToolCall): string => `${c.name}\u0000${canonicalJson(c.arguments)}`;

export function serializeObservation(o: Observation): string {
  return o.ok ? `{"result":${compactJson(o.result)}}` : `{"error":${JSON.stringify(o.error)}}`;
}

/** The Rehearse target for an observation. */
export function formatObservation(o: Observation): string {
  return `<execution_result>\n${serializeObservation(o)}\n</execution_result>`;
}

/**
 * Reads a rehearsed observation back. null when the text is not one `<execution_result>` block holding
 * {"result": …} or {"error": "<string>"} (an unparseable rehearsal ends the episode with reward 0).
 */
export function parseObservation(text: string, name: string): Observation | null {
  if (typeof text !== 'string' || text.length > MAX_TEXT) return null;
  const m = /^\s*<execution_result>([\s\S]*?)<\/execution_result>\s*$/.exec(stripThink(text));
  return m ? deserializeObservation(m[1].trim(), name) : null;
}

/** serializeObservation's inverse: null when `json` is not {"result": …} or {"error": "<string>"}. */
export function deserializeObservation(json: string, name: string): Observation | null {
  const p = safeJsonParse(json, MAX_TEXT);
  if (!p.ok || !isObject(p.value)) return null;
  const keys = Object.keys(p.value);
  if (keys.length !== 1) return null;
  if (keys[0] === 'result') return { ok: true, name, result: p.value.result };
  if (keys[0] === 'error' && typeof p.value.error === 'string') return { ok: false, name, error: p.value.error, code: 'tool' };
  return null;
}
