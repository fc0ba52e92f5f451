// Batched rollouts in every mode (src/method/modes.ts): Act writes a call; its observation comes from the real
// environment (no row: it is not generated) or from a Rehearse generation on the mode's simulator (the
// policy's own adapter, a second adapter, or the base) from its own grounded prompt, and Act continues on it.
// The real environment is never shown in a rehearsing mode.
// Batching: the K rollouts of each prompt and all prompts advance together. Each round, every episode that
// wants an Act turn goes into one generate() call, then every pending call of every episode goes into one
// Rehearse generate() call. Every generation becomes a training row. Fidelity is measured on the side
// for every rehearsed call (shadow environment; see episode.ts).
import { deriveSeed, deriveSeedFromText, hash32 } from '../util/rng';
import type { GroundingExample, Observation, Task, Turn, UserSimulator, UserStopToken } from '../env/domain';
import type { ConfirmationOptions } from '../env/confirmation';
import type { Environment } from '../env/env';
import { serializeObservation } from '../env/toolcall';
import { generate, GREEDY, PrefixCache, type GenerateRequest, type GenerateResult } from '../model/generate';
import type { LoraAdapter } from '../model/lora';
import { slotsThatFit, type Qwen3Model } from '../model/qwen3';
import type { Tokenizer } from '../model/tokenizer';
import type { Role } from '../method/advantage';
import { hasRehearseAdapter, isRolloutMode, MODES, rehearses, type RolloutMode } from '../method/modes';
import { ACT_STOP, buildActPrompt, REHEARSE_STOP } from './act-prompt';
import type { ToolDefinition } from './chat';
import { rehearseConstraintFor } from './rehearse-constraint';
import { recallObservation, REHEARSAL_RECALLS, type RehearsalRecall } from './recall';
import { Episode, REVISE_SCOPES, type EndReason, type FidelityRecord, type PendingCall, type ReviseOptions, type RevisionRecord } from './episode';
import { summarizeFidelity, type FidelitySummary } from './fidelity';
import { buildRehearsePrompt, type RehearsePromptOptions } from './rehearse-prompt';
import { Conversation, DEFAULT_MAX_USER_TURNS, USER_KINDS, type ConversationOptions } from './conversation';
import { defaultReward } from './reward-rule';
import { makeRow, type TrainingRow } from './rows';

/** What the loop needs of a domain (src/env/domain.ts Domain satisfies it). */
export interface RolloutDomain {
  /** The Act system prompt. */
  policy: string;
  definitions(): readonly ToolDefinition[];
  createEnv(): Environment;
  normaliseArgs?(name: string, args: Record<string, unknown>): Record<string, unknown>;
  /** Conversation episodes only (RolloutConfig.conversation): the scripted user and the confirmation rule. */
  user?(task: Task, opts?: { seed?: number }): UserSimulator;
  confirmation?: ConfirmationOptions;
}

export interface RolloutPolicy {
  model: Qwen3Model;
  tokenizer: Tokenizer;
  /** The trained adapter (null = the base model); the Act adapter where the mode has a Rehearse adapter. */
  adapter: LoraAdapter | null;
  /** Only in a mode with a Rehearse adapter (MODES[mode].simulator 'rehearse-adapter'), and required there. */
  rehearseAdapter?: LoraAdapter | null;
}

export interface RolloutLimits {
  /** Act turns per rollout (paper: 30). */
  maxTurns: number;
  /** New tokens per Act generation. */
  maxActTokens: number;
  /** New tokens per Rehearse generation. */
  maxRehearseTokens: number;
  /** Prompt + new tokens must fit this (default: the model's context). */
  maxContext?: number;
}

export interface RolloutConfig {
  mode: RolloutMode;
  /** Rollouts per prompt (the GRPO group size). */
  k: number;
  /** Every generation's sampling seed derives from (seed, episode, turn, role): vary it per training step. */
  seed: number;
  limits: RolloutLimits;
  temperature?: number; // default 1
  topP?: number; // default 1
  /**
   * Decode the first of each group's K rollouts greedily (every generation of it, both roles), as the held-out
   * evaluation decodes: the group then holds the answer the evaluation would give beside K − 1 samples, and a
   * sample that beats it pushes the greedy path's own tokens down (a self-critical group). Default false.
   */
  greedyMember?: boolean;
  enableThinking?: boolean; // default false
  rehearsePrompt?: RehearsePromptOptions;
  /** Rehearse, then revise (real mode only; src/rollout/episode.ts ReviseOptions). */
  revise?: ReviseOptions;
  /** Conversation episodes with a user simulator (src/rollout/conversation.ts); absent: one-message episodes. */
  conversation?: ConversationOptions;
  /**
   * Optional scripted Act turns: a text for (task, turn) is used instead of a generation (no row), e.g. the
   * reference actions, to measure rehearsal fidelity on the same calls for every policy. undefined = generate.
   */
  actScript?: (task: Task, turn: number) => string | undefined;
  /**
   * Optional scripted Rehearse turns (teacher forcing, e.g. the real observation written by the expert): a
   * text for a pending call is used instead of a generation (no row). It is held to the same budget as a
   * generation: cut to limits.maxRehearseTokens tokens, and refused when its prompt plus budget overflows.
   */
  rehearseScript?: (task: Task, turn: number, call: PendingCall) => string | undefined;
  /**
   * Rehearse modes: 'reference' answers a call from the task's reference trajectory where that is certainly the
   * real answer (src/rollout/recall.ts) instead of rehearsing it (no generation, no row, no fidelity record).
   * Default 'none'.
   */
  recall?: RehearsalRecall;
  /** Reward of a finished rollout; default: real mode τ²'s DB×communicate, rehearse modes the checklist judge. */
  reward?: (ep: Episode, domain: RolloutDomain) => number;
  /**
   * Keep each role's KV cache across rounds (generate()'s PrefixCache): an Act prompt re-feeds only what
   * the last turn added, a Rehearse prompt only what follows the shared instructions. Costs, per role,
   * (episodes × maxContext × layers × kvHeads × headDim × 8) bytes for the whole call; off by default.
   */
  kvReuse?: boolean;
  /**
   * Where this call's first task stands in a larger call whose tasks run in groups (runRollouts with kvReuse): prompt
   * ids and sampling seeds go on from it, so a call split in groups samples what it would have sampled whole.
   */
  firstPrompt?: number;
  /** Passed to generate() (ignored with kvReuse: one slot per episode). */
  maxConcurrent?: number;
  /** Bytes one generate() call's KV cache, or with kvReuse a group's caches, may take; default KV_BUDGET_BYTES. */
  kvBudget?: number;
  maxBatchTokens?: number;
  signal?: AbortSignal;
  onProgress?: (e: { round: number; active: number; phase: 'act' | 'rehearse'; requests: number }) => void;
  /** generate()'s per-step callback for every round (a round's own RoundOptions.onStep wins). */
  onStep?: RoundOptions['onStep'];
}

export interface RolloutRecord {
  promptId: string;
  rolloutId: string;
  taskId: string;
  mode: RolloutMode;
  end: EndReason;
  reward: number;
  turns: number;
  steps: Episode['steps'];
  messages: Episode['messages'];
  fidelity: FidelityRecord[];
  /** Every Act turn with its calls and what answered them (observation-rows.ts rebuilds Rehearse prompts from it). */
  log: Episode['log'];
  rehearseFailure: string | null;
  /** The failed rehearsal was cut at this many tokens (its budget), not malformed (null otherwise). */
  rehearseCut?: number | null;
  /** Calls answered by recall from the reference trajectory (cfg.recall), when any were. */
  recalled?: number;
  /** Rehearse-then-revise: every checked call, and the revisions the episode spent. */
  checked?: RevisionRecord[];
  revisions?: number;
  /** Conversation episodes: every turn (greeting, agent steps, user turns) and how the user ended it. */
  conversation?: { turns: Turn[]; userTurns: number; stop: UserStopToken | null; /** A generated user failed (reward 0). */ userError?: string };
  /** Indices into RolloutBatch.rows. */
  rows: number[];
}

export interface RolloutBatch {
  rollouts: RolloutRecord[];
  rows: TrainingRow[];
  /** Over every rehearsed call of the batch (NaN fields when none). */
  fidelity: FidelitySummary;
  stats: {
    rounds: number;
    actGenerations: number;
    rehearseGenerations: number;
    /** Calls answered by recall instead of a Rehearse generation (cfg.recall). */
    recalledObservations: number;
    generatedTokens: number;
    promptTokens: number;
    /** Prompt tokens served from the KV cache instead of being fed (kvReuse). */
    reusedPromptTokens: number;
    wallMs: number;
  };
}

export class RolloutConfigError extends Error {
  override readonly name = 'RolloutConfigError';
}

/** Real (name, arguments, result) triples of the task's reference actions, replayed on a fresh database. */
export function referenceGrounding(domain: RolloutDomain, task: Task): GroundingExample[] {
  const env = domain.createEnv();
  return task.referenceActions.map((a) => ({ name: a.name, arguments: a.arguments, result: serializeObservation(env.execute(a)) }));
}

/** The sampling seed of one generation: slot 0 is the turn's Act generation, 1 + i the Rehearse one of call i. */
export function generationSeed(seed: number, episode: number, turn: number, slot: number): number {
  return deriveSeed(hash32(seed), episode, turn, slot);
}

/** An Act generation of a round (the prompt as text, the sampled tokens with their log-probs). */
export interface ActGeneration {
  episode: number;
  turn: number;
  prompt: string;
  result: GenerateResult;
  /** Index into the stepper's rows. */
  row: number;
}

export interface RehearseGeneration extends ActGeneration {
  call: PendingCall;
}

/** What one round did, for a driver that shows it (the lab's stepper); runRollouts ignores it. */
export interface RoundReport {
  round: number;
  /** Act turns taken from cfg.actScript (no generation, no row), with the prompt they answer. */
  scripted: { episode: number; turn: number; prompt: string; text: string }[];
  /** Rehearse turns taken from cfg.rehearseScript (no row): the text as applied (cut to the budget), and the cut. */
  scriptedRehearsals: { episode: number; turn: number; call: PendingCall; prompt: string; text: string; cut: number | null }[];
  /** Calls answered by recall from the reference trajectory (cfg.recall; no prompt, no row). */
  recalled?: { episode: number; turn: number; call: PendingCall }[];
  acts: ActGeneration[];
  rehearsals: RehearseGeneration[];
  /** Episodes this round ended with 'context': a prompt plus its budget (`need` tokens) exceeds maxContext. */
  overflows: { episode: number; role: Role; need: number; maxContext: number }[];
  /** Generated users' turns taken at the start of the round (model and endpoint users; absent otherwise). */
  users?: { episode: number; text: string | null; stop: UserStopToken | null; error: string | null }[];
  userMs?: number;
  actMs: number;
  rehearseMs: number;
}

export interface RoundOptions {
  /** Overrides cfg.signal for this round. */
  signal?: AbortSignal;
  /** generate()'s per-step callback (progress; throwing from it cancels). */
  onStep?: (phase: Role, done: number, total: number) => void;
}

/**
 * The rollout loop one round at a time: runRollouts is `while (!done) round()`, and a step-by-step driver
 * (the lab) calls round() itself, so it sees exactly the generations, seeds and rows training gets.
 * A round = every episode that wants an Act turn in one generate() call, then every pending call of every
 * episode in one Rehearse generate() call.
 */
export class RolloutStepper {
  readonly episodes: Episode[] = [];
  readonly rows: TrainingRow[] = [];
  readonly stats = { rounds: 0, actGenerations: 0, rehearseGenerations: 0, recalledObservations: 0, generatedTokens: 0, promptTokens: 0, reusedPromptTokens: 0, wallMs: 0 };
  readonly maxContext: number;
  /** The first episode's index in the whole call (cfg.firstPrompt × k): the seeds' episode index. */
  private readonly firstEpisode: number;
  private readonly t0 = performance.now();
  private readonly rowsOf = new Map<Episode, number[]>();
  private readonly tools: readonly ToolDefinition[];
  private readonly actAdapter: LoraAdapter | null;
  private readonly rehearseAdapter: LoraAdapter | null;
  private caches: { act: PrefixCache; rehearse: PrefixCache | null } | null;

  constructor(
    readonly policy: RolloutPolicy,
    readonly domain: RolloutDomain,
    tasks: readonly Task[],
    readonly cfg: RolloutConfig,
  ) {
    if (!isRolloutMode(cfg.mode)) throw new RolloutConfigError(`unknown mode ${String(cfg.mode)}`);
    if (!(Number.isInteger(cfg.k) && cfg.k >= 1)) throw new RolloutConfigError(`k must be a positive integer, got ${cfg.k}`);
    if (cfg.greedyMember && cfg.k < 2) throw new RolloutConfigError(`a greedy member needs a group of at least 2 rollouts (k ${cfg.k})`);
    if (cfg.recall !== undefined && !(REHEARSAL_RECALLS as readonly string[]).includes(cfg.recall)) throw new RolloutConfigError(`recall must be one of ${REHEARSAL_RECALLS.join(', ')}, got ${String(cfg.recall)}`);
    if (cfg.recall === 'reference' && !rehearses(cfg.mode)) throw new RolloutConfigError(`recall answers rehearsed calls; ${cfg.mode} mode rehearses none`);
    if (cfg.revise) {
      if (rehearses(cfg.mode)) throw new RolloutConfigError(`rehearse-then-revise runs in the real environment, not in ${cfg.mode} mode`);
      if (!(Number.isInteger(cfg.revise.max) && cfg.revise.max >= 0)) throw new RolloutConfigError(`revise.max must be an integer >= 0, got ${cfg.revise.max}`);
      if (!(REVISE_SCOPES as readonly string[]).includes(cfg.revise.scope)) throw new RolloutConfigError(`revise.scope must be one of ${REVISE_SCOPES.join(', ')}, got ${String(cfg.revise.scope)}`);
    }
    const conv = cfg.conversation;
    if (conv) {
      if (!(USER_KINDS as readonly string[]).includes(conv.user)) throw new RolloutConfigError(`conversation.user must be one of ${USER_KINDS.join(', ')}, got ${String(conv.user)}`);
      if (!domain.confirmation) throw new RolloutConfigError('conversation episodes need a domain with a confirmation rule');
      if (conv.user === 'scripted' && !domain.user) throw new RolloutConfigError('a scripted user needs a domain with one');
      if (conv.user !== 'scripted' && !conv.generatedUser) throw new RolloutConfigError(`a ${conv.user} user needs conversation.generatedUser`);
      const m = conv.maxUserTurns ?? DEFAULT_MAX_USER_TURNS;
      if (!(Number.isInteger(m) && m >= 1)) throw new RolloutConfigError(`conversation.maxUserTurns must be a positive integer, got ${m}`);
    }
    const L = cfg.limits;
    for (const [name, v] of [['maxTurns', L.maxTurns], ['maxActTokens', L.maxActTokens], ['maxRehearseTokens', L.maxRehearseTokens]] as const)
      if (!(Number.isInteger(v) && v >= 1)) throw new RolloutConfigError(`limits.${name} must be a positive integer, got ${v}`);
    const own = hasRehearseAdapter(cfg.mode);
    if (own && policy.rehearseAdapter === undefined) throw new RolloutConfigError(`${cfg.mode} mode needs policy.rehearseAdapter`);
    if (!own && policy.rehearseAdapter !== undefined) throw new RolloutConfigError(`policy.rehearseAdapter is not used in ${cfg.mode} mode (it has no Rehearse adapter)`);
    this.actAdapter = policy.adapter;
    const simulator = MODES[cfg.mode].simulator;
    this.rehearseAdapter = simulator === 'rehearse-adapter' ? (policy.rehearseAdapter ?? null) : simulator === 'base' ? null : policy.adapter;
    this.maxContext = contextOf(policy, L);
    this.tools = domain.definitions();
    const first = cfg.firstPrompt ?? 0;
    if (!(Number.isInteger(first) && first >= 0)) throw new RolloutConfigError(`firstPrompt must be an integer >= 0, got ${first}`);
    this.firstEpisode = first * cfg.k;
    tasks.forEach((task, i) => {
      const p = first + i;
      const grounding = rehearses(cfg.mode) || cfg.revise ? referenceGrounding(domain, task) : [];
      for (let k = 0; k < cfg.k; k++) {
        const ep = new Episode(`${p}:${task.id}`, `${p}:${task.id}:${k}`, task, cfg.mode, domain.createEnv(), grounding, L.maxTurns, cfg.revise ?? null);
        if (conv) {
          const user = conv.user === 'scripted' ? domain.user!(task, { seed: conv.userSeed ?? 0 }) : conv.generatedUser!(task, deriveSeedFromText(conv.userSeed ?? 0, task.id));
          ep.converse(new Conversation(user, conv.maxUserTurns ?? DEFAULT_MAX_USER_TURNS));
        }
        this.episodes.push(ep);
      }
    });
    for (const e of this.episodes) this.rowsOf.set(e, []);
    // One cache per role, so Rehearse prompts never evict the Act conversations (and adapters may differ).
    const n = this.episodes.length;
    this.caches = cfg.kvReuse && Number.isFinite(this.maxContext)
      ? { act: new PrefixCache(policy.model, n, this.maxContext), rehearse: rehearses(cfg.mode) ? new PrefixCache(policy.model, n, this.maxContext) : null }
      : null;
  }

  get done(): boolean {
    return this.episodes.every((e) => e.done);
  }

  /** The Act prompt of an episode's next turn (the text, before tokenisation). */
  actPrompt(ep: Episode): string {
    return buildActPrompt(this.domain.policy, this.tools, ep.messages, { enableThinking: this.cfg.enableThinking });
  }

  rehearsePrompt(ep: Episode, p: PendingCall): string {
    return buildRehearsePrompt({ tools: this.tools, grounding: ep.grounding, history: ep.historyBefore, call: p.call }, { enableThinking: this.cfg.enableThinking, ...this.cfg.rehearsePrompt }).text;
  }

  /** Indices into rows of an episode's generations. */
  rowsOfEpisode(e: number): number[] {
    return this.rowsOf.get(this.episodes[e])!;
  }

  async round(opts: RoundOptions = {}): Promise<RoundReport> {
    const { cfg, episodes } = this;
    const L = cfg.limits;
    const tok = this.policy.tokenizer;
    // Episodes are laid out prompt by prompt, K each (constructor): e % K === 0 is a group's first rollout.
    const sampling = (seed: number, e: number) =>
      episodes[e].resample ? { temperature: 1, topP: 1, seed } : cfg.greedyMember && e % cfg.k === 0 ? { ...GREEDY, seed } : { temperature: cfg.temperature ?? 1, topP: cfg.topP ?? 1, seed };
    const round = this.stats.rounds++;
    const report: RoundReport = { round, scripted: [], scriptedRehearsals: [], acts: [], rehearsals: [], overflows: [], actMs: 0, rehearseMs: 0 };
    const run = async (reqs: GenerateRequest[], role: Role) => {
      if (reqs.length === 0) return [];
      const t = performance.now();
      const onStep = opts.onStep ?? cfg.onStep;
      const out = await generate(this.policy.model, tok, reqs, {
        adapter: role === 'act' ? this.actAdapter : this.rehearseAdapter,
        maxConcurrent: cfg.maxConcurrent,
        kvBudget: cfg.kvBudget,
        maxBatchTokens: cfg.maxBatchTokens,
        signal: opts.signal ?? cfg.signal,
        prefixCache: (role === 'act' ? this.caches?.act : this.caches?.rehearse) ?? undefined,
        ...(onStep ? { onStep: (d: number, n: number) => onStep(role, d, n) } : {}),
      });
      report[role === 'act' ? 'actMs' : 'rehearseMs'] = performance.now() - t;
      return out;
    };

    // ---- User phase: conversations waiting for a generated user's turn (its opening, or its answer to the
    // last round's reply) ask it all at once, so a model user batches them into one generation.
    const waiting = episodes.flatMap((ep, e) => (!ep.done && ep.conversation?.waiting ? [e] : []));
    if (waiting.length > 0) {
      const t = performance.now();
      await Promise.all(waiting.map((e) => episodes[e].conversation!.generatedTurn(episodes[e])));
      (opts.signal ?? cfg.signal)?.throwIfAborted();
      report.userMs = performance.now() - t;
      report.users = waiting.map((e) => {
        const c = episodes[e].conversation!;
        const said = c.userTurns.at(-1);
        return { episode: e, text: !episodes[e].done && said && said.at === episodes[e].steps.length ? said.text : null, stop: c.stop, error: c.userError };
      });
    }

    // ---- Act phase: scripted turns first, then one batched generation for every other live episode.
    const actReqs: GenerateRequest[] = [];
    const actFor: { e: number; prompt: string }[] = [];
    episodes.forEach((ep, e) => {
      if (!ep.wantsAct) return;
      const scripted = cfg.actScript?.(ep.task, ep.turns);
      if (scripted !== undefined) {
        report.scripted.push({ episode: e, turn: ep.turns, prompt: this.actPrompt(ep), text: scripted });
        ep.applyAct(scripted);
        return;
      }
      const text = this.actPrompt(ep);
      const prompt = tok.encode(text);
      if (prompt.length + L.maxActTokens > this.maxContext) {
        report.overflows.push({ episode: e, role: 'act', need: prompt.length + L.maxActTokens, maxContext: this.maxContext });
        ep.finish('context');
        return;
      }
      actReqs.push({ prompt, maxNewTokens: L.maxActTokens, stop: [ACT_STOP], sampling: sampling(generationSeed(cfg.seed, this.firstEpisode + e, ep.turns, 0), e) });
      actFor.push({ e, prompt: text });
    });
    cfg.onProgress?.({ round, active: episodes.filter((e) => !e.done).length, phase: 'act', requests: actReqs.length });
    const actOut = await run(actReqs, 'act');
    this.stats.actGenerations += actOut.length;
    actOut.forEach((r, i) => {
      const { e, prompt } = actFor[i];
      const ep = episodes[e];
      report.acts.push({ episode: e, turn: ep.turns, prompt, result: r, row: this.addRow(ep, 'act', ep.turns, r) });
      ep.applyAct(fullText(r, ACT_STOP));
    });

    // ---- Rehearse phase: one generation per pending call, all episodes together.
    const rehReqs: GenerateRequest[] = [];
    const rehFor: { e: number; p: PendingCall; prompt: string }[] = [];
    const scriptedReh: RoundReport['scriptedRehearsals'] = [];
    const recalled: { e: number; p: PendingCall; obs: Observation }[] = [];
    episodes.forEach((ep, e) => {
      for (const p of ep.pending) {
        if (cfg.recall === 'reference') {
          const obs = recallObservation(ep.grounding, ep.callsBefore(p), p.call, (name) => ep.env.isWrite(name));
          if (obs) {
            recalled.push({ e, p, obs });
            continue;
          }
        }
        const text = this.rehearsePrompt(ep, p);
        const prompt = tok.encode(text);
        if (prompt.length + L.maxRehearseTokens > this.maxContext) {
          report.overflows.push({ episode: e, role: 'rehearse', need: prompt.length + L.maxRehearseTokens, maxContext: this.maxContext });
          ep.finish('context');
          break;
        }
        const script = cfg.rehearseScript?.(ep.task, ep.turns - 1, p);
        if (script !== undefined) {
          const ids = tok.encode(script);
          const cut = ids.length > L.maxRehearseTokens ? L.maxRehearseTokens : null;
          scriptedReh.push({ episode: e, turn: ep.turns - 1, call: p, prompt: text, text: cut === null ? script : tok.decode(ids.slice(0, cut)), cut });
          continue;
        }
        rehReqs.push({
          prompt,
          maxNewTokens: L.maxRehearseTokens,
          stop: [REHEARSE_STOP],
          sampling: sampling(generationSeed(cfg.seed, this.firstEpisode + e, ep.turns, 1 + p.slot), e),
          constraint: rehearseConstraintFor(cfg.rehearsePrompt?.decoding, this.domain, tok, prompt, p.call.name),
        });
        rehFor.push({ e, p, prompt: text });
      }
    });
    // Recalled and scripted rehearsals apply in call order (an episode that ran out of context above drops them).
    for (const x of recalled) {
      if (episodes[x.e].done) continue;
      episodes[x.e].applyRecalled(x.p, x.obs);
      this.stats.recalledObservations++;
    }
    report.recalled = recalled.map((x) => ({ episode: x.e, turn: episodes[x.e].turns - 1, call: x.p }));
    for (const x of scriptedReh) {
      const ep = episodes[x.episode];
      if (ep.done) continue;
      report.scriptedRehearsals.push(x);
      ep.applyRehearse(x.call, x.text, x.cut);
    }
    // An episode that ran out of context above drops its already-queued requests.
    const keep = rehFor.map((x) => !episodes[x.e].done);
    const reqs = rehReqs.filter((_, i) => keep[i]);
    const fors = rehFor.filter((_, i) => keep[i]);
    if (reqs.length > 0) cfg.onProgress?.({ round, active: episodes.filter((e) => !e.done).length, phase: 'rehearse', requests: reqs.length });
    const rehOut = await run(reqs, 'rehearse');
    this.stats.rehearseGenerations += rehOut.length;
    rehOut.forEach((r, i) => {
      const { e, p, prompt } = fors[i];
      const ep = episodes[e];
      report.rehearsals.push({ episode: e, turn: ep.turns - 1, call: p, prompt, result: r, row: this.addRow(ep, 'rehearse', ep.turns - 1, r) });
      ep.applyRehearse(p, fullText(r, REHEARSE_STOP), r.finishReason === 'length' ? r.tokens.length : null);
    });
    return report;
  }

  /** The record of a finished episode; its reward is written into its rows. */
  record(e: number): RolloutRecord {
    const ep = this.episodes[e];
    if (!ep.done) throw new Error(`record: episode ${e} has not finished`);
    const reward = (this.cfg.reward ?? defaultReward)(ep, this.domain);
    const idx = this.rowsOf.get(ep)!;
    for (const i of idx) this.rows[i].reward = reward;
    return {
      promptId: ep.promptId,
      rolloutId: ep.rolloutId,
      taskId: ep.task.id,
      mode: ep.mode,
      end: ep.end!,
      reward,
      turns: ep.turns,
      steps: ep.steps,
      messages: ep.messages,
      fidelity: ep.fidelity,
      log: ep.log,
      rehearseFailure: ep.rehearseFailure,
      rehearseCut: ep.rehearseCut,
      ...(ep.recalled > 0 ? { recalled: ep.recalled } : {}),
      ...(ep.revise ? { checked: ep.checked, revisions: ep.revisions } : {}),
      ...(ep.conversation ? { conversation: { turns: ep.conversation.turns(ep.steps), userTurns: ep.conversation.userTurns.length, stop: ep.conversation.stop, ...(ep.conversation.userError !== null ? { userError: ep.conversation.userError } : {}) } } : {}),
      rows: idx,
    };
  }

  /** The batch, once every episode has finished. Frees the KV caches. */
  finish(): RolloutBatch {
    this.free();
    const rollouts = this.episodes.map((_, e) => this.record(e));
    this.stats.wallMs = performance.now() - this.t0;
    return { rollouts, rows: this.rows, fidelity: summarizeFidelity(this.episodes.flatMap((e) => e.fidelity)), stats: this.stats };
  }

  /** Releases the KV caches (idempotent; later rounds run without reuse). */
  free(): void {
    if (!this.caches) return;
    this.stats.reusedPromptTokens = this.caches.act.reused + (this.caches.rehearse?.reused ?? 0);
    this.caches.act.free();
    this.caches.rehearse?.free();
    this.caches = null;
  }

  // turn: 0-based index of the Act turn the generation belongs to (its Rehearse rows share it).
  private addRow(ep: Episode, role: Role, turn: number, r: GenerateResult): number {
    const row = makeRow({ role, promptId: ep.promptId, rolloutId: ep.rolloutId, turn, promptTokens: r.promptTokens, generated: { tokens: r.tokens, logprobs: r.logprobs } });
    this.rowsOf.get(ep)!.push(this.rows.length);
    this.rows.push(row);
    this.stats.generatedTokens += r.tokens.length;
    this.stats.promptTokens += r.promptTokens.length;
    return this.rows.length - 1;
  }
}

/** The text as the model wrote it: generate() cuts before a stop string, the context keeps it. */
export const fullText = (r: GenerateResult, stop: string) => (r.finishReason === 'stop' ? r.text + stop : r.text);

/**
 * Batches as one (row indices remapped; fidelity over every rehearsed call): token and generation counts and
 * wall time summed, rounds the most any batch took.
 */
export function mergeBatches(batches: readonly RolloutBatch[]): RolloutBatch {
  if (batches.length === 1) return batches[0];
  const rows: TrainingRow[] = [];
  const rollouts: RolloutRecord[] = [];
  const stats = { rounds: 0, actGenerations: 0, rehearseGenerations: 0, recalledObservations: 0, generatedTokens: 0, promptTokens: 0, reusedPromptTokens: 0, wallMs: 0 };
  for (const b of batches) {
    const off = rows.length;
    rows.push(...b.rows);
    for (const r of b.rollouts) rollouts.push({ ...r, rows: r.rows.map((i) => i + off) });
    for (const k of Object.keys(stats) as (keyof typeof stats)[]) stats[k] = k === 'rounds' ? Math.max(stats[k], b.stats[k]) : stats[k] + b.stats[k];
  }
  return { rollouts, rows, fidelity: summarizeFidelity(rollouts.flatMap((r) => r.fidelity)), stats };
}

/** The context a rollout's prompt and budget must fit: the limits' maxContext, at most the model's. */
function contextOf(policy: RolloutPolicy, L: RolloutLimits): number {
  return Math.min(L.maxContext ?? Infinity, policy.model.config.maxPositionEmbeddings);
}

/**
 * Tasks per group of a kvReuse call: every episode holds a cache slot of maxContext positions per role for the whole
 * call, so a large evaluation runs its tasks in consecutive groups whose caches fit KV_BUDGET_BYTES (each group's
 * prompts and seeds numbered as in the whole call).
 */
export function tasksPerGroup(policy: RolloutPolicy, tasks: number, cfg: RolloutConfig): number {
  const maxContext = contextOf(policy, cfg.limits);
  if (!cfg.kvReuse || !Number.isFinite(maxContext)) return Math.max(1, tasks);
  const perEpisode = rehearses(cfg.mode) ? 2 : 1;
  return Math.max(1, Math.min(tasks, Math.floor(slotsThatFit(policy.model.config, maxContext, cfg.kvBudget) / (perEpisode * cfg.k))));
}

export async function runRollouts(policy: RolloutPolicy, domain: RolloutDomain, tasks: readonly Task[], cfg: RolloutConfig): Promise<RolloutBatch> {
  const per = tasksPerGroup(policy, tasks.length, cfg);
  if (per < tasks.length) {
    const parts: RolloutBatch[] = [];
    for (let i = 0; i < tasks.length; i += per) parts.push(await runRollouts(policy, domain, tasks.slice(i, i + per), { ...cfg, firstPrompt: (cfg.firstPrompt ?? 0) + i }));
    return mergeBatches(parts);
  }
  const s = new RolloutStepper(policy, domain, tasks, cfg);
  try {
    while (!s.done) await s.round();
    return s.finish();
  } finally {
    s.free();
  }
}
