// Server-side episodes: one live episode = one task, its own copy-on-write database, the Act
// conversation so far, and the lab's own machinery for everything a trainer asks of it. Nothing here
// re-implements the method: a call goes through the lab's Episode (src/rollout/episode.ts, real mode) as the
// Act text the lab's expert would write for it, so the untrusted-input parsing, the observation text, the
// conversation and the turn limit are the lab's; the rehearse prompt is buildRehearsePrompt with the task's
// reference grounding (rollout.ts referenceGrounding); rewards are the lab's defaultReward on a lab Episode.
// The live episodes themselves are held by store.ts.
import { randomUUID } from 'node:crypto';
import type { ChecklistItem, Domain, GroundingExample, Observation, Step, Task, ToolCall, ToolDefinition } from '../env/domain';
import { EMPTY_RESPONSE_REWARD, judge, judgeOptions, type ItemVerdict } from '../env/judge';
import { realReward } from '../env/reward';
import { formatCall, formatObservation, parse, serializeObservation } from '../env/toolcall';
import { buildActPrompt } from '../rollout/act-prompt';
import type { ChatMessage } from '../rollout/chat';
import { Episode } from '../rollout/episode';
import { buildRehearsePrompt, parseExecutionResult, RESULT_OPEN, type RehearsePromptOptions } from '../rollout/rehearse-prompt';
import { defaultReward } from '../rollout/reward-rule';

/** A request the client got wrong (HTTP 4xx); `status` is the HTTP status, `code` a stable word. */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** Seconds after which a retry may succeed (sent as Retry-After). */
    readonly retryAfterS?: number,
  ) {
    super(message);
  }
}

export interface TaskSet {
  /** Every served task by id. */
  byId: Map<string, Task>;
  /** Task ids per split, in generation (or file) order. */
  splits: { train: string[]; test: string[] };
}

export function taskSet(tasks: readonly Task[], defaultSplit: 'train' | 'test' = 'train'): TaskSet {
  const byId = new Map<string, Task>();
  const splits = { train: [] as string[], test: [] as string[] };
  for (const t of tasks) {
    if (byId.has(t.id)) throw new Error(`duplicate task id ${JSON.stringify(t.id)}`);
    byId.set(t.id, t);
    splits[t.split ?? defaultSplit].push(t.id);
  }
  return { byId, splits };
}

/** Chat messages as trainers send them (OpenAI / Hugging Face layout); only what we read is typed. */
export interface WireMessage {
  role: string;
  content?: unknown;
  tool_calls?: unknown;
}

export interface ScoreResult {
  kind: 'real' | 'judge';
  reward: number;
  checklist: (Omit<ItemVerdict, 'item'> & ChecklistItem)[];
  /** real only: τ²'s DB and COMMUNICATE parts and the facts no reply stated. */
  db?: 0 | 1;
  communicate?: 0 | 1;
  missing_facts?: string[];
  /** How the (reconstructed) episode ended, as the lab names it; null while it was still running. */
  end: string | null;
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const OPEN_TAG = '<tool_call>';
const CLOSE_TAG = '</tool_call>';

/** The Act text for a call received as data: the expert's format when it is a well-formed call, else raw JSON. */
export function callText(name: unknown, args: unknown): string {
  if (typeof name === 'string' && (args === undefined || isObject(args) || typeof args === 'string')) {
    const text = formatCall({ name, arguments: (args ?? {}) as Record<string, unknown> });
    // A call that arrives as data is already structured: a string value holding "</tool_call>" or "<think>"
    // must not end the block or open a think span when the text is parsed back. Inside JSON, '<' can only
    // stand in a string, where \u003c means the same character to JSON.parse and nothing to the scanner.
    const inner = text.slice(OPEN_TAG.length, -CLOSE_TAG.length);
    return inner.includes('<') ? OPEN_TAG + inner.replaceAll('<', '\\u003c') + CLOSE_TAG : text;
  }
  let body: string;
  try {
    body = JSON.stringify({ name, arguments: args ?? {} }) ?? 'null';
  } catch {
    body = 'null';
  }
  return `<tool_call>\n${body}\n</tool_call>`;
}

/** A ToolCall from request data, for the rehearse prompt (which needs a parsed call, as in the lab). */
export function requireCall(body: Record<string, unknown>): ToolCall {
  const name = body.name;
  const args = Object.hasOwn(body, 'arguments') ? body.arguments : {};
  if (typeof name !== 'string' || name.length === 0 || name.length > 100) throw new ApiError(400, 'bad_request', '"name" must be a tool name (a string of 1 to 100 characters)');
  if (!isObject(args)) throw new ApiError(400, 'bad_request', '"arguments" must be a JSON object');
  return { name, arguments: args };
}

const flatVerdicts = (items: readonly ItemVerdict[]) => items.map(({ item, satisfied, turn, reason }) => ({ ...item, satisfied, turn, reason }));

export class ServerEpisode {
  lastUsed = Date.now();
  /** The lab's episode, in real mode: its `env` is this episode's own database. */
  readonly ep: Episode;
  /** Set by the MCP layer when this episode is an MCP session (closed when the episode goes away). */
  close: (() => void) | null = null;

  constructor(
    readonly domain: Domain,
    readonly task: Task,
    readonly grounding: readonly GroundingExample[],
    maxTurns: number,
    /** Who created it (the remote address): the per-client quota counts by it. */
    readonly client = 'local',
    readonly id: string = randomUUID(),
    readonly created = Date.now(),
    /** Set by the MCP layer: the episode is an MCP session. */
    readonly mcp = false,
  ) {
    this.ep = new Episode(task.id, this.id, task, 'real', domain.createEnv(), grounding, maxTurns);
  }

  /** The Act prompt's system message and the task's user messages (what a trainer's first turn sees). */
  firstMessages(): { role: string; content: string }[] {
    return [{ role: 'system', content: this.domain.policy }, ...this.task.userMessages.map((content) => ({ role: 'user', content }))];
  }

  actPrompt(): string {
    return buildActPrompt(this.domain.policy, this.domain.definitions(), this.ep.messages);
  }

  /**
   * Executes one call (untrusted: any name, any arguments) as one Act turn. A malformed call becomes the
   * lab's parse or validation error observation and leaves the database exactly as it was.
   */
  call(name: unknown, args: unknown): Observation {
    if (this.ep.done) throw new ApiError(409, 'episode_ended', `the episode has ended (${this.ep.end}); no more calls`);
    const before = this.ep.steps.length;
    this.ep.applyAct(callText(name, args));
    const step = this.ep.steps.slice(before).find((s): s is Extract<Step, { kind: 'call' }> => s.kind === 'call');
    if (!step) return { ok: false, name: '', error: 'the call was not understood', code: 'parse' }; // not reached: callText always makes a block
    return step.observation;
  }

  /**
   * The lab's Rehearse prompt for `call` in this episode: the task's grounding, and as history this episode's
   * conversation, or `history` when the trainer holds an imagined one (its wire messages become the Act
   * conversation: assistant turns as the lab's Act text, tool turns as observations; system turns skipped).
   */
  rehearsePrompt(call: ToolCall, opts: RehearsePromptOptions = {}, history?: readonly WireMessage[]): { prompt: string; messages: ChatMessage[] } {
    const hist: ChatMessage[] = history
      ? history.flatMap((m): ChatMessage[] =>
          m.role === 'assistant' ? [{ role: 'assistant', content: assistantText(m) }] : m.role === 'user' || m.role === 'tool' ? [{ role: m.role, content: contentText(m.content) }] : [],
        )
      : this.ep.messages;
    const r = buildRehearsePrompt({ tools: this.domain.definitions() as ToolDefinition[], grounding: this.grounding, history: hist, call }, opts);
    return { prompt: r.text, messages: r.messages };
  }

  hash(): string {
    return this.ep.env.hash();
  }

  /**
   * Real reward of this episode's real state: the calls this server executed, and the replies found in the
   * trainer's `messages` (assistant text outside tool-call blocks), by the lab's rules (defaultReward of a
   * real-mode episode: τ²'s DB × COMMUNICATE; an empty assistant turn −0.1; the turn limit 0).
   */
  scoreReal(messages: readonly WireMessage[] | undefined, terminated = false): ScoreResult {
    const replies: Step[] = [];
    let empty = false;
    for (const m of messages ?? []) {
      if (m.role !== 'assistant') continue;
      const text = assistantText(m);
      if (text.trim() === '') {
        empty = true;
        continue;
      }
      const p = parse(text);
      if (p.reply !== '') replies.push({ kind: 'reply', text: p.reply });
    }
    const steps = [...this.ep.steps.filter((s) => s.kind === 'call'), ...replies];
    const r = realReward(() => this.domain.createEnv(), this.task, steps);
    const ended = terminated || this.ep.terminated;
    const reward = empty ? EMPTY_RESPONSE_REWARD : ended ? 0 : r.reward;
    const env = this.ep.env;
    const j = judge(this.task.checklist, steps, judgeOptions(env, this.domain.normaliseArgs?.bind(this.domain)));
    return { kind: 'real', reward, checklist: flatVerdicts(j.items), db: r.db, communicate: r.communicate, missing_facts: r.missingFacts, end: empty ? 'empty' : ended ? (this.ep.end ?? 'max-turns') : null };
  }

  /**
   * Real reward of a trajectory the trainer holds (`replay`): its assistant turns are replayed through a lab
   * Episode in real mode on a fresh database of this task (τ²'s rule replays the calls anyway), scored with
   * the lab's defaultReward. For a reward function that never saw the episode (verl's compute_score).
   * This episode's own database is not touched.
   */
  scoreReplay(messages: readonly WireMessage[], maxTurns: number): ScoreResult {
    const ep = new Episode(this.task.id, this.id + ':replay', this.task, 'real', this.domain.createEnv(), [], maxTurns);
    for (const m of messages) {
      if (ep.done) break;
      if (m.role === 'assistant') ep.applyAct(assistantText(m));
    }
    const r = realReward(() => this.domain.createEnv(), this.task, ep.steps);
    const env = ep.env;
    const j = judge(this.task.checklist, ep.steps, judgeOptions(env, this.domain.normaliseArgs?.bind(this.domain)));
    return { kind: 'real', reward: defaultReward(ep, this.domain), checklist: flatVerdicts(j.items), db: r.db, communicate: r.communicate, missing_facts: r.missingFacts, end: ep.end };
  }

  /**
   * Checklist-judge reward of an imagined trajectory of this episode's task: `messages` is the Act
   * conversation with rehearsed observations as tool messages. It is replayed through a lab Episode in
   * rehearse mode (so parsing, empty turns, invalid rehearsals and the turn limit are the lab's) and scored
   * with the lab's defaultReward. The real database of this episode is not touched.
   */
  scoreImagined(messages: readonly WireMessage[], maxTurns: number): ScoreResult {
    const ep = new Episode(this.task.id, this.id + ':imagined', this.task, 'rehearse', this.domain.createEnv(), this.grounding, maxTurns);
    for (const m of messages) {
      if (ep.done) break;
      if (m.role === 'assistant') {
        if (ep.pending.length > 0) throw new ApiError(400, 'bad_request', 'an assistant message before every call of the previous turn had its tool message');
        ep.applyAct(assistantText(m));
      } else if (m.role === 'tool') {
        const p = ep.pending[0];
        if (!p) throw new ApiError(400, 'bad_request', 'a tool message without a pending call');
        const c = typeof m.content === 'string' ? m.content : contentText(m.content);
        ep.applyRehearse(p, c.trimStart().startsWith(RESULT_OPEN) ? c : `${RESULT_OPEN}\n${c}\n</execution_result>`);
      }
    }
    const env = ep.env;
    const j = judge(this.task.checklist, ep.steps, judgeOptions(env, this.domain.normaliseArgs?.bind(this.domain)));
    const reward = defaultReward(ep, this.domain);
    return { kind: 'judge', reward, checklist: flatVerdicts(j.items), end: ep.end };
  }
}

/** Text of a message content that may be a string or a list of {type: "text", text} parts. */
function contentText(c: unknown): string {
  if (typeof c === 'string') return c;
  if (Array.isArray(c)) return c.map((p) => (isObject(p) && typeof p.text === 'string' ? p.text : '')).join('');
  return '';
}

/** An assistant message as the Act text the lab would have seen: its content, then its tool_calls as blocks. */
export function assistantText(m: WireMessage): string {
  let text = contentText(m.content);
  if (Array.isArray(m.tool_calls)) {
    for (const tc of m.tool_calls) {
      const f = isObject(tc) && isObject(tc.function) ? tc.function : isObject(tc) ? tc : {};
      let args = f.arguments;
      if (typeof args === 'string') {
        try {
          args = JSON.parse(args);
        } catch {
          /* left as a string: parse() reports it */
        }
      }
      text += (text ? '\n' : '') + callText(f.name, args);
    }
  }
  return text;
}

export { formatObservation, serializeObservation };
