// What a caller (the train CLI, the ablation script, the lab's worker) needs around a GrpoRun
// (src/rl/run.ts, which does the stepping, checkpoints and exact resume): defaults sized for the bundled
// policy, a complete run configuration from a few options, the task split, and a one-line progress summary
// of a step. Browser-safe: no Node imports.
import type { Domain, Task } from '../env/domain';
import { tokenBudgets } from '../rollout/budget';
import type { RolloutLimits } from '../rollout/rollout';
import { checkValue, GROUPINGS, BASELINES as RUN_BASELINES, recordConfig, RUN_SETTINGS, setting, type RunSettingsTable, type RunValues } from '../method/run-config';
import type { EvalMetrics, GrpoRunConfig, StepMetrics } from './run';

export const ADVANTAGES = GROUPINGS;
export const BASELINES = RUN_BASELINES;

/**
 * Episode limits of the bundled policy's model card evaluation (research/pretrain/evaluate.ts EVAL_LIMITS), the
 * run settings' defaults (src/method/run-config.ts).
 */
export const DEFAULT_LIMITS: RolloutLimits = {
  maxTurns: setting('maxTurns').default,
  maxActTokens: setting('maxActTokens').default,
  maxRehearseTokens: setting('maxRehearseTokens').default,
};

/**
 * DEFAULT_LIMITS with the Rehearse budget measured on the domain's real observations under the policy's
 * tokenizer (src/rollout/budget.ts: p99 token length of the formatted observation, tags included), so a
 * rehearsal of a typical observation is never cut by a constant sized for another world or tokenizer.
 */
export function defaultLimits(domain: Pick<Domain, 'tasks' | 'expert' | 'createEnv'>, tokenizer: { encode(text: string): number[] }): RolloutLimits {
  return { ...DEFAULT_LIMITS, maxRehearseTokens: tokenBudgets(domain, tokenizer).rehearse };
}

/** A run's settings by their names (src/method/run-config.ts); absent ones take the table's defaults. */
export type TrainOptions = Partial<RunValues> & Pick<RunValues, 'mode' | 'steps' | 'seed'>;

export class TrainOptionsError extends Error {
  override readonly name = 'TrainOptionsError';
}

/** LoRA alpha for a rank when none is given: the table's fallback, 2·rank (the bundled policy's). */
export const defaultLoraAlpha = (rank: number): number => setting('alpha').fallback({ rank });

/**
 * A complete GrpoRun configuration: every setting checked against its row, then recorded as run.json keeps it
 * (src/method/run-config.ts recordConfig).
 */
export function grpoRunConfig(o: TrainOptions): GrpoRunConfig {
  return runConfigOf(o, RUN_SETTINGS) as unknown as GrpoRunConfig;
}

/** grpoRunConfig over any table, untyped (the run-config test's table with a dummy row). */
export function runConfigOf(values: Readonly<Record<string, unknown>>, table: RunSettingsTable): Record<string, unknown> {
  for (const row of table) {
    const v = values[row.name];
    if (v === undefined && row.cli?.required) throw new TrainOptionsError(`${row.name} is required`);
    const bad = v === undefined ? null : checkValue(row, v);
    if (bad) throw new TrainOptionsError(`${row.name} ${bad}, got ${JSON.stringify(v)}`);
  }
  for (const k of Object.keys(values)) if (values[k] !== undefined && !table.some((r) => r.name === k)) throw new TrainOptionsError(`${k} is not a run setting (src/method/run-config.ts)`);
  return recordConfig(values, table);
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
  return `step ${m.step}/${total}  reward ${f(r.meanReward)}±${f(r.sdReward)}  success ${f(r.success)}  rows act ${r.rows.act} reh ${r.rows.rehearse}${r.recalled ? ` recalled ${r.recalled}` : ''}${fid}  ${upd}  ${(m.wallMs / 1000).toFixed(1)} s`;
}

export function evalLine(e: EvalMetrics): string {
  const fid = e.fidelity ? `  fidelity exact ${f(e.fidelity.exact)} f1 ${f(e.fidelity.f1)} err ${f(e.fidelity.errorAgree)} invalid ${f(e.fidelity.invalid)}` : '';
  return `eval @${e.step}: success ${f(e.success)}  reward ${f(e.meanReward)}  tool P ${f(e.toolPrecision)} R ${f(e.toolRecall)}${fid}`;
}
