// GRPO training in the worker: a src/rl/run.ts GrpoRun over the loaded policy, its files in OPFS so the
// run survives a reload (every step is checkpointed; Start after a reload resumes from the last one),
// stepped one step at a time so the page can plot each step and pause between steps.
import type { Domain } from '../../src/env/domain';
import { loadPeftAdapter, adapterToPeftFiles } from '../../src/model/peft';
import { MemorySource } from '../../src/model/source';
import { grpoRunConfig, splitTasks, stepLine } from '../../src/rl/grpo-trainer';
import { GrpoRun, type EvalMetrics, type StepMetrics } from '../../src/rl/run';
import { MemoryStore, type RunStore } from '../../src/rl/store';
import type { NamedFile, ProgressFn, TrainPoint, TrainRequest, TrainStatus } from '../../src/worker-protocol';
import type { Policy } from './load';
import { OpfsStore } from './opfs-store';

const DIR = 'lab-run';
const enc = (o: unknown) => new TextEncoder().encode(JSON.stringify(o));
const lines = (b: Uint8Array | null) => (b ? new TextDecoder().decode(b).split('\n').filter((l) => l.trim()) : []);
const finite = (x: number) => (Number.isFinite(x) ? x : null);
const mean = (xs: number[]) => (xs.length ? xs.reduce((a, v) => a + v, 0) / xs.length : null);

export function toPoint(m: StepMetrics, total: number, ev: EvalMetrics | undefined): TrainPoint {
  const loss = (t: string) => m.updates.find((u) => u.target === t)?.loss ?? null;
  return {
    step: m.step,
    reward: m.rollouts.meanReward,
    success: m.rollouts.success,
    rowsAct: m.rollouts.rows.act,
    rowsRehearse: m.rollouts.rows.rehearse,
    fidelityF1: finite(m.rollouts.fidelity.f1),
    loss: { act: loss('act'), rehearse: loss('rehearse'), shared: loss('shared') },
    kl: mean(m.updates.map((u) => u.kl)),
    clipFrac: mean(m.updates.map((u) => u.clipFrac)),
    heldOutSuccess: ev ? ev.success : null,
    line: stepLine(m, total),
    wallMs: m.wallMs,
  };
}

export class Training {
  private store: RunStore | null = null;
  private pauseAsked = false;
  running = false;

  private async open(): Promise<RunStore> {
    this.store ??= (await OpfsStore.open(DIR)) ?? new MemoryStore();
    return this.store;
  }

  async status(): Promise<TrainStatus> {
    const st = await this.open();
    const meta = await st.read('lab.json');
    const saved = meta ? (JSON.parse(new TextDecoder().decode(meta)) as { req: TrainRequest; model: string }) : null;
    // After a resume a step may be logged twice: the last line wins.
    const steps = new Map<number, StepMetrics>();
    for (const l of lines(await st.read('metrics.jsonl'))) {
      const m = JSON.parse(l) as StepMetrics;
      steps.set(m.step, m);
    }
    const evals = new Map<number, EvalMetrics>();
    for (const l of lines(await st.read('eval.jsonl'))) {
      const e = JSON.parse(l) as EvalMetrics;
      evals.set(e.step, e);
    }
    const total = saved?.req.steps ?? 0;
    const points = [...steps.values()].sort((a, b) => a.step - b.step).map((m) => toPoint(m, total, evals.get(m.step)));
    return { config: saved?.req ?? null, step: points.length ? points[points.length - 1].step : 0, total, running: this.running, points, model: saved?.model ?? '' };
  }

  async files(): Promise<NamedFile[]> {
    const st = await this.open();
    const out: NamedFile[] = [];
    for (const name of ['run.json', 'metrics.jsonl', 'rollouts.jsonl', 'eval.jsonl']) {
      const bytes = await st.read(name);
      if (bytes) out.push({ name, bytes });
    }
    return out;
  }

  async reset(): Promise<void> {
    if (this.running) throw new Error('pause the run first');
    this.store = null;
    await OpfsStore.remove(DIR).catch(() => undefined);
  }

  pause(): void {
    this.pauseAsked = true;
  }

  /**
   * Runs steps until the run is done or paused. The trained adapter becomes the policy's adapter (for the
   * stepper, the group view and export). Only the shared/Act adapter is kept in per-role mode.
   */
  async start(policy: Policy, domain: Domain, req: TrainRequest, signal: AbortSignal, onPoint: (p: TrainPoint) => void, onProgress: ProgressFn): Promise<TrainStatus> {
    if (this.running) throw new Error('a run is already going');
    const st = await this.open();
    const meta = await st.read('lab.json');
    if (meta) {
      const saved = JSON.parse(new TextDecoder().decode(meta)) as { req: TrainRequest; model: string };
      if (saved.model !== policy.label) throw new Error(`the saved run was trained on "${saved.model}", not on the loaded model: reset the run first`);
      req = saved.req; // a resumed run keeps its own settings
    } else await st.write('lab.json', enc({ req, model: policy.label }));
    const config = grpoRunConfig({
      mode: req.mode,
      advantage: req.grouping,
      baseline: req.baseline,
      steps: req.steps,
      seed: req.seed,
      k: req.k,
      promptsPerStep: req.promptsPerStep,
      lr: req.lr,
      rank: req.rank,
      evalEvery: req.evalEvery,
      limits: { maxTurns: req.maxTurns, maxActTokens: req.maxNewTokens, maxRehearseTokens: 4 * req.maxNewTokens },
      checkpointEvery: 1,
    });
    const tasks = splitTasks(domain, { train: 16, eval: req.evalEvery > 0 ? 4 : 0, seed: req.seed });
    let evalSeen: EvalMetrics | undefined;
    const run = await GrpoRun.open(policy.model, policy.tok, domain, tasks, st, config, { signal });
    this.running = true;
    this.pauseAsked = false;
    try {
      while (!run.done && !this.pauseAsked) {
        if (signal.aborted) throw new DOMException('cancelled', 'AbortError');
        onProgress({ phase: `training step ${run.step + 1} of ${config.steps}`, done: run.step, total: config.steps });
        const evalsBefore = lines(await st.read('eval.jsonl')).length;
        const m = await run.trainStep();
        const evs = lines(await st.read('eval.jsonl'));
        evalSeen = evs.length > evalsBefore ? (JSON.parse(evs[evs.length - 1]) as EvalMetrics) : undefined;
        onPoint(toPoint(m, config.steps, evalSeen));
      }
      // Hand the trained adapter to the policy: a copy through its PEFT files (the run frees its own).
      const files = await adapterToPeftFiles(policy.backend, run.actAdapter);
      const trained = await loadPeftAdapter(policy.backend, policy.model.config, new MemorySource(files), 'trained');
      policy.adapter.free(policy.backend);
      policy.adapter = trained;
    } finally {
      run.free();
      this.running = false;
    }
    return this.status();
  }
}
