// Tokenizer and chat template through transformers.js, built from local file contents only (no hub,
// no network): the same code works in Node and in the browser on any ModelSource.
import { PreTrainedTokenizer } from '@huggingface/transformers';
import { ModelFormatError } from '../engine/errors';
import { readJson, type ModelSource } from './source';
import { escapeRegExp } from '../util/regex';

export const TOKENIZER_FILE = 'tokenizer.json';
export const TOKENIZER_CONFIG_FILE = 'tokenizer_config.json';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
  [extra: string]: unknown;
}

export interface ChatOptions {
  /** Tool schemas in the OpenAI function format, rendered by the template. */
  tools?: unknown[];
  addGenerationPrompt?: boolean;
  /** Extra template variables (e.g. enable_thinking for Qwen3). */
  templateArgs?: Record<string, unknown>;
}

/** Segments the encode memo keeps (oldest dropped first), and the shortest worth keeping. */
const MEMO_ENTRIES = 4096;
const MEMO_MIN_CHARS = 64;


export class Tokenizer {
  /** Token ids that end a generation (eos + the chat turn end). */
  readonly stopIds: number[];
  /** Highest token id + 1 (the model's vocab_size may be larger: Qwen pads it). */
  readonly size: number;

  constructor(
    private readonly tok: PreTrainedTokenizer,
    readonly hasChatTemplate: boolean,
    size: number,
    /** The added tokens (chat markup, eos, tool-call tags): never part of a value written in JSON. */
    readonly specialIds: readonly number[] = [],
    specialSplit: RegExp | null = null,
    /**
     * Whether decoding maps each id to its bytes and the bytes to text, nothing looking across tokens (a byte-level
     * decoder without clean-up): then DecodeStream decodes a growing output piece by piece.
     */
    readonly byteLevelDecode = false,
  ) {
    const ids = new Set<number>();
    for (const t of ['<|im_end|>', '<|endoftext|>', tok.eos_token]) {
      if (!t) continue;
      const id = this.tokenId(t);
      if (id !== null) ids.add(id);
    }
    this.stopIds = [...ids];
    this.size = size;
    this.specialSplit = specialSplit;
  }

  /**
   * Splits text at its special tokens (capturing them), or null when encoding cannot be split there: then
   * every encode goes to transformers.js whole.
   */
  private readonly specialSplit: RegExp | null;
  /** Segment -> ids (see encode). */
  private readonly memo = new Map<string, number[]>();

  /** From parsed tokenizer.json and tokenizer_config.json objects. */
  static fromJSON(tokenizerJson: unknown, tokenizerConfig: unknown): Tokenizer {
    if (typeof tokenizerJson !== 'object' || tokenizerJson === null || !('model' in tokenizerJson))
      throw new ModelFormatError(TOKENIZER_FILE, 'not a tokenizers JSON file (no "model" entry)');
    if (typeof tokenizerConfig !== 'object' || tokenizerConfig === null) throw new ModelFormatError(TOKENIZER_CONFIG_FILE, 'expected a JSON object');
    let tok: PreTrainedTokenizer;
    try {
      tok = new PreTrainedTokenizer(tokenizerJson as object, tokenizerConfig as object);
    } catch (e) {
      throw new ModelFormatError(TOKENIZER_FILE, `cannot build a tokenizer from it (${(e as Error).message})`);
    }
    // The id range, read from the file itself: the model's embedding must cover it.
    const j = tokenizerJson as { model: { vocab?: unknown }; added_tokens?: { id?: unknown }[] };
    let max = -1;
    if (j.model.vocab && typeof j.model.vocab === 'object') for (const id of Object.values(j.model.vocab)) if (typeof id === 'number') max = Math.max(max, id);
    const added: number[] = [];
    for (const t of j.added_tokens ?? []) if (typeof t.id === 'number') (max = Math.max(max, t.id)), added.push(t.id);
    const byteLevel = (tokenizerJson as { decoder?: { type?: unknown } }).decoder?.type === 'ByteLevel' && (tokenizerConfig as { clean_up_tokenization_spaces?: unknown }).clean_up_tokenization_spaces === false;
    return new Tokenizer(tok, typeof (tokenizerConfig as { chat_template?: unknown }).chat_template === 'string', max + 1, added, specialSplitOf(j.added_tokens ?? []), byteLevel);
  }

  static async load(src: ModelSource): Promise<Tokenizer> {
    const [json, config] = await Promise.all([readJson(src, TOKENIZER_FILE), readJson(src, TOKENIZER_CONFIG_FILE)]);
    return Tokenizer.fromJSON(json, config);
  }

  /**
   * Special tokens written in the text (e.g. <|im_start|>) become their single ids.
   * A rollout re-encodes its whole conversation every turn, and transformers.js caches BPE only for pieces
   * under 256 characters, while a pre-tokenizer that splits at few places (long numbers, stated values)
   * leaves pieces of thousands. Text is cut at special tokens, which tokenization never crosses (they are
   * split off before normalization and pre-tokenization, see specialSplitOf), and each segment's ids are
   * memoized, so a system prompt or a turn already seen costs a lookup.
   */
  encode(text: string): number[] {
    if (!this.specialSplit) return this.encodeSegment(text);
    const out: number[] = [];
    for (const part of text.split(this.specialSplit)) {
      if (part === '') continue;
      if (part.length < MEMO_MIN_CHARS) {
        for (const id of this.encodeSegment(part)) out.push(id);
        continue;
      }
      let ids = this.memo.get(part);
      if (!ids) {
        ids = this.encodeSegment(part);
        if (this.memo.size >= MEMO_ENTRIES) this.memo.delete(this.memo.keys().next().value!);
        this.memo.set(part, ids);
      }
      for (const id of ids) out.push(id);
    }
    return out;
  }

  private encodeSegment(text: string): number[] {
    return this.tok.encode(text, { add_special_tokens: false });
  }

  decode(ids: readonly number[], opts: { skipSpecial?: boolean } = {}): string {
    // transformers.js throws on an empty list; a generation whose first token is eos decodes to ''.
    if (ids.length === 0) return '';
    return this.tok.decode([...ids], { skip_special_tokens: opts.skipSpecial ?? false });
  }

  /** The id of a single token string, or null if it is not one token. */
  tokenId(token: string): number | null {
    const ids = this.tok.encode(token, { add_special_tokens: false });
    return ids.length === 1 ? ids[0] : null;
  }

  /** Render messages with the model's chat template (tokenizer_config.json). */
  chat(messages: readonly ChatMessage[], opts: ChatOptions = {}): string {
    if (!this.hasChatTemplate) throw new ModelFormatError(TOKENIZER_CONFIG_FILE, 'has no chat_template');
    return this.tok.apply_chat_template(messages as unknown as { role: string; content: string }[], {
      tokenize: false,
      add_generation_prompt: opts.addGenerationPrompt ?? true,
      tools: opts.tools as never,
      ...(opts.templateArgs ?? {}),
    }) as string;
  }
}

/**
 * The text of a growing list of ids (a generation's output), equal after every push to the tokenizer's decode of all
 * of them, without decoding all of them on every push. With a byte-level decoder the text of the ids up to a point
 * where it ends on a whole character never changes (transformers.js keeps a byte-order mark wherever it is, so the
 * text after that point decodes alone to what it adds: test/model/decode-stream.test.ts): those ids are done, and a
 * push decodes only the ids after them. Any other decoder decodes everything on every push.
 */
export class DecodeStream {
  readonly ids: number[] = [];
  /** decode(ids). */
  text = '';
  private done = 0;
  private doneText = '';

  constructor(private readonly tok: Tokenizer) {}

  push(id: number): string {
    this.ids.push(id);
    if (!this.tok.byteLevelDecode) return (this.text = this.tok.decode(this.ids));
    const tail = this.tok.decode(this.ids.slice(this.done));
    this.text = this.doneText + tail;
    // A trailing U+FFFD may be a character whose bytes are not all here yet: those ids stay open.
    if (!tail.endsWith('\uFFFD')) {
      this.done = this.ids.length;
      this.doneText = this.text;
    }
    return this.text;
  }
}

/** A tokenizer whose ids exceed the model's embedding would index out of range: refuse it up front. */
export function checkTokenizerFits(tok: Tokenizer, vocabSize: number): void {
  if (tok.size > vocabSize)
    throw new ModelFormatError(TOKENIZER_FILE, `has token ids up to ${tok.size - 1} but config.json vocab_size is ${vocabSize}`);
}

/**
 * A regex that cuts text at the added tokens, when transformers.js splits them off the same way: matched
 * literally, with no whitespace stripped around them, not normalized, not single-word. Otherwise null.
 */
function specialSplitOf(added: readonly unknown[]): RegExp | null {
  const contents: string[] = [];
  for (const t of added) {
    const a = t as { content?: unknown; lstrip?: unknown; rstrip?: unknown; normalized?: unknown; single_word?: unknown };
    if (typeof a.content !== 'string' || a.content === '') return null;
    if (a.lstrip === true || a.rstrip === true || a.normalized === true || a.single_word === true) return null;
    contents.push(a.content);
  }
  if (contents.length === 0) return null;
  contents.sort((x, y) => y.length - x.length); // longest first, as the added-token splitter matches
  return new RegExp(`(${contents.map(escapeRegExp).join('|')})`);
}
