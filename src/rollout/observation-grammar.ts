// The grammar of a rehearsed observation, as a character automaton that can say, before a token is drawn,
// whether the text so far plus that token can still become one:
//   ws* <execution_result> ws* {"result": <any JSON value>} ws* </execution_result> ws*
//   ws* <execution_result> ws* {"error": "<string>"} ws* </execution_result> ws*
// which is exactly what parseExecutionResult accepts (bar a leading think block, which the Rehearse prompt
// never asks for). The state is a small plain object, so trying a token is copying it and feeding characters.
import { RESULT_CLOSE, RESULT_OPEN } from './rehearse-prompt';

const enum Phase {
  Open, // inside the opening tag (lit = characters matched)
  Pre, // between the opening tag and the body
  Json, // inside the body
  Post, // after the body, before the closing tag
  Close, // inside the closing tag (lit = characters matched)
  Done, // after the closing tag: whitespace only
}

const enum Mode {
  Value, // a value is expected
  ArrFirst, // after '[': a value or ']'
  KeyFirst, // after '{': a key or '}'
  Key, // after ',' in an object: a key
  Colon,
  After, // after a value: ',' or the closer
  Str,
  Esc, // after a backslash in a string
  Hex, // inside \uXXXX (aux = digits left)
  Num, // inside a number (aux = NumState)
  Lit, // inside true / false / null (word + aux = the rest to write)
}

// Number states: 0 after '-', 1 after a leading 0, 2 in the integer digits, 3 after '.', 4 in the fraction,
// 5 after 'e', 6 after the exponent's sign, 7 in the exponent digits. A number may end in 1, 2, 4, 7.
const NUM_ENDS = new Set([1, 2, 4, 7]);
const TOP_KEYS = ['result', 'error'] as const;

export interface GrammarState {
  phase: Phase;
  lit: number;
  mode: Mode;
  /** Open containers, innermost last: '{' or '['. */
  stack: string;
  /** In Str: whether the string is an object key. */
  isKey: boolean;
  /** The key of the body's one member, as far as it is written. */
  key: string;
  aux: number;
  word: string;
  /** Characters written in the current string (escapes count as written), and the most a string may hold. */
  strLen: number;
  maxStr: number;
  /** In a string: how much of the closing tag its end spells (generation would stop inside the string). */
  tag: number;
}

/** maxString: the most characters a JSON string (key or value) may hold; Infinity = no limit. */
export function initialGrammarState(maxString = Infinity): GrammarState {
  return { phase: Phase.Open, lit: 0, mode: Mode.Value, stack: '', isKey: false, key: '', aux: 0, word: '', strLen: 0, maxStr: maxString, tag: 0 };
}

const isWs = (c: string) => c === ' ' || c === '\n' || c === '\t' || c === '\r';
const isDigit = (c: string) => c >= '0' && c <= '9';
const isHex = (c: string) => isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');

/** Whether the state has read a whole observation (the closing tag included). */
export function grammarComplete(s: GrammarState): boolean {
  return s.phase === Phase.Done;
}

/** A key under which two states accept exactly the same continuations. */
export function grammarKey(s: GrammarState, longestToken: number): string {
  const inString = s.mode === Mode.Str || s.mode === Mode.Esc || s.mode === Mode.Hex;
  // The string limit matters only where a token could reach it: the room left in the current string, and
  // the limit itself for a string a token opens.
  const limited = inString && !(s.isKey && s.stack.length === 1) && s.key !== 'error';
  const room = limited ? Math.min(s.maxStr - s.strLen, longestToken + 1) : 0;
  const cap = Math.min(s.maxStr, longestToken + 1);
  return `${s.phase}|${s.lit}|${s.mode}|${s.stack}|${s.isKey ? 1 : 0}|${s.stack.length === 1 ? s.key : ''}|${s.aux}|${s.word}|${room}|${cap}|${s.tag}`;
}

/** Whether a character is written into a string as itself, with no effect but its count (see plainStringRoom). */
export const isPlainStringChar = (c: string) => c >= ' ' && c !== '"' && c !== '\\' && c !== RESULT_CLOSE[0];

/**
 * In a string whose characters are written as themselves (a result's string, outside an escape, with no part
 * of the closing tag matched): how many more plain characters it may take (Infinity without a limit); -1 in
 * any other state. A token of plain characters only (isPlainStringChar) is accepted here exactly when its
 * length is at most this, which lets a mask skip feeding such tokens one character at a time.
 */
export function plainStringRoom(s: GrammarState): number {
  if (s.phase !== Phase.Json || s.mode !== Mode.Str || s.tag !== 0 || (s.isKey && s.stack.length === 1)) return -1;
  return s.key === 'error' ? Infinity : Math.max(0, s.maxStr - s.strLen);
}

/** A value ended: back to the container (or, at the top, to the closing tag). */
function valueEnded(s: GrammarState): void {
  if (s.stack.length === 0) s.phase = Phase.Post;
  else s.mode = Mode.After;
}

function startValue(s: GrammarState, c: string): boolean {
  const top = s.stack.length === 1;
  // The body holds one member; an "error" member's value is a string.
  if (top && s.key === 'error' && c !== '"') return false;
  if (c === '{') return ((s.stack += '{'), (s.mode = Mode.KeyFirst), true);
  if (c === '[') return ((s.stack += '['), (s.mode = Mode.ArrFirst), true);
  if (c === '"') return ((s.mode = Mode.Str), (s.isKey = false), (s.strLen = 0), true);
  if (c === '-') return ((s.mode = Mode.Num), (s.aux = 0), true);
  if (c === '0') return ((s.mode = Mode.Num), (s.aux = 1), true);
  if (isDigit(c)) return ((s.mode = Mode.Num), (s.aux = 2), true);
  for (const w of ['true', 'false', 'null'])
    if (c === w[0]) return ((s.mode = Mode.Lit), (s.word = w.slice(1)), true);
  return false;
}

function close(s: GrammarState, c: string): boolean {
  const want = s.stack[s.stack.length - 1] === '{' ? '}' : ']';
  if (c !== want) return false;
  s.stack = s.stack.slice(0, -1);
  valueEnded(s);
  return true;
}

function feedJson(s: GrammarState, c: string): boolean {
  switch (s.mode) {
    case Mode.Value:
      return isWs(c) || startValue(s, c);
    case Mode.ArrFirst:
      if (isWs(c)) return true;
      if (c === ']') return close(s, c);
      return startValue(s, c);
    case Mode.KeyFirst:
    case Mode.Key:
      if (isWs(c)) return true;
      // The body is not empty: its one key must come.
      if (c === '}' && s.mode === Mode.KeyFirst && s.stack.length > 1) return close(s, c);
      if (c !== '"') return false;
      s.mode = Mode.Str;
      s.isKey = true;
      s.strLen = 0;
      if (s.stack.length === 1) s.key = '';
      return true;
    case Mode.Colon:
      if (isWs(c)) return true;
      if (c !== ':') return false;
      s.mode = Mode.Value;
      return true;
    case Mode.After:
      if (isWs(c)) return true;
      if (c === ',') {
        if (s.stack.length === 1) return false; // one member only
        s.mode = s.stack[s.stack.length - 1] === '{' ? Mode.Key : Mode.Value;
        return true;
      }
      return close(s, c);
    case Mode.Str: {
      const topKey = s.isKey && s.stack.length === 1;
      if (c === '"') {
        if (topKey && !(TOP_KEYS as readonly string[]).includes(s.key)) return false;
        s.tag = 0;
        if (s.isKey) s.mode = Mode.Colon;
        else valueEnded(s);
        return true;
      }
      if (c < ' ') return false; // control characters must be escaped
      // The closing tag ends generation wherever it appears, so a string may not spell it ('<' starts it
      // and occurs nowhere else in it, so a mismatch restarts the match at 0 or 1).
      s.tag = c === RESULT_CLOSE[s.tag] ? s.tag + 1 : c === RESULT_CLOSE[0] ? 1 : 0;
      if (s.tag === RESULT_CLOSE.length) return false;
      // The limit is on what a result holds: not on the body's own key, nor on an error's sentence.
      if (++s.strLen > s.maxStr && !topKey && s.key !== 'error') return false;
      if (topKey) {
        if (c === '\\') return false;
        s.key += c;
        return TOP_KEYS.some((k) => k.startsWith(s.key));
      }
      if (c === '\\') s.mode = Mode.Esc;
      return true;
    }
    case Mode.Esc:
      if (c === 'u') return ((s.mode = Mode.Hex), (s.aux = 4), true);
      if (!'"\\/bfnrt'.includes(c)) return false;
      s.mode = Mode.Str;
      return true;
    case Mode.Hex:
      if (!isHex(c)) return false;
      if (--s.aux === 0) s.mode = Mode.Str;
      return true;
    case Mode.Num: {
      const st = s.aux;
      if (isDigit(c)) {
        if (st === 0) s.aux = c === '0' ? 1 : 2;
        else if (st === 1) return false; // no leading zeros
        else if (st === 3) s.aux = 4;
        else if (st === 5 || st === 6) s.aux = 7;
        return true;
      }
      if (c === '.' && (st === 1 || st === 2)) return ((s.aux = 3), true);
      if ((c === 'e' || c === 'E') && (st === 1 || st === 2 || st === 4)) return ((s.aux = 5), true);
      if ((c === '+' || c === '-') && st === 5) return ((s.aux = 6), true);
      if (!NUM_ENDS.has(st)) return false;
      valueEnded(s);
      return feed(s, c);
    }
    case Mode.Lit:
      if (c !== s.word[0]) return false;
      s.word = s.word.slice(1);
      if (s.word === '') valueEnded(s);
      return true;
  }
}

/** Feeds one character; false (and a state to throw away) when the text can no longer be an observation. */
export function feed(s: GrammarState, c: string): boolean {
  switch (s.phase) {
    case Phase.Open:
      if (s.lit === 0 && isWs(c)) return true;
      if (c !== RESULT_OPEN[s.lit]) return false;
      if (++s.lit === RESULT_OPEN.length) s.phase = Phase.Pre;
      return true;
    case Phase.Pre:
      if (isWs(c)) return true;
      if (c !== '{') return false;
      s.phase = Phase.Json;
      s.stack = '{';
      s.mode = Mode.KeyFirst;
      return true;
    case Phase.Json:
      return feedJson(s, c);
    case Phase.Post:
      if (isWs(c)) return true;
      if (c !== RESULT_CLOSE[0]) return false;
      s.phase = Phase.Close;
      s.lit = 1;
      return true;
    case Phase.Close:
      if (c !== RESULT_CLOSE[s.lit]) return false;
      if (++s.lit === RESULT_CLOSE.length) s.phase = Phase.Done;
      return true;
    case Phase.Done:
      return isWs(c);
  }
}

/** The state after `text`, or null when no observation starts with it. */
export function feedText(s: GrammarState, text: string): GrammarState | null {
  const t = { ...s };
  for (const c of text) if (!feed(t, c)) return null;
  return t;
}
