// The world-rehearsal lesson's plot (src/ui/panels/WorldLesson.svelte): held-out success (real environment, greedy)
// and held-out rehearsal fidelity (exact match) of the lesson's two runs on one axis of steps, in absolute numbers,
// with two horizontal lines: the base policy (the runs' step-0 evaluation) and the ceiling measured by pass@k (from the
// model folder's ceiling.json), or a note where the ceiling was not measured. Each run's end values are labelled.
// Pure, so the page and the unit tests share it.
import type { KeptRun, LessonTag, RunRecordView } from './compare';
import type { LessonRole } from '../method/lesson-runs';
import type { ModelCeiling } from '../worker-protocol';

/** A lesson run as the plot draws it. */
export interface LessonRecord extends Pick<RunRecordView, 'name' | 'points' | 'start' | 'world' | 'model' | 'config'> {
  role: LessonRole;
}

export interface PlotSeries {
  label: string;
  values: (number | null)[];
  colour: string;
  /** Canvas dash pattern (a horizontal reference line, a fidelity curve). */
  dash?: number[];
  /** A horizontal reference line (drawn without points). */
  reference?: boolean;
  /** Text drawn beside the series' last point (a run's end value). */
  endLabel?: string;
}

/** One run's figures at its start and its end (the table under the plot). */
export interface LessonEnd {
  role: LessonRole;
  name: string;
  success: { start: number | null; end: number | null; step: number | null };
  fidelity: { start: number | null; end: number | null; step: number | null };
}

export interface LessonPlot {
  x: number[];
  series: PlotSeries[];
  ends: LessonEnd[];
  /** The base policy's held-out success (null: no run has its step-0 evaluation). */
  base: number | null;
  /** The ceiling drawn (null: not drawn; `ceilingNote` says why). */
  ceiling: number | null;
  ceilingNote: string | null;
}

export const LESSON_COLOURS: Record<LessonRole, string> = { 'real-only': '#2563eb', rehearsed: '#d97706' };
const BASE_COLOUR = '#4b5563';
const CEILING_COLOUR = '#16a34a';
const FIDELITY_DASH = [2, 4];
const LINE_DASH = [10, 5];

const f2 = (v: number) => v.toFixed(2);

/** What the lab knows of the ceiling of the model the runs trained. */
export interface CeilingView {
  ceiling: ModelCeiling | null;
  /** Why the folder's ceiling.json was refused (null: none was there, or it was read). */
  problem: string | null;
  /** The loaded model's label, whose folder the ceiling came from. */
  model: string | null;
}

/** The ceiling's value and label, or the note that stands in for it. */
export function ceilingLine(c: CeilingView, runs: readonly Pick<LessonRecord, 'world' | 'model'>[], evalTasks: number | null): { value: number; label: string } | { note: string } {
  const none = 'ceiling not measured for this model';
  if (c.problem) return { note: `${none}: ${c.problem}` };
  if (!c.ceiling) return { note: `${none} (no ceiling.json in its folder)` };
  if (runs.some((r) => r.model !== c.model)) return { note: `${none}: the lesson's runs trained another model than the one loaded` };
  const w = runs.find((r) => r.world !== c.ceiling!.world);
  if (w) return { note: `${none} in the ${w.world} world (its ceiling.json was measured in the ${c.ceiling.world} world)` };
  const { passAtK, k, tasks } = c.ceiling;
  const other = evalTasks !== null && evalTasks !== tasks ? `; the runs evaluate ${evalTasks}` : '';
  return { value: passAtK, label: `ceiling: pass@${k} of the base policy, ${f2(passAtK)} (${tasks} held-out tasks${other})` };
}

/** The last point of a run that measured `v`, with its step. */
function last(points: LessonRecord['points'], v: (p: LessonRecord['points'][number]) => number | null | undefined): { value: number; step: number } | null {
  for (let i = points.length - 1; i >= 0; i--) {
    const x = v(points[i]);
    if (x !== null && x !== undefined && Number.isFinite(x)) return { value: x, step: points[i].step };
  }
  return null;
}

/**
 * The plot of a lesson's runs (real-only first): each run's held-out success (solid) and fidelity (dotted) from step
 * 0 (its starting policy's evaluation) to its last evaluation, the base line and the ceiling line (or its note; its
 * label says when it was measured on another count of held-out tasks than the runs').
 */
export function lessonPlot(records: readonly LessonRecord[], ceiling: CeilingView): LessonPlot {
  const runs = [...records].sort((a, b) => (a.role === b.role ? 0 : a.role === 'real-only' ? -1 : 1));
  const evalTasks = runs.length ? runs[0].config.evalTasks : null;
  const hasStart = runs.some((r) => r.start);
  const steps = new Set<number>(hasStart ? [0] : []);
  for (const r of runs) for (const p of r.points) if (p.heldOutSuccess !== null || p.heldOutFidelityExact !== null) steps.add(p.step);
  const x = [...steps].sort((a, b) => a - b);
  const series: PlotSeries[] = [];
  const ends: LessonEnd[] = [];
  for (const r of runs) {
    const at = new Map(r.points.map((p) => [p.step, p]));
    const colour = LESSON_COLOURS[r.role];
    const successAt = (s: number) => (s === 0 ? (r.start?.success ?? null) : (at.get(s)?.heldOutSuccess ?? null));
    const fidelityAt = (s: number) => (s === 0 ? (r.start?.fidelityExact ?? null) : (at.get(s)?.heldOutFidelityExact ?? null));
    const s = last(r.points, (p) => p.heldOutSuccess);
    const fi = last(r.points, (p) => p.heldOutFidelityExact);
    const endS = s ? `${f2(s.value)} at step ${s.step}` : 'no evaluation yet';
    const endF = fi ? `${f2(fi.value)} at step ${fi.step}` : 'no evaluation yet';
    series.push({ label: `held-out success · ${r.name}: ${endS}`, values: x.map(successAt), colour, ...(s ? { endLabel: f2(s.value) } : {}) });
    series.push({ label: `held-out fidelity · ${r.name}: ${endF}`, values: x.map(fidelityAt), colour, dash: FIDELITY_DASH, ...(fi ? { endLabel: f2(fi.value) } : {}) });
    ends.push({
      role: r.role, name: r.name,
      success: { start: r.start?.success ?? null, end: s?.value ?? null, step: s?.step ?? null },
      fidelity: { start: r.start?.fidelityExact ?? null, end: fi?.value ?? null, step: fi?.step ?? null },
    });
  }
  // The base policy: the runs' step-0 evaluation (the same model, tasks and limits: one measurement, reused).
  const base = runs.find((r) => r.start)?.start?.success ?? null;
  if (base !== null && x.length) series.push({ label: `base policy (step 0): held-out success ${f2(base)}`, values: x.map(() => base), colour: BASE_COLOUR, dash: LINE_DASH, reference: true });
  const c = ceilingLine(ceiling, runs, evalTasks);
  if ('value' in c && x.length) series.push({ label: c.label, values: x.map(() => c.value), colour: CEILING_COLOUR, dash: LINE_DASH, reference: true });
  return { x, series, ends, base, ceiling: 'value' in c ? c.value : null, ceilingNote: 'note' in c ? c.note : null };
}

/**
 * The latest lesson's kept runs (by its start time), with the run in progress when a lesson is going: `active`, the
 * going lesson's tag, its current run (null before its first step) and that run's name.
 */
export function lessonRecords(kept: readonly KeptRun[], active: { tag: LessonTag; current: RunRecordView | null; name: string } | null): LessonRecord[] {
  const id = active?.tag.id ?? kept.reduce<string | null>((m, k) => (k.lesson && (m === null || k.lesson.id > m) ? k.lesson.id : m), null);
  if (id === null) return [];
  const out: LessonRecord[] = kept.filter((k) => k.lesson?.id === id).map((k) => ({ ...k, role: k.lesson!.role }));
  if (active?.current && !out.some((r) => r.role === active.tag.role)) out.push({ ...active.current, name: `${active.name} (training)`, role: active.tag.role });
  return out;
}
