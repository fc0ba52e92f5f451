// The placeholder model's tokenizer: byte-level BPE with one token per byte and no merges, plus Qwen's
// chat and tool-call tokens (the same scheme as the model tests' fixture, test/fixtures/tiny-model.ts).
// A 265-token vocabulary keeps the random model's embedding and the sampler's per-token work tiny, which
// matters on slow adapters (SwiftShader samples a 151k vocabulary in tens of seconds per token).
import { Tokenizer } from '../../src/model/tokenizer';

const SPECIAL = ['<|endoftext|>', '<|im_start|>', '<|im_end|>'];
const ADDED = ['<tool_call>', '</tool_call>', '<tool_response>', '</tool_response>', '<think>', '</think>'];

/** Byte-level BPE's byte -> printable character table (printable bytes map to themselves). */
function byteChars(): string[] {
  const keep = (b: number) => (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  const out: string[] = [];
  let shifted = 0;
  for (let b = 0; b < 256; b++) out.push(String.fromCharCode(keep(b) ? b : 256 + shifted++));
  return out;
}

export function byteTokenizer(): Tokenizer {
  const vocab: Record<string, number> = {};
  byteChars().forEach((ch, b) => (vocab[ch] = b));
  const added = [...SPECIAL, ...ADDED].map((content, i) => ({
    id: 256 + i,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: SPECIAL.includes(content),
  }));
  const byteLevel = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: true };
  const json = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: null,
    pre_tokenizer: byteLevel,
    post_processor: null,
    decoder: byteLevel,
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges: [] },
  };
  const config = { add_bos_token: false, bos_token: null, eos_token: '<|im_end|>', pad_token: '<|endoftext|>', unk_token: null, clean_up_tokenization_spaces: false, model_max_length: 32768, tokenizer_class: 'Qwen2Tokenizer' };
  return Tokenizer.fromJSON(json, config);
}
