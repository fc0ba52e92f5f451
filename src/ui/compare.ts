// Comparing training runs (lesson step 4): a run is a record (its settings and its points), kept runs and
// the current one alike; a comparison plot draws N records, each one series aligned on the union of their
// steps. Pure functions, so the page and the unit tests share them.
import { effectiveGroups, MODES } from '../method/modes';
import { labDefault, labRequest, RUN_SETTINGS, type LabSettingName } from '../method/run-config';
import type { HeldOutEval, TrainMode, TrainPoint, TrainRequest } from '../worker-protocol';
import type { LessonRole } from '../method/lesson-runs';

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
  /** The starting policy's held-out evaluation (step 0); absent in runs kept before it was kept with them. */
  start?: HeldOutEval | null;
}

/** Which world-rehearsal lesson a kept run belongs to (src/method/lesson-runs.ts): the lesson's start time, the run's role. */
export interface LessonTag {
  id: string;
  role: LessonRole;
}

/** A kept run, as IndexedDB stores it. */
export interface KeptRun extends RunRecordView {
  at: string;
  /** Set when a world-rehearsal lesson trained it. */
  lesson?: LessonTag;
}


/** A run named from its settings: the mode, the grouping where it matters, the seed and the steps. */
export function runLabel(c: TrainRequest, steps = c.steps): string {
  const grouping = effectiveGroups(c.mode, c.groups) === 'pooled' ? ', pooled' : '';
  return `${MODES[c.mode].name}${grouping} · seed ${c.seed} · ${steps} step${steps === 1 ? '' : 's'}`;
}

/** The settings the comparison table shows in its own columns (src/ui/panels/CompareRuns.svelte). */
export const TABLE_COLUMNS: readonly LabSettingName[] = ['mode', 'groups', 'baseline', 'rehearseDecoding', 'seed', 'steps', 'k', 'promptsPerStep', 'lr', 'rank', 'evalEvery'];

/**
 * A run's request as saved by any version, by the settings' one names (src/method/run-config.ts labRequest): a
 * setting a run kept from before it existed reads as the value it then had, its default of that time; runs kept
 * before rehearsal decoding was a setting decoded free.
 */
export const savedRequest = (raw: unknown): TrainRequest => labRequest(raw as Record<string, unknown>, { rehearseDecoding: 'free' });

/**
 * The settings of a run beyond the table's own columns, each named (its row's `lab.says`) only when it differs
 * from the lab's default: two runs that differ there must not read as the same run. Token budgets are named when
 * set by hand: not 0 (= measured) and not the measured budget `measured` (a run's request may carry either); the
 * held-out evaluation's size only when the run evaluates. [] when all are at their defaults.
 */
export function otherSettings(c: TrainRequest, measured?: { act: number; rehearse: number } | null): string[] {
  const v = c as unknown as Record<string, unknown>;
  const asMeasured: Partial<Record<LabSettingName, number | undefined>> = { maxActTokens: measured?.act, maxRehearseTokens: measured?.rehearse };
  const out: string[] = [];
  for (const row of RUN_SETTINGS) {
    if (!('lab' in row) || TABLE_COLUMNS.includes(row.name)) continue;
    const x = v[row.name] ?? labDefault(row);
    if (x === labDefault(row) || (row.name in asMeasured && x === asMeasured[row.name as LabSettingName])) continue;
    if (row.name === 'evalTasks' && !c.evalEvery) continue;
    const says = (row.lab as { says?: (v: unknown) => string }).says;
    out.push(says ? says(x) : `${row.name} ${String(x)}`);
  }
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
