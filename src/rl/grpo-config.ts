// What a caller (the train CLI, the ablation script, the lab's worker) needs around a GrpoRun
// (src/rl/run.ts, which does the stepping, checkpoints and exact resume): defaults sized for the bundled
// policy, a complete run configuration from a few options, the task split, and a one-line progress summary
// of a step. Browser-safe: no Node imports.
import type { Domain, Task } from '../env/domain';
import { MIN_ACT_TOKENS, tokenBudgets } from '../rollout/budget';
import type { RehearsePromptOptions } from '../rollout/rehearse-prompt';
import type { ObservationGrounding } from '../rollout/observation-rows';
import { defaultRewardRule, REWARD_RULES, type RewardRule } from '../method/reward-rules';
import type { RolloutLimits } from '../rollout/rollout';
import type { Baseline } from '../method/advantage';
import { effectiveGroups, isRolloutMode, ROLLOUT_MODES, type RolloutMode } from '../method/modes';
import type { EvalMetrics, GrpoRunConfig, StepMetrics } from './run';
import type { TaskSampling } from './task-sampler';
import { DEFAULT_AGGREGATION, type Aggregation } from '../train/batch';

export const ADVANTAGES = ['role-wise', 'pooled'] as const;
export const BASELINES: readonly Baseline[] = ['row-weighted', 'rollout-mean'];

/**
 * Episode limits of the bundled policy's model card evaluation (research/pretrain/evaluate.ts EVAL_LIMITS):
 * retail tasks need up to ~8 calls; a rehearsed observation (an order with its items) can run to a few
 * hundred tokens of the domain tokenizer.
 */
export const DEFAULT_LIMITS: RolloutLimits = { maxTurns: 12, maxActTokens: MIN_ACT_TOKENS, maxRehearseTokens: 640 };

/**
 * DEFAULT_LIMITS with the Rehearse budget measured on the domain's real observations under the policy's
 * tokenizer (src/rollout/budget.ts: p99 token length of the formatted observation, tags included), so a
 * rehearsal of a typical observation is never cut by a constant sized for another world or tokenizer.
 */
export function defaultLimits(domain: Pick<Domain, 'tasks' | 'expert' | 'createEnv'>, tokenizer: { encode(text: string): number[] }): RolloutLimits {
  return { ...DEFAULT_LIMITS, maxRehearseTokens: tokenBudgets(domain, tokenizer).rehearse };
}

export interface TrainOptions {
  mode: RolloutMode;
  advantage?: (typeof ADVANTAGES)[number];
  baseline?: Baseline;
  steps: number;
  seed: number;
  k?: number;
  promptsPerStep?: number;
  lr?: number;
  /** Optimizer steps per batch of rollouts (PPO epochs); default 1. */
  epochs?: number;
  /** How a step's tasks are drawn (src/rl/task-sampler.ts); default 'uniform'. */
  taskSampling?: TaskSampling;
  rank?: number;
  alpha?: number;
  evalEvery?: number;
  /** Rehearsal budget of the periodic fidelity measurement; 0 = skip it. */
  evalFidelityTokens?: number;
  limits?: Partial<RolloutLimits>;
  rehearsePrompt?: RehearsePromptOptions;
  temperature?: number;
  /** Nucleus sampling of training rollouts; default 1 (none). */
  topP?: number;
  /** Decode the first of each group's K rollouts greedily, as the held-out evaluation; default false. */
  greedyMember?: boolean;
  /** How training rollouts are scored; default: the mode's own rule (verifier for real, checklist when rehearsing). */
  reward?: RewardRule;
  /** Rehearsing modes: prompts per step whose rollouts run in the real environment (GrpoRunConfig.realPrompts); default 0. */
  realPrompts?: number;
  /** Cross-entropy coefficient of Rehearse rows on real observations (GrpoRunConfig.observationCoef); default 0 (off). */
  observationCoef?: number;
  /** Grounding of those rows (GrpoRunConfig.observationGrounding); default 'with-call'. */
  observationGrounding?: ObservationGrounding;
  klCoef?: number;
  /** How token losses sum to the step's loss (src/train/batch.ts AGGREGATIONS); default seq-mean-token-mean. */
  lossAggregation?: Aggregation;
  maxBatchTokens?: number;
  checkpointEvery?: number;
}

export class TrainOptionsError extends Error {
  override readonly name = 'TrainOptionsError';
}

/** LoRA alpha for a rank when none is given: 2·rank, the bundled policy's (the CLI's flag default and the lab's). */
export const defaultLoraAlpha = (rank: number) => 2 * rank;

/** A complete GrpoRun configuration; defaults are the bundled policy's (LoRA r 8, lr 1e-3, 4 prompts × 4). */
export function grpoRunConfig(o: TrainOptions): GrpoRunConfig {
  if (!isRolloutMode(o.mode)) throw new TrainOptionsError(`mode must be one of ${ROLLOUT_MODES.join(', ')}, got ${String(o.mode)}`);
  const adv = o.advantage ?? 'role-wise';
  if (!ADVANTAGES.includes(adv)) throw new TrainOptionsError(`advantage must be one of ${ADVANTAGES.join(', ')}, got ${String(adv)}`);
  const baseline = o.baseline ?? 'row-weighted';
  if (!BASELINES.includes(baseline)) throw new TrainOptionsError(`baseline must be one of ${BASELINES.join(', ')}, got ${String(baseline)}`);
  const limits = { ...DEFAULT_LIMITS, ...o.limits };
  if (o.reward !== undefined && !REWARD_RULES.includes(o.reward)) throw new TrainOptionsError(`reward must be one of ${REWARD_RULES.join(', ')}, got ${String(o.reward)}`);
  const rank = o.rank ?? 8;
  return {
    mode: o.mode,
    // Recorded as used (run.json keeps the config), not as asked.
    groups: effectiveGroups(o.mode, adv),
    baseline,
    steps: o.steps,
    promptsPerStep: o.promptsPerStep ?? 4,
    k: o.k ?? 4,
    seed: o.seed,
    limits,
    ...(o.rehearsePrompt ? { rehearsePrompt: o.rehearsePrompt } : {}),
    temperature: o.temperature ?? 1,
    ...(o.topP !== undefined && o.topP !== 1 ? { topP: o.topP } : {}),
    // Recorded only when on, so a run.json from before the option reads the same.
    ...(o.greedyMember ? { greedyMember: true } : {}),
    // Recorded only when it differs from the mode's rule, so a run.json from before the option reads the same.
    ...(o.reward !== undefined && o.reward !== defaultRewardRule(o.mode) ? { reward: o.reward } : {}),
    // Recorded only when on, so a run.json from before the options reads the same.
    ...(o.realPrompts ? { realPrompts: o.realPrompts } : {}),
    ...(o.observationCoef ? { observationCoef: o.observationCoef } : {}),
    ...(o.observationGrounding && o.observationGrounding !== 'with-call' ? { observationGrounding: o.observationGrounding } : {}),
    kvReuse: true,
    lora: { rank, alpha: o.alpha ?? defaultLoraAlpha(rank) },
    lr: o.lr ?? 1e-3,
    updateEpochs: o.epochs ?? 1,
    taskSampling: o.taskSampling ?? 'uniform',
    klCoef: o.klCoef ?? 0,
    // Recorded only when it differs from the default, so a run.json from before the option reads the same.
    ...(o.lossAggregation !== undefined && o.lossAggregation !== DEFAULT_AGGREGATION ? { lossAggregation: o.lossAggregation } : {}),
    maxBatchTokens: o.maxBatchTokens ?? 4096,
    evalEvery: o.evalEvery ?? 0,
    evalFidelityTokens: o.evalFidelityTokens ?? limits.maxRehearseTokens,
    checkpointEvery: o.checkpointEvery ?? 1,
  };
}

/**
 * Training prompts from the train split and held-out tasks from the test split (the generator keeps their
 * users apart). The held-out set depends only on `evalSeed`, so every run of an ablation sees the same one.
 */
export function splitTasks(domain: Domain, o: { train: number; eval: number; seed: number; evalSeed?: number }): { train: Task[]; eval: Task[] } {
  if (!(Number.isInteger(o.train) && o.train >= 1)) throw new TrainOptionsError(`need at least one training task, got ${o.train}`);
  if (!(Number.isInteger(o.eval) && o.eval >= 0)) throw new TrainOptionsError(`eval task count must be >= 0, got ${o.eval}`);
  return {
    train: domain.tasks.generate({ split: 'train', count: o.train, seed: o.seed }),
    eval: o.eval > 0 ? domain.tasks.generate({ split: 'test', count: o.eval, seed: o.evalSeed ?? 1 }) : [],
  };
}

const f = (x: number, d = 2) => (Number.isFinite(x) ? x.toFixed(d) : '-');

/** "step 3/10  reward 0.31±0.20  success 0.25  act 12 reh 9 rows  loss -0.012 (shared)  14.2 s" */
export function stepLine(m: StepMetrics, total: number): string {
  const r = m.rollouts;
  const upd = m.updates.map((u) => `loss ${f(u.loss, 4)} gn ${f(u.gradNorm, 3)}${u.applied ? '' : ' SKIPPED'} (${u.target})`).join(', ') || 'no update (no advantage)';
  const fid = Number.isFinite(r.fidelity.exact) ? `  fid ${f(r.fidelity.exact)}/${f(r.fidelity.f1)}` : '';
  return `step ${m.step}/${total}  reward ${f(r.meanReward)}±${f(r.sdReward)}  success ${f(r.success)}  rows act ${r.rows.act} reh ${r.rows.rehearse}${fid}  ${upd}  ${(m.wallMs / 1000).toFixed(1)} s`;
}

export function evalLine(e: EvalMetrics): string {
  const fid = e.fidelity ? `  fidelity exact ${f(e.fidelity.exact)} f1 ${f(e.fidelity.f1)} err ${f(e.fidelity.errorAgree)} invalid ${f(e.fidelity.invalid)}` : '';
  return `eval @${e.step}: success ${f(e.success)}  reward ${f(e.meanReward)}  tool P ${f(e.toolPrecision)} R ${f(e.toolRecall)}${fid}`;
}
