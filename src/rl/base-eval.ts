// The base evaluation: the starting policy on the held-out tasks before the first step, a run's step 0 and what
// every later evaluation is compared with. It takes minutes (100 greedy episodes and a fidelity check) and its
// result is the same for every run of the same model in the same world on the same tasks and limits (the run's
// fresh adapters change nothing until the first update), so a record of it is kept and reused; or it is skipped,
// and the run then has no starting point. The lab keeps records in the browser, the train CLI in the run folder.
import type { Task } from '../env/domain';
import { canonicalJson, hash64 } from '../env/json';
import type { BaseEval, ConversationUser } from '../method/run-config';
import type { EvalMetrics, GrpoRunConfig } from './run';

/**
 * What the base evaluation's numbers depend on. Not the run's seed, LoRA settings or training settings: the
 * evaluation is greedy and the fresh adapters are zero. Not the backend either: another backend rounds
 * differently, which may flip a close greedy choice, but measures the same policy.
 */
export interface BaseEvalKey {
  /** The weights (bundled folder, file or URL, and a fingerprint of their bytes and format: see weightsFingerprint). */
  model: string;
  world: string;
  /** The held-out tasks: how many, and a hash of their content (ids, requests, checklists, reference actions). */
  tasks: { count: number; hash: string };
  limits: GrpoRunConfig['limits'];
  kvReuse: boolean;
  /** The fidelity check's budget (0: none) and the Rehearse prompt it decodes with. */
  fidelityTokens: number;
  rehearsePrompt: GrpoRunConfig['rehearsePrompt'] | null;
  /** The fidelity check's tasks, the first of the evaluation's (absent: all). */
  fidelityTasks?: number;
  /** Who answered the agent (absent: nobody, one-message episodes). */
  user?: Exclude<ConversationUser, 'off'>;
}

export interface BaseEvalRecord {
  version: 1;
  key: BaseEvalKey;
  /** When it was measured (ISO time). */
  measuredAt: string;
  eval: EvalMetrics;
}

/** The file a run folder keeps its base evaluation in (the train CLI's --base-record reads one). */
export const BASE_EVAL_FILE = 'base-eval.json';

export function baseEvalKey(model: string, world: string, evalTasks: readonly Task[], c: GrpoRunConfig): BaseEvalKey {
  return {
    model,
    world,
    tasks: { count: evalTasks.length, hash: hash64(canonicalJson(evalTasks)) },
    limits: c.limits,
    kvReuse: c.kvReuse ?? true,
    fidelityTokens: c.evalFidelityTokens ?? 0,
    rehearsePrompt: c.rehearsePrompt ?? null,
    // Only when it measures fewer tasks than the evaluation: keys (and record names) of full checks stay as they were.
    ...(c.evalFidelityTokens && c.evalFidelityTasks && c.evalFidelityTasks < evalTasks.length ? { fidelityTasks: c.evalFidelityTasks } : {}),
    // Only with a user: one-message keys (and record names) stay as they were.
    ...(c.user !== undefined && c.user !== 'off' ? { user: c.user } : {}),
  };
}

/** A short, stable name of a key (a file name in the lab's record folder). */
export const baseEvalName = (k: BaseEvalKey): string => `${hash64(canonicalJson(k))}.json`;

/** The fields of `have` that differ from `want`, in words ("limits: {...} (the record has {...})"); [] when they match. */
export function keyDiffs(want: BaseEvalKey, have: BaseEvalKey): string[] {
  const fields = [...new Set([...Object.keys(want), ...Object.keys(have)])] as (keyof BaseEvalKey)[];
  return fields
    .filter((f) => canonicalJson(want[f] ?? null) !== canonicalJson(have[f] ?? null))
    .map((f) => `${f}: ${canonicalJson(want[f] ?? null)} (the record has ${canonicalJson(have[f] ?? null)})`);
}

/** A record as read from a file (a lab record or a run folder's base-eval.json); throws naming `where` when it is not one. */
export function parseBaseEvalRecord(bytes: Uint8Array, where: string): BaseEvalRecord {
  let v: unknown;
  try {
    v = JSON.parse(new TextDecoder().decode(bytes));
  } catch (e) {
    throw new Error(`${where} is not JSON (${(e as Error).message})`);
  }
  const r = v as Partial<BaseEvalRecord>;
  const ok = r && r.version === 1 && typeof r.measuredAt === 'string' && r.key && typeof r.key.model === 'string' && typeof r.key.world === 'string' && r.key.tasks && r.eval && typeof r.eval.success === 'number';
  if (!ok) throw new Error(`${where} is not a base evaluation record (version 1: key, measuredAt, eval)`);
  return r as BaseEvalRecord;
}

/** How many bytes of a weights file its fingerprint samples. */
const SAMPLES = 1 << 16;

/** The offsets a fingerprint samples in a file of `length` bytes (evenly spaced; every byte of a small file). */
export function sampleOffsets(length: number): number[] {
  const n = Math.min(length, SAMPLES);
  return Array.from({ length: n }, (_, i) => Math.floor((i * length) / n));
}

/**
 * A fingerprint of one weights file: its length and a hash of its bytes at sampleOffsets. Retraining changes almost
 * every weight, so a sample of 65,536 positions tells two models apart at the cost of reading the sample, not
 * gigabytes. `sample`: the bytes at those offsets, in order (or the whole file). weightsFingerprint joins the files'.
 */
export function fileFingerprint(name: string, length: number, sample: Uint8Array): string {
  const at = sample.length === length ? sampleOffsets(length).map((o) => sample[o]) : [...sample];
  let s = '';
  for (let i = 0; i < at.length; i += 4096) s += String.fromCharCode(...at.slice(i, i + 4096));
  return `${name}:${length}:${hash64(s)}`;
}

export function weightsFingerprint(files: readonly string[], format: string): string {
  return `${format} weights ${hash64([...files].sort().join('\n'))}`;
}

export type BaseEvalSource = 'measured' | 'reused' | 'skipped' | 'logged' | 'off';

export interface BaseEvalOutcome {
  /** Where step 0 came from: measured now, reused from a record, skipped, already in the run's log (a resumed run),
   *  or off (the run has no held-out evaluation). */
  source: BaseEvalSource;
  eval: EvalMetrics | null;
  /** The record to keep (a fresh measurement), else null. */
  record: BaseEvalRecord | null;
  /** Why a stored record was not reused (its key differs), when one was offered. */
  notReused: string[];
}

/** What the run needs to give its base evaluation: its own evaluation and its log's step 0. */
export interface BaseEvaluable {
  readonly step: number;
  readonly config: GrpoRunConfig;
  evaluationsLogged(): Promise<number[]>;
  evaluate(): Promise<EvalMetrics>;
  logEvaluation(m: EvalMetrics): Promise<void>;
}

/**
 * Step 0 of a run that has not stepped yet, as `how` says: reuse a record whose key equals `key` (else measure),
 * measure afresh, or skip. A run whose log already has step 0 (it resumed) keeps it. A run that has stepped but
 * logged no evaluation yet (it trained while another process measured the base: `--base-wait`) can still log a
 * matching record as its step 0; it can no longer measure one (its adapters have moved).
 */
export async function baseEvaluation(run: BaseEvaluable, how: BaseEval, key: BaseEvalKey, stored: BaseEvalRecord | null): Promise<BaseEvalOutcome> {
  const none = (source: BaseEvalSource, notReused: string[] = []): BaseEvalOutcome => ({ source, eval: null, record: null, notReused });
  if ((run.config.evalEvery ?? 0) === 0 || key.tasks.count === 0) return none('off');
  const logged = await run.evaluationsLogged();
  if (logged.includes(0)) return none('logged');
  const notReused = stored && how === 'reuse' ? keyDiffs(key, stored.key) : [];
  const reusable = stored !== null && how === 'reuse' && notReused.length === 0;
  // A run that has stepped without one (skipped, or started before there were base evaluations) has none for good,
  // unless a record of its starting policy can still go into its log ahead of every other evaluation.
  if (run.step > 0 && !(reusable && logged.length === 0)) return none('off', notReused);
  if (how === 'skip') return none('skipped');
  if (reusable && stored) {
    const m: EvalMetrics = { ...stored.eval, step: 0, reused: stored.measuredAt };
    await run.logEvaluation(m);
    return { source: 'reused', eval: m, record: null, notReused };
  }
  const m = await run.evaluate();
  return { source: 'measured', eval: m, record: { version: 1, key, measuredAt: new Date().toISOString(), eval: m }, notReused };
}

/** "base 0.40 on the same 100 tasks: +5 points", what a run reports beside a later evaluation (points as the lab's). */
export function changeFromBase(base: EvalMetrics | null, now: EvalMetrics, tasks: number, source: BaseEvalSource): string {
  if (!base) return `no base evaluation${source === 'skipped' ? ' (skipped)' : ' in this run'}: the change from the starting policy is not known`;
  const d = Math.round(100 * (now.success - base.success));
  const sign = d > 0 ? '+' : d < 0 ? '−' : '±';
  return `base ${base.success.toFixed(2)} on the same ${tasks} tasks${base.reused ? ` (reused, measured ${base.reused})` : ''}: ${sign}${Math.abs(d)} point${Math.abs(d) === 1 ? '' : 's'}`;
}
