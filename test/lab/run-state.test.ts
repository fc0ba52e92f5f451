// Issue 48: "The saved run trains in the retail world" showed from Start to step 3 of a fresh mini-world run: the
// worker's status of no run said retail, and the page filled the starting run's settings without its world. The
// world is now part of the run's one source of truth (src/ui/run-state.ts, workers/lab/training.ts); a warning
// appears only when it is true.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { worldDomain, type WorldName } from '../../src/env/retail';
import { loadRetailBase } from '../../src/env/retail/node';
import { labRequest } from '../../src/method/run-config';
import { MemoryStore } from '../../src/rl/store';
import { pendingRun, runWarnings } from '../../src/ui/run-state';
import type { Progress, TrainRequest, TrainStatus } from '../../src/worker-protocol';
import type { Policy } from '../../workers/lab/load';
import { runProgress, Training } from '../../workers/lab/training';
import { loadTiny, type Tiny } from './helpers';

const REQ: TrainRequest = {
  ...labRequest({ mode: 'real', steps: 1, k: 2, promptsPerStep: 1, rank: 2, seed: 0, maxTurns: 1, maxActTokens: 4, maxRehearseTokens: 4, evalEvery: 0, evalTasks: 1 }),
};
const NO_RUN: TrainStatus = { config: null, start: null, step: 0, total: 0, running: false, points: [], model: '', world: null };

describe('the run and its world: the page side', () => {
  for (const world of ['mini', 'retail'] as const) {
    it(`a fresh run in the ${world} world shows no warning, from Start to its first step`, () => {
      const now = { world, model: 'bundled policy' };
      expect(runWarnings(NO_RUN, now)).toEqual([]);
      const starting = pendingRun(NO_RUN, REQ, world, 'bundled policy');
      expect(starting).toMatchObject({ config: REQ, total: 1, world, model: 'bundled policy', step: 0 });
      expect(runWarnings(starting, now)).toEqual([]);
    });
  }

  it('a saved run of the other world, or of another model, is warned about; with nothing known, nothing is said', () => {
    const saved = pendingRun(NO_RUN, REQ, 'retail', 'bundled retail policy');
    expect(runWarnings(saved, { world: 'mini', model: 'bundled retail policy' })).toEqual(['The saved run trains in the retail world; switch back to it, or reset the run.']);
    expect(runWarnings(saved, { world: 'retail', model: 'picked folder' })).toEqual(['The saved run was trained on “bundled retail policy”; reset it to train the loaded model.']);
    expect(runWarnings(saved, { world: null, model: null })).toEqual([]);
    expect(runWarnings(null, { world: 'mini', model: 'x' })).toEqual([]);
  });
});

describe('the run and its world: the worker side', () => {
  let tiny: Tiny;
  const base = loadRetailBase();
  beforeAll(async () => {
    tiny = await loadTiny();
  });
  afterAll(() => tiny.backend.dispose());

  const inject = (t: Training, store: MemoryStore) => Object.assign(t as unknown as { store: MemoryStore }, { store });

  it('with no run saved the status names no world (it used to say retail)', async () => {
    const t = inject(new Training(), new MemoryStore()) as unknown as Training;
    const st = await t.status();
    expect(st.config).toBeNull();
    expect(st.world).toBeNull();
    expect(runWarnings(st, { world: 'mini', model: 'm' })).toEqual([]);
  });

  it('a run saved before there were worlds trained in the full retail world', async () => {
    const store = new MemoryStore();
    await store.write('lab.json', new TextEncoder().encode(JSON.stringify({ req: REQ, model: 'm' })));
    const t = inject(new Training(), store) as unknown as Training;
    expect((await t.status()).world).toBe('retail');
  });

  for (const world of ['mini', 'retail'] as WorldName[]) {
    it(`a fresh run started in the ${world} world is saved in it: no warning at any point, and one after switching away`, async () => {
      const t = inject(new Training(), new MemoryStore()) as unknown as Training;
      const full = worldDomain(world, base);
      const domain = { ...full, policy: 'You are a retail agent.', definitions: () => full.definitions().slice(0, 1) };
      const policy = { backend: tiny.backend, model: tiny.model, tok: tiny.tok, adapter: tiny.adapter, label: 'tiny', untrained: true } as unknown as Policy;
      const now = { world, model: 'tiny' };
      let page = pendingRun(await t.status(), REQ, world, 'tiny');
      const seen: string[][] = [runWarnings(page, now)];
      const done = await t.start(policy, domain, world, REQ, new AbortController().signal, (p) => {
        page = { ...page, points: [...page.points, p], step: p.step };
        seen.push(runWarnings(page, now));
      }, () => seen.push(runWarnings(page, now)));
      expect(done.world).toBe(world);
      expect(done.step).toBe(1);
      seen.push(runWarnings(done, now));
      expect(seen.length).toBeGreaterThan(2);
      expect(seen.flat()).toEqual([]);
      const other = world === 'mini' ? 'retail' : 'mini';
      expect(runWarnings(done, { world: other, model: 'tiny' })).toEqual([`The saved run trains in the ${world} world; switch back to it, or reset the run.`]);
    });
  }
});

// Issue 48: three silent minutes before the first step (the starting policy's evaluation and fidelity check
// showed no count, an empty bar and no time left).
describe('progress before the first step', () => {
  const base = { steps: 20, perStep: 16, evalTasks: 100, tokens: 0, fidelityCheck: true } as const;

  it('the evaluation counts episodes against the held-out tasks, with its own time left', () => {
    const p = runProgress({ ...base, stepNo: 0, phase: 'held-out evaluation', finished: 37, round: 'round 4, Act: 63 generations', fidelity: null, phaseLeftMs: 42_000 });
    expect(p).toEqual({ phase: expect.stringContaining('before training, part 1 of 2'), done: 37, total: 100, etaMs: 42_000 });
    expect(p.phase).toContain('37 of 100 finished (round 4, Act: 63 generations)');
    expect(p.phase).toContain('then the fidelity check, then step 1 (time left: this part)');
  });

  it('the fidelity check counts rehearsals decoded', () => {
    const waiting = runProgress({ ...base, stepNo: 0, phase: 'held-out fidelity', finished: 0, fidelity: null });
    expect(waiting).toMatchObject({ done: 0, total: 1, etaMs: undefined });
    expect(waiting.phase).toContain('part 2 of 2');
    const p = runProgress({ ...base, stepNo: 0, phase: 'held-out fidelity', finished: 0, fidelity: { done: 120, total: 310 }, phaseLeftMs: 9000 });
    expect(p).toMatchObject({ done: 120, total: 310, etaMs: 9000 });
    expect(p.phase).toContain('120 of 310 rehearsals of the reference calls decoded; then step 1');
  });

  it('without the fidelity check the evaluation is the only part; from step 1 on the bar counts steps', () => {
    expect(runProgress({ ...base, fidelityCheck: false, stepNo: 0, phase: 'held-out evaluation', finished: 0, fidelity: null }).phase).toContain('part 1 of 1');
    const step = runProgress({ ...base, stepNo: 3, phase: 'rollouts', finished: 8, fidelity: null, runLeftMs: 60_000, phaseLeftMs: 1 });
    expect(step).toMatchObject({ done: 2.4, total: 20, etaMs: 60_000 });
    expect(step.phase).toMatch(/^step 3 of 20 · rollouts: 8 of 16 finished/);
  });

  it('a real run reports the starting evaluation as its own counted part', async () => {
    const tiny = await loadTiny();
    try {
      const t = Object.assign(new Training(), { store: new MemoryStore() }) as unknown as Training;
      const full = worldDomain('mini', loadRetailBase());
      const domain = { ...full, policy: 'You are a retail agent.', definitions: () => full.definitions().slice(0, 1) };
      const policy = { backend: tiny.backend, model: tiny.model, tok: tiny.tok, adapter: tiny.adapter, label: 'tiny', untrained: true } as unknown as Policy;
      const seen: Progress[] = [];
      let starting = null;
      await t.start(policy, domain, 'mini', { ...REQ, evalEvery: 1, evalTasks: 3 }, new AbortController().signal, () => undefined, (p) => seen.push(p), 0, () => undefined, (e) => (starting = e));
      expect(starting).not.toBeNull();
      const before = seen.filter((p) => p.phase.startsWith('before training'));
      expect(before.length).toBeGreaterThan(0);
      expect(before.every((p) => /part [12] of 2/.test(p.phase))).toBe(true);
      const evaluation = before.filter((p) => p.phase.includes('held-out evaluation'));
      expect(evaluation.length).toBeGreaterThan(0);
      for (const p of evaluation) {
        expect(p.total).toBe(3);
        expect(p.phase).toContain(`${p.done} of 3 finished`);
      }
      expect(seen.some((p) => p.phase.startsWith('step 1 of 1'))).toBe(true);
    } finally {
      tiny.backend.dispose();
    }
  });
});
