// Issue 48: "The pre-training evaluation can be skipped or reused when the base's record exists." The lab's worker
// (workers/lab/training.ts) keeps every base evaluation it measures, keyed by model, world, held-out tasks and
// limits (src/rl/base-eval.ts); a later run with the same key logs the record as its step 0 without evaluating,
// a run with another key measures its own, 'run' always measures, and 'skip' leaves the run without a step 0.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { worldDomain } from '../../src/env/retail';
import { loadRetailBase } from '../../src/env/retail/node';
import { labRequest } from '../../src/method/run-config';
import { baseEvalKey, baseEvaluation, keyDiffs, parseBaseEvalRecord, type BaseEvaluable } from '../../src/rl/base-eval';
import { grpoRunConfig } from '../../src/rl/grpo-config';
import type { EvalMetrics } from '../../src/rl/run';
import { MemoryStore } from '../../src/rl/store';
import type { HeldOutEval, Progress, TrainRequest } from '../../src/worker-protocol';
import type { Policy } from '../../workers/lab/load';
import { Training } from '../../workers/lab/training';
import { loadTiny, type Tiny } from './helpers';

// Each of those tests trains two or three one-step runs of the tiny model: seconds alone, minutes on a loaded machine.
const RUNS_TIMEOUT = 600_000;
const REQ: TrainRequest = labRequest({ mode: 'real', steps: 1, k: 2, promptsPerStep: 1, rank: 2, seed: 0, maxTurns: 1, maxActTokens: 4, maxRehearseTokens: 4, evalEvery: 1, evalTasks: 3 });

describe('the base evaluation in the lab: measured once, then reused, run afresh or skipped', () => {
  let tiny: Tiny;
  const full = worldDomain('mini', loadRetailBase());
  // A shorter system prompt keeps the tiny policy's episodes within its context.
  const domain = { ...full, policy: 'You are a retail agent.', definitions: () => full.definitions().slice(0, 1) };
  // The lab's kept base evaluations: one store for every run in "this browser" (OPFS there).
  const kept = new MemoryStore();
  beforeAll(async () => {
    tiny = await loadTiny();
  });
  afterAll(() => tiny.backend.dispose());

  const policy = (weights = 'f32 weights 0123') => ({ backend: tiny.backend, model: tiny.model, tok: tiny.tok, adapter: tiny.adapter, label: 'tiny', weights, untrained: true }) as unknown as Policy;

  /** A fresh run (its own store, as after Reset) of `req`: what it showed before step 1, its step 0, its log. */
  async function fresh(req: TrainRequest, p = policy()) {
    const store = new MemoryStore();
    const t = Object.assign(new Training(), { store, baseStore: kept }) as unknown as Training;
    const seen: Progress[] = [];
    let start: HeldOutEval | null = null;
    const st = await t.start(p, domain, 'mini', req, new AbortController().signal, () => undefined, (x) => seen.push(x), 0, () => undefined, (e) => (start = e));
    const evals = store.text('eval.jsonl').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l) as EvalMetrics);
    return { measured: seen.some((x) => x.phase.startsWith('before training')), start: start as HeldOutEval | null, status: st, evals };
  }

  it('the first run measures its base and keeps it; the next run of the same key reuses it without evaluating', async () => {
    const a = await fresh(REQ);
    expect(a.measured).toBe(true);
    expect(a.start).not.toBeNull();
    expect(a.start!.reused).toBeNull();
    expect(kept.files.size).toBe(1);
    const b = await fresh(REQ);
    expect(b.measured).toBe(false);
    expect(b.start).toMatchObject({ step: 0, success: a.start!.success, fidelityExact: a.start!.fidelityExact, byFamily: a.start!.byFamily });
    expect(b.start!.reused).toMatch(/^\d{4}-\d\d-\d\dT/);
    // The reused record is the run's own step 0: in its log, and in the status the page reads after a reload.
    expect(b.evals.map((e) => e.step)).toEqual([0, 1]);
    expect(b.evals[0]).toMatchObject({ success: a.evals[0].success, meanReward: a.evals[0].meanReward, reused: b.start!.reused });
    expect(b.status.start).toEqual(b.start);
  }, RUNS_TIMEOUT);

  it('another key (other held-out tasks, other limits, other weights) measures its own', async () => {
    for (const [req, p] of [[{ ...REQ, evalTasks: 2 }, policy()], [{ ...REQ, maxTurns: 2 }, policy()], [REQ, policy('q8 weights 4567')]] as const) {
      const before = kept.files.size;
      const r = await fresh(req, p);
      expect(r.measured).toBe(true);
      expect(r.start!.reused).toBeNull();
      expect(kept.files.size).toBe(before + 1);
    }
  }, RUNS_TIMEOUT);

  it("'run' measures afresh although a record exists; 'skip' leaves the run without a step 0", async () => {
    const again = await fresh({ ...REQ, baseEval: 'run' });
    expect(again.measured).toBe(true);
    expect(again.start!.reused).toBeNull();
    const skipped = await fresh({ ...REQ, baseEval: 'skip' });
    expect(skipped.measured).toBe(false);
    expect(skipped.start).toBeNull();
    expect(skipped.status.start).toBeNull();
    expect(skipped.evals.map((e) => e.step)).toEqual([1]);
  }, RUNS_TIMEOUT);
});

describe('src/rl/base-eval.ts', () => {
  const c = grpoRunConfig({ mode: 'real', steps: 2, seed: 0, evalEvery: 1 });
  const tasks = worldDomain('mini', loadRetailBase()).tasks.generate({ split: 'test', count: 3, seed: 1 });
  const key = baseEvalKey('m', 'mini', tasks, c);
  const m: EvalMetrics = { step: 0, success: 0.5, meanReward: 0.5, toolPrecision: 1, toolRecall: 1, ends: {} as EvalMetrics['ends'] };

  it('a key names what differs: tasks by content, limits, the model', () => {
    expect(keyDiffs(key, baseEvalKey('m', 'mini', tasks, c))).toEqual([]);
    expect(keyDiffs(key, baseEvalKey('m', 'mini', [...tasks.slice(0, 2), { ...tasks[2], userMessages: ['other'] }], c)).map((d) => d.split(':')[0])).toEqual(['tasks']);
    expect(keyDiffs(key, baseEvalKey('n', 'mini', tasks, { ...c, limits: { ...c.limits, maxTurns: 3 } })).map((d) => d.split(':')[0])).toEqual(['model', 'limits']);
    // A fidelity check on part of the tasks is another evaluation, named in the key only when it is part.
    const part = baseEvalKey('m', 'mini', tasks, { ...c, evalFidelityTasks: 2 });
    expect(keyDiffs(key, part).map((d) => d.split(':')[0])).toEqual(['fidelityTasks']);
    expect(keyDiffs(part, key).map((d) => d.split(':')[0])).toEqual(['fidelityTasks']);
    expect(baseEvalKey('m', 'mini', tasks, { ...c, evalFidelityTasks: 3 })).toEqual(key);
    // The run's seed and training settings do not change the base: greedy decoding, zero adapters.
    expect(keyDiffs(key, baseEvalKey('m', 'mini', tasks, { ...c, seed: 9, lr: 0.5 }))).toEqual([]);
  });

  it('reuses only a matching record; a resumed run keeps the step 0 it logged; no held-out evaluation: nothing', async () => {
    const logged: EvalMetrics[] = [];
    let evaluated = 0;
    const run = (step = 0, cfg = c): BaseEvaluable => ({
      step, config: cfg,
      evaluationsLogged: async () => logged.map((e) => e.step),
      evaluate: async () => (evaluated++, logged.push(m), m),
      logEvaluation: async (e) => void logged.push(e),
    });
    const record = { version: 1 as const, key: { ...key, world: 'retail' }, measuredAt: '2026-12-01T00:00:00.000Z', eval: m };
    const other = await baseEvaluation(run(), 'reuse', key, record);
    expect(other).toMatchObject({ source: 'measured', notReused: [expect.stringMatching(/^world: "mini" \(the record has "retail"\)/)] });
    expect(other.record).toMatchObject({ version: 1, key, eval: m });
    expect(evaluated).toBe(1);
    expect(await baseEvaluation(run(), 'reuse', key, other.record)).toMatchObject({ source: 'logged' });
    logged.length = 0;
    const same = await baseEvaluation(run(), 'reuse', key, other.record);
    expect(same).toMatchObject({ source: 'reused', eval: { ...m, reused: other.record!.measuredAt }, record: null });
    expect(evaluated).toBe(1);
    // Resumed after step 1: the step 0 it logged is its base; a run that stepped without one has none for good.
    expect(await baseEvaluation(run(1), 'run', key, null)).toMatchObject({ source: 'logged' });
    logged.length = 0;
    expect(await baseEvaluation(run(1), 'run', key, null)).toMatchObject({ source: 'off' });
    // ... unless a matching record can still go in ahead of every evaluation (it trained while another process measured
    // the base: --base-wait); it is never measured then (its adapters moved), and not once another evaluation is logged.
    expect(await baseEvaluation(run(3), 'reuse', key, record)).toMatchObject({ source: 'off', notReused: [expect.stringMatching(/^world: /)] });
    expect(await baseEvaluation(run(3), 'reuse', key, other.record)).toMatchObject({ source: 'reused', eval: { step: 0 } });
    expect(logged.map((e) => e.step)).toEqual([0]);
    logged.length = 0;
    logged.push({ ...m, step: 10 });
    expect(await baseEvaluation(run(10), 'reuse', key, other.record)).toMatchObject({ source: 'off' });
    logged.length = 0;
    expect(evaluated).toBe(1);
    expect(await baseEvaluation(run(0, { ...c, evalEvery: 0 }), 'run', key, null)).toMatchObject({ source: 'off' });
    expect(() => parseBaseEvalRecord(new TextEncoder().encode('{"version":1}'), 'x.json')).toThrow(/x\.json is not a base evaluation record/);
    expect(parseBaseEvalRecord(new TextEncoder().encode(JSON.stringify(other.record)), 'x.json')).toEqual(other.record);
  });
});
