// `npm run eval -- --user scripted|model|endpoint [--samples N] [--max-user-turns N]` and `--user-fidelity`:
// the conversation flags of the eval CLI (issue 47), kept apart from eval.ts so that file's own flags and its
// one-message path stay as they are.
//
// Who plays the user: `scripted`, the domain's scripted τ² user (generated tasks only: it plays their
// intents); `model`, the lab's model playing the task's τ² instructions (src/rollout/model-user.ts; by
// default the agent's own model and adapter, the policy playing both sides, or --user-model DIR with
// --user-adapter DIR); `endpoint`, any OpenAI-compatible chat endpoint doing the same (--user-url URL
// --user-model NAME, through the official `openai` client). Model and endpoint users play any task that has
// instructions: generated tasks (rendered from their intents) and τ²-bench task files alike.
import { resolve } from 'node:path';
import OpenAI from 'openai';
import type { Backend } from '../engine/backend';
import type { Domain, GeneratedUserSimulator, Task } from '../env/domain';
import type { RetailTask } from '../env/retail/intent';
import { conversationSummary, evaluateConversations, type ConversationReport, type ConversationTranscript } from '../eval/conversation-eval';
import type { EvalPolicy } from '../eval/evaluate';
import { measureUserFidelity, userFidelitySummary, type UserFidelityReport } from '../eval/user-fidelity';
import type { LoraAdapter } from '../model/lora';
import { loadAdapters } from '../rl/checkpoint';
import { DirStore } from '../rl/store-node';
import { DEFAULT_MAX_USER_TURNS, USER_KINDS, type ConversationOptions, type UserKind } from '../rollout/conversation';
import { EndpointUsers } from '../rollout/endpoint-user';
import { DEFAULT_USER_TOKENS, UserGenerator } from '../rollout/model-user';
import type { RolloutDomain, RolloutLimits } from '../rollout/rollout';
import { checkWritablePath, writeFileAtomic } from '../util/atomic-file';
import { recordPath } from '../util/record-path';
import { ArgError, enumFlag, intFlag, openModel, strFlag, type FlagSpec } from './args';
import type { WorldName } from '../env/retail/index';

/** Act turns of a conversation when --max-turns is not given: the paper's ≤ 30 turns (one-message episodes keep 12). */
export const CONVERSATION_MAX_TURNS = 30;

export const CONVERSATION_FLAGS: FlagSpec = {
  user: { type: 'string', arg: 'U', help: 'each task is a conversation with a user, and the reply no longer ends the episode (a write before the user\'s explicit yes fails the task): scripted (the domain\'s scripted τ² user; generated tasks only), model (the lab\'s model plays the task\'s τ² instructions; any task with instructions, τ² files included), endpoint (an OpenAI-compatible chat endpoint plays them: --user-url, --user-model)', default: 'off: one-message episodes' },
  samples: { type: 'string', arg: 'N', help: 'with --user: conversations per task, 1..16, for pass^k (k = 1..N); N > 1 samples at temperature 1, N = 1 decodes greedily', default: '1' },
  'max-user-turns': { type: 'string', arg: 'N', help: 'with --user: user turns before an episode is cut off (reward 0), 1..100', default: String(DEFAULT_MAX_USER_TURNS) },
  'user-model': { type: 'string', arg: 'X', help: 'with --user model: the model folder that plays the user; with --user endpoint: the model name to request (required there)', default: 'the agent\'s model (and adapter)' },
  'user-adapter': { type: 'string', arg: 'DIR', help: 'with --user model: a PEFT adapter folder or a training run folder (its last checkpoint\'s Act adapter) for the user', default: 'the agent\'s adapter with the agent\'s model, none with --user-model' },
  'user-url': { type: 'string', arg: 'URL', help: 'with --user endpoint: the endpoint\'s base URL, e.g. http://127.0.0.1:8000/v1 (key: $OPENAI_API_KEY, if it needs one)' },
  'max-user-tokens': { type: 'string', arg: 'N', help: 'with --user model|endpoint: new tokens per user turn, 1..4096', default: String(DEFAULT_USER_TOKENS) },
  transcripts: { type: 'string', arg: 'FILE', help: 'with --user: also write every conversation (the user\'s turns, the agent\'s calls with their observations and its replies, the reward, how it ended and the writes made without a yes) to FILE, one JSON line each' },
  'user-fidelity': { type: 'boolean', help: 'with --user model|endpoint and --tasks test|train: instead of conversations, measure the user against the scripted user, turn by turn on the scripted conversations (same information revealed, same decision at a proposal, same stop)' },
};

export type UserSource =
  | { kind: 'scripted' }
  | { kind: 'model'; modelDir?: string; adapterDir?: string; maxTokens: number }
  | { kind: 'endpoint'; url: string; name: string; maxTokens: number };

export interface ConversationEvalArgs {
  conversation: ConversationOptions;
  samples: number;
  source: UserSource;
  fidelity: boolean;
  /** Where every conversation is written as a JSON line (--transcripts). */
  transcripts?: string;
}

const USER_ONLY = ['samples', 'max-user-turns', 'user-model', 'user-adapter', 'user-url', 'max-user-tokens', 'user-fidelity', 'transcripts'] as const;

/** The conversation options of the command line, or null without --user (refusals are usage errors). */
export function conversationArgs(v: Record<string, string | boolean | undefined>, opts: { tts: boolean }): ConversationEvalArgs | null {
  if (v.user === undefined) {
    const stray = USER_ONLY.filter((k) => v[k] !== undefined && v[k] !== false);
    if (stray.length) throw new ArgError(`${stray.map((k) => `--${k}`).join(', ')} need${stray.length > 1 ? '' : 's'} --user (scripted, model or endpoint)`);
    return null;
  }
  const user: UserKind = enumFlag(v, 'user', USER_KINDS, 'scripted');
  if (opts.tts) throw new ArgError('--user does not combine with --tts (test-time rehearsal of conversations is not built yet)');
  const only = (flags: readonly string[], kinds: readonly UserKind[]) => {
    for (const f of flags) if (v[f] !== undefined && !kinds.includes(user)) throw new ArgError(`--${f} needs --user ${kinds.join('|')}`);
  };
  only(['user-adapter'], ['model']);
  only(['user-url'], ['endpoint']);
  only(['user-model', 'max-user-tokens'], ['model', 'endpoint']);
  const fidelity = v['user-fidelity'] === true;
  if (fidelity && user === 'scripted') throw new ArgError('--user-fidelity measures a model or endpoint user against the scripted one: use --user model or --user endpoint');
  const transcripts = strFlag(v, 'transcripts');
  if (fidelity && transcripts !== undefined) throw new ArgError('--transcripts writes conversations, and --user-fidelity runs none: leave one out');
  const maxTokens = intFlag(v, 'max-user-tokens', DEFAULT_USER_TOKENS, 1, 4096);
  let source: UserSource = { kind: 'scripted' };
  if (user === 'model') source = { kind: 'model', modelDir: strFlag(v, 'user-model'), adapterDir: strFlag(v, 'user-adapter'), maxTokens };
  if (user === 'endpoint') {
    const url = strFlag(v, 'user-url');
    const name = strFlag(v, 'user-model');
    if (!url || !name) throw new ArgError('--user endpoint needs --user-url URL and --user-model NAME');
    if (!/^https?:\/\/[^\s]+$/.test(url)) throw new ArgError(`--user-url must be an http(s) URL, got ${JSON.stringify(url)}`);
    source = { kind: 'endpoint', url, name, maxTokens };
  }
  return {
    conversation: { user, maxUserTurns: intFlag(v, 'max-user-turns', DEFAULT_MAX_USER_TURNS, 1, 100) },
    samples: intFlag(v, 'samples', 1, 1, 16),
    source,
    fidelity,
    ...(transcripts !== undefined ? { transcripts } : {}),
  };
}

/**
 * The scripted user plays a generated task's structured intent; a model or endpoint user plays a task's τ²
 * instructions, which generated tasks and τ² files have and a lab-format file's tasks do not.
 */
export function checkConversationTasks(tasks: readonly Task[], tasksArg: string, a: ConversationEvalArgs, domain: Domain): void {
  const generated = tasksArg === 'test' || tasksArg === 'train';
  if (a.source.kind === 'scripted' || a.fidelity) {
    if (!generated || tasks.some((t) => !('intent' in t))) {
      throw new ArgError(a.fidelity ? `--user-fidelity replays the scripted user on generated tasks: use --tasks test|train, not ${tasksArg}` : `--user scripted plays the generated tasks of --tasks test|train, not ${tasksArg}: the scripted user needs each task's generated intent`);
    }
    return;
  }
  const without = tasks.find((t) => !domain.userInstructions?.(t));
  if (without) throw new ArgError(`--user ${a.source.kind} plays a task's τ² user instructions, and task ${without.id} of ${tasksArg} has none (a τ²-bench task file or a generated split has them)`);
}

/** A generated user, open: the factory the rollouts call, what to record of it, and how to release it. */
interface OpenedUser {
  generatedUser: (task: Task, seed: number) => GeneratedUserSimulator;
  describe: Record<string, unknown>;
  stats: () => Record<string, number>;
  close(): void;
}

async function openUser(src: Exclude<UserSource, { kind: 'scripted' }>, domain: Domain, ctx: { backend: Backend; agent: EvalPolicy; world: WorldName; log: (s: string) => void }): Promise<OpenedUser> {
  const instructionsOf = (task: Task) => {
    const ins = domain.userInstructions?.(task);
    if (!ins) throw new ArgError(`task ${task.id} has no user instructions`);
    return ins;
  };
  if (src.kind === 'endpoint') {
    const client = new OpenAI({ baseURL: src.url, apiKey: process.env.OPENAI_API_KEY || 'unused', maxRetries: 1, timeout: 600_000 });
    const users = new EndpointUsers({
      maxTokens: src.maxTokens,
      complete: async (r) => {
        const c = await client.chat.completions.create({ model: src.name, messages: r.messages, max_tokens: r.maxTokens, temperature: r.temperature, seed: r.seed });
        return c.choices[0]?.message?.content ?? null;
      },
    });
    ctx.log(`user: endpoint ${src.url}, model ${src.name}`);
    return { generatedUser: (t, seed) => users.user(instructionsOf(t), seed), describe: { kind: 'endpoint', url: src.url, model: src.name, maxTokens: src.maxTokens }, stats: () => ({ ...users.stats }), close: () => {} };
  }
  // The agent's own policy plays the user unless another model or adapter is named.
  const own = src.modelDir === undefined;
  const policy = own ? null : await openModel(src.modelDir, ctx.backend, { world: ctx.world });
  let adapter: LoraAdapter | null = own ? ctx.agent.actAdapter : null;
  let loaded: { act: LoraAdapter; rehearse?: LoraAdapter | null } | null = null;
  if (src.adapterDir) {
    loaded = await loadAdapters(new DirStore(src.adapterDir), ctx.backend, (policy?.model ?? ctx.agent.model).config);
    adapter = loaded.act;
  }
  const gen = new UserGenerator({ model: policy?.model ?? ctx.agent.model, tokenizer: policy?.tokenizer ?? ctx.agent.tokenizer, adapter, maxTokens: src.maxTokens });
  ctx.log(`user: ${own ? 'the agent\'s model' : `model ${policy!.dir}`}${src.adapterDir ? `, adapter ${resolve(src.adapterDir)}` : own && adapter ? ' and adapter' : ''}, greedy, ${src.maxTokens} tokens per turn`);
  return {
    generatedUser: (t, seed) => gen.user(instructionsOf(t), seed),
    describe: { kind: 'model', model: own ? 'agent' : recordPath(policy!.dir), adapter: src.adapterDir ? recordPath(src.adapterDir) : own && adapter ? 'agent' : null, maxTokens: src.maxTokens, temperature: 0 },
    stats: () => ({ ...gen.stats }),
    close: () => {
      loaded?.act.free(ctx.backend);
      loaded?.rehearse?.free(ctx.backend);
      policy?.model.free();
    },
  };
}

export type ConversationEvalOutput = { conversation: ConversationReport; user: Record<string, unknown> } | { userFidelity: UserFidelityReport; user: Record<string, unknown> };

export async function runConversationEval(
  policy: EvalPolicy, domain: Domain & RolloutDomain, tasks: readonly Task[], a: ConversationEvalArgs,
  o: { limits: RolloutLimits; seed: number; log: (s: string) => void; backend: Backend; world: WorldName },
): Promise<ConversationEvalOutput> {
  // A path that cannot be written fails now, not after the conversations have run.
  if (a.transcripts !== undefined) await checkWritablePath(a.transcripts, '--transcripts');
  const opened = a.source.kind === 'scripted' ? null : await openUser(a.source, domain, { backend: o.backend, agent: policy, world: o.world, log: o.log });
  try {
    const user = { ...(opened?.describe ?? { kind: 'scripted' }) };
    if (a.fidelity) {
      const report = await measureUserFidelity(domain, tasks as RetailTask[], (t) => opened!.generatedUser(t, 0), { log: o.log });
      for (const line of userFidelitySummary(report).split('\n')) o.log(line);
      return { userFidelity: report, user: { ...user, ...opened!.stats() } };
    }
    const conversation: ConversationOptions = { ...a.conversation, ...(opened ? { generatedUser: opened.generatedUser } : {}) };
    const lines: string[] = [];
    const report = await evaluateConversations(policy, domain, tasks, {
      limits: o.limits, seed: o.seed, conversation, samples: a.samples, kvReuse: true, log: o.log,
      ...(a.transcripts !== undefined ? { onConversation: (c: ConversationTranscript) => lines.push(JSON.stringify(c)) } : {}),
    });
    for (const line of conversationSummary(report).split('\n')) o.log(line);
    if (a.transcripts !== undefined) {
      await writeFileAtomic(a.transcripts, lines.map((l) => l + '\n').join(''));
      o.log(`transcripts: ${lines.length} conversations written to ${a.transcripts}`);
    }
    // Every conversation lost to the user is a broken setup (an endpoint that is down, a wrong model name), not a result.
    if (opened && report.userErrors === report.tasks * report.samples) throw new Error(`every conversation ended with a user error (the first: ${firstUserError(report)})`);
    return { conversation: report, user: { ...user, ...(opened?.stats() ?? {}) } };
  } finally {
    opened?.close();
  }
}

const firstUserError = (r: ConversationReport) => r.perTask.find((t) => t.userError)?.userError ?? 'unknown';
