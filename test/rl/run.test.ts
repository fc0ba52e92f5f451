// A GRPO training run on a tiny random-weight model (CPU fast path, one thread): steps, logs, evaluation,
// checkpoints, and exact resume (a run interrupted after step 1 and resumed ends bit for bit where the
// uninterrupted run ends). The reward is a test-chosen function so that advantages are non-zero.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Backend } from '../../src/engine/backend';
import type { Task } from '../../src/env/domain';
import type { Qwen3Model } from '../../src/model/qwen3';
import { Tokenizer } from '../../src/model/tokenizer';
import { GrpoRun, RunConfigError, type GrpoRunConfig } from '../../src/rl/run';
import { MemoryStore } from '../../src/rl/store';
import type { RolloutDomain } from '../../src/rollout/rollout';
import { calculateOnlyDomain } from '../fixtures/domains';
import { loadTinyPolicy } from '../fixtures/tiny-model';

const domain: RolloutDomain = calculateOnlyDomain;
const calc = { name: 'calculate', arguments: { expression: '2+2' } };
const train: Task[] = ['Hi.', '2+2?', 'Hello!'].map((m, i) => ({ id: `t${i}`, userMessages: [m], referenceActions: [calc], facts: [], checklist: [] }));
const evalTasks: Task[] = [{ id: 'e0', userMessages: ['3*3?'], referenceActions: [{ name: 'calculate', arguments: { expression: '3*3' } }], facts: ['9'], checklist: [] }];
const hooks = { reward: (ep: { rolloutId: string }) => (ep.rolloutId.endsWith(':0') ? 1 : 0) };

const config: GrpoRunConfig = {
  mode: 'rehearse',
  steps: 2,
  promptsPerStep: 2,
  k: 2,
  seed: 17,
  limits: { maxTurns: 1, maxActTokens: 6, maxRehearseTokens: 6 },
  rehearsePrompt: { maxGroundingChars: 200, maxHistoryChars: 200 },
  lora: { rank: 2, alpha: 4 },
  lr: 1e-2,
  evalEvery: 2,
  evalFidelityTokens: 4,
};

let backend: Backend;
let model: Qwen3Model;
let tok: Tokenizer;

beforeAll(async () => {
  ({ backend, model, tok } = await loadTinyPolicy(13));
});
afterAll(() => backend?.dispose());

const open = (store: MemoryStore, c = config) => GrpoRun.open(model, tok, domain, { train, eval: evalTasks }, store, c, hooks);
const withoutTime = (jsonl: string) => jsonl.trim().split('\n').map((l) => ({ ...JSON.parse(l), wallMs: undefined }));

describe('GrpoRun', () => {
  it('a resumed run equals the uninterrupted one bit for bit', async () => {
    const a = new MemoryStore();
    const runA = await open(a);
    await runA.run();
    expect(runA.step).toBe(2);
    runA.free();

    const b = new MemoryStore();
    const first = await open(b);
    await first.trainStep();
    first.free(); // "crash" after the step-1 checkpoint
    const resumed = await open(b, { ...config, seed: 999 }); // the saved config wins
    expect(resumed.step).toBe(1);
    expect(resumed.config.seed).toBe(17);
    await resumed.run();
    resumed.free();

    for (const f of ['ckpt/2/adapter/adapter_model.safetensors', 'ckpt/2/optimizer.safetensors', 'run.json'])
      expect(b.files.get(f), f).toEqual(a.files.get(f));
    expect(withoutTime(b.text('metrics.jsonl'))).toEqual(withoutTime(a.text('metrics.jsonl')));
    expect(b.text('rollouts.jsonl')).toBe(a.text('rollouts.jsonl'));
    expect(b.text('eval.jsonl')).toBe(a.text('eval.jsonl'));

    // The run trained: the adapter moved between checkpoints, every update applied, nothing clipped at
    // the first epoch of each batch (old log-probs are the sampler's).
    expect(a.files.get('ckpt/1/adapter/adapter_model.safetensors')).not.toEqual(a.files.get('ckpt/2/adapter/adapter_model.safetensors'));
    const metrics = withoutTime(a.text('metrics.jsonl'));
    expect(metrics.map((m) => m.step)).toEqual([1, 2]);
    for (const m of metrics) {
      expect(m.tasks).toHaveLength(2);
      expect(m.rollouts.rollouts).toBe(4);
      expect(m.updates).toEqual([expect.objectContaining({ target: 'shared', applied: true, clipFrac: 0 })]);
      expect(m.advantage.meanAbs).toBeCloseTo(0.5, 6);
    }
    // Evaluation after step 2 (every 2 steps; also the last), in the real environment, with fidelity on reference calls.
    const evals = a.text('eval.jsonl').trim().split('\n').map((l) => JSON.parse(l));
    expect(evals.map((e) => e.step)).toEqual([2]);
    expect(evals[0].fidelity).toMatchObject({ steps: 1, invalid: 1 });
    // These held-out tasks name no family: no per-family breakdown is written.
    expect(evals[0].byFamily).toBeUndefined();
    const run = JSON.parse(a.text('run.json'));
    expect(run).toMatchObject({ step: 2, checkpoint: 'ckpt/2' });
  });

  it('signal task sampling and two epochs per batch: saved in run.json, resumed bit for bit', async () => {
    const fams = ['lookup', 'lookup', 'cancel'];
    const famTrain = train.map((t, i) => ({ ...t, family: fams[i] }));
    const c: GrpoRunConfig = { ...config, steps: 3, taskSampling: 'signal', updateEpochs: 2, evalEvery: 0 };
    const openF = (store: MemoryStore) => GrpoRun.open(model, tok, domain, { train: famTrain, eval: evalTasks }, store, c, hooks);
    const a = new MemoryStore();
    const runA = await openF(a);
    await runA.run();
    runA.free();
    const b = new MemoryStore();
    const first = await openF(b);
    await first.trainStep();
    first.free();
    const resumed = await openF(b);
    await resumed.run();
    resumed.free();
    expect(b.files.get('ckpt/3/adapter/adapter_model.safetensors')).toEqual(a.files.get('ckpt/3/adapter/adapter_model.safetensors'));
    expect(withoutTime(b.text('metrics.jsonl'))).toEqual(withoutTime(a.text('metrics.jsonl')));

    const metrics = withoutTime(a.text('metrics.jsonl'));
    // Before any episode every family counts as p = 1/2: weight floor + 1 - 2 (1/2)^k with k = 2.
    expect(metrics[0].familyWeights).toEqual({ lookup: 0.05 + 0.5, cancel: 0.05 + 0.5 });
    // The counts in run.json are this run's episodes: k = 2 rollouts of 2 tasks per step, 3 steps.
    const state = JSON.parse(a.text('run.json'));
    const stats = state.familyStats as Record<string, { episodes: number; reward: number }>;
    expect(Object.values(stats).reduce((n, s) => n + s.episodes, 0)).toBe(12);
    const drawn = metrics.flatMap((m) => m.tasks as string[]);
    for (const f of ['lookup', 'cancel']) expect(stats[f]?.episodes ?? 0).toBe(2 * drawn.filter((id) => fams[Number(id.slice(1))] === f).length);
    expect(state.config).toMatchObject({ taskSampling: 'signal', updateEpochs: 2 });
    for (const m of metrics) expect(m.updates).toEqual([expect.objectContaining({ applied: true })]);
  });

  it('the loss aggregation reaches the update: the same rollouts, other weights; recorded in run.json only when not the default', async () => {
    const firstStep = async (c: GrpoRunConfig) => {
      const store = new MemoryStore();
      const run = await open(store, { ...c, mode: 'real', steps: 1, k: 3, evalEvery: 0, limits: { ...c.limits, maxActTokens: 12 } });
      await run.trainStep();
      run.free();
      return { rollouts: store.text('rollouts.jsonl'), update: withoutTime(store.text('metrics.jsonl'))[0].updates[0], config: JSON.parse(store.text('run.json')).config };
    };
    const byRow = await firstStep(config);
    const byToken = await firstStep({ ...config, lossAggregation: 'token-mean' });
    const bySum = await firstStep({ ...config, lossAggregation: 'seq-mean-token-sum' });
    // The adapter starts at zero, so the step's samples cannot depend on how their losses will be summed.
    expect(byToken.rollouts).toBe(byRow.rollouts);
    expect(bySum.rollouts).toBe(byRow.rollouts);
    expect(byToken.update.applied && byRow.update.applied && bySum.update.applied).toBe(true);
    // The random tiny policy writes every Act row to its 12-token cap: with rows of one length, token-mean is
    // seq-mean-token-mean exactly, and seq-mean-token-sum is it times 12 (before clipping).
    expect(byRow.update.tokens).toBe(12 * byRow.update.rows);
    expect(byToken.update.gradNorm).toBe(byRow.update.gradNorm);
    expect(bySum.update.gradNorm / byRow.update.gradNorm).toBeCloseTo(12, 4);
    expect(byRow.config.lossAggregation).toBeUndefined();
    expect(byToken.config.lossAggregation).toBe('token-mean');
  });

  it('topP reaches the training rollouts: a nucleus of one token makes the K samples of a prompt alike', async () => {
    const texts = async (topP: number) => {
      const store = new MemoryStore();
      const run = await open(store, { ...config, mode: 'real', steps: 1, k: 3, evalEvery: 0, topP });
      await run.trainStep();
      run.free();
      const byTask = new Map<string, Set<string>>();
      for (const l of store.text('rollouts.jsonl').trim().split('\n')) {
        const r = JSON.parse(l);
        const set = byTask.get(r.taskId) ?? new Set<string>();
        set.add(JSON.stringify(r.steps ?? r.turns ?? r));
        byTask.set(r.taskId, set);
      }
      return [...byTask.values()].map((v) => v.size);
    };
    expect(await texts(1e-6)).toEqual([1, 1]);
    expect(Math.max(...(await texts(1)))).toBeGreaterThan(1);
  });

  it('greedyMember decodes the first rollout of each group greedily and leaves the other K - 1 as they were', async () => {
    const rollouts = async (o: Partial<GrpoRunConfig>) => {
      const store = new MemoryStore();
      const run = await open(store, { ...config, mode: 'real', steps: 1, k: 3, evalEvery: 0, ...o });
      await run.trainStep();
      run.free();
      const rs = store.text('rollouts.jsonl').trim().split('\n').map((l) => JSON.parse(l));
      return { byId: new Map(rs.map((r) => [r.rolloutId, JSON.stringify(r.steps)])), config: JSON.parse(store.text('run.json')).config };
    };
    const sampled = await rollouts({});
    const greedyGroups = await rollouts({ greedyMember: true });
    // A nucleus of one token is the argmax at every step: every rollout decoded greedily.
    const argmax = await rollouts({ topP: 1e-6 });
    const ids = [...sampled.byId.keys()];
    expect(ids).toHaveLength(6);
    for (const id of ids) {
      if (id.endsWith(':0')) expect(greedyGroups.byId.get(id), id).toBe(argmax.byId.get(id));
      else expect(greedyGroups.byId.get(id), id).toBe(sampled.byId.get(id));
    }
    // The sampled first rollouts differ from the greedy ones somewhere, or the check above shows nothing.
    expect(ids.filter((id) => id.endsWith(':0')).some((id) => sampled.byId.get(id) !== argmax.byId.get(id))).toBe(true);
    expect(greedyGroups.config.greedyMember).toBe(true);
    expect(sampled.config.greedyMember).toBeUndefined();
    await expect(open(new MemoryStore(), { ...config, k: 1, greedyMember: true })).rejects.toThrow(/greedy member needs k >= 2/);
  });

  it('the reward rule reaches the training rollouts: the same reply scores 0 under the verifier and partial credit under the checklist', async () => {
    // Every Act turn is the same scripted reply: no write (the database is right), the fact unstated.
    const factTrain: Task[] = train.map((t) => ({ ...t, facts: ['zebra'], checklist: [{ kind: 'fact', text: 'zebra', weight: 1 }, { kind: 'no_forbidden_writes', weight: 1 }] }));
    const rewards = async (reward: GrpoRunConfig['reward']) => {
      const store = new MemoryStore();
      const run = await GrpoRun.open(model, tok, domain, { train: factTrain, eval: [] }, store, { ...config, mode: 'real', steps: 1, evalEvery: 0, ...(reward ? { reward } : {}) }, { actScript: () => 'Hello, how can I help?' });
      await run.trainStep();
      run.free();
      expect(JSON.parse(store.text('run.json')).config.reward).toBe(reward);
      return store.text('rollouts.jsonl').trim().split('\n').map((l) => JSON.parse(l).reward as number);
    };
    expect(await rewards(undefined)).toEqual([0, 0, 0, 0]);
    expect(await rewards('checklist')).toEqual([0.5, 0.5, 0.5, 0.5]);
  });

  it('breaks held-out success down per task family when the tasks name one', async () => {
    const fam = (id: string, family: string): Task => ({ ...evalTasks[0], id, family });
    const store = new MemoryStore();
    const run = await GrpoRun.open(model, tok, domain, { train, eval: [fam('e0', 'lookup'), fam('e1', 'lookup'), fam('e2', 'cancel')] }, store, { ...config, evalFidelityTokens: 0 }, hooks);
    const m = await run.evaluate();
    run.free();
    expect(m.byFamily).toEqual({ cancel: { tasks: 1, success: expect.any(Number) }, lookup: { tasks: 2, success: expect.any(Number) } });
    const solved = Object.values(m.byFamily!).reduce((a, g) => a + g.success * g.tasks, 0);
    expect(solved / 3).toBeCloseTo(m.success, 9);
    expect(JSON.parse(store.text('eval.jsonl').trim()).byFamily).toEqual(m.byFamily);
  });

  it('evalFidelityTasks: the fidelity check rehearses the reference calls of the first N held-out tasks only', async () => {
    const two = (id: string, calls: number): Task => ({ ...evalTasks[0], id, referenceActions: Array.from({ length: calls }, () => evalTasks[0].referenceActions[0]) });
    const eval3 = [two('e0', 1), two('e1', 2), two('e2', 2)];
    const measure = async (n: number) => {
      const run = await GrpoRun.open(model, tok, domain, { train, eval: eval3 }, new MemoryStore(), { ...config, evalFidelityTasks: n }, hooks);
      const m = await run.evaluate();
      run.free();
      return m;
    };
    const [all, first, firstTwo] = [await measure(0), await measure(1), await measure(2)];
    expect([all.fidelity!.steps, first.fidelity!.steps, firstTwo.fidelity!.steps]).toEqual([5, 1, 3]);
    // The episodes are the evaluation's all the same.
    expect(first.success).toBe(all.success);
  });

  it('per-role: two adapters and two optimizer states are checkpointed and restored', async () => {
    const c: GrpoRunConfig = { ...config, mode: 'per-role', steps: 2, promptsPerStep: 1, evalEvery: 0 };
    const s = new MemoryStore();
    const r1 = await open(s, c);
    await r1.trainStep();
    r1.free();
    for (const f of ['adapter/adapter_model.safetensors', 'adapter-rehearse/adapter_model.safetensors', 'optimizer.safetensors', 'optimizer-rehearse.safetensors'])
      expect(s.files.has(`ckpt/1/${f}`), f).toBe(true);
    // The two adapters start from different seeds.
    expect(s.files.get('ckpt/1/adapter/adapter_model.safetensors')).not.toEqual(s.files.get('ckpt/1/adapter-rehearse/adapter_model.safetensors'));
    const saved = new Map(s.files);
    const r2 = await open(s, c);
    expect(r2.rehearseAdapter).not.toBeNull();
    await r2.checkpoint(); // re-saving what was loaded gives the same bytes
    for (const f of ['adapter/adapter_model.safetensors', 'adapter-rehearse/adapter_model.safetensors', 'optimizer.safetensors', 'optimizer-rehearse.safetensors'])
      expect(s.files.get(`ckpt/1/${f}`), f).toEqual(saved.get(`ckpt/1/${f}`));
    await r2.run();
    expect(r2.step).toBe(2);
    r2.free();
  });

  it('a short run of every mode works', async () => {
    for (const mode of ['real', 'frozen-simulator', 'rehearse', 'per-role'] as const) {
      const s = new MemoryStore();
      const r = await open(s, { ...config, mode, steps: 1, promptsPerStep: 1, evalEvery: 0 });
      const m = await r.trainStep();
      r.free();
      const targets = m.updates.map((u) => u.target);
      if (mode === 'rehearse') expect(targets).toEqual(['shared']);
      else if (mode === 'per-role') expect(targets[0]).toBe('act'); // 'rehearse' too if the policy made a call
      else expect(targets).toEqual(['act']);
      expect(m.updates.every((u) => u.applied)).toBe(true);
      expect(JSON.parse(s.text('run.json'))).toMatchObject({ step: 1, config: { mode } });
    }
  });

  it('refuses bad configurations and steps past the end', async () => {
    await expect(open(new MemoryStore(), { ...config, k: 0 })).rejects.toThrow(RunConfigError);
    await expect(open(new MemoryStore(), { ...config, lr: 0 })).rejects.toThrow(RunConfigError);
    await expect(open(new MemoryStore(), { ...config, topP: 1.5 })).rejects.toThrow(/topP/);
    await expect(open(new MemoryStore(), { ...config, updateEpochs: 0 })).rejects.toThrow(/updateEpochs/);
    await expect(open(new MemoryStore(), { ...config, lossAggregation: 'sum' as never })).rejects.toThrow(/lossAggregation/);
    await expect(open(new MemoryStore(), { ...config, taskSampling: 'hardest' as never })).rejects.toThrow(/taskSampling/);
    await expect(GrpoRun.open(model, tok, domain, { train: [] }, new MemoryStore(), config)).rejects.toThrow(RunConfigError);
    const s = new MemoryStore();
    const r = await open(s, { ...config, steps: 1, evalEvery: 0 });
    await r.run();
    await expect(r.trainStep()).rejects.toThrow(RunConfigError);
    r.free();
  });
});
