// Issue 49: "the worker keeps the run's curve in memory (appending as it goes, reading storage only on resume)".
// The lab's Training used to re-read the whole eval.jsonl and rollouts.jsonl after every step to draw one plot
// point. Now a step reads none of the run's logs; they are read once when the run is opened (a status after a
// reload, a Start that resumes), and the curve read back from them is the curve the steps drew.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { worldDomain } from '../../src/env/retail';
import { loadRetailBase } from '../../src/env/retail/node';
import { labRequest } from '../../src/method/run-config';
import { MemoryStore } from '../../src/rl/store';
import type { Progress, TrainPoint, TrainRequest } from '../../src/worker-protocol';
import type { Policy } from '../../workers/lab/load';
import { Training } from '../../workers/lab/training';
import { loadTiny, type Tiny } from './helpers';

const LOGS = ['metrics.jsonl', 'eval.jsonl', 'rollouts.jsonl'];
// Three steps with the held-out evaluation every second step (and at the end), so some points carry one.
const REQ: TrainRequest = labRequest({ mode: 'rehearse', steps: 3, k: 2, promptsPerStep: 1, rank: 2, seed: 0, maxTurns: 1, maxActTokens: 4, maxRehearseTokens: 4, evalEvery: 2, evalTasks: 2 });
const RUNS_TIMEOUT = 900_000;

/** A MemoryStore that counts reads of the run's logs, and can say which happened after a mark. */
class CountingStore extends MemoryStore {
  logReads: string[] = [];
  override async read(name: string): Promise<Uint8Array | null> {
    if (LOGS.includes(name)) this.logReads.push(name);
    return super.read(name);
  }
}

describe("the lab's training curve: in memory, read from the logs only when the run is opened", () => {
  let tiny: Tiny;
  const full = worldDomain('mini', loadRetailBase());
  const domain = { ...full, policy: 'You are a retail agent.', definitions: () => full.definitions().slice(0, 1) };
  beforeAll(async () => {
    tiny = await loadTiny();
  });
  afterAll(() => tiny.backend.dispose());

  const policy = () => ({ backend: tiny.backend, model: tiny.model, tok: tiny.tok, adapter: tiny.adapter, label: 'tiny', weights: 'f32', untrained: true }) as unknown as Policy;
  const training = (store: MemoryStore) => Object.assign(new Training(), { store, baseStore: new MemoryStore() }) as unknown as Training;

  /** Starts (or resumes) a run on `store`; `pauseAfter`: pause once that step is drawn. Log reads after step 1 began are counted. */
  async function start(store: CountingStore, pauseAfter?: number) {
    const t = training(store);
    const points: TrainPoint[] = [];
    let readsBefore = -1;
    const onProgress = (p: Progress) => {
      if (readsBefore < 0 && /^step \d+ of/.test(p.phase)) readsBefore = store.logReads.length;
    };
    const st = await t.start(policy(), domain, 'mini', REQ, new AbortController().signal, (p) => {
      points.push(p);
      if (p.step === pauseAfter) t.pause();
    }, onProgress);
    return { t, points, status: st, readsDuringSteps: store.logReads.slice(readsBefore) };
  }

  it('a step reads no log; the status after the run, and after a reload, is the curve the steps drew', async () => {
    const store = new CountingStore();
    const run = await start(store);
    expect(run.points.map((p) => p.step)).toEqual([1, 2, 3]);
    expect(run.points.map((p) => p.heldOutSuccess === null)).toEqual([true, false, false]);
    expect(run.points.every((p) => p.prompts === 1 && p.groups === 2)).toBe(true);
    // Three steps, and the status that ends the run: not one read of metrics, eval or rollouts.
    expect(run.readsDuringSteps).toEqual([]);
    expect(run.status.points).toEqual(run.points);
    // The same instance answers from memory; a reloaded page (a new worker) reads the logs once.
    const n = store.logReads.length;
    expect((await run.t.status()).points).toEqual(run.points);
    expect(store.logReads.length).toBe(n);
    const reloaded = await training(store).status();
    expect(store.logReads.slice(n).sort()).toEqual([...LOGS].sort());
    expect(reloaded.points).toEqual(run.points);
    expect(reloaded.start).toEqual(run.status.start);
  }, RUNS_TIMEOUT);

  it('a run paused after step 1 and resumed in a new worker draws the same curve as its logs', async () => {
    const store = new CountingStore();
    const first = await start(store, 1);
    expect(first.points.map((p) => p.step)).toEqual([1]);
    const resumed = await start(store);
    expect(resumed.points.map((p) => p.step)).toEqual([2, 3]);
    expect(resumed.readsDuringSteps).toEqual([]);
    const curve = [...first.points, ...resumed.points];
    expect(resumed.status.points).toEqual(curve);
    expect((await training(store).status()).points).toEqual(curve);
  }, RUNS_TIMEOUT);
});
