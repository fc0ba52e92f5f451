// The user played by an OpenAI-compatible chat endpoint (issue 47: `--user endpoint --user-url URL
// --user-model NAME`), for a researcher with a local LLM server. It sends the user-role prompt of
// user-prompt.ts as chat messages (the system message with the scenario, then the conversation with roles
// flipped), so the lab's own `npm run serve -- --openai` renders it exactly as the model user renders it
// locally. The HTTP client is passed in (the CLI binds the official `openai` client), so this layer has no
// network code of its own.
//
// τ²'s stop tokens are not sent as `stop` sequences: a server drops the stop string it matched, and the token
// is what the turn means. Requests run a few at a time (a local server serves one anyway), and a request
// that fails (HTTP error, context exceeded, network) fails that turn only: the conversation ends with a
// user error and the evaluation goes on.
import { deriveSeed } from '../util/rng';
import type { GeneratedUserSimulator, Turn, UserAct, UserFailure, UserInstructions } from '../env/domain';
import type { ChatMessage } from './chat';
import { readUserText, userMessages } from './user-prompt';

/** One chat completion: the messages in, the assistant's text out (throws on any failure). */
export type ChatComplete = (req: { messages: { role: 'system' | 'user' | 'assistant'; content: string }[]; maxTokens: number; temperature: number; seed: number }) => Promise<string | null>;

export interface EndpointUserOptions {
  complete: ChatComplete;
  /** Completion tokens per user turn. */
  maxTokens: number;
  /** Default 0 (greedy), as τ²'s user simulator runs. */
  temperature?: number;
  /** Requests in flight at once (default 4). */
  concurrency?: number;
}

/** Runs at most `n` tasks at once, in arrival order. */
export function limiter(n: number): <T>(f: () => Promise<T>) => Promise<T> {
  let active = 0;
  const waiting: (() => void)[] = [];
  return async (f) => {
    if (active >= n) await new Promise<void>((r) => waiting.push(r));
    active++;
    try {
      return await f();
    } finally {
      active--;
      waiting.shift()?.();
    }
  };
}

export class EndpointUsers {
  private readonly run: <T>(f: () => Promise<T>) => Promise<T>;
  readonly stats = { requests: 0, failures: 0 };

  constructor(readonly o: EndpointUserOptions) {
    if (!(Number.isInteger(o.maxTokens) && o.maxTokens >= 1)) throw new RangeError(`maxTokens must be a positive integer, got ${o.maxTokens}`);
    this.run = limiter(o.concurrency ?? 4);
  }

  user(instructions: UserInstructions, seed: number): EndpointUser {
    return new EndpointUser(this, instructions, seed >>> 0);
  }

  /** The assistant text of one request (counted; a failure is rethrown for the conversation to record). */
  async ask(messages: ChatMessage[], seed: number): Promise<string | null> {
    this.stats.requests++;
    try {
      return await this.run(() =>
        this.o.complete({
          messages: messages.map((m) => ({ role: m.role === 'tool' ? 'user' : m.role, content: m.content })),
          maxTokens: this.o.maxTokens,
          temperature: this.o.temperature ?? 0,
          seed,
        }),
      );
    } catch (e) {
      this.stats.failures++;
      throw e;
    }
  }
}

export class EndpointUser implements GeneratedUserSimulator {
  readonly generated = true;

  constructor(
    readonly pool: EndpointUsers,
    readonly instructions: UserInstructions,
    readonly seed: number,
  ) {}

  async next(conversation: readonly Turn[]): Promise<UserAct | UserFailure> {
    const k = conversation.filter((t) => t.kind === 'user').length;
    try {
      // A 31-bit seed: some servers refuse larger ones.
      return readUserText(await this.pool.ask(userMessages(this.instructions, conversation), deriveSeed(this.seed, k) & 0x7fffffff));
    } catch (e) {
      return { kind: 'error', error: `the user endpoint failed: ${e instanceof Error ? e.message : String(e)}`, text: '' };
    }
  }
}
