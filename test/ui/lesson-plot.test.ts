// The world-rehearsal lesson's plot (src/ui/lesson-plot.ts): both runs' held-out success and held-out fidelity from
// their step-0 evaluation to their last, in absolute numbers; the base line (the step-0 evaluation); the ceiling line
// from the model's ceiling.json, or a note where it was not measured (never a number that was not measured); each
// run's end value labelled; and the latest lesson's runs picked from the kept ones.
import { describe, expect, it } from 'vitest';
import { labRequest } from '../../src/method/run-config';
import type { KeptRun, RunRecordView } from '../../src/ui/compare';
import { lessonPlot, lessonRecords, type CeilingView, type LessonRecord } from '../../src/ui/lesson-plot';
import type { HeldOutEval, ModelCeiling, TrainPoint } from '../../src/worker-protocol';

const pt = (step: number, success: number | null = null, fidelity: number | null = null): TrainPoint => ({
  step, reward: 0, success: 0, rowsAct: 1, rowsRehearse: 0, fidelityF1: null, loss: { act: null, rehearse: null, shared: 0 }, kl: null, clipFrac: null,
  heldOutSuccess: success, heldOutFidelityExact: fidelity, heldOutFidelityF1: null, groups: 1, groupsWithSpread: 0, prompts: 1, promptsWithSpread: 0, gradNorm: null, line: '', wallMs: 1,
});
const start: HeldOutEval = { step: 0, success: 0.4, fidelityExact: 0.6, byFamily: null, reused: null };
const config = labRequest({ mode: 'real', steps: 4, seed: 1, evalEvery: 2, evalTasks: 100 });
const run = (role: LessonRecord['role'], points: TrainPoint[], o: Partial<LessonRecord> = {}): LessonRecord => ({ role, name: role, points, start, world: 'mini', model: 'bundled mini policy', config, ...o });
const real = run('real-only', [pt(1), pt(2, 0.45, 0.6), pt(3), pt(4, 0.47, 0.61)]);
const reh = run('rehearsed', [pt(1), pt(2, 0.42, 0.58), pt(3), pt(4, 0.5, 0.63)]);
const ceiling: ModelCeiling = { passAtK: 0.62, k: 8, tasks: 100, world: 'mini', temperature: 1 };
const measured: CeilingView = { ceiling, problem: null, model: 'bundled mini policy' };
const unmeasured: CeilingView = { ceiling: null, problem: null, model: 'bundled mini policy' };

describe("the lesson's plot", () => {
  it('draws both success curves and both fidelity curves from step 0, the base line and the ceiling line, in absolute numbers', () => {
    const p = lessonPlot([reh, real], measured);
    // Step 0 and the evaluated steps only (a step without an evaluation has no point).
    expect(p.x).toEqual([0, 2, 4]);
    expect(p.series.map((s) => s.label)).toEqual([
      'held-out success · real-only: 0.47 at step 4',
      'held-out fidelity · real-only: 0.61 at step 4',
      'held-out success · rehearsed: 0.50 at step 4',
      'held-out fidelity · rehearsed: 0.63 at step 4',
      'base policy (step 0): held-out success 0.40',
      'ceiling: pass@8 of the base policy, 0.62 (100 held-out tasks)',
    ]);
    expect(p.series.map((s) => s.values)).toEqual([
      [0.4, 0.45, 0.47],
      [0.6, 0.6, 0.61],
      [0.4, 0.42, 0.5],
      [0.6, 0.58, 0.63],
      [0.4, 0.4, 0.4],
      [0.62, 0.62, 0.62],
    ]);
    // Each run's end values are labelled on the plot; the reference lines are lines, not points.
    expect(p.series.map((s) => s.endLabel)).toEqual(['0.47', '0.61', '0.50', '0.63', undefined, undefined]);
    expect(p.series.map((s) => !!s.reference)).toEqual([false, false, false, false, true, true]);
    expect(p.series[0].colour).toBe(p.series[1].colour);
    expect(p.series[0].colour).not.toBe(p.series[2].colour);
    expect([p.base, p.ceiling, p.ceilingNote]).toEqual([0.4, 0.62, null]);
    expect(p.ends).toEqual([
      { role: 'real-only', name: 'real-only', success: { start: 0.4, end: 0.47, step: 4 }, fidelity: { start: 0.6, end: 0.61, step: 4 } },
      { role: 'rehearsed', name: 'rehearsed', success: { start: 0.4, end: 0.5, step: 4 }, fidelity: { start: 0.6, end: 0.63, step: 4 } },
    ]);
  });

  it('without a measured ceiling draws no ceiling line and says so, naming why', () => {
    const p = lessonPlot([real, reh], unmeasured);
    expect(p.series).toHaveLength(5);
    expect(p.series.some((s) => /ceiling/.test(s.label))).toBe(false);
    expect([p.ceiling, p.ceilingNote]).toEqual([null, 'ceiling not measured for this model (no ceiling.json in its folder)']);
    expect(lessonPlot([real], { ...unmeasured, problem: 'ceiling.json is not used: it was measured on the "train" split' }).ceilingNote).toBe(
      'ceiling not measured for this model: ceiling.json is not used: it was measured on the "train" split',
    );
    // The ceiling of another model or world is not this lesson's.
    expect(lessonPlot([real], { ...measured, model: 'another' }).ceilingNote).toMatch(/^ceiling not measured for this model: the lesson's runs trained another model/);
    expect(lessonPlot([run('real-only', real.points, { world: 'retail' })], measured).ceilingNote).toMatch(/^ceiling not measured for this model in the retail world/);
  });

  it("says when the ceiling was measured on another count of held-out tasks than the runs'", () => {
    const few = run('real-only', real.points, { config: { ...config, evalTasks: 2 } });
    expect(lessonPlot([few], measured).series.at(-1)!.label).toBe('ceiling: pass@8 of the base policy, 0.62 (100 held-out tasks; the runs evaluate 2)');
  });

  it('a run without its step-0 evaluation has no base point and no base line; a run not yet evaluated says so', () => {
    const p = lessonPlot([run('real-only', [pt(1, 0.5, 0.6)], { start: null }), run('rehearsed', [pt(1)], { start: null })], unmeasured);
    expect(p.x).toEqual([1]);
    expect(p.base).toBeNull();
    expect(p.series.map((s) => s.label)).toEqual([
      'held-out success · real-only: 0.50 at step 1',
      'held-out fidelity · real-only: 0.60 at step 1',
      'held-out success · rehearsed: no evaluation yet',
      'held-out fidelity · rehearsed: no evaluation yet',
    ]);
    expect(lessonPlot([], measured)).toMatchObject({ x: [], series: [], ends: [] });
  });
});

describe("the lesson's runs among the kept ones", () => {
  const kept = (id: string, lesson: KeptRun['lesson'], name = id): KeptRun => ({ id, name, config, model: 'm', world: 'mini', points: [pt(1, 0.5)], at: id, ...(lesson ? { lesson } : {}) });
  const all = [
    kept('a', { id: '2026-12-05T10:00:00.000Z', role: 'real-only' }),
    kept('b', { id: '2026-12-05T10:00:00.000Z', role: 'rehearsed' }),
    kept('c', undefined),
    kept('d', { id: '2026-12-05T11:00:00.000Z', role: 'real-only' }),
    kept('e', { id: '2026-12-05T11:00:00.000Z', role: 'rehearsed' }),
  ];

  it('are the latest lesson\'s two runs; kept runs of no lesson are not drawn', () => {
    expect(lessonRecords(all, null).map((r) => [r.name, r.role])).toEqual([['d', 'real-only'], ['e', 'rehearsed']]);
    expect(lessonRecords([kept('c', undefined)], null)).toEqual([]);
  });

  it('while a lesson is going: its kept run and its run training now', () => {
    const current: RunRecordView = { id: 'current', name: '', config, model: 'm', world: 'mini', points: [pt(1)], current: true };
    const tag = { id: '2026-12-05T12:00:00.000Z', role: 'rehearsed' as const };
    const going = [...all, kept('f', { id: tag.id, role: 'real-only' })];
    expect(lessonRecords(going, { tag, current, name: 'world rehearsal' }).map((r) => [r.name, r.role])).toEqual([['f', 'real-only'], ['world rehearsal (training)', 'rehearsed']]);
    // Before its first run has a step: nothing yet (not the previous lesson's runs).
    expect(lessonRecords(all, { tag: { ...tag, role: 'real-only' }, current: null, name: 'x' })).toEqual([]);
  });
});
