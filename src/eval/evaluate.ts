// Held-out evaluation of a policy, the one measurement `npm run eval`, the ablation script and the lab
// share, so their figures compare like with like:
//   - real environment: one greedy episode per task (temperature 0), success = reward 1 (τ²'s DB ×
//     communicate), tool precision/recall of the calls against the task's reference actions;
//   - rehearsal fidelity: the policy rehearses every reference call of every task from the real history
//     before it (src/rollout/fidelity-eval.ts), compared with the real environment's answer.
// The same procedure as GrpoRun.evaluate (src/rl/run.ts), plus per-task records and timings.
// Browser-safe: no Node imports.
import type { Step, Task } from '../env/domain';
import { familyTier } from '../env/retail/tiers';
import type { LoraAdapter } from '../model/lora';
import type { Qwen3Model } from '../model/qwen3';
import type { Tokenizer } from '../model/tokenizer';
import { evalRehearsalFidelityVariants, type FidelityEvalResult } from '../rollout/fidelity-eval';
import { groupSuccess, matchToolCalls, summarizeRollouts, type GroupSuccess, type RolloutSummary } from '../rollout/metrics';
import type { RehearsePromptOptions } from '../rollout/rehearse-prompt';
import type { ReviseOptions } from '../rollout/episode';
import { runRollouts, type RolloutDomain, type RolloutLimits, type RolloutRecord } from '../rollout/rollout';
import { RoundEta } from '../util/eta';

export interface EvalPolicy {
  model: Qwen3Model;
  tokenizer: Tokenizer;
  /** Acts in the real environment (null = the base model). */
  actAdapter: LoraAdapter | null;
  /** Rehearses for the fidelity measurement; default actAdapter (one policy plays both roles). */
  rehearseAdapter?: LoraAdapter | null;
}

export interface HeldOutOptions {
  limits: RolloutLimits;
  seed: number;
  /** Token budget of each rehearsal in the fidelity measurement; 0 skips it. */
  fidelityTokens: number;
  rehearsePrompt?: RehearsePromptOptions;
  kvReuse?: boolean;
  /** Rehearse, then revise before each checked turn (src/rollout/episode.ts ReviseOptions); absent: off. */
  revise?: ReviseOptions;
  signal?: AbortSignal;
  log?: (s: string) => void;
  /** How far each phase is, with time left once measurable (the fidelity check alone can take a minute). */
  onProgress?: (p: EvalProgress) => void;
}

/** Progress of a held-out evaluation: episodes finished, then rehearsals of the fidelity check decoded. */
export interface EvalProgress {
  phase: 'episodes' | 'fidelity';
  done: number;
  total: number;
  etaMs?: number;
}

/**
 * What rehearse-then-revise did: how well the Rehearse role predicted the errors of the policy's own calls
 * (each checked call's rehearsal against what the environment would have answered), how often it revised,
 * and the tokens it cost.
 */
export interface ReviseReport {
  options: ReviseOptions;
  /** Checked calls (each rehearsed before it could run; the control checks none). */
  checked: number;
  /** Checked calls the environment would have refused / that the rehearsal said it would refuse / both. */
  realErrors: number;
  predictedErrors: number;
  caught: number;
  /** caught / realErrors, caught / predictedErrors; NaN when the denominator is 0. */
  recall: number;
  precision: number;
  /** Turns written again (imagined turns, or the control's discarded ones), per task. */
  revisionsPerTask: number;
  /** Every token generated, all phases, per task (the compute a control must match). */
  generatedPerTask: number;
}

export function reviseReport(options: ReviseOptions, rollouts: readonly RolloutRecord[], generatedTokens: number): ReviseReport {
  const checked = rollouts.flatMap((r) => r.checked ?? []);
  const realErrors = checked.filter((c) => !c.real.ok).length;
  const predictedErrors = checked.filter((c) => !c.rehearsed.ok).length;
  const caught = checked.filter((c) => !c.real.ok && !c.rehearsed.ok).length;
  const n = rollouts.length;
  return {
    options, checked: checked.length, realErrors, predictedErrors, caught,
    recall: realErrors ? caught / realErrors : NaN, precision: predictedErrors ? caught / predictedErrors : NaN,
    revisionsPerTask: n ? rollouts.reduce((a, r) => a + (r.revisions ?? 0), 0) / n : 0,
    generatedPerTask: n ? generatedTokens / n : 0,
  };
}

export interface TaskResult {
  taskId: string;
  /** The generator's family and its tier (src/env/retail/tiers.ts); null for tasks without one. */
  family: string | null;
  tier: number | null;
  reward: number;
  end: string;
  turns: number;
  calls: number;
  /** Calls the environment executed without an error observation. */
  callsOk: number;
  matched: number;
  references: number;
}

export interface HeldOutFidelity {
  /** Reference calls rehearsed. */
  steps: number;
  exact: number;
  f1: number;
  errorAgree: number;
  /** Fraction of rehearsals that did not parse (scored as total disagreement in the three figures). */
  invalid: number;
  /** Calls skipped because their prompt did not fit the context. */
  skipped: number;
}

export interface HeldOutReport {
  tasks: number;
  success: number;
  meanReward: number;
  toolPrecision: number;
  toolRecall: number;
  /** Fraction of all calls made in the real environment that ran without an error. */
  callsWithoutError: number;
  byTier: Record<string, GroupSuccess>;
  byFamily: Record<string, GroupSuccess>;
  meanTurns: number;
  ends: RolloutSummary['ends'];
  /** Rehearsal fidelity on the reference calls, the call's own example left out of the grounding. */
  fidelity: HeldOutFidelity | null;
  /**
   * The same, grounded as rollouts ground (the call's own reference result among the examples when it fits);
   * measured by the plain evaluation only (absent in private-rehearsal reports).
   */
  fidelityGrounded?: HeldOutFidelity | null;
  /** Rehearse-then-revise's own figures (absent without it). */
  revise?: ReviseReport;
  perTask: TaskResult[];
  tokens: { generated: number; prompt: number };
  wallMs: { real: number; fidelity: number };
}

export class EvalError extends Error {
  override readonly name = 'EvalError';
}

export async function evaluateHeldOut(policy: EvalPolicy, domain: RolloutDomain, tasks: readonly Task[], opts: HeldOutOptions): Promise<HeldOutReport> {
  if (tasks.length === 0) throw new EvalError('no evaluation tasks');
  if (!(Number.isInteger(opts.fidelityTokens) && opts.fidelityTokens >= 0)) throw new EvalError(`fidelityTokens must be an integer >= 0, got ${opts.fidelityTokens}`);
  const log = opts.log ?? (() => {});
  const refs = new Map(tasks.map((t) => [t.id, t.referenceActions]));
  const episodes = new RoundEta(tasks.length, opts.limits.maxTurns);
  const batch = await runRollouts({ model: policy.model, tokenizer: policy.tokenizer, adapter: policy.actAdapter }, domain, tasks, {
    mode: 'real',
    k: 1,
    seed: opts.seed,
    limits: opts.limits,
    temperature: 0,
    kvReuse: opts.kvReuse,
    ...(opts.revise ? { revise: opts.revise } : {}),
    signal: opts.signal,
    onProgress: (e) => {
      episodes.round(e.round, e.active);
      opts.onProgress?.({ phase: 'episodes', done: episodes.finished, total: tasks.length, etaMs: episodes.leftMs() });
    },
    // Within a round only the clock moves: the time left counts down between rounds.
    onStep: () => opts.onProgress?.({ phase: 'episodes', done: episodes.finished, total: tasks.length, etaMs: episodes.leftMs() }),
  });
  opts.onProgress?.({ phase: 'episodes', done: tasks.length, total: tasks.length, etaMs: 0 });
  const s = summarizeRollouts(batch, (id) => refs.get(id) ?? []);
  const family = new Map(tasks.map((t) => [t.id, t.family ?? null]));
  const perTask = batch.rollouts.map((r): TaskResult => taskResult(r.taskId, family.get(r.taskId) ?? null, r, refs.get(r.taskId) ?? []));

  // Two measures of the same rehearsals: grounded as a rollout grounds them (the task's whole reference
  // trajectory, so a reference call's own result is among the examples when it fits the budget: reproducing
  // it is what a grounded rehearser must do), and with the call's own example left out (the answer must come
  // from the learned dynamics). The second is the stricter; both are reported.
  let fidelity: HeldOutFidelity | null = null;
  let fidelityGrounded: HeldOutFidelity | null = null;
  let fidelityMs = 0;
  if (opts.fidelityTokens > 0) {
    const t0 = performance.now();
    const rehearser = policy.rehearseAdapter === undefined ? policy.actAdapter : policy.rehearseAdapter;
    const calls = tasks.reduce((n, t) => n + t.referenceActions.length, 0);
    log(`eval fidelity: rehearsing ${calls} reference calls without the call's own example and grounded as in rollouts`);
    let eta: RoundEta | null = null;
    let token = 0;
    const [strict, grounded] = await evalRehearsalFidelityVariants(
      policy.model, policy.tokenizer, rehearser, domain, tasks,
      {
        maxRehearseTokens: opts.fidelityTokens, maxContext: opts.limits.maxContext, signal: opts.signal,
        onStep: (done, total) => {
          eta ??= new RoundEta(total, opts.fidelityTokens);
          eta.round(token++, total - done);
          opts.onProgress?.({ phase: 'fidelity', done, total, etaMs: eta.leftMs() });
        },
      },
      [{ ...opts.rehearsePrompt, excludeSameCall: true }, { ...opts.rehearsePrompt, excludeSameCall: false }],
    );
    fidelity = toHeldOutFidelity(strict);
    fidelityGrounded = toHeldOutFidelity(grounded);
    fidelityMs = performance.now() - t0;
  }
  return {
    ...heldOutReport(tasks.length, s, fidelity, perTask, { real: batch.stats.wallMs, fidelity: fidelityMs }),
    ...(fidelityGrounded ? { fidelityGrounded } : {}),
    ...(opts.revise ? { revise: reviseReport(opts.revise, batch.rollouts, batch.stats.generatedTokens) } : {}),
  };
}

/** The held-out summary of a teacher-forced fidelity measurement. */
export function toHeldOutFidelity(f: FidelityEvalResult): HeldOutFidelity {
  return { steps: f.summary.steps, exact: f.summary.exact, f1: f.summary.f1, errorAgree: f.summary.errorAgree, invalid: f.invalid, skipped: f.skipped };
}

/** The report of a held-out evaluation from its rollout summary (shared with test-time private rehearsal). */
export function heldOutReport(tasks: number, s: RolloutSummary, fidelity: HeldOutFidelity | null, perTask: TaskResult[], wallMs: HeldOutReport['wallMs']): HeldOutReport {
  const { success, meanReward, toolPrecision, toolRecall, meanTurns, ends, tokens } = s;
  const calls = perTask.reduce((a, t) => a + t.calls, 0);
  const callsWithoutError = calls ? perTask.reduce((a, t) => a + t.callsOk, 0) / calls : NaN;
  const byTier = groupSuccess(perTask, (t) => (t.tier === null ? null : `tier ${t.tier}`));
  const byFamily = groupSuccess(perTask, (t) => t.family);
  return { tasks, success, meanReward, toolPrecision, toolRecall, callsWithoutError, byTier, byFamily, meanTurns, ends, fidelity, perTask, tokens, wallMs };
}

/** One task's record from its (real-environment) rollout. */
export function taskResult(taskId: string, family: string | null, r: { reward: number; end: string; turns: number; steps: readonly Step[] }, references: readonly Task['referenceActions'][number][]): TaskResult {
  const m = matchToolCalls(r.steps, references);
  const callsOk = r.steps.filter((s) => s.kind === 'call' && s.call.name !== '' && s.observation.ok).length;
  return { taskId, family, tier: familyTier(family ?? undefined), reward: r.reward, end: r.end, turns: r.turns, calls: m.calls, callsOk, matched: m.matched, references: m.references };
}
