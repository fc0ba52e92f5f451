// The lab's model as the user (issue 47, "the policy plays the user"): a GeneratedUserSimulator that writes
// each user turn with generate() from the user-role prompt (user-prompt.ts), as the Act and Rehearse roles
// generate theirs. Any model and adapter can play it: the agent's own policy, or another model folder.
//
// Batching: every ModelUser of one UserGenerator queues its request and the generator runs the queue as one
// generate() call on the next microtask, so the rollout loop, which asks every waiting conversation at once
// (Promise.all), gets one batched generation per round; the calls are serialised, so two batches never share
// the backend at once. A sequence's tokens do not depend on its batch (generate()'s guarantee), so batching
// changes nothing a conversation says.
//
// Determinism: turn k of a user draws from deriveSeed(user seed, k); greedy (temperature 0, the default, as
// τ²'s user simulator runs) needs no seed at all. The same conversation therefore always gets the same turn.
import { deriveSeed } from '../util/rng';
import { USER_STOP_TOKENS, type GeneratedUserSimulator, type Turn, type UserAct, type UserFailure, type UserInstructions } from '../env/domain';
import { generate, type GenerateRequest, type GenerateResult } from '../model/generate';
import type { LoraAdapter } from '../model/lora';
import type { Qwen3Model } from '../model/qwen3';
import type { Tokenizer } from '../model/tokenizer';
import { fitUserPrompt, readUserText } from './user-prompt';

/** New tokens per user turn when none is given: the scripted user's longest lines are ~60 words. */
export const DEFAULT_USER_TOKENS = 128;

export interface UserModelOptions {
  model: Qwen3Model;
  tokenizer: Tokenizer;
  adapter: LoraAdapter | null;
  /** New tokens per user turn (default DEFAULT_USER_TOKENS). */
  maxTokens?: number;
  /** Default 0 (greedy). */
  temperature?: number;
  topP?: number;
  /** Prompt + new tokens must fit this (default: the model's context). */
  maxContext?: number;
  signal?: AbortSignal;
}

interface Queued {
  prompt: number[];
  seed: number;
  done: (r: GenerateResult | Error) => void;
}

export class UserGenerator {
  readonly stats = { generations: 0, batches: 0, generatedTokens: 0, promptTokens: 0, droppedMessages: 0 };
  readonly maxTokens: number;
  readonly maxContext: number;
  private queue: Queued[] = [];
  private scheduled = false;
  private chain: Promise<void> = Promise.resolve();

  constructor(readonly o: UserModelOptions) {
    this.maxTokens = o.maxTokens ?? DEFAULT_USER_TOKENS;
    if (!(Number.isInteger(this.maxTokens) && this.maxTokens >= 1)) throw new RangeError(`maxTokens must be a positive integer, got ${this.maxTokens}`);
    this.maxContext = Math.min(o.maxContext ?? Infinity, o.model.config.maxPositionEmbeddings);
  }

  /** The user of one task: its instructions, and the seed of its turns' sampling. */
  user(instructions: UserInstructions, seed: number): ModelUser {
    return new ModelUser(this, instructions, seed >>> 0);
  }

  /** Queues one generation (prompt already fitted); resolves once its batch has run. */
  request(prompt: number[], seed: number): Promise<GenerateResult> {
    return new Promise((ok, fail) => {
      this.queue.push({ prompt, seed, done: (r) => (r instanceof Error ? fail(r) : ok(r)) });
      if (!this.scheduled) {
        this.scheduled = true;
        queueMicrotask(() => {
          this.scheduled = false;
          const batch = this.queue;
          this.queue = [];
          this.chain = this.chain.then(() => this.run(batch));
        });
      }
    });
  }

  private async run(batch: Queued[]): Promise<void> {
    const temperature = this.o.temperature ?? 0;
    const reqs: GenerateRequest[] = batch.map((q) => ({
      prompt: q.prompt,
      maxNewTokens: this.maxTokens,
      stop: USER_STOP_TOKENS,
      sampling: { temperature, topP: this.o.topP ?? 1, seed: q.seed },
    }));
    try {
      const out = await generate(this.o.model, this.o.tokenizer, reqs, { adapter: this.o.adapter, signal: this.o.signal });
      this.stats.batches++;
      out.forEach((r, i) => {
        this.stats.generations++;
        this.stats.generatedTokens += r.tokens.length;
        this.stats.promptTokens += r.promptTokens.length;
        batch[i].done(r);
      });
    } catch (e) {
      for (const q of batch) q.done(e instanceof Error ? e : new Error(String(e)));
    }
  }
}

export class ModelUser implements GeneratedUserSimulator {
  readonly generated = true;

  constructor(
    readonly generator: UserGenerator,
    readonly instructions: UserInstructions,
    readonly seed: number,
  ) {}

  /** The prompt of the turn after `conversation` (null: it cannot fit the context with its budget). */
  prompt(conversation: readonly Turn[]): { text: string; ids: number[]; dropped: number } | null {
    const g = this.generator;
    let ids: number[] = [];
    const fitted = fitUserPrompt(this.instructions, conversation, (text) => {
      ids = g.o.tokenizer.encode(text);
      return ids.length + g.maxTokens <= g.maxContext;
    });
    return fitted ? { text: fitted.text, ids, dropped: fitted.dropped } : null;
  }

  async next(conversation: readonly Turn[]): Promise<UserAct | UserFailure> {
    const p = this.prompt(conversation);
    if (!p) return { kind: 'error', error: `the user prompt does not fit the context (${this.generator.maxContext} tokens with ${this.generator.maxTokens} to write)`, text: '' };
    if (p.dropped) this.generator.stats.droppedMessages += p.dropped;
    const k = conversation.filter((t) => t.kind === 'user').length;
    const r = await this.generator.request(p.ids, deriveSeed(this.seed, k));
    // generate() cuts the text before a stop string; the stop token is the turn's meaning, so it goes back.
    return readUserText(r.finishReason === 'stop' && r.stopIndex !== undefined ? r.text + USER_STOP_TOKENS[r.stopIndex] : r.text);
  }
}
