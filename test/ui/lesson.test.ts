// The lesson strip (src/ui/lesson.ts): each step is done only when the lab's state shows it, and the
// step-by-step comparison of two episodes (private rehearsal with and without memory).
import { describe, expect, it } from 'vitest';
import { lessonSteps, stepDiff, type LessonState } from '../../src/ui/lesson';
import type { CallView, GenView, TurnView } from '../../src/worker-protocol';

const gen = (source: GenView['source']): GenView => ({ source, prompt: '', promptTokens: 0, text: '', tokens: [], ms: 0 });
const call = (rehearsed: boolean): CallView => ({ call: '{}', name: 'f', rehearse: rehearsed ? gen('policy') : null, rehearsed: null, rehearseError: null, rehearseCut: null, real: '{}', fidelity: null });
const turn = (source: GenView['source'], calls: CallView[]): TurnView => ({ index: 0, act: gen(source), calls, reply: null });
const empty: LessonState = { stepperRollouts: [], groups: [], runs: [], tts: null };
const done = (s: Partial<LessonState>) => lessonSteps({ ...empty, ...s }).map((x) => x.done);

describe('lesson steps', () => {
  it('nothing is done in a fresh lab; five steps in order', () => {
    const steps = lessonSteps(empty);
    expect(steps.map((s) => s.n)).toEqual([1, 2, 3, 4, 5]);
    expect(steps.every((s) => !s.done)).toBe(true);
  });

  it('(1) needs a rehearse rollout with a policy-written Act turn that was rehearsed', () => {
    expect(done({ stepperRollouts: [{ mode: 'rehearse', turns: [turn('policy', [call(true)])] }] })[0]).toBe(true);
    expect(done({ stepperRollouts: [{ mode: 'real', turns: [turn('policy', [call(false)])] }] })[0]).toBe(false);
    expect(done({ stepperRollouts: [{ mode: 'rehearse', turns: [turn('expert', [call(true)])] }] })[0]).toBe(false);
    expect(done({ stepperRollouts: [{ mode: 'rehearse', turns: [] }] })[0]).toBe(false);
  });

  it('(2) needs a group whose rewards differ', () => {
    expect(done({ groups: [[0, 0, 0, 0]] })[1]).toBe(false);
    expect(done({ groups: [[1]] })[1]).toBe(false);
    expect(done({ groups: [[0, 0], [0, 0.5]] })[1]).toBe(true);
  });

  it('(3) needs a run with a held-out evaluation; (4) an EnvACE and a frozen-simulator run of the same length', () => {
    const pts = (n: number, heldOut: number | null = null) => Array.from({ length: n }, (_, i) => ({ step: i + 1, heldOutSuccess: i === n - 1 ? heldOut : null }));
    expect(done({ runs: [{ mode: 'rehearse', points: pts(2) }] }).slice(2, 4)).toEqual([false, false]);
    expect(done({ runs: [{ mode: 'rehearse', points: pts(2, 0) }] }).slice(2, 4)).toEqual([true, false]);
    expect(done({ runs: [{ mode: 'rehearse', points: pts(2, 0) }, { mode: 'frozen-simulator', points: pts(1) }] })[3]).toBe(false);
    expect(done({ runs: [{ mode: 'rehearse', points: pts(2, 0) }, { mode: 'frozen-simulator', points: pts(2) }] })[3]).toBe(true);
    expect(done({ runs: [{ mode: 'rehearse', points: pts(2) }, { mode: 'real', points: pts(2) }] })[3]).toBe(false);
  });

  it('(5) needs a private rehearsal shown beside the same task without memory', () => {
    expect(done({ tts: { withoutMemory: null } })[4]).toBe(false);
    expect(done({ tts: { withoutMemory: { end: 'reply', endText: '', reward: 0, steps: [] } } })[4]).toBe(true);
  });
});

describe('step diff of two episodes', () => {
  it('pairs steps by index, marks the changed ones, pads the shorter episode', () => {
    const d = stepDiff(['a()', 'b()', 'reply: ok'], ['a()', 'c()']);
    expect(d.rows).toEqual([
      { index: 0, a: 'a()', b: 'a()', same: true },
      { index: 1, a: 'b()', b: 'c()', same: false },
      { index: 2, a: 'reply: ok', b: null, same: false },
    ]);
    expect(d.changed).toBe(2);
    expect(d.firstChange).toBe(1);
    expect(stepDiff(['x'], ['x'])).toEqual({ rows: [{ index: 0, a: 'x', b: 'x', same: true }], changed: 0, firstChange: null });
  });
});
