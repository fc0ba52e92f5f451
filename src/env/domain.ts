// The contract every domain implements, so that a second domain is a folder (src/env/<name>/) and not a
// fork: tools with JSON schemas, a database of records, a task source, the reward and an expert. The
// generic machinery (store, execution, parsing, rewards, judge) lives beside this file and never names a
// domain.

import type { ConfirmationOptions } from './confirmation';
import type { Environment } from './env';
import type { StoreTx } from './store';

/** The JSON-schema subset used by tool parameters (validated by src/env/schema.ts). */
export interface JsonSchema {
  type: 'object' | 'string' | 'array' | 'number' | 'integer' | 'boolean';
  description?: string;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: false;
  items?: JsonSchema;
  maxLength?: number;
  maxItems?: number;
  enum?: string[];
}

/**
 * A tool definition in the OpenAI function-calling format (also what MCP tool lists carry). A type alias,
 * not an interface, so it stays assignable to plain JSON-object types (Record<string, unknown>).
 */
export type ToolDefinition = {
  type: 'function';
  function: { name: string; description: string; parameters: JsonSchema };
};

export type ToolKind = 'read' | 'write' | 'generic';

export interface ToolSpec {
  name: string;
  description: string;
  kind: ToolKind;
  parameters: JsonSchema;
  /** Runs against a transaction; throws ToolError for a domain failure. Arguments are schema-valid. */
  run(tx: StoreTx, args: Record<string, unknown>): unknown;
}

/** A failure the domain defines (its message is the upstream error text, without an "Error: " prefix). */
export class ToolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ToolError';
  }
}

export interface ToolCall {
  name: string;
  arguments: Record<string, unknown>;
}

/** Why a call produced an error observation; only 'tool' errors come from the domain itself. */
export type ObservationErrorCode = 'parse' | 'unknown_tool' | 'invalid_arguments' | 'tool' | 'internal';

export type Observation =
  | { ok: true; name: string; result: unknown }
  | { ok: false; name: string; error: string; code: ObservationErrorCode };

/** One agent turn of a trajectory: a tool call with what came back (real or rehearsed), or a reply. */
export type Step =
  | { kind: 'call'; call: ToolCall; observation: Observation }
  | { kind: 'reply'; text: string };

/**
 * Checklist items for the imagined-trajectory judge (rules in src/env/judge.ts). `call` items require a
 * call by name whose arguments include `args` (after the domain's normaliseArgs); `no_forbidden_writes`
 * fails if any successful write call matches no `call` item; `fact` requires the text in a reply.
 */
export type ChecklistItem =
  | { kind: 'call'; name: string; args: Record<string, unknown>; weight: number }
  | { kind: 'no_forbidden_writes'; weight: number }
  | { kind: 'fact'; text: string; weight: number };

/**
 * The user role (τ²-bench's half-duplex user simulator). The stop tokens are τ²'s own spellings, so a
 * conversation the lab records is one τ²'s orchestrator would also end at the same turn: STOP when the
 * user's goal is met, TRANSFER when the agent hands the user to another agent, OUT-OF-SCOPE when the user's
 * instructions do not cover what the conversation now needs.
 */
export const USER_STOP = '###STOP###';
export const USER_TRANSFER = '###TRANSFER###';
export const USER_OUT_OF_SCOPE = '###OUT-OF-SCOPE###';
export const USER_STOP_TOKENS = [USER_STOP, USER_TRANSFER, USER_OUT_OF_SCOPE] as const;
export type UserStopToken = (typeof USER_STOP_TOKENS)[number];

/** τ²'s is_stop: a token anywhere in the message ends the conversation (a model user may add words around it). */
export function userStopToken(text: string): UserStopToken | null {
  for (const t of USER_STOP_TOKENS) if (text.includes(t)) return t;
  return null;
}

/** What a customer-facing agent says first in τ² (the orchestrator's fixed greeting). */
export const AGENT_GREETING = 'Hi! How can I help you today?';

/** A user message inside a conversation. */
export type UserTurn = { kind: 'user'; text: string };

/**
 * One turn of a conversation: an agent step (a call with its observation, or a reply, which no longer ends
 * the episode) or a user message. A plain `Step[]` is the agent's side of it (what the rewards replay).
 */
export type Turn = Step | UserTurn;

/**
 * The user's next turn. `meaning` is a structured account of what a scripted user said (what it revealed,
 * what it confirmed), for scripted agents that stand in for perfect understanding, as the expert reads a
 * task's intent; a model agent never sees it, and a model user leaves it out.
 */
export type UserAct<M = unknown> =
  | { kind: 'message'; text: string; meaning?: M }
  | { kind: 'stop'; token: UserStopToken; text: string; meaning?: M };

/**
 * A user turn that could not be had from a generated user (a model, an endpoint): nothing usable was written
 * (an empty message, a prompt that no longer fits), or the endpoint failed. τ² ends such a conversation with
 * USER_ERROR and scores it 0 (only agent and user stops are evaluated); the lab does the same.
 */
export type UserFailure = { kind: 'error'; error: string; text: string };

/**
 * A user whose turns are generated (the policy playing the user, an OpenAI-compatible endpoint): the
 * UserSimulator contract, asynchronous, and allowed to fail. The rollout loop asks all waiting conversations
 * at once, so an implementation can batch them. Deterministic under its construction's seed where the
 * generator is (a local model is; an endpoint is as deterministic as the server).
 */
export interface GeneratedUserSimulator<M = unknown> {
  readonly generated: true;
  next(conversation: readonly Turn[]): Promise<UserAct<M> | UserFailure>;
}

/**
 * τ²'s user instructions (a task file's user_scenario.instructions): what a model that plays the user reads,
 * and all it knows of the customer. Fields are '' where a task leaves them out.
 */
export interface UserInstructions {
  reasonForCall: string;
  knownInfo: string;
  unknownInfo: string;
  taskInstructions: string;
}

export interface UserSimulator<M = unknown> {
  /**
   * The user's turn after `conversation`: the turns so far, normally ending with an agent reply (τ²: the agent
   * greets first); an empty conversation asks for the opening message. A pure function of the conversation
   * and the simulator's construction (task, seed), so a recorded conversation replays to the same user turns.
   * Only what a user can see counts: agent replies, never calls or observations.
   */
  next(conversation: readonly Turn[]): UserAct<M>;
}

/** The agent's side of a conversation, which is what the real reward and the judge score. */
export function agentSteps(conversation: readonly Turn[]): Step[] {
  return conversation.filter((t): t is Step => t.kind !== 'user');
}

export interface Task {
  id: string;
  /** What the user says, in order; generated tasks have one message that carries consent to act. */
  userMessages: string[];
  /** The calls whose replay defines the gold final database (some may fail on purpose). */
  referenceActions: ToolCall[];
  /** Strings some assistant reply must contain (τ²-bench communicate_info). */
  facts: string[];
  checklist: ChecklistItem[];
  family?: string;
  split?: 'train' | 'test';
}

/** A training row as plain data. Messages never include the system prompt or tool list: the renderer adds them. */
export interface ChatMessage {
  role: 'user' | 'assistant' | 'tool';
  content: string;
}

export interface GroundingExample {
  name: string;
  arguments: Record<string, unknown>;
  result: string; // the serialised observation, as a Rehearse target would write it
}

/**
 * role 'act': `messages` is the history up to this turn; `target` is what the policy writes (a
 * `<tool_call>` block or the final reply). role 'rehearse': `messages` is the history before the call,
 * `call` is the call to simulate, `grounding` are real triples from the same task (never the call itself),
 * and `target` is `<execution_result>\n{json}\n</execution_result>` with the real observation.
 */
export type Row =
  | { role: 'act'; taskId: string; messages: ChatMessage[]; target: string }
  | {
      role: 'rehearse';
      taskId: string;
      messages: ChatMessage[];
      call: ToolCall;
      grounding: GroundingExample[];
      target: string;
    };

export interface ExpertResult {
  steps: Step[];
  rows: Row[];
  /** Number of deliberate mistakes the expert made (and recovered from) in this episode. */
  mistakes: number;
  /** Number of replies that left out details the user was owed (ExpertOptions.carelessRate). */
  careless?: number;
}

/** A careless demonstrator's habits (ExpertOptions.carelessAbout): what each one leaves out of a reply. */
export const CARELESS_HABITS = ['figures', 'refusals', 'lookups'] as const;
export type CarelessHabit = (typeof CARELESS_HABITS)[number];
/** The habits of a careless demonstrator that names none (the first one there was). */
export const DEFAULT_CARELESS_ABOUT: readonly CarelessHabit[] = ['figures'];
export const CARELESS_HABIT_TEXT: Readonly<Record<CarelessHabit, string>> = {
  figures: 'the tracking number of a status lookup, the amount refunded or charged after a write',
  refusals: 'why a cancellation or a return is refused (the order\'s status, the reasons allowed)',
  lookups: 'what a lookup found: the tracking number of a status lookup, the status that stops a write, the orders on the account when an order is not found',
};

export interface ExpertOptions {
  /** Probability, per opportunity, of a realistic mistake followed by the error and the fix. */
  mistakeRate?: number;
  /**
   * Probability, per reply (each request's part of it), that the expert leaves out what a user was owed (a careless demonstrator:
   * its episode then fails the reward's COMMUNICATE check). A teaching base imitates the habit; RL against
   * the verifiable reward can unlearn it. Default 0.
   */
  carelessRate?: number;
  /** What the careless demonstrator leaves out (default DEFAULT_CARELESS_ABOUT: the figures). */
  carelessAbout?: readonly CarelessHabit[];
  seed?: number;
}

/**
 * The task seed of the held-out evaluation (`npm run eval -- --tasks test`): every figure called "held-out" in
 * the cards, the probes and the pretraining's own evaluation is measured on the test tasks of this seed.
 */
export const HELD_OUT_TASK_SEED = 1;

export interface TaskSource<T extends Task = Task> {
  /** Deterministic in (split, seed, count); train and test seeds never overlap. */
  generate(opts: { split: 'train' | 'test'; count: number; seed?: number }): T[];
}

export interface Domain<T extends Task = Task> {
  name: string;
  /** Short policy text for the Act system prompt. */
  policy: string;
  tools: readonly ToolSpec[];
  definitions(): ToolDefinition[];
  /** A fresh environment over the domain's initial database (cheap: shares the frozen base). */
  createEnv(): Environment;
  tasks: TaskSource<T>;
  /** A scripted user for a task, deterministic under `seed` (absent where the domain has none yet). */
  user?(task: T, opts?: { seed?: number }): UserSimulator;
  /**
   * The τ² instructions a model reads to play the user of a task, under the user `seed` the scripted user
   * plays (a generated task's are rendered from its intent; a τ² file's are its own); null: none.
   */
  userInstructions?(task: T, opts?: { seed?: number }): UserInstructions | null;
  /** What counts as a write and which of its details a user must have said yes to (src/env/confirmation.ts). */
  confirmation?: ConfirmationOptions;
  /** Runs the scripted expert on a task in the given (fresh) environment. */
  expert(task: T, env: Environment, opts?: ExpertOptions): ExpertResult;
  /**
   * The scripted expert as a τ² agent in a conversation with the domain's scripted user under `userSeed` (the
   * greeting first, then agent steps and user turns in order); absent where the domain has none.
   */
  expertConversation?(task: T, env: Environment, opts?: ExpertOptions & { userSeed?: number }): { turns: Turn[] };
  /** Canonicalises arguments before the judge compares them (e.g. unordered id lists); identity by default. */
  normaliseArgs?(name: string, args: Record<string, unknown>): Record<string, unknown>;
  /**
   * Values a user states in words that a call or an observation must match exactly (a cancellation reason,
   * a product name, an option value): the lexicon of the `stated-values` tokenizer pre-tokenizer.
   */
  statedValues?(): readonly string[];
  /** Fields that upstream types as float, for byte-parity traces (see pyJson). */
  floatKeys: ReadonlySet<string>;
  /** Real-execution reward of a trajectory (src/env/reward.ts rules): 0 or 1. */
  realReward(task: T, steps: readonly Step[], opts?: { terminated?: boolean }): number;
  /** Checklist-judge reward of a (possibly imagined) trajectory (src/env/judge.ts rules): -0.1 or [0, 1]. */
  judge(task: T, steps: readonly Step[]): number;
}

export function toolDefinitions(tools: readonly ToolSpec[]): ToolDefinition[] {
  return tools.map((t) => ({
    type: 'function',
    function: { name: t.name, description: t.description, parameters: t.parameters },
  }));
}
