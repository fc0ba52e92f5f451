// Comparing training runs (lesson step 4): a run is a record (its settings and its points), kept runs and
// the current one alike; a comparison plot draws N records, each one series aligned on the union of their
// steps. Pure functions, so the page and the unit tests share them.
import { effectiveGroups, MODES } from '../method/modes';
import type { TrainMode, TrainPoint, TrainRequest } from '../worker-protocol';
import { DEFAULTS, type Settings } from './settings.svelte';

/** One training run as the comparison draws it. */
export interface RunRecordView {
  id: string;
  /** The name the student gave it (kept runs), or '' (the current run: named from its settings). */
  name: string;
  config: TrainRequest;
  model: string;
  world: string;
  points: TrainPoint[];
  /** True for the run in this browser's OPFS that is still going (not a kept copy). */
  current?: boolean;
}

/** A kept run, as IndexedDB stores it. */
export interface KeptRun extends RunRecordView {
  at: string;
}


/** A run named from its settings: the mode, the grouping where it matters, the seed and the steps. */
export function runLabel(c: TrainRequest, steps = c.steps): string {
  const grouping = effectiveGroups(c.mode, c.grouping) === 'pooled' ? ', pooled' : '';
  return `${MODES[c.mode].name}${grouping} · seed ${c.seed} · ${steps} step${steps === 1 ? '' : 's'}`;
}

/**
 * The More GRPO settings a run's request stands for. A field a run kept from before it was a setting is read
 * as the value it then had (absent = the default of that time). A comparison run takes these, and the table
 * names those that differ from today's defaults.
 */
export function grpoSettingsOf(c: TrainRequest): Pick<Settings, 'epochs' | 'tsamp' | 'topP' | 'reward' | 'lossAgg' | 'greedy'> {
  return { epochs: c.epochs ?? 1, tsamp: c.taskSampling ?? 'uniform', topP: c.topP ?? 1, reward: c.reward ?? 'auto', lossAgg: c.lossAggregation ?? 'seq-mean-token-mean', greedy: c.greedyMember ?? false };
}

/**
 * The settings of a run beyond the table's own columns (the More GRPO settings, the episode limits, the
 * held-out evaluation's size), each named only when it differs from the lab's default (DEFAULTS): two runs
 * that differ there must not read as the same run (grpoSettingsOf reads a run kept before a setting existed). Token budgets are named when set by hand: not 0 (= measured) and not the
 * measured budget `measured` (a run's request may carry either). [] when all are at their defaults.
 */
export function otherSettings(c: TrainRequest, measured?: { act: number; rehearse: number } | null): string[] {
  const out: string[] = [];
  const g = grpoSettingsOf(c);
  if (g.epochs !== DEFAULTS.epochs) out.push(`${g.epochs} epochs per batch`);
  if (g.tsamp !== DEFAULTS.tsamp) out.push(`${g.tsamp} task sampling`);
  if (g.topP !== DEFAULTS.topP) out.push(`top-p ${g.topP}`);
  if (g.reward !== DEFAULTS.reward) out.push(`${g.reward} reward`);
  if (g.lossAgg !== DEFAULTS.lossAgg) out.push(`${g.lossAgg} loss`);
  if (g.greedy !== DEFAULTS.greedy) out.push(g.greedy ? 'a greedy member per group' : 'no greedy member');
  if (c.maxTurns !== DEFAULTS.turns) out.push(`at most ${c.maxTurns} turns`);
  if (c.maxNewTokens && c.maxNewTokens !== measured?.act) out.push(`${c.maxNewTokens} Act tokens`);
  if (c.rehearseTokens && c.rehearseTokens !== measured?.rehearse) out.push(`${c.rehearseTokens} Rehearse tokens`);
  if (c.evalEvery && c.evalTasks !== DEFAULTS.evalTasks) out.push(`held-out eval of ${c.evalTasks} tasks`);
  return out;
}

/** The mode a comparison run takes by default: EnvACE against the frozen simulator, and back. */
export function otherMode(m: TrainMode): TrainMode {
  return m === 'frozen-simulator' ? 'rehearse' : 'frozen-simulator';
}

/** Legend labels, one per record, all distinct (a repeated name gets " (2)", " (3)"…); the current run says so. */
export function legendLabels(records: readonly RunRecordView[]): string[] {
  const seen = new Map<string, number>();
  return records.map((r) => {
    const last = r.points.length ? r.points[r.points.length - 1].step : 0;
    const base = (r.name.trim() || runLabel(r.config, last)) + (r.current ? ' (current run)' : '');
    const n = (seen.get(base) ?? 0) + 1;
    seen.set(base, n);
    return n === 1 ? base : `${base} (${n})`;
  });
}

export type Metric = (p: TrainPoint) => number | null;

/**
 * Series of N records on one x axis: x is the sorted union of their steps; each record's values sit at its
 * own steps and are null elsewhere (a step it did not reach, or a step without that measurement, e.g. no
 * held-out evaluation). A step logged twice keeps its last point.
 */
export function alignByStep(records: readonly Pick<RunRecordView, 'points'>[], metric: Metric): { x: number[]; values: (number | null)[][] } {
  const perRecord = records.map((r) => {
    const m = new Map<number, number | null>();
    for (const p of r.points) {
      const v = metric(p);
      m.set(p.step, v === null || !Number.isFinite(v) ? null : v);
    }
    return m;
  });
  const x = [...new Set(perRecord.flatMap((m) => [...m.keys()]))].sort((a, b) => a - b);
  return { x, values: perRecord.map((m) => x.map((s) => m.get(s) ?? null)) };
}

/** The last value of a metric in a run (the last step that measured it), with that step. */
export function finalOf(points: readonly TrainPoint[], metric: Metric): { value: number; step: number } | null {
  for (let i = points.length - 1; i >= 0; i--) {
    const v = metric(points[i]);
    if (v !== null && Number.isFinite(v)) return { value: v, step: points[i].step };
  }
  return null;
}

/** Distinct colours for up to 8 series (then they repeat). */
export const PALETTE = ['#2563eb', '#dc2626', '#16a34a', '#d97706', '#7c3aed', '#0891b2', '#db2777', '#4b5563'];

/** Whether a run (the current one) is already kept: same settings, same model and world, same points. */
export function sameRun(a: RunRecordView, b: RunRecordView): boolean {
  const key = (r: RunRecordView) => JSON.stringify([r.config, r.model, r.world, r.points.map((p) => [p.step, p.reward, p.heldOutSuccess])]);
  return key(a) === key(b);
}
