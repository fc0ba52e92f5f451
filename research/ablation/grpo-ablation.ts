// The miniature of the paper's ablation: the configurations, the per-run record, the
// aggregation (bootstrap intervals over tasks and seeds, paired differences; research/ablation/stats.ts) and the
// Markdown tables that docs/results.md carries, with the paper's τ²-Bench figures beside ours. Pure
// functions; research/scripts/ablation.ts runs the experiments.
import { realEpisodesPerStep, type RolloutMode } from '../../src/method/modes';
import { DEFAULT_BASELINE, type RunValues } from '../../src/method/run-config';
import { bootstrapMean, fmtDiff, fmtInterval, meanCI, pairedBootstrap, type BootstrapOptions, type Interval, type Obs, type PairedInterval } from './stats';

/** A configuration of the ablation: its run settings by their one names (src/method/run-config.ts), and its place in the table. */
export interface AblationConfig extends Pick<RunValues, 'groups' | 'baseline' | 'klCoef'>, Partial<Pick<RunValues, 'reward' | 'promptsPerStep' | 'realPrompts' | 'observationCoef' | 'observationGrounding' | 'observationWeighting' | 'rehearsalRecall'>> {
  id: string;
  label: string;
  /** null: the base policy, evaluated without training. */
  mode: RolloutMode | null;
  /** Not run unless named in --configs. */
  optional?: boolean;
  /** The paper's τ²-Bench overall success (%) for the matching configuration, where it reports one. */
  paper: { b8: number | null; b1_7: number | null };
}

const NO_PAPER = { b8: null, b1_7: null };

/**
 * The paper's standard GRPO trains Act against a frozen LLM simulator: our `frozen-simulator`. `real` (GRPO
 * against the executable environment) is the upper reference the paper could not run. The baseline axis
 * (row-weighted, the reference code's, vs rollout-mean) and the KL term are varied on EnvACE only.
 */
export const ABLATION_CONFIGS: readonly AblationConfig[] = [
  { id: 'base', label: 'base policy', mode: null, groups: 'role-wise', baseline: DEFAULT_BASELINE, klCoef: 0, paper: { b8: 30.0, b1_7: null } },
  { id: 'real', label: 'GRPO, real environment', mode: 'real', groups: 'role-wise', baseline: DEFAULT_BASELINE, klCoef: 0, paper: NO_PAPER },
  // The real environment scored by the rehearsed runs' checklist judge: tells the judge's effect from the rehearsal's.
  { id: 'real-checklist', label: 'GRPO, real environment, checklist reward', mode: 'real', reward: 'checklist', groups: 'role-wise', baseline: DEFAULT_BASELINE, klCoef: 0, optional: true, paper: NO_PAPER },
  // EnvACE with the judge all or nothing: does rehearsed training keep its writes without the partial credit?
  { id: 'envace-strict', label: 'EnvACE, role-wise, strict checklist', mode: 'rehearse', reward: 'strict-checklist', groups: 'role-wise', baseline: DEFAULT_BASELINE, klCoef: 0, optional: true, paper: NO_PAPER },
  // The frozen simulator with the same strict judge: is its loss the partial credit too, or the frozen imagined observations?
  { id: 'frozen-strict', label: 'GRPO, frozen simulator, strict checklist', mode: 'frozen-simulator', reward: 'strict-checklist', groups: 'role-wise', baseline: DEFAULT_BASELINE, klCoef: 0, optional: true, paper: NO_PAPER },
  { id: 'frozen-simulator', label: 'GRPO, frozen simulator (paper: GRPO)', mode: 'frozen-simulator', groups: 'role-wise', baseline: DEFAULT_BASELINE, klCoef: 0, paper: { b8: 31.2, b1_7: 14.7 } },
  { id: 'per-role', label: 'per-role policies', mode: 'per-role', groups: 'role-wise', baseline: DEFAULT_BASELINE, klCoef: 0, paper: { b8: 35.5, b1_7: 14.0 } },
  { id: 'envace', label: 'EnvACE, role-wise', mode: 'rehearse', groups: 'role-wise', baseline: DEFAULT_BASELINE, klCoef: 0, paper: { b8: 36.7, b1_7: 15.3 } },
  { id: 'envace-pooled', label: 'EnvACE, pooled groups', mode: 'rehearse', groups: 'pooled', baseline: DEFAULT_BASELINE, klCoef: 0, paper: NO_PAPER },
  { id: 'envace-rollout-mean', label: 'EnvACE, rollout-mean baseline', mode: 'rehearse', groups: 'role-wise', baseline: 'rollout-mean', klCoef: 0, paper: NO_PAPER },
  { id: 'envace-kl', label: 'EnvACE, KL 1e-4 (k3)', mode: 'rehearse', groups: 'role-wise', baseline: DEFAULT_BASELINE, klCoef: 1e-4, optional: true, paper: NO_PAPER },
  // EnvACE whose imagined episodes are scored by replaying their calls on a fresh real database at the end:
  // one real reward per episode, no real observation ever shown to Act (the judge's control).
  { id: 'envace-verifier', label: 'EnvACE, verifier replay', mode: 'rehearse', reward: 'verifier', groups: 'role-wise', baseline: DEFAULT_BASELINE, klCoef: 0, optional: true, paper: NO_PAPER },
  // The real-interaction budget (the paper's premise): a quarter of real GRPO's episodes, 1 prompt × K real per step.
  { id: 'real-q', label: 'GRPO, real environment, 1/4 of the real episodes', mode: 'real', promptsPerStep: 1, groups: 'role-wise', baseline: DEFAULT_BASELINE, klCoef: 0, optional: true, paper: NO_PAPER },
  // The same real episodes plus 3 rehearsed prompts per step (Dyna-style; the imagined ones scored by the strict
  // checklist, the real ones by the verifier), with and without the simulator learning from the real observations.
  { id: 'dyna-q', label: 'EnvACE + 1/4 real episodes', mode: 'rehearse', reward: 'strict-checklist', realPrompts: 1, groups: 'role-wise', baseline: DEFAULT_BASELINE, klCoef: 0, optional: true, paper: NO_PAPER },
  // The first observation-term runs weighed every row alike ('row'); see observationWeighting in src/method/run-config.ts.
  { id: 'dyna-q-obs', label: 'EnvACE + 1/4 real episodes, simulator on real observations', mode: 'rehearse', reward: 'strict-checklist', realPrompts: 1, observationCoef: 0.5, observationWeighting: 'row', groups: 'role-wise', baseline: DEFAULT_BASELINE, klCoef: 0, optional: true, paper: NO_PAPER },
  // The same with the observation rows grounded without the call's own reference result (as pretraining's rows
  // and the strict fidelity measurement). dyna-q-obs's seed 0 had lost 12 points of fidelity (60.9 -> 48.6 %); the
  // cause proved to be the row weighting, not the example (research/records/2026-12-04-budget).
  { id: 'dyna-q-sim', label: 'EnvACE + 1/4 real episodes, simulator on real observations (dynamics, not copies)', mode: 'rehearse', reward: 'strict-checklist', realPrompts: 1, observationCoef: 0.5, observationGrounding: 'without-call', observationWeighting: 'row', groups: 'role-wise', baseline: DEFAULT_BASELINE, klCoef: 0, optional: true, paper: NO_PAPER },
  // dyna-q-sim with every target token weighed alike: the short error targets no longer outweigh long results.
  { id: 'dyna-q-tok', label: 'EnvACE + 1/4 real episodes, simulator on real observations (token-weighted)', mode: 'rehearse', reward: 'strict-checklist', realPrompts: 1, observationCoef: 0.5, observationGrounding: 'without-call', groups: 'role-wise', baseline: DEFAULT_BASELINE, klCoef: 0, optional: true, paper: NO_PAPER },
  // dyna-q whose rehearsals recall the reference trajectory's real observation where it is certainly the real
  // answer (src/rollout/recall.ts): the same 160 real episodes, the simulator exact wherever the data already is.
  { id: 'dyna-q-recall', label: 'EnvACE + 1/4 real episodes, rehearsal with recall', mode: 'rehearse', reward: 'strict-checklist', realPrompts: 1, rehearsalRecall: 'reference', groups: 'role-wise', baseline: DEFAULT_BASELINE, klCoef: 0, optional: true, paper: NO_PAPER },
  // dyna-q-recall with only Act's rows trained: the base policy (adapter off) rehearses, as in frozen-simulator, so
  // the task reward never reaches the Rehearse rows and the simulator does not move while Act learns.
  { id: 'dyna-fq-recall', label: 'GRPO, frozen simulator + 1/4 real episodes, rehearsal with recall', mode: 'frozen-simulator', reward: 'strict-checklist', realPrompts: 1, rehearsalRecall: 'reference', groups: 'role-wise', baseline: DEFAULT_BASELINE, klCoef: 0, optional: true, paper: NO_PAPER },
  // dyna-fq-recall with 7 rehearsed prompts per step beside the 1 real one (8 × K): the same 160 real episodes, 1120
  // rehearsed ones; asks whether more free episodes are what the act-only gain (+1.6 [−0.1, +3.3]) lacked.
  { id: 'dyna-fq8-recall', label: 'GRPO, frozen simulator + 1/4 real episodes, 7 rehearsed prompts per step, recall', mode: 'frozen-simulator', reward: 'strict-checklist', promptsPerStep: 8, realPrompts: 1, rehearsalRecall: 'reference', groups: 'role-wise', baseline: DEFAULT_BASELINE, klCoef: 0, optional: true, paper: NO_PAPER },
  // Every episode rehearsed with recall, none real (strict checklist): what the recall buys without any real episode.
  { id: 'envace-recall', label: 'EnvACE, strict checklist, rehearsal with recall', mode: 'rehearse', reward: 'strict-checklist', rehearsalRecall: 'reference', groups: 'role-wise', baseline: DEFAULT_BASELINE, klCoef: 0, optional: true, paper: NO_PAPER },
  // The budget's half: 2 of the 4 prompts real (320 episodes), for the figure of success against the real budget.
  { id: 'real-h', label: 'GRPO, real environment, 1/2 of the real episodes', mode: 'real', promptsPerStep: 2, groups: 'role-wise', baseline: DEFAULT_BASELINE, klCoef: 0, optional: true, paper: NO_PAPER },
  { id: 'dyna-h', label: 'EnvACE + 1/2 real episodes', mode: 'rehearse', reward: 'strict-checklist', realPrompts: 2, groups: 'role-wise', baseline: DEFAULT_BASELINE, klCoef: 0, optional: true, paper: NO_PAPER },
  { id: 'dyna-h-recall', label: 'EnvACE + 1/2 real episodes, rehearsal with recall', mode: 'rehearse', reward: 'strict-checklist', realPrompts: 2, rehearsalRecall: 'reference', groups: 'role-wise', baseline: DEFAULT_BASELINE, klCoef: 0, optional: true, paper: NO_PAPER },
  // Real GRPO whose adapter also learns the real observations (the simulator grounded, every episode real).
  { id: 'real-obs', label: 'GRPO, real environment, simulator on real observations', mode: 'real', observationCoef: 0.5, observationWeighting: 'row', groups: 'role-wise', baseline: DEFAULT_BASELINE, klCoef: 0, optional: true, paper: NO_PAPER },
];

/** Real episodes a configuration spends over a run of `steps` (the real-interaction budget). */
export function realEpisodesOf(c: AblationConfig, budget: { steps: number; prompts: number; k: number }, steps = budget.steps): number {
  if (c.mode === null) return 0;
  return steps * realEpisodesPerStep({ mode: c.mode, promptsPerStep: c.promptsPerStep ?? budget.prompts, k: budget.k, realPrompts: c.realPrompts });
}

/** The configurations run when --configs is not given (all but the optional ones). */
export const DEFAULT_CONFIG_IDS = ABLATION_CONFIGS.filter((c) => !c.optional).map((c) => c.id);

export interface FidelityFigures {
  exact: number;
  f1: number;
  errorAgree: number;
  invalid: number;
  steps: number;
}

/** One point of a learning curve: held-out evaluation after `step` GRPO steps (0: before training). */
export interface CurvePoint {
  step: number;
  tasks: number;
  success: number;
  meanReward: number;
  fidelity: FidelityFigures | null;
  s: number;
}

/** The record of one finished (configuration, seed) run: <out>/<config>-s<seed>/result.json. */
export interface AblationRun {
  /** Fingerprint of the budget, limits, world and weights: records of another budget are not mixed in. */
  key: string;
  config: string;
  seed: number;
  steps: number;
  success: number;
  meanReward: number;
  toolPrecision: number;
  toolRecall: number;
  /** Rehearsal fidelity on the held-out reference calls without each call's own example (strict). */
  fidelity: FidelityFigures | null;
  /** The same calls grounded as rollouts ground them (the example kept); records before 2026-12-05 lack it. */
  fidelityGrounded?: FidelityFigures | null;
  /** Per held-out task, for the bootstrap over tasks and the paired differences (tier, family: for breakdowns). */
  perTask: { taskId: string; reward: number; tier?: number | null; family?: string | null }[];
  /** Fraction of the real calls that ran without an error observation (a graded signal where success is rare). */
  callsWithoutError?: number;
  /** Mean reward of the training rollouts: first step, last step, mean over steps (rehearsed modes: the judge's). */
  trainReward: { first: number; last: number; mean: number } | null;
  /** Mean over steps of the fraction of advantage groups with a non-zero reward spread. */
  spread: number | null;
  /** Seconds: training steps (summed over sessions), curve evaluations, the final evaluation; wall = their sum. */
  trainS: number;
  curveS: number;
  evalS: number;
  wallS: number;
}

interface LimitsLike {
  maxTurns: number;
  maxActTokens: number;
  maxRehearseTokens: number;
}

export interface AblationMeta {
  date: string;
  world: string;
  model: string;
  /** First hex digits of the weights file's sha256. */
  modelHash?: string;
  modelParams: number | null;
  backend: string;
  machine: string;
  command: string;
  budget: { steps: number; seeds: number; evalTasks: number; trainTasks: number; k: number; prompts: number; lr: number; rank: number };
  /** Episode limits of the training rollouts and of the evaluation. */
  limits?: { train: LimitsLike; eval: LimitsLike };
  /** Learning-curve evaluations: every N steps on the first M held-out tasks (null: none). */
  curve?: { every: number; tasks: number } | null;
  /** Bootstrap replicates and seed. */
  bootstrap: { reps: number; seed: number };
  /** Set when the budget is below the intended one: printed above the table. */
  reduced: string | null;
  /** What came out, in words, printed under the table. */
  note?: string | null;
  /** Learning-curve figures (paths relative to docs/), shown under the tables. */
  figures?: string[];
  /** A section kept beside the current one needs its own heading and a line saying what it is (default: the current ablation's heading, no line). */
  title?: string;
  intro?: string;
}

export interface Stat {
  mean: number;
  sd: number;
  n: number;
}

/** Mean and sample sd (n - 1) of the finite values; NaN when there are none (sd 0 for one value). */
export function stat(xs: readonly number[]): Stat {
  const v = xs.filter((x) => Number.isFinite(x));
  const n = v.length;
  if (n === 0) return { mean: NaN, sd: NaN, n: 0 };
  const mean = v.reduce((s, x) => s + x, 0) / n;
  const sd = n > 1 ? Math.sqrt(v.reduce((s, x) => s + (x - mean) ** 2, 0) / (n - 1)) : 0;
  return { mean, sd, n };
}

/** Success (reward 1) per task and seed, the observations of the bootstrap. */
export function successObs(runs: readonly AblationRun[]): Obs[] {
  return runs.flatMap((r) => r.perTask.map((t) => ({ seed: r.seed, task: t.taskId, value: t.reward >= 1 ? 1 : 0 })));
}

function tierSuccess(rs: readonly AblationRun[]): AblationRow['byTier'] {
  const acc: AblationRow['byTier'] = {};
  for (const t of rs.flatMap((r) => r.perTask)) {
    if (t.tier === null || t.tier === undefined) continue;
    const a = (acc[String(t.tier)] ??= { results: 0, success: 0 });
    a.success = (a.success * a.results + (t.reward >= 1 ? 1 : 0)) / (a.results + 1);
    a.results++;
  }
  return acc;
}

export interface AblationRow {
  config: AblationConfig;
  runs: number;
  seeds: number[];
  /** Held-out tasks per run (the largest; runs of one budget all have the same). */
  tasks: number;
  success: Interval;
  reward: Interval;
  /** Paired against the base policy on the same tasks (null for the base itself or without a base run). */
  vsBase: PairedInterval | null;
  precision: Interval;
  recall: Interval;
  fidelityExact: Interval;
  fidelityF1: Interval;
  fidelityErr: Interval;
  fidelityInvalid: Interval;
  /** Exact match with each call's own example kept in the grounding, as rollouts ground (records since 2026-12-05). */
  fidelityGroundedExact: Interval;
  /** Real calls of the held-out episodes that ran without an error observation (older records lack it: n 0). */
  callsWithoutError: Interval;
  trainFirst: Interval;
  trainLast: Interval;
  spread: Interval;
  /** Wall-clock seconds per seed (training + evaluations), in seed order. */
  wallS: { seed: number; s: number }[];
  /** Success per task tier, pooled over seeds and tasks (tiers: src/env/retail/tiers.ts); empty without tiers. */
  byTier: Record<string, { results: number; success: number }>;
}

export interface PairRow {
  a: AblationConfig;
  b: AblationConfig;
  diff: PairedInterval;
  /** A key pair, stated in its expected direction (A > B); the other pairs carry no expectation. */
  expected: boolean;
}

export interface AblationSummary {
  rows: AblationRow[];
  pairs: PairRow[];
}

/**
 * The comparisons the text needs first, each in its expected direction (A > B): the paper's ordering, the proof
 * that the loop learns and its upper reference, the secondary axes.
 */
export const KEY_PAIRS: readonly [string, string][] = [
  ['real', 'base'],
  ['frozen-simulator', 'base'],
  ['per-role', 'frozen-simulator'],
  ['envace', 'per-role'],
  ['envace', 'frozen-simulator'],
  ['envace', 'base'],
  ['real', 'envace'],
  ['envace', 'envace-pooled'],
  ['envace', 'envace-rollout-mean'],
  ['envace-kl', 'envace'],
  // The judge alone, without rehearsal: training on the judge's partial credit instead of the verifier's objective is
  // expected to cost; real observations are expected to beat imagined ones under the same judge.
  ['real', 'real-checklist'],
  ['real-checklist', 'envace'],
  ['envace-strict', 'envace'],
  ['frozen-strict', 'frozen-simulator'],
  ['envace-strict', 'frozen-strict'],
];

/** Per configuration: bootstrap intervals, the paired difference to the base; then the paired differences between configurations. */
export function summarize(runs: readonly AblationRun[], configs: readonly AblationConfig[] = ABLATION_CONFIGS, boot: BootstrapOptions = {}): AblationSummary {
  const byConfig = new Map(configs.map((c) => [c.id, runs.filter((r) => r.config === c.id).sort((x, y) => x.seed - y.seed)]));
  const base = configs.find((c) => c.mode === null);
  const baseObs = base ? successObs(byConfig.get(base.id) ?? []) : [];
  const rows = configs
    .map((config): AblationRow => {
      const rs = byConfig.get(config.id)!;
      const obs = successObs(rs);
      const rewardObs = rs.flatMap((r) => r.perTask.map((t) => ({ seed: r.seed, task: t.taskId, value: t.reward })));
      return {
        config,
        runs: rs.length,
        seeds: rs.map((r) => r.seed),
        tasks: Math.max(0, ...rs.map((r) => r.perTask.length)),
        success: bootstrapMean(obs, boot),
        reward: bootstrapMean(rewardObs, boot),
        vsBase: config.mode !== null && baseObs.length > 0 && obs.length > 0 ? pairedBootstrap(obs, baseObs, { ...boot, broadcast: true }) : null,
        precision: meanCI(rs.map((r) => r.toolPrecision)),
        recall: meanCI(rs.map((r) => r.toolRecall)),
        fidelityExact: meanCI(rs.map((r) => r.fidelity?.exact ?? NaN)),
        fidelityF1: meanCI(rs.map((r) => r.fidelity?.f1 ?? NaN)),
        fidelityErr: meanCI(rs.map((r) => r.fidelity?.errorAgree ?? NaN)),
        fidelityInvalid: meanCI(rs.map((r) => r.fidelity?.invalid ?? NaN)),
        fidelityGroundedExact: meanCI(rs.map((r) => r.fidelityGrounded?.exact ?? NaN)),
        callsWithoutError: meanCI(rs.map((r) => r.callsWithoutError ?? NaN)),
        trainFirst: meanCI(rs.map((r) => r.trainReward?.first ?? NaN)),
        trainLast: meanCI(rs.map((r) => r.trainReward?.last ?? NaN)),
        spread: meanCI(rs.map((r) => r.spread ?? NaN)),
        wallS: rs.map((r) => ({ seed: r.seed, s: r.wallS })),
        byTier: tierSuccess(rs),
      };
    })
    .filter((r) => r.runs > 0);
  const present = rows.map((r) => r.config);
  const order: [AblationConfig, AblationConfig, boolean][] = [];
  const seen = new Set<string>();
  const add = (a: AblationConfig | undefined, b: AblationConfig | undefined, expected: boolean) => {
    if (!a || !b || a.id === b.id) return;
    const k = [a.id, b.id].sort().join('|');
    if (seen.has(k)) return;
    seen.add(k);
    order.push([a, b, expected]);
  };
  for (const [a, b] of KEY_PAIRS) add(present.find((c) => c.id === a), present.find((c) => c.id === b), true);
  for (let i = 0; i < present.length; i++) for (let j = i + 1; j < present.length; j++) add(present[j], present[i], false);
  const pairs = order.map(([a, b, expected]) => ({ a, b, expected, diff: pairedBootstrap(successObs(byConfig.get(a.id)!), successObs(byConfig.get(b.id)!), { ...boot, broadcast: b.mode === null }) }));
  return { rows, pairs };
}

const num = (x: number | null) => (x === null ? '–' : x.toFixed(1));
const params = (n: number | null) => (n === null ? '?' : n >= 1e6 ? `${(n / 1e6).toFixed(1)} M` : `${Math.round(n / 1e3)} K`);
const lim = (l: LimitsLike) => `${l.maxTurns} turns, ${l.maxActTokens} Act / ${l.maxRehearseTokens} Rehearse tokens`;
const pct = (x: Interval) => fmtInterval(x, 100, 1);
const r2 = (x: Interval) => (x.n === 0 || !Number.isFinite(x.mean) ? '–' : x.mean.toFixed(2));
const mins = (s: number) => (s / 60).toFixed(1);

/** reproduced / contradicted / not resolved, for "a > b" as the paper has it. */
/** Against the expected direction A > B (a key pair), or only which side is ahead (any other pair). */
export function verdict(d: PairedInterval, expected = true): string {
  if (d.n === 0) return 'not run';
  if (!d.significant) return 'not resolved';
  if (expected) return d.mean > 0 ? 'reproduced' : 'contradicted';
  return d.mean > 0 ? 'A > B' : 'A < B';
}

/** The Markdown of the ablation section (without the markers). */
export function renderAblation(sum: AblationSummary, meta: AblationMeta): string {
  const { rows, pairs } = sum;
  const b = meta.budget;
  const base = rows.find((r) => r.config.mode === null);
  const fid3 = (r: AblationRow) => `${pct(r.fidelityExact)} / ${pct(r.fidelityF1)} / ${pct(r.fidelityErr)}`;
  const out: string[] = [];
  out.push(meta.title ?? '## Ablation: world rehearsal in miniature');
  out.push('');
  if (meta.intro) out.push(meta.intro, '');
  if (meta.reduced) out.push(`> **Reduced budget.** ${meta.reduced}`, '');
  out.push(
    `World \`${meta.world}\`. Held-out real-environment evaluation on ${b.evalTasks} test-split tasks, one greedy episode per task, the same tasks for every run; ` +
      `training: ${b.steps} GRPO steps × ${b.prompts} prompts × ${b.k} rollouts from ${b.trainTasks} train-split tasks, LoRA r ${b.rank}, lr ${b.lr}` +
      `${meta.limits ? `, rollouts of at most ${lim(meta.limits.train)} (evaluation: ${lim(meta.limits.eval)})` : ''}; ${b.seeds} training seed(s) per configuration ` +
      `(the base policy is deterministic under greedy evaluation: one run stands for every seed). ` +
      `Success = reward 1 (final database equals the reference one and every required fact stated), with a 95 % two-level bootstrap interval over seeds and tasks ` +
      `(${meta.bootstrap.reps} replicates, seed ${meta.bootstrap.seed}; research/ablation/stats.ts). Δ vs base: the paired difference on the same tasks (each seed's run against the base), ` +
      `in points, with its paired bootstrap interval; **yes** when the interval excludes zero. Other columns: mean over seeds [95 % t-interval over seeds]. ` +
      `Tool P/R: calls matching the reference actions (name and arguments). Fidelity: the policy rehearses every reference call from the real history before it; ` +
      `exact JSON match / field-level F1 / error-or-not agreement with the real observation (an unparseable rehearsal counts as a miss); per-role: its Rehearse adapter; ` +
      `real and frozen-simulator: the Act-trained adapter playing the environment. Training reward: the rollouts' own (the verifier's 0 or 1 in the real environment; ` +
      `the checklist judge's partial credit on imagined trajectories, and on real ones in a configuration named "checklist reward"; all or nothing in one named "strict checklist"), so it compares within a row. Groups with spread: the mean over steps of the fraction of advantage groups whose rewards ` +
      `are not all equal (the others carry no gradient).`,
  );
  out.push('');
  // Records from 2026-12-05 also measure fidelity grounded as rollouts ground it; older tables render as they were.
  const grounded = rows.some((r) => r.fidelityGroundedExact.n > 0);
  out.push(`| configuration | seeds | success % [95 % CI] | Δ vs base, pts [95 % CI] | significant | reward [95 % CI] | tool P / R % | fidelity exact / F1 / error-agree % |${grounded ? ' fidelity exact, grounded as in rollouts % |' : ''} unparseable rehearsals % | training reward, step 1 → last | groups with spread % | paper τ²-Bench 8B | paper 1.7B |`);
  out.push(`|---|---|---|---|---|---|---|---|${grounded ? '---|' : ''}---|---|---|---|---|`);
  for (const r of rows) {
    const seedsNote = r.config.mode !== null && r.runs < b.seeds ? `${r.runs} of ${b.seeds}` : `${r.runs}`;
    const vs = r.vsBase ? fmtDiff(r.vsBase) : '–';
    const sig = r.vsBase ? (r.vsBase.significant ? '**yes**' : 'no') : '–';
    out.push(
      `| ${r.config.label} | ${seedsNote} | ${pct(r.success)} | ${vs} | ${sig} | ${fmtInterval(r.reward, 1, 3)} | ${pct(r.precision)} / ${pct(r.recall)} | ${fid3(r)} |${grounded ? ` ${pct(r.fidelityGroundedExact)} |` : ''} ${pct(r.fidelityInvalid)} | ` +
        `${r.config.mode === null ? '–' : `${r2(r.trainFirst)} → ${r2(r.trainLast)}`} | ${r.config.mode === null ? '–' : pct(r.spread)} | ${num(r.config.paper.b8)} | ${num(r.config.paper.b1_7)} |`,
    );
  }
  out.push('');
  if (pairs.length) {
    out.push('### Paired differences between configurations');
    out.push('');
    out.push('Success of A minus success of B on the same held-out tasks and training seeds (points; base: its one run against every seed), 95 % paired bootstrap interval. The first rows are stated in their expected direction (A > B): the paper\'s ordering (EnvACE > per-role > GRPO > base), the proof that the loop learns (real > base) and its upper reference (real > EnvACE), the secondary axes, and the judge\'s own cost (the verifier > the checklist in the real environment; real > imagined observations under the checklist; the strict checklist > the partial one when rehearsing). The rest carry no expectation: only which side is ahead.');
    out.push('');
    out.push('| A − B | Δ success, pts [95 % CI] | significant | expected direction (A > B) | paired results |');
    out.push('|---|---|---|---|---|');
    for (const p of pairs) out.push(`| ${p.a.label} − ${p.b.label} | ${fmtDiff(p.diff)} | ${p.diff.significant ? '**yes**' : 'no'} | ${verdict(p.diff, p.expected)} | ${p.diff.n} |`);
    out.push('');
  }
  const tiers = [...new Set(rows.flatMap((r) => Object.keys(r.byTier)))].sort((x, y) => Number(x) - Number(y));
  if (tiers.length) {
    out.push('### Success by task tier');
    out.push('');
    out.push('Success % per tier of the held-out tasks (src/env/retail/tiers.ts), pooled over seeds and tasks (results in parentheses).');
    out.push('');
    out.push(`| configuration | ${tiers.map((t) => `tier ${t}`).join(' | ')} |`);
    out.push(`|---|${tiers.map(() => '---|').join('')}`);
    for (const r of rows) out.push(`| ${r.config.label} | ${tiers.map((t) => (r.byTier[t] ? `${(100 * r.byTier[t].success).toFixed(1)} (${r.byTier[t].results})` : '–')).join(' | ')} |`);
    out.push('');
  }
  const trained = rows.filter((r) => r.config.mode !== null);
  if (trained.length || base) {
    const seeds = [...new Set(rows.flatMap((r) => r.seeds))].sort((x, y) => x - y);
    out.push('### Wall-clock per configuration × seed');
    out.push('');
    out.push('Minutes per run: training steps (summed over resumed sessions), learning-curve evaluations and the final held-out evaluation. Target: ≤ 20 min per configuration × seed on the 2-core machine.');
    out.push('');
    out.push(`| configuration | ${seeds.map((s) => `seed ${s}`).join(' | ')} | mean | max |`);
    out.push(`|---|${seeds.map(() => '---|').join('')}---|---|`);
    for (const r of rows) {
      const cell = (s: number) => {
        const w = r.wallS.find((x) => x.seed === s);
        return w ? mins(w.s) : '–';
      };
      const ws = r.wallS.map((w) => w.s);
      out.push(`| ${r.config.label} | ${seeds.map(cell).join(' | ')} | ${mins(ws.reduce((a, x) => a + x, 0) / ws.length)} | ${mins(Math.max(...ws))} |`);
    }
    out.push('');
  }
  if (meta.figures?.length) {
    out.push('### Learning curves');
    out.push('');
    out.push(
      `Per step and configuration, mean over seeds (line) and 95 % t-band over seeds (shaded): held-out success and rehearsal fidelity` +
        `${meta.curve ? ` (every ${meta.curve.every} steps on the first ${meta.curve.tasks} held-out tasks; step 0 and the last step from the base's and the run's final evaluation)` : ''}, ` +
        `training reward, and the fraction of advantage groups with a non-zero reward spread. Rendered by \`npm run plots\` from the run records.`,
    );
    out.push('');
    for (const f of meta.figures) out.push(`![learning curves](${f})`, '');
  }
  if (meta.note) out.push(`**What came out.** ${meta.note}`, '');
  out.push(
    `Paper figures: EnvACE (arXiv 2608.06197), τ²-Bench overall success, Qwen3-8B and Qwen3-1.7B; its "GRPO" trains Act against a frozen LLM simulator ` +
      `(our frozen-simulator row); it has no real-environment GRPO, no pooled-group and no baseline ablation. Our policy is a ${params(meta.modelParams)}-parameter ` +
      `model on one domain, so only the direction of the differences, not their size, is comparable.`,
  );
  out.push('');
  out.push(`Model: \`${meta.model}\`${meta.modelHash ? ` (model.safetensors sha256 ${meta.modelHash}…)` : ''}. Machine: ${meta.machine}; backend ${meta.backend}. Date: ${meta.date}.`);
  out.push('');
  out.push(`Command: \`${meta.command}\``);
  return out.join('\n');
}

export const ABLATION_START = '<!-- ablation:start -->';
export const ABLATION_END = '<!-- ablation:end -->';
export const TTS_START = '<!-- tts:start -->';
export const TTS_END = '<!-- tts:end -->';

/** A fresh docs/results.md: the ablation section and the (empty) test-time section another script fills. */
export function emptyResultsDoc(): string {
  return `# Results\n\nProduced by scripts; edit the scripts, not the sections between the markers.\n\n${ABLATION_START}\n${ABLATION_END}\n\n${TTS_START}${TTS_END}\n`;
}

/** Replaces what lies between `start` and `end` (markers kept); refuses a document without both, in order. */
export function replaceSection(doc: string, start: string, end: string, body: string): string {
  const i = doc.indexOf(start);
  const j = doc.indexOf(end, i < 0 ? 0 : i + start.length);
  if (i < 0 || j < 0) throw new Error(`the document has no ${start} … ${end} section`);
  return doc.slice(0, i + start.length) + '\n' + body.trim() + '\n' + doc.slice(j);
}

/** GRPO in the real environment with the verifier and nothing else: what a rehearsed configuration must beat at its own real budget. */
export const isRealOnly = (c: AblationConfig): boolean => c.mode === 'real' && c.reward === undefined && c.observationCoef === undefined;

type Budget = { steps: number; prompts: number; k: number };

/** A row with its real-interaction budget and the paired difference to real-only GRPO at the same number of real episodes. */
export interface BudgetRow {
  row: AblationRow;
  realEpisodes: number;
  /** The real-only configuration it is paired with (null: it is one, spends no real episode, or none ran at its budget). */
  realSameBudget: AblationConfig | null;
  vsRealSameBudget: PairedInterval | null;
}

export function budgetRows(sum: AblationSummary, runs: readonly AblationRun[], budget: Budget, boot: BootstrapOptions = {}): BudgetRow[] {
  const obsOf = (id: string) => successObs(runs.filter((r) => r.config === id));
  return sum.rows.map((row) => {
    const realEpisodes = realEpisodesOf(row.config, budget);
    const ref = isRealOnly(row.config) || realEpisodes === 0 ? undefined : sum.rows.find((r) => isRealOnly(r.config) && realEpisodesOf(r.config, budget) === realEpisodes);
    return { row, realEpisodes, realSameBudget: ref?.config ?? null, vsRealSameBudget: ref ? pairedBootstrap(obsOf(row.config.id), obsOf(ref.config.id), boot) : null };
  });
}

/** One entry of docs/results/summary.json: success in [0, 1], differences in [−1, 1], intervals 95 % bootstrap. */
export interface SummaryEntry {
  world: string;
  config: string;
  label: string;
  /** Which records: the section's records folder. */
  records: string;
  model: string;
  realEpisodes: number;
  seeds: number;
  seedIds: number[];
  tasks: number;
  success: number;
  ci: [number, number];
  vsBase: { delta: number; ci: [number, number] } | null;
  vsRealSameBudget: { delta: number; ci: [number, number]; against: string } | null;
}

const r4 = (x: number) => Math.round(x * 1e4) / 1e4;
const diffEntry = (d: PairedInterval | null) => (d && d.n > 0 ? { delta: r4(d.mean), ci: [r4(d.lo), r4(d.hi)] as [number, number] } : null);

export function summaryEntries(rows: readonly BudgetRow[], at: { world: string; records: string; model: string }): SummaryEntry[] {
  return rows.map((b) => {
    const vsReal = diffEntry(b.vsRealSameBudget);
    return {
      world: at.world, config: b.row.config.id, label: b.row.config.label, records: at.records, model: at.model, realEpisodes: b.realEpisodes,
      seeds: b.row.runs, seedIds: b.row.seeds, tasks: b.row.tasks, success: r4(b.row.success.mean), ci: [r4(b.row.success.lo), r4(b.row.success.hi)],
      vsBase: diffEntry(b.row.vsBase), vsRealSameBudget: vsReal && { ...vsReal, against: b.realSameBudget!.id },
    };
  });
}

/** The budget experiment's section: what it asks and how it decides (fixed text), what came out, where and how it ran. */
export interface BudgetMeta extends AblationMeta {
  title: string;
  /** The configurations the experiment intends to run, each at budget.seeds seeds (the table says how many finished). */
  configs: string[];
  /** The paired difference the pre-registration decides on, A − B, in its expected direction; [A, B] pairs, the first one decisive. */
  decisive: [string, string][];
  /** The training seeds the experiment runs (a replication on fresh seeds); absent: 0 .. budget.seeds − 1. */
  trainingSeeds?: number[];
}

/** "0–4", or "5–9", or "1, 3, 4": the seeds as a reader types them. */
function seedRange(seeds: readonly number[]): string {
  const run = seeds.every((x, i) => i === 0 || x === seeds[i - 1] + 1);
  return run && seeds.length > 2 ? `${seeds[0]}–${seeds[seeds.length - 1]}` : seeds.join(', ');
}

/** The Markdown of the real-interaction-budget section (without the markers). */
export function renderBudget(rows: readonly BudgetRow[], pairs: readonly PairRow[], meta: BudgetMeta): string {
  const b = meta.budget;
  const out: string[] = [meta.title, ''];
  if (meta.intro) out.push(meta.intro, '');
  const seeds = meta.trainingSeeds ?? Array.from({ length: b.seeds }, (_, i) => i);
  const finished = meta.configs.map((id) => {
    const r = rows.find((x) => x.row.config.id === id)?.row;
    return { id, n: r?.runs ?? 0, base: r?.config.mode === null || id === 'base' };
  });
  const missing = finished.filter((f) => !f.base && f.n < seeds.length);
  const grounded = rows.some((r) => r.row.fidelityGroundedExact.n > 0);
  if (missing.length) out.push(`> **Partial.** Finished seeds so far: ${finished.filter((f) => !f.base).map((f) => `${f.id} ${f.n} of ${seeds.length}`).join(', ')}. Every figure below is from the finished runs only.`, '');
  out.push(
    `World \`${meta.world}\`. Held-out real-environment evaluation on ${b.evalTasks} test-split tasks, one greedy episode per task, the same tasks for every run; ` +
      `training: ${b.steps} GRPO steps × ${b.prompts} prompts × ${b.k} rollouts from ${b.trainTasks} train-split tasks (a configuration with fewer prompts per step says so), LoRA r ${b.rank}, lr ${b.lr}` +
      `${meta.limits ? `, rollouts of at most ${lim(meta.limits.train)} (evaluation: ${lim(meta.limits.eval)})` : ''}; training seeds ${seedRange(seeds)} intended per configuration, ` +
      `the table counts the finished ones (the base policy is deterministic under greedy evaluation: one run stands for every seed). ` +
      `Real episodes: the episodes a run spends in the real environment over its ${b.steps} steps (research/ablation/grpo-ablation.ts realEpisodesOf); the rest of a step's rollouts are rehearsed. ` +
      `Success = reward 1, with a 95 % two-level bootstrap interval over seeds and tasks (${meta.bootstrap.reps} replicates, seed ${meta.bootstrap.seed}; research/ablation/stats.ts). ` +
      `Δ: paired on the same tasks and seeds (the base: its one run against every seed; two trained configurations: the seeds both have), in points; **yes** when the interval excludes zero. ` +
      `Other columns: mean over seeds [95 % t-interval over seeds]; fidelity is the strict one (the reference call's own result left out of the grounding examples)` +
      `${grounded ? "; the grounded column keeps that result, as rollouts' grounding does (measured since 2026-12-05: older runs show –)" : ''}.`,
  );
  out.push('');
  out.push(`| configuration | real episodes / run | seeds | success % [95 % CI] | Δ vs base, pts [95 % CI] | significant | Δ vs real-only GRPO at the same real episodes, pts [95 % CI] | significant | fidelity exact / F1 / error-agree % |${grounded ? ' fidelity exact, grounded as in rollouts % |' : ''} calls without error % | training reward, step 1 → last | minutes / run |`);
  out.push(`|---|---|---|---|---|---|---|---|---|${grounded ? '---|' : ''}---|---|---|`);
  for (const { row: r, realEpisodes, realSameBudget, vsRealSameBudget: vr } of rows) {
    const seedCell = r.config.mode === null ? '1 (stands for every seed)' : `${r.runs} of ${seeds.length} (${r.seeds.join(', ')})`;
    const sig = (d: PairedInterval | null) => (d ? (d.significant ? '**yes**' : 'no') : '–');
    const walls = r.wallS.map((w) => w.s);
    out.push(
      `| ${r.config.label} | ${realEpisodes} | ${seedCell} | ${pct(r.success)} | ${r.vsBase ? fmtDiff(r.vsBase) : '–'} | ${sig(r.vsBase)} | ${vr ? `${fmtDiff(vr)} (against ${realSameBudget!.id})` : '–'} | ${sig(vr)} | ` +
        `${pct(r.fidelityExact)} / ${pct(r.fidelityF1)} / ${pct(r.fidelityErr)} |${grounded ? ` ${pct(r.fidelityGroundedExact)} |` : ''} ${pct(r.callsWithoutError)} | ${r.config.mode === null ? '–' : `${r2(r.trainFirst)} → ${r2(r.trainLast)}`} | ${walls.length ? mins(walls.reduce((a, x) => a + x, 0) / walls.length) : '–'} |`,
    );
  }
  out.push('');
  if (pairs.length) {
    out.push('### Paired differences');
    out.push('');
    const [da, db] = meta.decisive[0];
    const decided = pairs[0]?.a.id === da && pairs[0]?.b.id === db;
    out.push(
      `A − B on the same held-out tasks and the training seeds both have, 95 % paired bootstrap interval, each stated in its expected direction (A > B). ` +
        (decided ? 'The first row is the pre-registered decision.' : `The pre-registered decision, ${da} − ${db}, has no row yet: one side has no finished run.`),
    );
    out.push('');
    out.push('| A − B | Δ success, pts [95 % CI] | significant | expected direction (A > B) | paired results |');
    out.push('|---|---|---|---|---|');
    for (const p of pairs) out.push(`| ${p.a.label} − ${p.b.label} | ${fmtDiff(p.diff)} | ${p.diff.significant ? '**yes**' : 'no'} | ${verdict(p.diff, p.expected)} | ${p.diff.n} |`);
    out.push('');
  }
  if (meta.note) out.push(`**What came out.** ${meta.note}`, '');
  out.push(`Model: \`${meta.model}\`${meta.modelHash ? ` (model.safetensors sha256 ${meta.modelHash}…)` : ''}. Machine: ${meta.machine}; backend ${meta.backend}. Date: ${meta.date}.`);
  out.push('');
  out.push(`Command: \`${meta.command}\``);
  return out.join('\n');
}
