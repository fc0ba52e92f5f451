// A real-interaction budget (GrpoRunConfig.realPrompts) and the simulator's supervised signal
// (observationCoef) on a tiny random-weight model: which rollouts ran where, that the real observations
// become Rehearse rows with the real answer as target and the prompt a rehearsing rollout would build,
// that they train the shared adapter, exact resume, and the refusals of configurations that cannot work.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Backend } from '../../src/engine/backend';
import type { Task } from '../../src/env/domain';
import { formatCall } from '../../src/env/toolcall';
import type { Qwen3Model } from '../../src/model/qwen3';
import { Tokenizer } from '../../src/model/tokenizer';
import { grpoRunConfig, TrainOptionsError, type TrainOptions } from '../../src/rl/grpo-config';
import { GrpoRun, RunConfigError, realEpisodesPerStep, type StepMetrics } from '../../src/rl/run';
import { MemoryStore } from '../../src/rl/store';
import { realObservationRows } from '../../src/rollout/observation-rows';
import { makeRow } from '../../src/rollout/rows';
import { microBatches, rowToSequence, supervisedRows } from '../../src/rl/grpo';
import { AGGREGATIONS } from '../../src/train/batch';
import { buildRehearsePrompt, rehearseTarget } from '../../src/rollout/rehearse-prompt';
import { referenceGrounding, runRollouts } from '../../src/rollout/rollout';
import { calculateOnlyDomain } from '../fixtures/domains';
import { loadTinyPolicy } from '../fixtures/tiny-model';

const domain = calculateOnlyDomain;
const calc = (e: string) => ({ name: 'calculate', arguments: { expression: e } });
const train: Task[] = ['Hi.', '2+2?', 'Hello!', '3+4?'].map((m, i) => ({ id: `t${i}`, userMessages: [m], referenceActions: [calc('2+2')], facts: [], checklist: [] }));
// Every task opens with a scripted call, so a random-weight policy has calls for the environment to answer.
const actScript = (_t: Task, turn: number) => (turn === 0 ? formatCall(calc('2+2')) : undefined);
const hooks = { reward: (ep: { rolloutId: string }) => (ep.rolloutId.endsWith(':0') ? 1 : 0), actScript };

const options = (over: Partial<TrainOptions> = {}): TrainOptions => ({
  mode: 'rehearse', steps: 2, seed: 3, k: 2, promptsPerStep: 3, lr: 1e-2, rank: 2, evalEvery: 0, evalFidelityTokens: 0,
  maxTurns: 2, maxActTokens: 6, maxRehearseTokens: 24,
  maxGroundingChars: 150, maxHistoryChars: 150,
  ...over,
});

let backend: Backend;
let model: Qwen3Model;
let tok: Tokenizer;
beforeAll(async () => {
  ({ backend, model, tok } = await loadTinyPolicy(21));
});
afterAll(() => backend?.dispose());

async function run(o: TrainOptions, store = new MemoryStore(), stop = Infinity): Promise<{ store: MemoryStore; metrics: StepMetrics[] }> {
  const r = await GrpoRun.open(model, tok, domain, { train, eval: [] }, store, grpoRunConfig(o), hooks);
  const metrics: StepMetrics[] = [];
  while (!r.done && metrics.length < stop) metrics.push(await r.trainStep());
  r.free();
  return { store, metrics };
}
const lines = (s: MemoryStore, f: string) => s.text(f).trim().split('\n').map((l) => JSON.parse(l));

describe('a real-interaction budget', () => {
  it('runs the first realPrompts groups of each step in the real environment and rehearses the rest', async () => {
    const { store, metrics } = await run(options({ realPrompts: 1 }));
    const rolls = lines(store, 'rollouts.jsonl');
    for (const step of [1, 2]) {
      const modes = rolls.filter((r) => r.step === step).map((r) => r.mode);
      expect(modes.filter((m) => m === 'real')).toHaveLength(2); // 1 prompt × k 2
      expect(modes.filter((m) => m === 'rehearse')).toHaveLength(4);
    }
    expect(metrics.map((m) => m.realEpisodes)).toEqual([2, 2]);
    expect(realEpisodesPerStep(grpoRunConfig(options({ realPrompts: 1 })))).toBe(2);
    expect(realEpisodesPerStep(grpoRunConfig(options({ mode: 'real' })))).toBe(6);
    expect(realEpisodesPerStep(grpoRunConfig(options()))).toBe(0);
    // Real rollouts carry no Rehearse generation; the rehearsed ones do.
    for (const r of rolls.filter((x) => x.mode === 'real')) expect(r.fidelity).toEqual([]);
    for (const m of metrics) expect(m.rollouts.rows.rehearse).toBeGreaterThan(0);
  });

  it('without a budget, a rehearsing run is what it was (no real rollouts, same bits as before the option)', async () => {
    const a = await run(options());
    const b = await run(options({ realPrompts: 0 }));
    expect(lines(a.store, 'rollouts.jsonl').every((r) => r.mode === 'rehearse')).toBe(true);
    expect(a.store.text('metrics.jsonl').replace(/"wallMs":[\d.e+-]+/g, '')).toBe(b.store.text('metrics.jsonl').replace(/"wallMs":[\d.e+-]+/g, ''));
    expect(grpoRunConfig(options({ realPrompts: 0 }))).not.toHaveProperty('realPrompts');
  });

  it('resumes bit for bit from a checkpoint', async () => {
    const o = options({ realPrompts: 1, observationCoef: 0.5 });
    const whole = await run(o);
    const store = new MemoryStore();
    await run(o, store, 1);
    await run(o, store);
    const last = (s: MemoryStore) => JSON.stringify({ ...lines(s, 'metrics.jsonl').at(-1), wallMs: 0 });
    expect(last(store)).toBe(last(whole.store));
  });

  it('refuses what cannot work, naming the setting', () => {
    const open = (o: TrainOptions) => GrpoRun.open(model, tok, domain, { train, eval: [] }, new MemoryStore(), grpoRunConfig(o), hooks);
    return Promise.all([
      expect(open(options({ mode: 'real', realPrompts: 1 }))).rejects.toThrow(/realPrompts applies to a rehearsing mode/),
      expect(open(options({ realPrompts: 4 }))).rejects.toThrow(/realPrompts must be an integer in \[0, promptsPerStep 3\]/),
      expect(open(options({ observationCoef: 0.5 }))).rejects.toThrow(/observationCoef needs real observations/),
      expect(open(options({ mode: 'frozen-simulator', realPrompts: 1, observationCoef: 0.5 }))).rejects.toThrow(/frozen base rehearses/),
      // A config written by hand (not through the table's checks) is still refused when the run opens.
      expect(GrpoRun.open(model, tok, domain, { train, eval: [] }, new MemoryStore(), { ...grpoRunConfig(options({ mode: 'real' })), observationCoef: -1 }, hooks)).rejects.toThrow(RunConfigError),
    ]).then(() => expect(() => grpoRunConfig(options({ mode: 'real', observationCoef: -1 }))).toThrow(TrainOptionsError));
  });
});

describe('the simulator learns real observations', () => {
  it('turns each answered call of a real rollout into a Rehearse row: the prompt a rollout builds, the real answer as target', async () => {
    const batch = await runRollouts({ model, tokenizer: tok, adapter: null }, domain, train.slice(0, 2), {
      mode: 'real', k: 2, seed: 1, limits: { maxTurns: 2, maxActTokens: 6, maxRehearseTokens: 24 }, actScript,
    });
    const rp = { maxGroundingChars: 150, maxHistoryChars: 150 };
    const rows = await realObservationRows(model, tok, null, domain, batch.rollouts, new Map(train.map((t) => [t.id, t])), { maxRehearseTokens: 24, maxContext: 4096, rehearsePrompt: rp });
    const answered = batch.rollouts.flatMap((r) => r.log.flatMap((t) => t.calls.filter((c) => c.call.name !== '' && c.obs !== null).map((c) => ({ r, t, c }))));
    expect(answered.length).toBeGreaterThanOrEqual(4);
    expect(rows).toHaveLength(answered.length);
    answered.forEach(({ r, t, c }, i) => {
      const task = train.find((x) => x.id === r.taskId)!;
      const prompt = buildRehearsePrompt({ tools: domain.definitions(), grounding: referenceGrounding(domain, task), history: r.messages.slice(0, t.history), call: c.call }, rp).text;
      expect(tok.decode([...rows[i].promptTokens])).toBe(tok.decode(tok.encode(prompt)));
      expect([...rows[i].responseTokens]).toEqual(tok.encode(rehearseTarget(c.obs!)).slice(0, 24));
      expect(rows[i].role).toBe('rehearse');
      expect([...rows[i].oldLogprobs].every((x) => Number.isFinite(x) && x <= 0)).toBe(true);
    });
    // The first turn's history is the user's message alone.
    expect(batch.rollouts[0].messages.slice(0, batch.rollouts[0].log[0].history)).toEqual([{ role: 'user', content: 'Hi.' }]);
    await expect(realObservationRows(model, tok, null, domain, [{ ...batch.rollouts[0], mode: 'rehearse' }], new Map(train.map((t) => [t.id, t])), { maxRehearseTokens: 24, maxContext: 4096 })).rejects.toThrow(/not real/);
  });

  it('trains the shared adapter on them in a budgeted EnvACE run, and the Act adapter in real mode', async () => {
    const envace = await run(options({ realPrompts: 1, observationCoef: 0.5 }));
    const plain = await run(options({ realPrompts: 1 }));
    envace.metrics.forEach((m, i) => {
      expect(m.observationRows).toBeGreaterThanOrEqual(2);
      expect(m.updates[0].target).toBe('shared');
      expect(m.updates[0].rows).toBe(plain.metrics[i].updates[0].rows + m.observationRows!);
    });
    const real = await run(options({ mode: 'real', observationCoef: 0.5 }));
    for (const m of real.metrics) {
      expect(m.observationRows).toBeGreaterThanOrEqual(6);
      expect(m.updates.map((u) => u.target)).toEqual(['act']);
      expect(m.updates[0].rows).toBe(m.rollouts.rows.act + m.observationRows!);
    }
  });
});

describe('the observation term raises the likelihood of the real observations', () => {
  it('after one update on those rows alone, each row is more likely under the adapter than before', async () => {
    const { createLoraAdapter } = await import('../../src/model/lora');
    const { Trainer } = await import('../../src/train/trainer');
    const { grpoUpdate } = await import('../../src/rl/grpo');
    const { logprobs } = await import('../../src/model/score');
    const batch = await runRollouts({ model, tokenizer: tok, adapter: null }, domain, train.slice(0, 2), {
      mode: 'real', k: 2, seed: 1, limits: { maxTurns: 2, maxActTokens: 6, maxRehearseTokens: 24 }, actScript,
    });
    const adapter = createLoraAdapter(backend, model.config, { name: 'obs', rank: 2, alpha: 4, seed: 3 });
    const trainer = new Trainer(model, { mode: 'lora', adapter, schedule: { kind: 'constant', lr: 1e-2 }, weightDecay: 0, maxGradNorm: 1, loss: { kind: 'grpo', clipEps: 0.2, dualClip: 3, klCoef: 0 } });
    const rows = await realObservationRows(model, tok, adapter, domain, batch.rollouts, new Map(train.map((t) => [t.id, t])), { maxRehearseTokens: 24, maxContext: 4096, rehearsePrompt: { maxGroundingChars: 150, maxHistoryChars: 150 } });
    const score = async () =>
      (await logprobs(model, rows.map((r) => ({ tokens: [...r.promptTokens, ...r.responseTokens], start: r.promptTokens.length })), { adapter })).map((lp) => lp.reduce((a, x) => a + x, 0));
    const before = await score();
    // No GRPO rows (no rollouts' rows carry an advantage here: a batch of only Act rows in real mode would; drop them).
    const rep = await grpoUpdate({ act: trainer }, { ...batch, rows: [] }, 'real', { supervised: { rows, advantage: 0.5 } });
    expect(rep.steps.map((s) => s.rows)).toEqual([rows.length]);
    const after = await score();
    const up = after.filter((a, i) => a > before[i]).length;
    expect(up).toBe(rows.length);
    trainer.free();
    adapter.free(backend);
  });
});

describe('the observation rows weigh as observationWeighting says, whatever the loss aggregation', () => {
  // Three targets of 2, 10 and 40 tokens: a short error beside long results, as the real observations come.
  const row = (n: number, id: number) =>
    makeRow({ role: 'rehearse', promptId: `p${id}`, rolloutId: `r${id}`, turn: 0, promptTokens: [1, 2, 3 + id], generated: { tokens: Array.from({ length: n }, (_, i) => 5 + (i % 7)), logprobs: new Array(n).fill(-1) } });
  const rows = [row(2, 0), row(10, 1), row(40, 2)];
  // The loss weight each token of each row ends with: the packed batch's weight times the row's advantage.
  const tokenWeights = (weighting: 'token' | 'row', aggregation: (typeof AGGREGATIONS)[number]) => {
    const sup = supervisedRows(rows, 0.5, weighting, aggregation);
    expect(sup.reduce((s, r) => s + r.advantage!, 0) / sup.length).toBeCloseTo(0.5, 12);
    const [b] = microBatches(sup.map((r) => rowToSequence(r, r.advantage!)), 1 << 16, aggregation, false);
    const perRow: number[][] = sup.map(() => []);
    let at = 0;
    sup.forEach((r, i) => {
      const n = r.promptTokens.length + r.responseTokens.length;
      for (let t = at; t < at + n; t++) if (b.weight[t] > 0) perRow[i].push(b.weight[t] * r.advantage!);
      at += n;
    });
    return perRow;
  };
  for (const aggregation of AGGREGATIONS) {
    it(`token: every target token alike (${aggregation})`, () => {
      const w = tokenWeights('token', aggregation).flat();
      expect(w.length).toBe(52);
      for (const x of w) expect(x / w[0]).toBeCloseTo(1, 6); // float32 weights
    });
    it(`row: every row's tokens sum alike (${aggregation})`, () => {
      const sums = tokenWeights('row', aggregation).map((ws) => ws.reduce((a, x) => a + x, 0));
      for (const s of sums) expect(s / sums[0]).toBeCloseTo(1, 6);
    });
  }
});
