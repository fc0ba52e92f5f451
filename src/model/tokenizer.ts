// Tokenizer and chat template through transformers.js, built from local file contents only (no hub,
// no network): the same code works in Node and in the browser on any ModelSource.
import { PreTrainedTokenizer } from '@huggingface/transformers';
import { ModelFormatError } from '../engine/errors';
import { readJson, type ModelSource } from './source';

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
  ) {
    const ids = new Set<number>();
    for (const t of ['<|im_end|>', '<|endoftext|>', tok.eos_token]) {
      if (!t) continue;
      const id = this.tokenId(t);
      if (id !== null) ids.add(id);
    }
    this.stopIds = [...ids];
    this.size = size;
  }

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
    return new Tokenizer(tok, typeof (tokenizerConfig as { chat_template?: unknown }).chat_template === 'string', max + 1, added);
  }

  static async load(src: ModelSource): Promise<Tokenizer> {
    const [json, config] = await Promise.all([readJson(src, TOKENIZER_FILE), readJson(src, TOKENIZER_CONFIG_FILE)]);
    return Tokenizer.fromJSON(json, config);
  }

  /** Special tokens written in the text (e.g. <|im_start|>) become their single ids. */
  encode(text: string): number[] {
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

/** A tokenizer whose ids exceed the model's embedding would index out of range: refuse it up front. */
export function checkTokenizerFits(tok: Tokenizer, vocabSize: number): void {
  if (tok.size > vocabSize)
    throw new ModelFormatError(TOKENIZER_FILE, `has token ids up to ${tok.size - 1} but config.json vocab_size is ${vocabSize}`);
}
