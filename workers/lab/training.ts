// GRPO training in the worker: a src/rl/run.ts GrpoRun over the loaded policy, its files in OPFS so the
// run survives a reload (every step is checkpointed; Start after a reload resumes from the last one),
// stepped one step at a time so the page can plot each step and pause between steps. Progress inside a
// step names its phase (rollouts, update, checkpoint, held-out evaluation) with counts and an estimate of
// the time left; a finished run can be extended by more steps (it continues from its last checkpoint).
import type { Domain } from '../../src/env/domain';
import { loadPeftAdapter, adapterToPeftFiles } from '../../src/model/peft';
import { MemorySource } from '../../src/model/source';
import { effectiveGroups, trainedRoles } from '../../src/method/modes';
import { labRequest, setting } from '../../src/method/run-config';
import { grpoRunConfig, splitTasks, stepLine } from '../../src/rl/grpo-config';
import { baseEvalKey, baseEvalName, baseEvaluation, parseBaseEvalRecord } from '../../src/rl/base-eval';
import { GrpoRun, type EvalMetrics, type RunPhase, type StepMetrics } from '../../src/rl/run';
import { MemoryStore, type RunStore } from '../../src/rl/store';
import type { HeldOutEval, NamedFile, Progress, ProgressFn, TrainPoint, TrainRequest, TrainStatus } from '../../src/worker-protocol';
import { RoundEta } from '../../src/util/eta';
import type { Policy } from './load';
import { OpfsStore } from './opfs-store';

const DIR = 'lab-run';
/** Base evaluations kept for reuse (src/rl/base-eval.ts), one file per key; beside the run, so a reset keeps them. */
const BASE_DIR = 'lab-base-evals';
const enc = (o: unknown) => new TextEncoder().encode(JSON.stringify(o));
const lines = (b: Uint8Array | null) => (b ? new TextDecoder().decode(b).split('\n').filter((l) => l.trim()) : []);
const finite = (x: number) => (Number.isFinite(x) ? x : null);
const mean = (xs: number[]) => (xs.length ? xs.reduce((a, v) => a + v, 0) / xs.length : null);

interface Saved {
  req: TrainRequest;
  model: string;
  /** Absent in runs saved before there were worlds: those trained in the full retail world. */
  world?: string;
}

/** A step's rollouts as rollouts.jsonl holds them (the fields the spread count needs). */
interface LoggedRollout {
  step: number;
  promptId: string;
  reward: number;
}

/**
 * How many GRPO groups of a step had a non-zero reward spread: a group whose rollouts all scored the same
 * has every advantage 0 and teaches nothing. Groups are (prompt × role) as the run grouped them: role-wise
 * has an Act and a Rehearse group per prompt (both see the same rollout rewards), pooled and standard one.
 */
export function spreadOf(rollouts: readonly LoggedRollout[], groupsPerPrompt: number): { prompts: number; promptsWithSpread: number; groups: number; groupsWithSpread: number } {
  const byPrompt = new Map<string, number[]>();
  for (const r of rollouts) (byPrompt.get(r.promptId) ?? byPrompt.set(r.promptId, []).get(r.promptId)!).push(r.reward);
  const prompts = byPrompt.size;
  const promptsWithSpread = [...byPrompt.values()].filter((rs) => Math.max(...rs) - Math.min(...rs) > 1e-9).length;
  return { prompts, promptsWithSpread, groups: prompts * groupsPerPrompt, groupsWithSpread: promptsWithSpread * groupsPerPrompt };
}

export function toPoint(m: StepMetrics, total: number, ev: EvalMetrics | undefined, rollouts: readonly LoggedRollout[], groupsPerPrompt: number): TrainPoint {
  const loss = (t: string) => m.updates.find((u) => u.target === t)?.loss ?? null;
  const spread = spreadOf(rollouts, groupsPerPrompt);
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
    heldOutFidelityExact: ev?.fidelity ? finite(ev.fidelity.exact) : null,
    heldOutFidelityF1: ev?.fidelity ? finite(ev.fidelity.f1) : null,
    heldOutByFamily: ev?.byFamily ?? null,
    ...spread,
    gradNorm: mean(m.updates.map((u) => u.gradNorm)),
    line: stepLine(m, total),
    wallMs: m.wallMs,
  };
}

const heldOutEval = (e: EvalMetrics): HeldOutEval => ({ step: e.step, success: e.success, fidelityExact: e.fidelity ? finite(e.fidelity.exact) : null, byFamily: e.byFamily ?? null, reused: e.reused ?? null });

/** The run's logs that make its curve. */
const CURVE_LOGS = ['metrics.jsonl', 'eval.jsonl', 'rollouts.jsonl'] as const;

/**
 * The run's curve in memory: every step, held-out evaluation and rollout line of its logs, by step. Read from
 * the logs once when the run is opened (Curve.read: a status after a reload, a Start that resumes), then kept
 * up to date with the lines the run appends (curveStore), so drawing a step's point reads no storage. After a
 * resume a step may be logged twice: the last line wins, in the logs as read and as appended alike.
 */
export class Curve {
  private readonly steps = new Map<number, StepMetrics>();
  private readonly evals = new Map<number, EvalMetrics>();
  private readonly rolls = new Map<number, Map<string, LoggedRollout>>();

  static async read(st: RunStore): Promise<Curve> {
    const c = new Curve();
    for (const name of CURVE_LOGS) for (const l of lines(await st.read(name))) c.add(name, l);
    return c;
  }

  /** One line appended to one of the run's files (lines of other files are not the curve's). */
  add(name: string, line: string): void {
    if (name === 'metrics.jsonl') {
      const m = JSON.parse(line) as StepMetrics;
      this.steps.set(m.step, m);
    } else if (name === 'eval.jsonl') {
      const e = JSON.parse(line) as EvalMetrics;
      this.evals.set(e.step, e);
    } else if (name === 'rollouts.jsonl') {
      // Only what a point needs of a rollout (its line holds the whole episode).
      const { step, promptId, reward, rolloutId } = JSON.parse(line) as LoggedRollout & { rolloutId: string };
      (this.rolls.get(step) ?? this.rolls.set(step, new Map()).get(step)!).set(rolloutId, { step, promptId, reward });
    }
  }

  /** The starting policy's held-out evaluation (step 0), when the run has one. */
  start(): HeldOutEval | null {
    const e0 = this.evals.get(0);
    return e0 ? heldOutEval(e0) : null;
  }

  /** Step `m`'s point: its held-out evaluation and rollouts as logged (`m` itself: the step as the run returned it). */
  point(m: StepMetrics, total: number, gpp: number): TrainPoint {
    return toPoint(m, total, this.evals.get(m.step), [...(this.rolls.get(m.step)?.values() ?? [])], gpp);
  }

  points(total: number, gpp: number): TrainPoint[] {
    return [...this.steps.values()].sort((a, b) => a.step - b.step).map((m) => this.point(m, total, gpp));
  }
}

/** `st`, with every line appended to it also added to `curve`. */
function curveStore(st: RunStore, curve: Curve): RunStore {
  return {
    read: (name) => st.read(name),
    write: (name, bytes) => st.write(name, bytes),
    append: async (name, line) => {
      await st.append(name, line);
      curve.add(name, line);
    },
  };
}

/** Groups per prompt in a mode and grouping (role-wise: one per trained role). */
function groupsPerPrompt(req: TrainRequest): number {
  return effectiveGroups(req.mode, req.groups) === 'role-wise' ? trainedRoles(req.mode).length : 1;
}

const PHASE: Record<RunPhase, string> = {
  rollouts: 'rollouts',
  update: 'update (GRPO loss, backward, AdamW)',
  checkpoint: 'checkpoint (saving the adapter and optimizer to this browser)',
  'held-out evaluation': 'held-out evaluation (real environment, greedy)',
  'held-out fidelity': 'held-out rehearsal fidelity',
};

/** What the status bar needs to say about a run at one moment (workers/lab/training.ts keeps it up to date). */
export interface RunMoment {
  /** 0: before the first step (the starting policy's evaluation). */
  stepNo: number;
  steps: number;
  phase: RunPhase;
  /** Rollouts (or held-out episodes) finished in this phase. */
  finished: number;
  perStep: number;
  evalTasks: number;
  /** The rollouts' current round, in words. */
  round?: string;
  tokens: number;
  /** The held-out fidelity check: rehearsals decoded of all to decode, once it has started. */
  fidelity: { done: number; total: number } | null;
  /** Whether held-out evaluations include the fidelity check. */
  fidelityCheck: boolean;
  /** Time left of the run, from the steps timed so far (none before the first step ends). */
  runLeftMs?: number;
  /** Time left of the current held-out phase (src/util/eta.ts). */
  phaseLeftMs?: number;
}

/**
 * The status bar's line, bar and time left. Before the first step the starting policy's evaluation and fidelity
 * check take minutes with no step timed yet: each is its own part, its bar counts episodes or rehearsals, and the
 * time left is the part's, as the line says. From step 1 on the bar counts steps and the time left is the run's.
 */
export function runProgress(m: RunMoment): Progress {
  const heldOut = m.phase === 'held-out evaluation' || m.phase === 'held-out fidelity';
  const count =
    m.phase === 'rollouts' || m.phase === 'held-out evaluation'
      ? `: ${m.finished} of ${m.phase === 'rollouts' ? m.perStep : m.evalTasks} finished${m.round ? ` (${m.round})` : ''}, ≈${m.tokens} tokens generated`
      : m.phase === 'held-out fidelity'
        ? m.fidelity ? `: ${m.fidelity.done} of ${m.fidelity.total} rehearsals of the reference calls decoded` : ': preparing the rehearsals of the reference calls'
        : '';
  if (m.stepNo === 0 && heldOut) {
    const parts = m.fidelityCheck ? 2 : 1;
    const part = m.phase === 'held-out evaluation' ? 1 : 2;
    const [done, total] = m.phase === 'held-out evaluation' ? [m.finished, m.evalTasks] : m.fidelity ? [m.fidelity.done, m.fidelity.total] : [0, 1];
    const next = part < parts ? 'the fidelity check, then step 1' : 'step 1';
    return {
      phase: `before training, part ${part} of ${parts}, the starting policy · ${PHASE[m.phase]}${count}; then ${next} (time left: this part)`,
      done, total, etaMs: m.phaseLeftMs,
    };
  }
  const done = Math.max(0, m.stepNo - 1 + (m.phase === 'rollouts' ? 0.8 * (m.finished / m.perStep) : 0.9));
  return { phase: `${m.stepNo === 0 ? 'before training' : `step ${m.stepNo} of ${m.steps}`} · ${PHASE[m.phase]}${count}`, done, total: m.steps, etaMs: m.runLeftMs };
}

export class Training {
  private store: RunStore | null = null;
  private baseStore: RunStore | null = null;
  /** The open run's curve (null until the run is opened: read from its logs then, appended to as it trains). */
  private curve: Curve | null = null;
  private pauseAsked = false;
  running = false;

  private async open(): Promise<RunStore> {
    this.store ??= (await OpfsStore.open(DIR)) ?? new MemoryStore();
    return this.store;
  }

  private async openBase(): Promise<RunStore> {
    this.baseStore ??= (await OpfsStore.open(BASE_DIR)) ?? new MemoryStore();
    return this.baseStore;
  }

  async status(): Promise<TrainStatus> {
    const st = await this.open();
    const meta = await st.read('lab.json');
    const raw = meta ? (JSON.parse(new TextDecoder().decode(meta)) as Saved) : null;
    // Saved by any version; shown as the page shows kept runs (runs saved before rehearsal decoding was a setting decoded free).
    const saved = raw ? { ...raw, req: labRequest(raw.req as unknown as Record<string, unknown>, { rehearseDecoding: 'free' }) } : null;
    // The curve: from memory once the run is open, from its logs the first time.
    this.curve ??= await Curve.read(st);
    const total = saved?.req.steps ?? 0;
    const gpp = saved ? groupsPerPrompt(saved.req) : 1;
    const points = this.curve.points(total, gpp);
    return { config: saved?.req ?? null, start: this.curve.start(), step: points.length ? points[points.length - 1].step : 0, total, running: this.running, points, model: saved?.model ?? '', world: saved ? (saved.world ?? 'retail') : null };
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
    this.curve = null;
    await OpfsStore.remove(DIR).catch(() => undefined);
  }

  pause(): void {
    this.pauseAsked = true;
  }

  /**
   * Runs steps until the run is done or paused. The trained adapter becomes the policy's adapter (for the
   * stepper, the group view and export). Only the shared/Act adapter is kept in per-role mode. `extend`
   * adds steps to the saved run first (its run.json and lab.json), so a finished run goes on.
   */
  async start(
    policy: Policy, domain: Domain, world: string, req: TrainRequest, signal: AbortSignal, onPoint: (p: TrainPoint) => void, onProgress: ProgressFn,
    extend = 0, checkCancel: () => void = () => undefined, onStart?: (e: HeldOutEval) => void,
  ): Promise<TrainStatus> {
    if (this.running) throw new Error('a run is already going');
    const st = await this.open();
    const meta = await st.read('lab.json');
    if (meta) {
      const saved = JSON.parse(new TextDecoder().decode(meta)) as Saved;
      if (saved.model !== policy.label) throw new Error(`the saved run was trained on "${saved.model}", not on the loaded model: reset the run first`);
      if ((saved.world ?? 'retail') !== world) throw new Error(`the saved run trains in the ${saved.world ?? 'retail'} world: switch back to it, or reset the run`);
      // A resumed run keeps its own settings; one saved before a setting existed ran with the run's default.
      req = labRequest(saved.req as unknown as Record<string, unknown>);
      if (extend > 0) {
        req = { ...req, steps: req.steps + extend };
        await st.write('lab.json', enc({ ...saved, req }));
        const runJson = await st.read('run.json');
        if (runJson) {
          const state = JSON.parse(new TextDecoder().decode(runJson)) as { config: { steps: number } };
          state.config.steps = req.steps;
          await st.write('run.json', new TextEncoder().encode(JSON.stringify(state, null, 1)));
        }
      }
    } else await st.write('lab.json', enc({ req, model: policy.label, world } satisfies Saved));
    // The request is the lab's rows of the run settings' table by their names; the lab checkpoints every step.
    const config = grpoRunConfig({ ...req, checkpointEvery: 1 });
    // The training prompts are drawn from 200 train-split tasks; the held-out set is the CLI's (`npm run eval
    // --tasks test`, task seed 1), so the dashboard's success is the same measurement as the command line's.
    const tasks = splitTasks(domain, { train: setting('trainTasks').default, eval: req.evalEvery > 0 ? req.evalTasks : 0, seed: req.seed });
    const perStep = Math.min(config.promptsPerStep, tasks.train.length) * config.k;
    const gpp = groupsPerPrompt(req);
    // Progress inside a step: the phase, rollouts finished of the step's total, tokens, time left.
    let stepNo = 0;
    let phase: RunPhase = 'rollouts';
    let finished = 0;
    let tokens = 0;
    let round: string | undefined;
    let fidelity: { done: number; total: number } | null = null;
    let fidelityTokens = 0;
    // The held-out phases' own time left: before the first step there is no step time to go by.
    let phaseEta: RoundEta | null = null;
    let stepT0 = performance.now();
    const stepMs: number[] = [];
    const report = () => {
      checkCancel();
      const avg = stepMs.length ? stepMs.reduce((a, v) => a + v, 0) / stepMs.length : null;
      onProgress(runProgress({
        stepNo, steps: config.steps, phase, finished, perStep, evalTasks: tasks.eval.length, round, tokens, fidelity, fidelityCheck: !!config.evalFidelityTokens,
        runLeftMs: avg === null ? undefined : Math.max(0, avg * (config.steps - stepNo + 1) - (performance.now() - stepT0)),
        phaseLeftMs: phaseEta?.leftMs(),
      }));
    };
    // Starting is opening the run: its curve is read from its logs here, once, then appended to as it trains.
    const curve = (this.curve = await Curve.read(st));
    const run = await GrpoRun.open(policy.model, policy.tok, domain, tasks, curveStore(st, curve), config, {
      signal,
      onPhase: (p) => {
        phase = p;
        finished = 0;
        tokens = 0;
        round = undefined;
        fidelity = null;
        fidelityTokens = 0;
        phaseEta = p === 'held-out evaluation' ? new RoundEta(tasks.eval.length, config.limits.maxTurns) : null;
        report();
      },
      onRolloutProgress: (e) => {
        finished = (phase === 'rollouts' ? perStep : tasks.eval.length) - e.active;
        if (phase === 'held-out evaluation') phaseEta?.round(e.round, e.active);
        round = `round ${e.round + 1}, ${e.phase === 'act' ? 'Act' : 'Rehearse'}: ${e.requests} generations`;
        report();
      },
      onRolloutStep: (_role, done, total) => {
        tokens += total - done;
        report();
      },
      onFidelityStep: (done, total) => {
        if (!fidelity) phaseEta = new RoundEta(total, config.evalFidelityTokens ?? 1);
        fidelity = { done, total };
        phaseEta?.round(fidelityTokens++, total - done);
        report();
      },
    });
    this.running = true;
    this.pauseAsked = false;
    try {
      // The starting policy on the same held-out tasks, once per run: the dashboard's step 0, so a student sees
      // what the training changed. It reads no random numbers, so the steps that follow are the same as without it.
      // Measured once per model, world, tasks and limits in this browser, then reused unless the run says otherwise.
      if (run.step === 0) {
        stepNo = 0;
        const key = baseEvalKey(`${policy.label} · ${policy.weights}`, world, tasks.eval, run.config);
        const bs = await this.openBase();
        const saved = await bs.read(baseEvalName(key));
        const out = await baseEvaluation(run, req.baseEval, key, saved ? parseBaseEvalRecord(saved, `${BASE_DIR}/${baseEvalName(key)}`) : null);
        if (out.record) await bs.write(baseEvalName(key), enc(out.record));
        if (out.eval) onStart?.(heldOutEval(out.eval));
      }
      while (!run.done && !this.pauseAsked) {
        if (signal.aborted) throw new DOMException('cancelled', 'AbortError');
        stepNo = run.step + 1;
        stepT0 = performance.now();
        phase = 'rollouts';
        finished = 0;
        tokens = 0;
        round = undefined;
        phaseEta = null;
        report();
        const m = await run.trainStep();
        stepMs.push(performance.now() - stepT0);
        onPoint(curve.point(m, config.steps, gpp));
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
