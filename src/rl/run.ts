// A Role-Wise GRPO training run: steps of (sample prompts, K rollouts each, one GRPO update), evaluation
// on held-out tasks in the real environment every N steps, checkpoints and exact resume, and JSONL logs.
//
// Exact resume: everything a step depends on is either derived from (seed, step) (the sampling seeds) or
// saved in the checkpoint (adapters as F32 PEFT files, AdamW moments and step, the task-sampling RNG
// state), so a run resumed from a checkpoint continues bit for bit like the uninterrupted run on the same
// backend. A checkpoint is a folder ckpt/<step>/; run.json is written last and names it, so an
// interrupted checkpoint is never half-loaded. Logs are append-only: after a resume, a step may appear
// twice in metrics.jsonl (the last occurrence wins).
import { deriveSeed, hash32, Rng } from '../util/rng';
import { parseJsonl } from '../util/jsonl';
import type { Task } from '../env/domain';
import { createLoraAdapter, type LoraAdapter } from '../model/lora';
import { adapterToPeftFiles, loadPeftAdapter } from '../model/peft';
import type { Qwen3Model } from '../model/qwen3';
import { MemorySource } from '../model/source';
import type { Tokenizer } from '../model/tokenizer';
import { evalRehearsalFidelity } from '../rollout/fidelity-eval';
import { groupSuccess, summarizeRollouts, type GroupSuccess, type RolloutSummary } from '../rollout/metrics';
import { rewardBy } from '../rollout/reward-rule';
import { mergeBatches, runRollouts, type RolloutBatch, type RolloutConfig, type RolloutDomain } from '../rollout/rollout';
import { OBSERVATION_GROUNDINGS, realObservationRows } from '../rollout/observation-rows';
import { AGGREGATIONS } from '../train/batch';
import { Trainer } from '../train/trainer';
import type { Advantages } from '../method/advantage';
import { hasRehearseAdapter, MODES, rehearses } from '../method/modes';
import type { RecordedConfig } from '../method/run-config';
import { grpoUpdate } from './grpo';
import { parseRunState, storeFile } from './checkpoint';
import type { RunStore } from './store';
import { addEpisodes, familyOf, familyWeights, sampleTaskIndices, TASK_SAMPLINGS, type FamilyStats } from './task-sampler';

/**
 * A run's configuration as run.json keeps it: derived from the run settings' table (src/method/run-config.ts,
 * whose rows say what each setting means, its range and where it is recorded).
 */
export type GrpoRunConfig = RecordedConfig;

/** Things a run needs that are not configuration (functions, signals). */
export interface RunHooks {
  reward?: RolloutConfig['reward'];
  /** Scripted Act turns for training rollouts (tests: gives a random-weight policy calls to rehearse). */
  actScript?: RolloutConfig['actScript'];
  onStep?: (m: StepMetrics) => void;
  signal?: AbortSignal;
  /** Progress inside a step (the lab's progress bar): each phase as it starts. */
  onPhase?: (phase: RunPhase) => void;
  /** The rollouts' own callbacks (training and held-out rollouts): per round, per generated token. */
  onRolloutProgress?: RolloutConfig['onProgress'];
  onRolloutStep?: RolloutConfig['onStep'];
  /** The held-out fidelity check, per decoded token: rehearsals finished of all to decode (it can take a minute). */
  onFidelityStep?: (done: number, total: number) => void;
  /** Awaited before each held-out evaluation (the train CLI's --base-wait: step 0 logged from a record measured elsewhere). */
  beforeEvaluate?: () => Promise<void>;
}

export type RunPhase = 'rollouts' | 'update' | 'checkpoint' | 'held-out evaluation' | 'held-out fidelity';

export interface StepMetrics {
  step: number;
  tasks: string[];
  rollouts: RolloutSummary;
  updates: { target: string; rows: number; loss: number; clipFrac: number; kl: number; gradNorm: number; tokens: number; applied: boolean; lr: number }[];
  /** spread: fraction of the advantage groups whose rewards are not all equal (the others carry no gradient). */
  advantage: { groups: number; meanAbs: number; spread: number };
  /** With taskSampling 'signal': each family's weight when this step's tasks were drawn. */
  familyWeights?: Record<string, number>;
  /** Rollouts of this step that ran in the real environment (the run's real-interaction spend). */
  realEpisodes: number;
  /** Rehearse rows with a real observation as target (observationCoef > 0). */
  observationRows?: number;
  wallMs: number;
}

/**
 * Fraction of advantage groups with a non-zero reward spread. A group's advantages R − μ are all zero exactly
 * when its rewards are all equal (under either baseline), so a group counts when any of its rows has |A| > 1e-9.
 * Rows without an advantage (null: not in any group) are skipped; 0 when there are no groups.
 */
export function spreadFraction(rows: readonly { promptId: string; role: string }[], advantages: Advantages): number {
  const any = new Map<string, boolean>();
  rows.forEach((r, i) => {
    const a = advantages.advantage[i];
    if (a === null || a === undefined) return;
    const k = JSON.stringify([r.promptId, advantages.mode === 'pooled' ? 'all' : r.role]);
    any.set(k, (any.get(k) ?? false) || Math.abs(a) > 1e-9);
  });
  return any.size ? [...any.values()].filter(Boolean).length / any.size : 0;
}

export interface EvalMetrics {
  step: number;
  success: number;
  meanReward: number;
  toolPrecision: number;
  toolRecall: number;
  ends: RolloutSummary['ends'];
  fidelity?: { exact: number; f1: number; errorAgree: number; invalid: number; steps: number };
  /** Success per task family (src/env/retail/tiers.ts); absent when no held-out task names one (a user's task file). */
  byFamily?: Record<string, GroupSuccess>;
  /** Step 0 reused from an earlier measurement of the same base (src/rl/base-eval.ts): when that was measured. */
  reused?: string;
}

interface RunState {
  version: 1;
  config: GrpoRunConfig;
  /** Completed steps. */
  step: number;
  rng: { seed: number; step: number };
  checkpoint: string | null;
  /** With taskSampling 'signal': the per-family success estimates the next draw uses. */
  familyStats?: FamilyStats;
}

export class RunConfigError extends Error {
  override readonly name = 'RunConfigError';
}

/** Every seed a run derives from its configured seed; a saved run resumes on these, so they never change. */
export const runSeeds = {
  taskSampling: (seed: number) => hash32(seed ^ 0x5eed),
  actAdapter: (seed: number) => hash32(seed ^ 0xac7),
  rehearseAdapter: (seed: number) => hash32(seed ^ 0x4e4),
  /** The rollouts of step `step` (1-based). */
  step: (seed: number, step: number) => deriveSeed(seed, step - 1),
};

const enc = (o: unknown) => new TextEncoder().encode(JSON.stringify(o, null, 1));

function checkConfig(c: GrpoRunConfig): void {
  const posInt = (v: unknown) => Number.isInteger(v) && (v as number) >= 1;
  if (!posInt(c.steps) || !posInt(c.promptsPerStep) || !posInt(c.k)) throw new RunConfigError('steps, promptsPerStep and k must be positive integers');
  if (c.taskSampling !== undefined && !TASK_SAMPLINGS.includes(c.taskSampling)) throw new RunConfigError(`taskSampling must be one of ${TASK_SAMPLINGS.join(', ')}, got ${String(c.taskSampling)}`);
  if (c.lossAggregation !== undefined && !AGGREGATIONS.includes(c.lossAggregation)) throw new RunConfigError(`lossAggregation must be one of ${AGGREGATIONS.join(', ')}, got ${String(c.lossAggregation)}`);
  if (c.topP !== undefined && !(c.topP > 0 && c.topP <= 1)) throw new RunConfigError(`topP must be in (0, 1], got ${c.topP}`);
  if (c.greedyMember && c.k < 2) throw new RunConfigError(`a greedy member needs k >= 2, got k ${c.k}`);
  if (c.updateEpochs !== undefined && !posInt(c.updateEpochs)) throw new RunConfigError(`updateEpochs must be a positive integer, got ${c.updateEpochs}`);
  if (!(c.lr > 0)) throw new RunConfigError(`lr must be > 0, got ${c.lr}`);
  if (!posInt(c.lora?.rank) || !(c.lora.alpha > 0)) throw new RunConfigError('lora.rank must be a positive integer and lora.alpha > 0');
  if (c.realPrompts !== undefined && c.realPrompts !== 0) {
    if (!rehearses(c.mode)) throw new RunConfigError(`realPrompts applies to a rehearsing mode; ${c.mode} mode runs every rollout in the real environment`);
    if (!(Number.isInteger(c.realPrompts) && c.realPrompts >= 0 && c.realPrompts <= c.promptsPerStep)) throw new RunConfigError(`realPrompts must be an integer in [0, promptsPerStep ${c.promptsPerStep}], got ${c.realPrompts}`);
  }
  if (c.observationCoef !== undefined && c.observationCoef !== 0) {
    if (!(Number.isFinite(c.observationCoef) && c.observationCoef > 0)) throw new RunConfigError(`observationCoef must be >= 0, got ${c.observationCoef}`);
    if (MODES[c.mode].simulator === 'base') throw new RunConfigError(`observationCoef: in ${c.mode} mode the frozen base rehearses, so no trained parameters would learn the observations`);
    if (rehearses(c.mode) && !c.realPrompts) throw new RunConfigError(`observationCoef needs real observations: give realPrompts > 0 in ${c.mode} mode`);
  }
  if (c.rehearsalRecall === 'reference' && !rehearses(c.mode)) throw new RunConfigError(`rehearsalRecall answers rehearsed calls; ${c.mode} mode rehearses none`);
  if (c.observationGrounding !== undefined && !OBSERVATION_GROUNDINGS.includes(c.observationGrounding)) throw new RunConfigError(`observationGrounding must be one of ${OBSERVATION_GROUNDINGS.join(', ')}, got ${String(c.observationGrounding)}`);
}

export { realEpisodesPerStep } from '../method/modes';

/**
 * The rollouts' conversation option of a run with a user (training and held-out rollouts alike): every sample of a
 * task meets the same scripted user (user seed 0, as the eval CLI's), so a group's rollouts differ by the policy's
 * sampling only.
 */
const conversationOf = (c: GrpoRunConfig): Pick<RolloutConfig, 'conversation'> =>
  c.user === 'scripted' ? { conversation: { user: 'scripted' } } : {};

export class GrpoRun {
  private constructor(
    readonly model: Qwen3Model,
    readonly tokenizer: Tokenizer,
    readonly domain: RolloutDomain,
    readonly trainTasks: readonly Task[],
    readonly evalTasks: readonly Task[],
    readonly store: RunStore,
    private state: RunState,
    /** The adapter Act samples with (the shared one where one adapter plays both roles). */
    readonly actAdapter: LoraAdapter,
    /** Only in a mode with a Rehearse adapter. */
    readonly rehearseAdapter: LoraAdapter | null,
    private readonly trainers: { act: Trainer; rehearse?: Trainer },
    private rng: Rng,
    private readonly hooks: RunHooks,
  ) {}

  get config(): GrpoRunConfig {
    return this.state.config;
  }
  get step(): number {
    return this.state.step;
  }
  get done(): boolean {
    return this.state.step >= this.state.config.steps;
  }

  /**
   * Opens the run in `store`: resumes from its last checkpoint if run.json exists (its saved config wins),
   * else starts a fresh run with `config` (adapters initialised from the seed).
   */
  static async open(
    model: Qwen3Model,
    tokenizer: Tokenizer,
    domain: RolloutDomain,
    tasks: { train: readonly Task[]; eval?: readonly Task[] },
    store: RunStore,
    config: GrpoRunConfig,
    hooks: RunHooks = {},
  ): Promise<GrpoRun> {
    if (tasks.train.length === 0) throw new RunConfigError('no training tasks');
    const saved = await store.read('run.json');
    const state: RunState = saved
      ? (parseRunState(saved, storeFile(store, 'run.json')) as RunState)
      : { version: 1, config, step: 0, rng: { seed: runSeeds.taskSampling(config.seed), step: 0 }, checkpoint: null };
    checkConfig(state.config);
    const c = state.config;
    const b = model.backend;
    const fresh = (name: string, seed: number) => createLoraAdapter(b, model.config, { name, rank: c.lora.rank, alpha: c.lora.alpha, targets: c.lora.targets, seed });
    const load = async (dir: string, name: string) => {
      const files = new Map<string, Uint8Array>();
      for (const f of ['adapter_config.json', 'adapter_model.safetensors']) {
        const bytes = await store.read(`${dir}/${f}`);
        if (!bytes) throw new RunConfigError(`checkpoint file ${dir}/${f} is missing`);
        files.set(f, bytes);
      }
      return loadPeftAdapter(b, model.config, new MemorySource(files), name);
    };
    const ck = state.checkpoint;
    const act = ck ? await load(`${ck}/adapter`, 'act') : fresh('act', runSeeds.actAdapter(c.seed));
    const reh = hasRehearseAdapter(c.mode) ? (ck ? await load(`${ck}/adapter-rehearse`, 'rehearse') : fresh('rehearse', runSeeds.rehearseAdapter(c.seed))) : null;
    // An adapter that does not match run.json's LoRA settings would train on silently under a wrong label.
    for (const [a, dir] of [[act, 'adapter'], [reh, 'adapter-rehearse']] as const) {
      if (!a || !ck) continue;
      if (a.rank !== c.lora.rank || a.alpha !== c.lora.alpha) {
        act.free(b);
        reh?.free(b);
        throw new RunConfigError(
          `${storeFile(store, 'run.json')} says lora.rank ${c.lora.rank}, alpha ${c.lora.alpha}, but ${storeFile(store, `${ck}/${dir}/adapter_config.json`)} has r ${a.rank}, lora_alpha ${a.alpha}`,
        );
      }
    }
    const schedule =
      (c.warmupSteps ?? 0) > 0
        ? { kind: 'warmup-cosine' as const, lr: c.lr, warmupSteps: c.warmupSteps!, totalSteps: c.steps }
        : { kind: 'constant' as const, lr: c.lr };
    const trainer = (a: LoraAdapter) =>
      new Trainer(model, {
        mode: 'lora',
        adapter: a,
        schedule,
        weightDecay: c.weightDecay ?? 0,
        maxGradNorm: c.maxGradNorm ?? 1,
        // The rollouts' temperature: the head scores the policy that sampled them (src/train/trainer.ts LossSpec).
        loss: { kind: 'grpo', clipEps: c.clipEps ?? 0.2, dualClip: c.dualClip ?? 3, klCoef: c.klCoef ?? 0, temperature: c.temperature ?? 1 },
      });
    const trainers = { act: trainer(act), ...(reh ? { rehearse: trainer(reh) } : {}) };
    if (ck) {
      for (const [t, f] of [[trainers.act, 'optimizer.safetensors'], [trainers.rehearse, 'optimizer-rehearse.safetensors']] as const) {
        if (!t) continue;
        const bytes = await store.read(`${ck}/${f}`);
        if (!bytes) throw new RunConfigError(`checkpoint file ${ck}/${f} is missing`);
        t.loadOptimizerState(bytes, storeFile(store, `${ck}/${f}`));
      }
    }
    return new GrpoRun(model, tokenizer, domain, tasks.train, tasks.eval ?? [], store, state, act, reh, trainers, Rng.restore(state.rng), hooks);
  }

  /** Distinct training tasks for one step (with replacement across steps); `weights` per family with 'signal'. */
  private sampleTasks(weights?: Record<string, number>): Task[] {
    const c = this.config;
    const idx = sampleTaskIndices(this.rng, this.trainTasks, c.promptsPerStep, c.taskSampling ?? 'uniform', weights);
    return idx.map((i) => this.trainTasks[i]);
  }

  /** One GRPO step: rollouts, update, logs; checkpoint and evaluation when due. */
  async trainStep(): Promise<StepMetrics> {
    if (this.done) throw new RunConfigError(`the run is finished (${this.state.step}/${this.config.steps} steps)`);
    const t0 = performance.now();
    const c = this.config;
    const step = this.state.step + 1;
    const signal = c.taskSampling === 'signal';
    const weights = signal ? familyWeights(this.state.familyStats ?? {}, this.trainTasks, c.k) : undefined;
    const tasks = this.sampleTasks(weights);
    const h = this.hooks;
    h.onPhase?.('rollouts');
    const nReal = rehearses(c.mode) ? (c.realPrompts ?? 0) : tasks.length;
    const common = {
      ...conversationOf(c),
      k: c.k, limits: c.limits, temperature: c.temperature, topP: c.topP, greedyMember: c.greedyMember,
      rehearsePrompt: c.rehearsePrompt, kvReuse: c.kvReuse, actScript: this.hooks.actScript, signal: this.hooks.signal,
      onProgress: h.onRolloutProgress, onStep: h.onRolloutStep,
    };
    const reward = this.hooks.reward ?? ((ep, d) => rewardBy(c.reward, ep, d));
    const parts: RolloutBatch[] = [];
    // The budgeted real rollouts of a rehearsing run: their own seed stream, scored as real-mode GRPO is.
    if (nReal > 0 && rehearses(c.mode)) {
      parts.push(await runRollouts({ model: this.model, tokenizer: this.tokenizer, adapter: this.actAdapter }, this.domain, tasks.slice(0, nReal), {
        ...common, mode: 'real', seed: hash32(runSeeds.step(c.seed, step) ^ 0x4ea1), reward: this.hooks.reward ?? ((ep, d) => rewardBy('verifier', ep, d)),
      }));
    }
    const imagined = rehearses(c.mode) ? tasks.slice(nReal) : tasks;
    if (imagined.length > 0) {
      parts.push(await runRollouts(
        { model: this.model, tokenizer: this.tokenizer, adapter: this.actAdapter, ...(this.rehearseAdapter ? { rehearseAdapter: this.rehearseAdapter } : {}) },
        this.domain,
        imagined,
        { ...common, mode: c.mode, seed: runSeeds.step(c.seed, step), reward, ...(c.rehearsalRecall === 'reference' ? { recall: c.rehearsalRecall } : {}) },
      ));
    }
    const batch = mergeBatches(parts);
    const realRollouts = batch.rollouts.filter((r) => r.mode === 'real');
    let observationRows: Awaited<ReturnType<typeof realObservationRows>> = [];
    if ((c.observationCoef ?? 0) > 0 && realRollouts.length > 0) {
      observationRows = await realObservationRows(
        this.model, this.tokenizer, this.rehearseAdapter ?? this.actAdapter, this.domain, realRollouts, new Map(tasks.map((t) => [t.id, t])),
        { maxRehearseTokens: c.limits.maxRehearseTokens, maxContext: Math.min(c.limits.maxContext ?? Infinity, this.model.config.maxPositionEmbeddings), rehearsePrompt: c.rehearsePrompt, grounding: c.observationGrounding },
      );
    }
    h.onPhase?.('update');
    const upd = await grpoUpdate(this.trainers, batch, c.mode, {
      groups: c.groups, baseline: c.baseline, maxBatchTokens: c.maxBatchTokens, withReference: (c.klCoef ?? 0) > 0, epochs: c.updateEpochs, aggregation: c.lossAggregation,
      ...(observationRows.length > 0 ? { supervised: { rows: observationRows, advantage: c.observationCoef!, weighting: c.observationWeighting } } : {}),
    });
    const adv = upd.advantages.advantage.filter((a): a is number => a !== null);
    const metrics: StepMetrics = {
      step,
      tasks: tasks.map((t) => t.id),
      rollouts: summarizeRollouts(batch, (id) => tasks.find((t) => t.id === id)?.referenceActions ?? []),
      updates: upd.steps.map((s) => ({
        target: s.target, rows: s.rows, loss: s.report.loss, clipFrac: s.report.clipFrac, kl: s.report.kl,
        gradNorm: s.report.gradNorm, tokens: s.report.tokens, applied: s.report.applied, lr: s.report.lr,
      })),
      advantage: { groups: upd.advantages.groups.length, meanAbs: adv.length ? adv.reduce((s, a) => s + Math.abs(a), 0) / adv.length : 0, spread: spreadFraction(batch.rows, upd.advantages) },
      ...(weights ? { familyWeights: weights } : {}),
      realEpisodes: realRollouts.length,
      ...((c.observationCoef ?? 0) > 0 ? { observationRows: observationRows.length } : {}),
      wallMs: performance.now() - t0,
    };
    if (signal) {
      const fam = new Map(tasks.map((t) => [t.id, familyOf(t)]));
      this.state.familyStats = addEpisodes(this.state.familyStats ?? {}, batch.rollouts, (id) => fam.get(id));
    }
    this.state.step = step;
    this.state.rng = this.rng.state;
    await this.store.append('metrics.jsonl', JSON.stringify(metrics));
    for (const r of batch.rollouts) {
      await this.store.append('rollouts.jsonl', JSON.stringify({ step, ...r, rows: undefined, log: undefined, fidelity: r.fidelity.map(({ call, exact, f1, errorAgree, turn }) => ({ turn, call: call.name, exact, f1, errorAgree })) }));
    }
    // Evaluation before the checkpoint: a run killed in between then redoes the step (same bits) and its
    // evaluation, where the other order left a finished run.json without the final evaluation, for good.
    if ((c.evalEvery ?? 0) > 0 && this.evalTasks.length > 0 && (step % c.evalEvery! === 0 || this.done)) await this.evaluate();
    const every = c.checkpointEvery ?? 1;
    if (step % every === 0 || this.done) {
      h.onPhase?.('checkpoint');
      await this.checkpoint();
    }
    this.hooks.onStep?.(metrics);
    return metrics;
  }

  async checkpoint(): Promise<void> {
    const dir = `ckpt/${this.state.step}`;
    const b = this.model.backend;
    for (const [a, sub] of [[this.actAdapter, 'adapter'], [this.rehearseAdapter, 'adapter-rehearse']] as const) {
      if (!a) continue;
      for (const [name, bytes] of await adapterToPeftFiles(b, a)) await this.store.write(`${dir}/${sub}/${name}`, bytes);
    }
    await this.store.write(`${dir}/optimizer.safetensors`, await this.trainers.act.saveOptimizerState());
    if (this.trainers.rehearse) await this.store.write(`${dir}/optimizer-rehearse.safetensors`, await this.trainers.rehearse.saveOptimizerState());
    this.state.checkpoint = dir;
    await this.store.write('run.json', enc(this.state));
  }

  /** Held-out tasks in the real environment (greedy, one rollout each), plus optional rehearsal fidelity. */
  async evaluate(): Promise<EvalMetrics> {
    const c = this.config;
    await this.hooks.beforeEvaluate?.();
    this.hooks.onPhase?.('held-out evaluation');
    const batch = await runRollouts({ model: this.model, tokenizer: this.tokenizer, adapter: this.actAdapter }, this.domain, this.evalTasks, {
      ...conversationOf(c),
      mode: 'real', k: 1, seed: c.seed, limits: c.limits, temperature: 0, kvReuse: c.kvReuse, signal: this.hooks.signal,
      onProgress: this.hooks.onRolloutProgress, onStep: this.hooks.onRolloutStep,
    });
    const byId = new Map(this.evalTasks.map((t) => [t.id, t]));
    const s = summarizeRollouts(batch, (id) => byId.get(id)?.referenceActions ?? []);
    const m: EvalMetrics = { step: this.state.step, success: s.success, meanReward: s.meanReward, toolPrecision: s.toolPrecision, toolRecall: s.toolRecall, ends: s.ends };
    const byFamily = groupSuccess(batch.rollouts, (r) => byId.get(r.taskId)?.family ?? null);
    if (Object.keys(byFamily).length > 0) m.byFamily = byFamily;
    if (c.evalFidelityTokens) {
      this.hooks.onPhase?.('held-out fidelity');
      const tasks = c.evalFidelityTasks ? this.evalTasks.slice(0, c.evalFidelityTasks) : this.evalTasks;
      const f = await evalRehearsalFidelity(this.model, this.tokenizer, this.rehearseAdapter ?? this.actAdapter, this.domain, tasks, {
        maxRehearseTokens: c.evalFidelityTokens, rehearsePrompt: c.rehearsePrompt, maxContext: c.limits.maxContext, signal: this.hooks.signal,
        onStep: this.hooks.onFidelityStep,
      });
      m.fidelity = { exact: f.summary.exact, f1: f.summary.f1, errorAgree: f.summary.errorAgree, invalid: f.invalid, steps: f.summary.steps };
    }
    await this.store.append('eval.jsonl', JSON.stringify(m));
    return m;
  }

  /** The steps whose held-out evaluation is in the run's log (0: the base evaluation). */
  async evaluationsLogged(): Promise<number[]> {
    const text = new TextDecoder().decode((await this.store.read('eval.jsonl')) ?? new Uint8Array());
    // A torn last line (an interrupted append) is not an evaluation; the CLI's own read of the log warns about it.
    return (parseJsonl(text, 'eval.jsonl') as EvalMetrics[]).map((m) => m.step);
  }

  /**
   * Logs an evaluation measured elsewhere (a reused base evaluation) as the run's own: only step 0, and only while the
   * log holds no evaluation (so step 0 stays first, whether or not the run has stepped while the base was measured).
   */
  async logEvaluation(m: EvalMetrics): Promise<void> {
    if (m.step !== 0 || (await this.evaluationsLogged()).length > 0) throw new RunConfigError('only the base evaluation (step 0, before any other evaluation) can be logged from a record');
    await this.store.append('eval.jsonl', JSON.stringify(m));
  }

  /** Runs the remaining steps. */
  async run(): Promise<void> {
    while (!this.done) await this.trainStep();
  }

  free(): void {
    this.trainers.act.free();
    this.trainers.rehearse?.free();
    this.actAdapter.free(this.model.backend);
    this.rehearseAdapter?.free(this.model.backend);
  }
}
