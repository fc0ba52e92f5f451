// Held-out evaluation of conversations (issue 47): each task is played against a user (the domain's scripted
// user, or a generated one: the lab's model or an endpoint playing the task's τ² instructions),
// `samples` times, in the real environment, and scored by the verifier under the confirmation rule
// (src/rollout/reward-rule.ts). Reports what τ²-bench reports — success and pass^k — and what a conversation
// adds: turns on each side, how conversations ended, and writes made without the user's explicit yes.
//
// pass^k is τ²'s estimator (tau2 metrics/agent_metrics.py pass_hat_k): for a task with c successes out of n
// trials, C(c, k) / C(n, k), the chance that k trials drawn without replacement all succeed; averaged over
// tasks, for k = 1..n. With one sample the episode is decoded greedily (temperature 0, as `npm run eval`
// decodes); with more, every sample is drawn at the given temperature (default 1): k identical greedy runs
// would make pass^k equal pass^1 and measure nothing about consistency.
// Browser-safe: no Node imports.
import type { Task, Turn } from '../env/domain';
import { unconfirmedWrites } from '../env/confirmation';
import { realReward } from '../env/reward';
import { familyTier } from '../env/retail/tiers';
import { matchToolCalls, type GroupSuccess } from '../rollout/metrics';
import type { ConversationOptions } from '../rollout/conversation';
import type { EndReason } from '../rollout/episode';
import { runRollouts, type RolloutConfig, type RolloutDomain, type RolloutLimits } from '../rollout/rollout';
import { EvalError, type EvalPolicy } from './evaluate';

export interface ConversationEvalOptions {
  limits: RolloutLimits;
  seed: number;
  conversation: ConversationOptions;
  /** Trials per task, 1..16 (pass^k for k = 1..samples). */
  samples: number;
  /** Sampling temperature; default 0 with one sample, 1 with more. */
  temperature?: number;
  kvReuse?: boolean;
  /** Scripted Act turns instead of generations (RolloutConfig.actScript): a reference agent, in tests. */
  actScript?: RolloutConfig['actScript'];
  signal?: AbortSignal;
  log?: (s: string) => void;
  /** Called with every conversation, in task order (`npm run eval -- --transcripts FILE`). */
  onConversation?: (c: ConversationTranscript) => void;
}

/** One conversation as it went: what the user said, the agent's calls with their observations, its replies. */
export interface ConversationTranscript {
  taskId: string;
  /** The trial of its task, 0..samples − 1. */
  sample: number;
  reward: number;
  /** Whether the database and facts were right, the confirmation rule aside. */
  successWithoutRule: boolean;
  end: EndReason;
  stop: string | null;
  userError?: string;
  /** Writes made without an explicit yes to their details, with why. */
  unconfirmed: { call: string; why: string }[];
  turns: Turn[];
}

export interface ConversationTaskResult {
  taskId: string;
  family: string | null;
  tier: number | null;
  samples: number;
  /** Trials with reward 1 (under the confirmation rule). */
  successes: number;
  /** Trials whose database and facts were right, the rule aside. */
  successesWithoutRule: number;
  /** Writes made without an explicit yes to their details, over all trials (attempts included). */
  unconfirmed: number;
  ends: EndReason[];
  /** The first generated user's failure among its trials (absent: none failed). */
  userError?: string;
}

export interface ConversationReport {
  tasks: number;
  samples: number;
  temperature: number;
  user: ConversationOptions['user'];
  maxUserTurns: number | null;
  /** Fraction of all episodes with reward 1 (equals passK[0]). */
  success: number;
  /** pass^k for k = 1..samples (index k − 1), τ²'s estimator averaged over tasks. */
  passK: number[];
  meanReward: number;
  /** What success would be without the confirmation rule (database and facts only): what the rule costs. */
  successWithoutRule: number;
  /** Means per episode: Act turns (calls and replies), user turns (the opening included). */
  turns: { agent: number; user: number };
  /**
   * Writes made without the user's explicit yes to their details (src/env/confirmation.ts): all of them
   * (attempts included) and those that succeeded; per episode, and the fraction of episodes with any.
   */
  unconfirmed: { writes: number; effective: number; noYes: number; detailsNotStated: number; perEpisode: number; episodes: number };
  /** Write calls made (well-formed, any outcome): the denominator of the line above. */
  writes: number;
  ends: Partial<Record<EndReason, number>>;
  /** How the user ended it, per stop token. */
  stops: Record<string, number>;
  /**
   * Episodes a generated user (model, endpoint) ended by writing nothing usable or failing (counted among
   * ends 'user-stop', with no stop token; reward 0, as τ² scores a USER_ERROR).
   */
  userErrors: number;
  toolPrecision: number;
  toolRecall: number;
  byTier: Record<string, GroupSuccess>;
  perTask: ConversationTaskResult[];
  tokens: { generated: number; prompt: number };
  wallMs: number;
}

/** τ²'s pass^k of one task: C(c, k) / C(n, k) (0 when c < k). */
export function passHatK(c: number, n: number, k: number): number {
  if (!(Number.isInteger(n) && Number.isInteger(c) && Number.isInteger(k) && 0 <= c && c <= n && 1 <= k && k <= n)) throw new RangeError(`pass^k needs 0 <= c <= n and 1 <= k <= n (c ${c}, n ${n}, k ${k})`);
  let p = 1;
  // C(c,k)/C(n,k) = prod_{i<k} (c-i)/(n-i), which stays in [0, 1] all the way (no large binomials).
  for (let i = 0; i < k; i++) p *= (c - i) / (n - i);
  return Math.max(0, p);
}

export async function evaluateConversations(policy: EvalPolicy, domain: RolloutDomain, tasks: readonly Task[], opts: ConversationEvalOptions): Promise<ConversationReport> {
  if (tasks.length === 0) throw new EvalError('no evaluation tasks');
  if (!(Number.isInteger(opts.samples) && opts.samples >= 1 && opts.samples <= 16)) throw new EvalError(`samples must be an integer in 1..16, got ${opts.samples}`);
  if (!domain.confirmation) throw new EvalError('conversations need the domain\'s confirmation rule');
  const confirmation = domain.confirmation;
  const temperature = opts.temperature ?? (opts.samples > 1 ? 1 : 0);
  const log = opts.log ?? (() => {});
  const n = opts.samples;
  const batch = await runRollouts({ model: policy.model, tokenizer: policy.tokenizer, adapter: policy.actAdapter }, domain, tasks, {
    mode: 'real',
    k: n,
    seed: opts.seed,
    limits: opts.limits,
    temperature,
    kvReuse: opts.kvReuse,
    conversation: opts.conversation,
    ...(opts.actScript ? { actScript: opts.actScript } : {}),
    signal: opts.signal,
    onProgress: (e) => log(`eval conversations: round ${e.round}, ${e.active}/${tasks.length * n} episodes active`),
  });

  const perTask: ConversationTaskResult[] = [];
  const ends: Partial<Record<EndReason, number>> = {};
  const stops: Record<string, number> = {};
  const un = { writes: 0, effective: 0, noYes: 0, detailsNotStated: 0, perEpisode: 0, episodes: 0 };
  let writes = 0;
  let userErrors = 0;
  let agentTurns = 0;
  let userTurns = 0;
  let rewardSum = 0;
  let calls = 0;
  let matched = 0;
  let refs = 0;
  // runRollouts lays episodes out task by task, `samples` each.
  tasks.forEach((task, p) => {
    const rs = batch.rollouts.slice(p * n, (p + 1) * n);
    const t: ConversationTaskResult = { taskId: task.id, family: task.family ?? null, tier: familyTier(task.family), samples: n, successes: 0, successesWithoutRule: 0, unconfirmed: 0, ends: [] };
    rs.forEach((r, sample) => {
      if (r.taskId !== task.id || !r.conversation) throw new EvalError(`rollout ${r.rolloutId} is not a conversation of task ${task.id}`);
      const terminated = r.end === 'max-turns' || r.end === 'context' || r.end === 'user-turns' || r.conversation.userError !== undefined;
      if (r.conversation.userError !== undefined) {
        userErrors++;
        t.userError ??= r.conversation.userError;
      }
      if (r.reward === 1) t.successes++;
      const withoutRule = r.end !== 'empty' && realReward(() => domain.createEnv(), task, r.steps, { terminated }).reward === 1;
      if (withoutRule) t.successesWithoutRule++;
      const u = unconfirmedWrites(r.conversation.turns, confirmation);
      opts.onConversation?.({
        taskId: task.id, sample, reward: r.reward, successWithoutRule: withoutRule, end: r.end, stop: r.conversation.stop,
        ...(r.conversation.userError !== undefined ? { userError: r.conversation.userError } : {}),
        unconfirmed: u.map((x) => ({ call: x.call.name, why: x.why })), turns: r.conversation.turns,
      });
      t.unconfirmed += u.length;
      un.writes += u.length;
      un.effective += u.filter((x) => x.ok).length;
      un.noYes += u.filter((x) => x.why === 'no-yes').length;
      un.detailsNotStated += u.filter((x) => x.why === 'details-not-stated').length;
      if (u.length) un.episodes++;
      writes += r.steps.filter((s) => s.kind === 'call' && s.call.name !== '' && confirmation.isWrite(s.call.name)).length;
      t.ends.push(r.end);
      ends[r.end] = (ends[r.end] ?? 0) + 1;
      if (r.conversation.stop) stops[r.conversation.stop] = (stops[r.conversation.stop] ?? 0) + 1;
      agentTurns += r.turns;
      userTurns += r.conversation.userTurns;
      rewardSum += r.reward;
      const m = matchToolCalls(r.steps, task.referenceActions);
      calls += m.calls;
      matched += m.matched;
      refs += m.references;
    });
    perTask.push(t);
  });
  const episodes = tasks.length * n;
  un.perEpisode = un.writes / episodes;
  un.episodes /= episodes;
  const passK = Array.from({ length: n }, (_, i) => perTask.reduce((a, t) => a + passHatK(t.successes, n, i + 1), 0) / tasks.length);
  return {
    tasks: tasks.length,
    samples: n,
    temperature,
    user: opts.conversation.user,
    maxUserTurns: opts.conversation.maxUserTurns ?? null,
    success: perTask.reduce((a, t) => a + t.successes, 0) / episodes,
    passK,
    meanReward: rewardSum / episodes,
    successWithoutRule: perTask.reduce((a, t) => a + t.successesWithoutRule, 0) / episodes,
    turns: { agent: agentTurns / episodes, user: userTurns / episodes },
    unconfirmed: un,
    writes,
    ends,
    stops,
    userErrors,
    toolPrecision: calls ? matched / calls : NaN,
    toolRecall: refs ? matched / refs : NaN,
    byTier: tierSuccess(perTask),
    perTask,
    tokens: { generated: batch.stats.generatedTokens, prompt: batch.stats.promptTokens },
    wallMs: batch.stats.wallMs,
  };
}

/** Per tier: its tasks, and the fraction of their episodes with reward 1. */
function tierSuccess(perTask: readonly ConversationTaskResult[]): Record<string, GroupSuccess> {
  const acc = new Map<string, { tasks: number; successes: number; episodes: number }>();
  for (const t of perTask) {
    if (t.tier === null) continue;
    const g = acc.get(`tier ${t.tier}`) ?? { tasks: 0, successes: 0, episodes: 0 };
    g.tasks++;
    g.successes += t.successes;
    g.episodes += t.samples;
    acc.set(`tier ${t.tier}`, g);
  }
  return Object.fromEntries([...acc].sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, g]) => [k, { tasks: g.tasks, success: g.successes / g.episodes }]));
}

/** One progress line of a report (the CLI's summary). */
export function conversationSummary(r: ConversationReport): string {
  const f = (x: number) => (Number.isFinite(x) ? x.toFixed(3) : '-');
  return [
    `conversations (${r.user} user, ${r.samples} sample${r.samples > 1 ? 's' : ''} per task at temperature ${r.temperature}): success ${f(r.success)} (without the confirmation rule ${f(r.successWithoutRule)})`,
    `pass^k ${r.passK.map((p, i) => `k=${i + 1} ${f(p)}`).join(', ')}`,
    `turns per episode: agent ${r.turns.agent.toFixed(2)}, user ${r.turns.user.toFixed(2)}`,
    `writes without confirmation: ${r.unconfirmed.writes} of ${r.writes} writes (${r.unconfirmed.effective} took effect; no yes ${r.unconfirmed.noYes}, details not stated ${r.unconfirmed.detailsNotStated}), in ${f(r.unconfirmed.episodes)} of episodes`,
    `ends ${Object.entries(r.ends).map(([k, v]) => `${k} ${v}`).join(', ')}; stops ${Object.entries(r.stops).map(([k, v]) => `${k} ${v}`).join(', ') || '-'}${r.userErrors ? `; user errors ${r.userErrors}` : ''}; tool P ${f(r.toolPrecision)} R ${f(r.toolRecall)}`,
  ].join('\n');
}
