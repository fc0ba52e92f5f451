// A byte-level BPE tokenizer for the bundled policy: trainer, encoder, decoder.
//
// Design choices (the context length is the main cost of a small policy):
// - No word pre-tokenization (the byte-level pre-tokenizer runs with use_regex: false, like the second
//   stage of Qwen's own pipeline): merges may cross spaces and punctuation, so frequent multi-word domain
//   strings (the constant tool block, `{"name": "get_order_details", "arguments": {"order_id": "#W`,
//   `<execution_result>\n{"result":`) become a few tokens instead of dozens.
// - Long numbers (optional, on for the bundled policy): every digit of a run of 4 or more digits is its
//   own pre-token, never merged. Ids, zip codes and item numbers must be copied digit for digit from the
//   context into calls; with merges across them the same id tokenizes differently in a user message and
//   in a JSON value, and a small model failed to copy them (the first bundled policy wrote "#W323" for
//   "#W3238419"). Short numbers (JSON-schema limits like 200, prices' parts) still merge, so the constant
//   tool block stays short. Qwen's own pre-tokenizer splits every digit; this is the cheaper variant.
// - Values (the `values` pre-tokenizer): the mini-world policy copies values it has seen, but on unseen users
//   it failed because a name tokenized differently in a request and in a call (`Sophia", "last_name": "`
//   was one token). So every value a call copies is its own pre-token, whatever surrounds it: every digit,
//   every capitalised word (names, streets, cities), the local part and the domain of an email, the prefix
//   of a snake-case id (`sophia_garcia_` of `sophia_garcia_1234`). The JSON scaffolding between values and
//   lowercase prose still merges freely, so the constant tool block stays a few hundred tokens.
// - Stated values (the `stated-values` pre-tokenizer): long numbers as above, plus a lexicon of the values a
//   user states in prose that a call or an observation must match exactly (the domain's statedValues(): a
//   cancellation reason, a product name, an option value). Without it the mini policy never read the reason
//   of a cancellation: `, the reason is: ordered by mistake` was one token of the request while the call
//   needs `ordered by mistake`, and a record fused option values with their keys
//   (`","color":"blue`) while the request says `color blue`. Matched whole, between non-alphanumerics, so
//   the value is the same pre-token in a request, a record and a call; prose and scaffolding still merge.
// - Special tokens split the text first and never take part in merges (as Hugging Face added tokens).
// - A token string that two different merges produce is one vocab entry (keyed by its bytes), exactly as
//   the tokenizers library does, so the rank-ordered merge list encodes the same way here and in
//   transformers.js.
// Token ids: 0..255 are the single bytes (id = byte value), merged tokens follow in creation order, the
// special tokens come last.

export class BpeError extends Error {
  override readonly name = 'BpeError';
}

export interface BpeTrainOptions {
  /** Total vocabulary including the 256 bytes and the special tokens. */
  vocabSize: number;
  /** Strings that split the text and become their own tokens (never merged). */
  specials: readonly string[];
  /** A pair seen fewer times than this is never merged (default 2). */
  minFrequency?: number;
  /** Longest token in bytes (default 64): stops a few huge tokens eating the vocabulary. */
  maxTokenBytes?: number;
  /** Which spans are isolated before merging (default 'none'); see PRE_TOKENIZERS. */
  preTokenizer?: PreTokenizerName;
  /** The stated values the `stated-values` pre-tokenizer isolates (required by it, refused by the others). */
  lexicon?: readonly string[];
}

const enc = new TextEncoder();
const dec = new TextDecoder('utf-8', { fatal: false });

/** Splits text on special-token strings (leftmost match, longest special first): ordinary segments and specials. */
export function splitSpecials(text: string, specials: readonly string[]): { text: string; special: boolean }[] {
  const out: { text: string; special: boolean }[] = [];
  const sorted = [...specials].sort((a, b) => b.length - a.length);
  let i = 0;
  let start = 0;
  while (i < text.length) {
    const hit = text.charCodeAt(i) === 0x3c ? sorted.find((s) => text.startsWith(s, i)) : undefined;
    if (hit) {
      if (i > start) out.push({ text: text.slice(start, i), special: false });
      out.push({ text: hit, special: true });
      i += hit.length;
      start = i;
    } else i++;
  }
  if (start < text.length) out.push({ text: text.slice(start), special: false });
  return out;
}

/**
 * One digit that has, within its run of digits, a+b >= 3 neighbours (a before, b after): the digits of
 * runs of 4+. The same source is the Split pattern in tokenizer.json (JS and Oniguruma both have
 * fixed-length lookbehind).
 */
export const LONG_NUMBER_DIGIT = '[0-9](?=[0-9]{3})|(?<=[0-9])[0-9](?=[0-9]{2})|(?<=[0-9]{2})[0-9](?=[0-9])|(?<=[0-9]{3})[0-9]';

/**
 * Spans a call copies from its context, each isolated so that it tokenizes the same in a request, an
 * observation and a JSON value: every digit of a 4+ digit number, a shorter number whole (street numbers,
 * schema limits); a capitalised word that does not continue a word (names, not the `Length` of
 * `maxLength`); an email's lowercase local part (up to its digits) and its domain; the letter prefix of a
 * snake-case id that ends in digits. One source for our
 * encoder and the Split pattern in tokenizer.json (JS and Oniguruma read it the same: lookahead only).
 */
export const VALUE_SPAN = `${LONG_NUMBER_DIGIT}|[0-9]{1,3}|(?<![A-Za-z])[A-Z][A-Za-z]*|[a-z][a-z._+-]*(?=[0-9a-z._+-]*@)|@[a-z0-9-]+(?:\\.[a-z0-9-]+)+|[a-z]+(?:_[a-z]+)*_(?=[0-9])`;

/** The pre-tokenizers: none (merges cross everything), long-numbers, values, stated-values (long numbers and a lexicon). */
export const PRE_TOKENIZERS = { none: null, 'long-numbers': LONG_NUMBER_DIGIT, values: VALUE_SPAN, 'stated-values': LONG_NUMBER_DIGIT } as const;
export type PreTokenizerName = keyof typeof PRE_TOKENIZERS;
export const PRE_TOKENIZER_NAMES = Object.keys(PRE_TOKENIZERS) as PreTokenizerName[];

// A lexicon entry matches whole: not inside a longer word or number.
const WORD_CHAR = '[A-Za-z0-9]';
const LEXICON_OPEN = `(?<!${WORD_CHAR})(?:`;
const LEXICON_CLOSE = `)(?!${WORD_CHAR})`;
const WORD_CHAR_RE = new RegExp(WORD_CHAR);
// Syntax characters and `/` only: the escapes a `u`-flag RegExp (transformers.js) also accepts.
const escapeRegex = (v: string) => v.replace(/[.*+?^${}()[\]/]/g, '\\$&');

/** Checks a lexicon: non-empty strings without `|`, backslashes or control characters, no duplicates. */
function checkLexicon(scheme: PreTokenizerName, lexicon: readonly string[]): void {
  if (scheme !== 'stated-values') {
    if (lexicon.length > 0) throw new BpeError(`the ${scheme} pre-tokenizer takes no lexicon`);
    return;
  }
  if (lexicon.length === 0) throw new BpeError('the stated-values pre-tokenizer needs a non-empty lexicon');
  const seen = new Set<string>();
  for (const v of lexicon) {
    // eslint-disable-next-line no-control-regex
    if (typeof v !== 'string' || v.length === 0 || /[|\\\u0000-\u001f]/.test(v)) throw new BpeError(`lexicon entry ${JSON.stringify(v)} is empty or holds |, \\ or a control character`);
    if (seen.has(v)) throw new BpeError(`lexicon entry ${JSON.stringify(v)} is listed twice`);
    seen.add(v);
  }
}

/**
 * The Split pattern of a scheme (null: no split). A lexicon is tried longest entry first, so a value that
 * extends another ("no longer needed" and a shorter one) wins where both match.
 */
export function preTokenizerPattern(scheme: PreTokenizerName, lexicon: readonly string[] = []): string | null {
  checkLexicon(scheme, lexicon);
  const base = PRE_TOKENIZERS[scheme];
  if (scheme !== 'stated-values') return base;
  const alts = [...lexicon].sort((a, b) => b.length - a.length || (a < b ? -1 : a > b ? 1 : 0)).map(escapeRegex);
  return `${base}|${LEXICON_OPEN}${alts.join('|')}${LEXICON_CLOSE}`;
}

/** The lexicon back out of a stated-values pattern (null when the pattern is not one). */
export function lexiconOfPattern(pattern: string): string[] | null {
  const head = `${PRE_TOKENIZERS['stated-values']}|${LEXICON_OPEN}`;
  if (!pattern.startsWith(head) || !pattern.endsWith(LEXICON_CLOSE)) return null;
  const lexicon = pattern.slice(head.length, -LEXICON_CLOSE.length).split('|').map((v) => v.replace(/\\(.)/g, '$1'));
  try {
    return preTokenizerPattern('stated-values', lexicon) === pattern ? lexicon : null;
  } catch {
    return null;
  }
}

const splitters = new Map<string, RegExp | null>();
function splitter(scheme: PreTokenizerName, lexicon: readonly string[]): RegExp | null {
  const pattern = preTokenizerPattern(scheme, lexicon);
  if (pattern === null) return null;
  let re = splitters.get(pattern);
  if (!re) splitters.set(pattern, (re = new RegExp(`(${pattern})`)));
  return re;
}

/** A non-special segment cut into pre-tokens: each match of the scheme's pattern alone, the text between as it is. */
export function preTokens(text: string, scheme: PreTokenizerName, lexicon: readonly string[] = []): string[] {
  const re = splitter(scheme, lexicon);
  if (!re) return [text];
  return text.split(re).filter((p) => p.length > 0);
}

/** Min-heap entries packed as (primary, secondary) numbers; small and allocation-light. */
class Heap {
  private a: number[] = [];
  private b: number[] = [];
  get size(): number {
    return this.a.length;
  }
  private less(i: number, j: number): boolean {
    return this.a[i] < this.a[j] || (this.a[i] === this.a[j] && this.b[i] < this.b[j]);
  }
  private swap(i: number, j: number): void {
    const ta = this.a[i];
    this.a[i] = this.a[j];
    this.a[j] = ta;
    const tb = this.b[i];
    this.b[i] = this.b[j];
    this.b[j] = tb;
  }
  push(p: number, s: number): void {
    this.a.push(p);
    this.b.push(s);
    let i = this.a.length - 1;
    while (i > 0) {
      const up = (i - 1) >> 1;
      if (!this.less(i, up)) break;
      this.swap(i, up);
      i = up;
    }
  }
  pop(): [number, number] {
    const top: [number, number] = [this.a[0], this.b[0]];
    const la = this.a.pop()!;
    const lb = this.b.pop()!;
    if (this.a.length > 0) {
      this.a[0] = la;
      this.b[0] = lb;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < this.a.length && this.less(l, m)) m = l;
        if (r < this.a.length && this.less(r, m)) m = r;
        if (m === i) break;
        this.swap(i, m);
        i = m;
      }
    }
    return top;
  }
}

// Pair keys: ids stay below 2^21, so a * 2^21 + b is an exact integer.
const SHIFT = 2 ** 21;
const pairKey = (a: number, b: number) => a * SHIFT + b;

export class Bpe {
  /** Bytes of every non-special token, by id. */
  readonly tokens: Uint8Array[];
  /** Merge rules in rank order, as token ids (left, right). */
  readonly merges: [number, number][];
  readonly specials: readonly string[];
  readonly preTokenizer: PreTokenizerName;
  /** The stated values isolated by the `stated-values` pre-tokenizer (empty for the others). */
  readonly lexicon: readonly string[];
  private readonly lexiconSet: ReadonlySet<string>;
  private readonly rank = new Map<number, number>();
  private readonly mergedId = new Map<number, number>();
  private readonly specialIds = new Map<string, number>();
  private readonly cache = new Map<string, number[]>();

  constructor(tokens: Uint8Array[], merges: [number, number][], specials: readonly string[], opts: { preTokenizer?: PreTokenizerName; lexicon?: readonly string[] } = {}) {
    this.tokens = tokens;
    this.merges = merges;
    this.specials = specials;
    this.preTokenizer = opts.preTokenizer ?? 'none';
    this.lexicon = [...(opts.lexicon ?? [])];
    checkLexicon(this.preTokenizer, this.lexicon);
    this.lexiconSet = new Set(this.lexicon);
    const byBytes = new Map<string, number>();
    tokens.forEach((t, id) => byBytes.set(bytesKey(t), id));
    merges.forEach(([a, b], r) => {
      const id = byBytes.get(bytesKey(concat(tokens[a], tokens[b])));
      if (id === undefined) throw new BpeError(`merge ${r} produces a token missing from the vocabulary`);
      if (!this.rank.has(pairKey(a, b))) this.rank.set(pairKey(a, b), r);
      this.mergedId.set(pairKey(a, b), id);
    });
    specials.forEach((s, i) => this.specialIds.set(s, tokens.length + i));
  }

  get size(): number {
    return this.tokens.length + this.specials.length;
  }

  tokenId(special: string): number {
    const id = this.specialIds.get(special);
    if (id === undefined) throw new BpeError(`unknown special token ${JSON.stringify(special)}`);
    return id;
  }

  /** Text -> ids: specials split first, then each segment's bytes merged lowest rank first, leftmost first. */
  encode(text: string): number[] {
    const out: number[] = [];
    this.walk(text, (ids) => {
      for (const id of ids) out.push(id);
    });
    return out;
  }

  /**
   * The one encoding walk: each special's id, then each pre-token's ids, with whether that pre-token is a
   * lexicon value matched whole (the lexicon rule's own boundaries; not a digit the long-number rule cut out
   * of an id that happens to equal a value such as the size "7").
   */
  private walk(text: string, emit: (ids: readonly number[], value: boolean) => void): void {
    for (const seg of splitSpecials(text, this.specials)) {
      if (seg.special) {
        emit([this.specialIds.get(seg.text)!], false);
        continue;
      }
      let at = 0;
      for (const piece of preTokens(seg.text, this.preTokenizer, this.lexicon)) {
        const value = this.lexiconSet.has(piece) && !WORD_CHAR_RE.test(seg.text[at - 1] ?? '') && !WORD_CHAR_RE.test(seg.text[at + piece.length] ?? '');
        emit(this.encodeSegment(piece), value);
        at += piece.length;
      }
    }
  }

  /**
   * Text -> ids, and per id whether it spells a lexicon value (a whole `stated-values` pre-token): what a
   * loss weight on stated values marks. Same ids as encode.
   */
  encodeMarkingValues(text: string): { ids: number[]; value: Uint8Array } {
    const ids: number[] = [];
    const value: number[] = [];
    this.walk(text, (piece, isValue) => {
      for (const id of piece) {
        ids.push(id);
        value.push(isValue ? 1 : 0);
      }
    });
    return { ids, value: Uint8Array.from(value) };
  }

  private encodeSegment(text: string): number[] {
    const hit = this.cache.get(text);
    if (hit) return hit;
    const sym = Array.from(enc.encode(text));
    const n = sym.length;
    const next = new Int32Array(n).map((_, i) => (i + 1 < n ? i + 1 : -1));
    const prev = new Int32Array(n).map((_, i) => i - 1);
    const alive = new Uint8Array(n).fill(1);
    const heap = new Heap();
    const offer = (i: number) => {
      const j = next[i];
      if (i < 0 || j < 0) return;
      const r = this.rank.get(pairKey(sym[i], sym[j]));
      if (r !== undefined) heap.push(r * n + i, pairKey(sym[i], sym[j]));
    };
    for (let i = 0; i + 1 < n; i++) offer(i);
    while (heap.size > 0) {
      const [score, key] = heap.pop();
      const i = score % n;
      const j = next[i];
      // Stale entry: the pair at i changed since it was pushed.
      if (!alive[i] || j < 0 || pairKey(sym[i], sym[j]) !== key) continue;
      sym[i] = this.mergedId.get(key)!;
      alive[j] = 0;
      next[i] = next[j];
      if (next[j] >= 0) prev[next[j]] = i;
      offer(prev[i]);
      offer(i);
    }
    const ids: number[] = [];
    for (let i = 0; i >= 0 && i < n; i = next[i]) ids.push(sym[i]);
    // Whole segments repeat (the tool block starts every prompt): cache them, bounded.
    if (this.cache.size > 50_000) this.cache.clear();
    this.cache.set(text, ids);
    return ids;
  }

  /** Ids -> text (invalid UTF-8 across a cut becomes U+FFFD, as byte-level decoders do). */
  decode(ids: readonly number[]): string {
    let out = '';
    let buf: number[] = [];
    const flush = () => {
      if (buf.length) out += dec.decode(new Uint8Array(buf));
      buf = [];
    };
    for (const id of ids) {
      if (id >= this.tokens.length) {
        const s = this.specials[id - this.tokens.length];
        if (s === undefined) throw new BpeError(`token id ${id} out of range (vocab ${this.size})`);
        flush();
        out += s;
      } else if (id >= 0) for (const b of this.tokens[id]) buf.push(b);
      else throw new BpeError(`negative token id ${id}`);
    }
    flush();
    return out;
  }
}

const bytesKey = (b: Uint8Array) => Array.from(b).join(',');
function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const c = new Uint8Array(a.length + b.length);
  c.set(a);
  c.set(b, a.length);
  return c;
}

/**
 * Learns merges from texts: the most frequent adjacent pair (ties: smaller left id, then smaller right id)
 * is merged everywhere, until the vocabulary is full or no pair reaches minFrequency. Deterministic.
 */
export function trainBpe(texts: Iterable<string>, opts: BpeTrainOptions): Bpe {
  const minFreq = opts.minFrequency ?? 2;
  const maxBytes = opts.maxTokenBytes ?? 64;
  const budget = opts.vocabSize - opts.specials.length;
  if (!Number.isInteger(opts.vocabSize) || budget < 256 || opts.vocabSize >= SHIFT)
    throw new BpeError(`vocabSize ${opts.vocabSize} must leave room for 256 bytes and ${opts.specials.length} specials`);

  // Unique segments with their counts: the constant tool block is one entry however often it occurs.
  const counts = new Map<string, number>();
  const iso = opts.preTokenizer ?? 'none';
  const lexicon = opts.lexicon ?? [];
  for (const t of texts)
    for (const s of splitSpecials(t, opts.specials)) if (!s.special) for (const p of preTokens(s.text, iso, lexicon)) counts.set(p, (counts.get(p) ?? 0) + 1);
  const words: number[][] = [];
  const wc: number[] = [];
  for (const [s, c] of counts) {
    words.push(Array.from(enc.encode(s)));
    wc.push(c);
  }

  const tokens: Uint8Array[] = Array.from({ length: 256 }, (_, b) => Uint8Array.of(b));
  const byBytes = new Map<string, number>(tokens.map((t, i) => [bytesKey(t), i]));
  const merges: [number, number][] = [];
  const pairCount = new Map<number, number>();
  const pairWords = new Map<number, Set<number>>();
  // Max-heap by count via negation; stale entries are re-checked on pop.
  const heap = new Heap();
  // Pairs whose count grew since the last heap push (pushed once per merge step, not once per word).
  const grown = new Set<number>();
  const bump = (k: number, w: number, d: number) => {
    const c = (pairCount.get(k) ?? 0) + d;
    if (c === 0) pairCount.delete(k);
    else pairCount.set(k, c);
    if (d > 0) {
      let set = pairWords.get(k);
      if (!set) pairWords.set(k, (set = new Set()));
      set.add(w);
      grown.add(k);
    }
  };
  const pushGrown = () => {
    for (const k of grown) {
      const c = pairCount.get(k) ?? 0;
      if (c > 0) heap.push(-c, k);
    }
    grown.clear();
  };
  words.forEach((w, i) => {
    for (let j = 0; j + 1 < w.length; j++) bump(pairKey(w[j], w[j + 1]), i, wc[i]);
  });
  pushGrown();

  while (tokens.length < budget && heap.size > 0) {
    const [negC, key] = heap.pop();
    const cur = pairCount.get(key) ?? 0;
    if (cur !== -negC) {
      if (cur > 0 && cur < -negC) heap.push(-cur, key);
      continue;
    }
    if (cur < minFreq) break;
    const a = Math.floor(key / SHIFT);
    const b = key % SHIFT;
    const bytes = concat(tokens[a], tokens[b]);
    if (bytes.length > maxBytes) continue; // never merged; the entry is dropped for good
    let id = byBytes.get(bytesKey(bytes));
    if (id === undefined) {
      id = tokens.length;
      tokens.push(bytes);
      byBytes.set(bytesKey(bytes), id);
    }
    merges.push([a, b]);
    for (const wi of pairWords.get(key) ?? []) mergeWord(wi, a, b, id);
    pairWords.delete(key);
    pushGrown();
  }
  return new Bpe(tokens, merges, [...opts.specials], { preTokenizer: iso, lexicon });

  // Replaces every leftmost non-overlapping (a,b) in word wi by id and updates only the pairs that touch it.
  function mergeWord(wi: number, a: number, b: number, id: number): void {
    const old = words[wi];
    const c = wc[wi];
    const sites: number[] = [];
    for (let j = 0; j + 1 < old.length; j++) if (old[j] === a && old[j + 1] === b) sites.push(j++);
    if (sites.length === 0) return;
    const gone = new Set<number>();
    for (const j of sites) for (const s of [j - 1, j, j + 1]) if (s >= 0 && s + 1 < old.length) gone.add(s);
    for (const s of gone) bump(pairKey(old[s], old[s + 1]), wi, -c);
    const neu: number[] = [];
    const made: number[] = [];
    let k = 0;
    for (let j = 0; j < old.length; j++) {
      if (k < sites.length && sites[k] === j) {
        made.push(neu.length);
        neu.push(id);
        j++;
        k++;
      } else neu.push(old[j]);
    }
    const fresh = new Set<number>();
    for (const m of made) for (const s of [m - 1, m]) if (s >= 0 && s + 1 < neu.length) fresh.add(s);
    for (const s of fresh) bump(pairKey(neu[s], neu[s + 1]), wi, c);
    words[wi] = neu;
  }
}
