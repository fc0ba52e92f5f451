// Structured decoding of a rehearsal: the Rehearse role draws only tokens that keep its text a possible
// observation (src/rollout/observation-grammar.ts), and a loop guard stops it copying a stretch of its context
// more often than the context holds it.
//
// Why both: a small policy that rehearses by copying the grounding example loses its place in long records
// and either writes broken JSON or starts the record again and loops until its token budget runs out (about
// nine in ten of the unparseable rehearsals of the retail policy's stage 6). The grammar removes the first;
// the guard the second: an n-gram of the rehearsal may occur in it at most as often as in the prompt (at least
// once), so a faithful copy of anything in the context is never forbidden, while a copy that restarts is. A plain
// no-repeat-n-gram ban cannot tell the two apart (real observations repeat n-grams up to 48 tokens long).
//
// The mask changes which tokens are drawn, not the log-probabilities generate() reports: those stay the
// model's own (as with top-p), so a training step on a structured rehearsal also teaches the policy to write
// the structure by itself.
import type { Domain } from '../env/domain';
import type { TokenConstraint } from '../model/token-constraint';
import type { Tokenizer } from '../model/tokenizer';
import { observationStringLimits } from './budget';
import type { RehearseDecoding } from './rehearse-prompt';
import { feedText, grammarComplete, grammarKey, initialGrammarState, isPlainStringChar, plainStringRoom, type GrammarState } from './observation-grammar';

export interface RehearseConstraintOptions {
  /** Loop guard n-gram length in tokens; 0 = no guard. */
  ngram: number;
  /**
   * Per tool, the most characters a JSON string of its result may hold (error messages are not limited); a
   * tool not listed has no limit. The defaults: domainStringLimits.
   */
  maxStringChars?: Readonly<Record<string, number>>;
}

/**
 * The guard's n-gram and the strings' margin over the longest real one, chosen on the held-out rehearsals
 * of models/retail's stage 6 (research/records/2026-12-05-retail-previous/structured-rehearsal-stage6-sweep.json:
 * n 8-32, margins 1-2): n 12 breaks every loop without costing an exact rehearsal, and a margin of 1.5 lets
 * every held-out value through; other held-out tasks and the later stages agree (the -seed2 records there, and
 * models/retail/structured-rehearsal*.json for the bundled retail policy).
 */
export const REHEARSE_NGRAM = 12;
export const STRING_MARGIN = 1.5;
/** Expert trajectories the string limits are measured on (about 0.3 s for retail). */
const LIMIT_TASKS = 1000;

const limitsByDomain = new WeakMap<object, Record<string, number>>();

/**
 * The string limits of a domain that can generate tasks and run its expert (the worlds do; a bare
 * environment gets none): STRING_MARGIN times the longest string of each tool's real results.
 */
export function domainStringLimits(domain: object): Record<string, number> {
  let l = limitsByDomain.get(domain);
  if (!l) {
    const d = domain as Partial<Domain>;
    l = {};
    if (typeof d.tasks?.generate === 'function' && typeof d.expert === 'function' && typeof d.createEnv === 'function') {
      let longest: Record<string, number> = {};
      try {
        longest = observationStringLimits(d as Domain, { tasks: LIMIT_TASKS });
      } catch {
        // A domain that cannot generate tasks of its own (a generator that refuses) gets no limits,
        // like a bare environment: the grammar and the loop guard still apply.
      }
      for (const [tool, n] of Object.entries(longest)) l[tool] = Math.ceil(n * STRING_MARGIN);
    }
    limitsByDomain.set(domain, l);
  }
  return l;
}

/**
 * The constraint a rollout or an evaluation uses for a Rehearse request, or undefined for free decoding.
 * `settings` replaces the defaults (to measure them: research/scripts/structured-rehearsal.ts).
 */
export function rehearseConstraintFor(
  decoding: RehearseDecoding | undefined,
  domain: object,
  tok: Tokenizer,
  prompt: readonly number[],
  tool: string,
  settings?: RehearseConstraintOptions,
): TokenConstraint | undefined {
  if (decoding === 'free') return undefined;
  return rehearseConstraint(tok, prompt, tool, settings ?? { ngram: REHEARSE_NGRAM, maxStringChars: domainStringLimits(domain) });
}

interface Vocab {
  /** Each id's text; null for special tokens (never drawn inside a rehearsal) and empty strings. */
  text: (string | null)[];
  stop: Set<number>;
  longest: number;
  /** Each id's length in characters when all are plain string characters (isPlainStringChar), else -1. */
  plainLen: Int32Array;
  /** The ids a mask must feed character by character in a plain string (plainLen -1, text not null). */
  fed: Int32Array;
  /** Allowed-token masks by grammar state (grammarKey), null where no token is allowed; bounded. */
  masks: Map<string, Uint8Array | null>;
}

const vocabs = new WeakMap<Tokenizer, Vocab>();
/** Masks kept per tokenizer: 64 MiB of them (16,384 for the bundled 4,096-token vocabulary, 440 for Qwen3's). */
const maskCacheSize = (vocab: number) => Math.max(64, Math.floor(2 ** 26 / vocab));

function vocabOf(tok: Tokenizer): Vocab {
  let v = vocabs.get(tok);
  if (!v) {
    const special = new Set(tok.specialIds);
    const text = Array.from({ length: tok.size }, (_, id) => {
      if (special.has(id)) return null;
      const s = tok.decode([id]);
      return s === '' ? null : s;
    });
    const plainLen = Int32Array.from(text, (t) => {
      if (t === null) return -1;
      const cs = [...t];
      return cs.every(isPlainStringChar) ? cs.length : -1;
    });
    const fed = Int32Array.from(text.flatMap((t, id) => (t !== null && plainLen[id] < 0 ? [id] : [])));
    v = { text, stop: new Set(tok.stopIds), longest: Math.max(...text.map((t) => t?.length ?? 0)), plainLen, fed, masks: new Map() };
    vocabs.set(tok, v);
  }
  return v;
}

function grammarMask(v: Vocab, s: GrammarState): Uint8Array | null {
  const key = grammarKey(s, v.longest);
  let m = v.masks.get(key);
  if (m === undefined) {
    const mask = new Uint8Array(v.text.length);
    const done = grammarComplete(s);
    let any = 0;
    const room = plainStringRoom(s);
    if (room >= 0) {
      // Inside a string most tokens are plain text: accepted exactly when they fit. Only the rest (quotes,
      // escapes, '<', control characters) are fed; the stop ids are never plain, and grammarComplete is false.
      for (let id = 0; id < mask.length; id++) any |= mask[id] = v.plainLen[id] >= 0 && v.plainLen[id] <= room ? 1 : 0;
      for (const id of v.fed) if (!v.stop.has(id)) any |= mask[id] = feedText(s, v.text[id]!) !== null ? 1 : 0;
    } else {
      for (let id = 0; id < mask.length; id++) {
        const t = v.text[id];
        any |= mask[id] = v.stop.has(id) ? (done ? 1 : 0) : t !== null && feedText(s, t) !== null ? 1 : 0;
      }
    }
    // No token of this vocabulary continues the text (a vocabulary without some character the grammar
    // needs): the generation goes on unconstrained rather than stopping.
    m = any ? mask : null;
    if (v.masks.size >= maskCacheSize(mask.length)) v.masks.clear();
    v.masks.set(key, m);
  }
  return m;
}

/** Counts of the token that follows each (n-1)-gram. */
type NgramCounts = Map<string, Map<number, number>>;

function countNgrams(tokens: readonly number[], n: number, into: NgramCounts = new Map()): NgramCounts {
  for (let i = 0; i + n <= tokens.length; i++) bump(into, tokens.slice(i, i + n - 1).join(','), tokens[i + n - 1]);
  return into;
}

function bump(c: NgramCounts, prefix: string, next: number): void {
  let m = c.get(prefix);
  if (!m) c.set(prefix, (m = new Map()));
  m.set(next, (m.get(next) ?? 0) + 1);
}

/**
 * The constraint for one Rehearse generation with the given prompt tokens. Stateful: one per request.
 */
export function rehearseConstraint(tok: Tokenizer, prompt: readonly number[], tool: string, opts: RehearseConstraintOptions): TokenConstraint {
  const v = vocabOf(tok);
  const n = opts.ngram;
  if (n !== 0 && !(Number.isInteger(n) && n >= 2)) throw new RangeError(`rehearse constraint: ngram must be 0 or an integer >= 2, got ${n}`);
  const inPrompt = n ? countNgrams(prompt, n) : new Map();
  const written: number[] = [];
  const inOutput: NgramCounts = new Map();
  let state: GrammarState | null = initialGrammarState(opts.maxStringChars?.[tool] ?? Infinity);
  return {
    allowed() {
      // A text the grammar has already rejected (only possible if a caller forced a token) is left free.
      if (state === null) return null;
      const g = grammarMask(v, state);
      if (g === null || !n || written.length < n - 1) return g;
      const prefix = written.slice(written.length - n + 1).join(',');
      const mine = inOutput.get(prefix);
      if (!mine) return g;
      const theirs = inPrompt.get(prefix);
      const m = Uint8Array.from(g);
      let left = 0;
      for (const [t, k] of mine) if (k >= Math.max(1, theirs?.get(t) ?? 0)) m[t] = 0;
      for (let i = 0; i < m.length && left === 0; i++) left += m[i];
      // The guard never leaves the grammar without a way on.
      return left > 0 ? m : g;
    },
    push(token) {
      if (n && written.length >= n - 1) bump(inOutput, written.slice(written.length - n + 1).join(','), token);
      written.push(token);
      const t = v.text[token];
      state = state === null || t === null ? null : feedText(state, t);
    },
  };
}
