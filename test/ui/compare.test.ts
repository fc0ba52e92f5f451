// Comparing training runs (src/ui/compare.ts): records aligned on one step axis, distinct legend labels,
// final figures, the default comparison mode.
import { describe, expect, it } from 'vitest';
import { alignByStep, finalOf, legendLabels, otherMode, otherSettings, runLabel, sameRun, savedRequest, type RunRecordView } from '../../src/ui/compare';
import { labRequest } from '../../src/method/run-config';
import type { TrainPoint, TrainRequest } from '../../src/worker-protocol';

const cfg = (o: Partial<TrainRequest> = {}): TrainRequest => labRequest({
  mode: 'rehearse', steps: 3, lr: 1e-4, k: 4, promptsPerStep: 1, rank: 8, seed: 1, maxTurns: 12, maxActTokens: 64, maxRehearseTokens: 128, evalEvery: 1, evalTasks: 4, ...o,
});
const pt = (step: number, o: Partial<TrainPoint> = {}): TrainPoint => ({
  step, reward: step / 10, success: 0, rowsAct: 1, rowsRehearse: 1, fidelityF1: null, loss: { act: null, rehearse: null, shared: 0 }, kl: null, clipFrac: null,
  heldOutSuccess: null, heldOutFidelityExact: null, heldOutFidelityF1: null, groups: 2, groupsWithSpread: 0, prompts: 1, promptsWithSpread: 0, gradNorm: null, line: '', wallMs: 1000, ...o,
});
const rec = (id: string, c: TrainRequest, points: TrainPoint[], o: Partial<RunRecordView> = {}): RunRecordView => ({ id, name: '', config: c, model: 'm', world: 'mini', points, ...o });

describe('run comparison', () => {
  it('aligns N records on the union of their steps, null where a run has no point or no measurement', () => {
    const a = rec('a', cfg(), [pt(1, { heldOutSuccess: 0.25 }), pt(2), pt(3, { heldOutSuccess: 0.5 })]);
    const b = rec('b', cfg({ mode: 'frozen-simulator' }), [pt(1, { heldOutSuccess: 0 }), pt(2, { heldOutSuccess: 0.75 })]);
    const c = rec('c', cfg(), [pt(5, { heldOutSuccess: 1 })]);
    const s = alignByStep([a, b, c], (p) => p.heldOutSuccess);
    expect(s.x).toEqual([1, 2, 3, 5]);
    expect(s.values).toEqual([
      [0.25, null, 0.5, null],
      [0, 0.75, null, null],
      [null, null, null, 1],
    ]);
    // The training reward exists at every step of each run.
    expect(alignByStep([a, b], (p) => p.reward).values).toEqual([[0.1, 0.2, 0.3], [0.1, 0.2, null]]);
  });

  it('keeps the last point of a step logged twice, drops non-finite values, and handles no records', () => {
    const a = rec('a', cfg(), [pt(1, { reward: 0.1 }), pt(2, { reward: Number.NaN }), pt(1, { reward: 0.9 })]);
    expect(alignByStep([a], (p) => p.reward)).toEqual({ x: [1, 2], values: [[0.9, null]] });
    expect(alignByStep([], (p) => p.reward)).toEqual({ x: [], values: [] });
  });

  it('labels every series distinctly: a kept name, or the mode, seed and steps reached; the current run says so', () => {
    const env = rec('a', cfg({ steps: 10 }), [pt(1), pt(2)]);
    const named = rec('b', cfg(), [pt(1)], { name: 'my baseline' });
    const frozen = rec('c', cfg({ mode: 'frozen-simulator' }), [pt(1), pt(2)], { current: true });
    const twin = rec('d', cfg({ steps: 10 }), [pt(1), pt(2)]);
    expect(legendLabels([env, named, frozen, twin])).toEqual([
      'EnvACE (rehearse) · seed 1 · 2 steps',
      'my baseline',
      'frozen-simulator GRPO · seed 1 · 2 steps (current run)',
      'EnvACE (rehearse) · seed 1 · 2 steps (2)',
    ]);
    expect(runLabel(cfg({ groups: 'pooled', seed: 7 }), 1)).toBe('EnvACE (rehearse), pooled · seed 7 · 1 step');
  });

  it('final figures come from the last step that measured them', () => {
    const pts = [pt(1, { heldOutSuccess: 0.2 }), pt(2, { heldOutSuccess: 0.4 }), pt(3)];
    expect(finalOf(pts, (p) => p.heldOutSuccess)).toEqual({ value: 0.4, step: 2 });
    expect(finalOf(pts, (p) => p.heldOutFidelityExact)).toBeNull();
  });

  it('the comparison mode is the other of EnvACE and frozen simulator; a kept copy is recognised', () => {
    expect(otherMode('rehearse')).toBe('frozen-simulator');
    expect(otherMode('frozen-simulator')).toBe('rehearse');
    expect(otherMode('real')).toBe('frozen-simulator');
    const a = rec('current', cfg(), [pt(1)], { current: true });
    expect(sameRun(a, { ...a, id: 'x', name: 'kept', current: false })).toBe(true);
    expect(sameRun(a, rec('x', cfg(), [pt(1), pt(2)]))).toBe(false);
  });

  it('names the settings beyond the table columns only where they differ from the lab defaults', () => {
    // The lab's own request at its defaults: budgets 0 (measured), 12 turns, 100 held-out tasks.
    const lab = cfg({ maxActTokens: 0, maxRehearseTokens: 0, evalTasks: 100, updateEpochs: 1, taskSampling: 'uniform', topP: 1, lossAggregation: 'seq-mean-token-mean' });
    expect(otherSettings(lab)).toEqual([]);
    // A run kept before these were settings (fields absent) read as the values it then had: the defaults.
    const old = { mode: 'rehearse', grouping: 'pooled', baseline: 'row-weighted', steps: 3, lr: 1e-4, k: 4, promptsPerStep: 1, rank: 8, seed: 1, maxTurns: 12, maxNewTokens: 0, rehearseTokens: 0, evalEvery: 1, evalTasks: 100 };
    expect(otherSettings(savedRequest(old))).toEqual([]);
    // Its settings under their old names read under their one names; rehearsal decoding was free then.
    expect(savedRequest({ ...old, epochs: 2, maxNewTokens: 64 })).toMatchObject({ groups: 'pooled', updateEpochs: 2, maxActTokens: 64, rehearseDecoding: 'free', taskSampling: 'uniform' });
    expect(savedRequest({ ...old, epochs: 2 })).not.toHaveProperty('epochs');
    // The measured budgets written out are not a choice of the user's.
    expect(otherSettings(cfg({ maxActTokens: 96, maxRehearseTokens: 641, evalTasks: 100 }), { act: 96, rehearse: 641 })).toEqual([]);
    const tuned = cfg({ updateEpochs: 2, taskSampling: 'signal', topP: 0.8, reward: 'checklist', lossAggregation: 'token-mean', greedyMember: true, maxTurns: 8, maxActTokens: 64, maxRehearseTokens: 641, evalTasks: 40 });
    expect(otherSettings(tuned, { act: 96, rehearse: 641 })).toEqual([
      '2 epochs per batch', 'signal task sampling', 'token-mean loss', 'top-p 0.8', 'a greedy member per group', 'checklist reward', 'held-out eval of 40 tasks', 'at most 8 turns', '64 Act tokens',
    ]);
    // Without a held-out evaluation its size is not a setting of the run.
    expect(otherSettings(cfg({ maxActTokens: 0, maxRehearseTokens: 0, evalEvery: 0, evalTasks: 7 }))).toEqual([]);
  });
});
