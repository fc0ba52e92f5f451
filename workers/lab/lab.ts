// The worker's state and operations behind the comlink API: the environment, the loaded policy, the
// stepper's rollout (the training loop itself, viewed through ./episode.ts), progress and cancellation.
import type { Domain, Task } from '../../src/env/domain';
import { CONVERSATION_POLICY, retailBase, WORLDS, worldDomain, worldSummary, worldBase } from '../../src/env/retail';
import type { BaseData } from '../../src/env/store';
import { loadTaskFile } from '../../src/env/tau2';
import { tokenBudgets } from '../../src/rollout/budget';
import { paramCount } from '../../src/model/config';
import { generate } from '../../src/model/generate';
import { adapterToPeftFiles, loadPeftAdapter } from '../../src/model/peft';
import { FileMapSource } from '../../src/model/source';
import type {
  BackendKind, BudgetInfo, EnvInfo, PolicyApi, WorldRequest, WorldName, FolderInfo, GenView, GroupRequest, GroupView, LoadInfo, LoadRequest, MemoryNow, NamedFile, ProgressFn, RolloutRequest, RolloutView,
  HeldOutEval, TrainPoint, TrainRequest, TrainStatus, TtsRequest, TtsView,
} from '../../src/worker-protocol';
import { genView, itemLabel, LabRollouts, rehearseFailureText, type LabRolloutConfig } from './episode';
import { inspectFolder, loadPolicy, memoryNow, pickBackend, webGpuAdapter, type Policy } from './load';
import { generate as gen } from '../../src/model/generate';
import type { Backend } from '../../src/engine/backend';
import { Training } from './training';
import { privateRehearsalTask } from '../../src/eval/private-rehearsal';
import type { Step } from '../../src/env/domain';
import { serializeObservation } from '../../src/env/toolcall';
import { setting } from '../../src/method/run-config';
import { callText, rehearsedCalls } from './tts-view';

const DATA_URL = `${import.meta.env.BASE_URL}data/tau2-retail/db.json`;

/** How an episode ended, in words (private rehearsal's attempts and committed episode). */
function endText(end: string, failure: string | null, cut: number | null | undefined, maxTurns: number): string {
  switch (end) {
    case 'reply': return 'the policy replied to the user';
    case 'empty': return 'an empty Act turn';
    case 'max-turns': return `turn limit (${maxTurns}) reached`;
    case 'context': return 'a prompt plus its token budget did not fit the context';
    case 'rehearse-invalid': return rehearseFailureText(failure, cut ?? null);
    default: return end;
  }
}

export class Lab implements PolicyApi {
  private domain: Domain | null = null;
  private full: BaseData | null = null;
  private world: WorldName = 'mini';
  private taskFile: string | null = null;
  private budget: { key: unknown[]; info: BudgetInfo } | null = null;
  private tasks = new Map<string, Task>();
  private policy: Policy | null = null;
  private rollouts: LabRollouts | null = null;
  private abort: AbortController | null = null;
  private cancelFlag: Int32Array | null = null;
  private readonly training = new Training();

  /**
   * The world the lab serves: the compact 'mini' world (default) or the full retail one, generated tasks of
   * each split; or a user's task file, over the full retail world. Switching drops the stepper's rollout.
   */
  async init(flag: SharedArrayBuffer | null, req: WorldRequest = { world: 'mini' }): Promise<EnvInfo> {
    this.cancelFlag = flag ? new Int32Array(flag) : null;
    if (!this.full) {
      const r = await fetch(DATA_URL);
      if (!r.ok) throw new Error(`retail data not found at ${DATA_URL} (HTTP ${r.status})`);
      const text = await r.text();
      this.full = retailBase(JSON.parse(text), text);
    }
    const world: WorldName = req.taskFile ? 'retail' : req.world in WORLDS ? req.world : 'mini';
    const fileTasks = req.taskFile ? loadTaskFile(req.taskFile.text) : null;
    if (fileTasks && fileTasks.length === 0) throw new Error(`${req.taskFile!.name}: no tasks`);
    if (!this.domain || world !== this.world || fileTasks || this.taskFile) {
      if (this.training.running) throw new Error('pause the training run before switching worlds');
      this.domain = worldDomain(world, this.full);
      this.world = world;
      this.taskFile = req.taskFile?.name ?? null;
      this.tasks.clear();
      this.rollouts = null;
      if (fileTasks) for (const t of fileTasks) this.tasks.set(t.id, t);
      else
        for (const split of ['train', 'test'] as const)
          for (const t of this.domain.tasks.generate({ split, count: 12, seed: 0 })) this.tasks.set(t.id, t);
    }
    const size = worldSummary(worldBase(this.full, WORLDS[this.world]));
    return {
      world: this.world,
      worldDescription: WORLDS[this.world].description,
      lessonPolicies: Object.keys(WORLDS[this.world].lessonPolicies ?? {}),
      conversationPolicy: CONVERSATION_POLICY in (WORLDS[this.world].lessonPolicies ?? {}) ? CONVERSATION_POLICY : null,
      size: { users: size.users, orders: size.orders, products: size.products },
      taskFile: this.taskFile,
      domain: this.domain.name,
      tools: this.domain.tools.length,
      tasks: [...this.tasks.values()].map((t) => ({
        id: t.id,
        family: t.family ?? '',
        split: t.split ?? 'train',
        request: t.userMessages.join('\n'),
        checklist: t.checklist.map(itemLabel),
      })),
    };
  }

  /** Budgets of the current world under the loaded tokenizer, measured once per (world, tokenizer). */
  budgets(): BudgetInfo | null {
    if (!this.policy || !this.domain) return null;
    const key = [this.domain, this.policy.tok];
    if (this.budget && this.budget.key.every((k, i) => k === key[i])) return this.budget.info;
    const b = tokenBudgets(this.domain, this.policy.tok, { tasks: 100 });
    const info: BudgetInfo = { ...b, world: this.world, context: this.policy.model.config.maxPositionEmbeddings };
    this.budget = { key, info };
    return info;
  }

  /** A request's budgets: 0 means the measured default. */
  private limitsOf(r: { maxNewTokens: number; rehearseTokens: number }): { act: number; rehearse: number } {
    const b = this.budgets();
    return { act: r.maxNewTokens > 0 ? r.maxNewTokens : (b?.act ?? setting('maxActTokens').default), rehearse: r.rehearseTokens > 0 ? r.rehearseTokens : (b?.rehearse ?? setting('maxRehearseTokens').default) };
  }

  inspectFiles(files: File[]): Promise<FolderInfo> {
    return inspectFolder(files);
  }

  /** Load a model; cancellable between phases and during the backend calibration. */
  load(req: LoadRequest, onProgress: ProgressFn): Promise<LoadInfo> {
    return this.guarded((signal) => this.loadIn(req, onProgress, signal));
  }

  private async loadIn(req: LoadRequest, onProgress: ProgressFn, signal: AbortSignal): Promise<LoadInfo> {
    const t0 = performance.now();
    onProgress({ phase: 'starting the backend', done: 0, total: 3 });
    if (this.policy) {
      this.policy.adapter.free(this.policy.backend);
      this.policy.model.free();
      this.policy = null;
      this.rollouts = null;
    }
    if (!this.domain) throw new Error('the environment is not initialised');
    const domain = this.domain;
    const adapter = await webGpuAdapter();
    let calibration: LoadInfo['calibration'] = null;
    let chosen: { backend: Backend; kind: BackendKind; note: string; p: Awaited<ReturnType<typeof loadPolicy>> };
    if (!req.backend && adapter?.software) {
      // A software WebGPU adapter is a CPU posing as a GPU: time the same work on it and on the CPU fast
      // path (this model, a short batched generation after a warm-up) and keep the faster.
      const cands: { backend: Backend; kind: BackendKind; p: Awaited<ReturnType<typeof loadPolicy>>; ms: number }[] = [];
      for (const order of [['webgpu'], ['cpu-fast', 'cpu-ref']] as BackendKind[][]) {
        try {
          onProgress({ phase: `timing ${order[0]} on this model (the WebGPU adapter is a software one: ${adapter.description})`, done: cands.length, total: 3 });
          this.checkCancel(signal);
          const { backend, kind } = await pickBackend(undefined, order);
          const p = await loadPolicy(req, backend, domain, onProgress);
          cands.push({ backend, kind, p, ms: NaN });
          cands[cands.length - 1].ms = await calibrate(p, signal, () => this.checkCancel(signal));
        } catch (e) {
          if ((e as Error).name === 'AbortError') {
            for (const c of cands) {
              c.p.adapter.free(c.backend);
              c.p.model.free();
              c.backend.dispose();
            }
            throw e;
          }
          // That backend could not start (or failed its timing): the other one wins.
          const bad = cands.findIndex((c) => Number.isNaN(c.ms));
          if (bad >= 0) {
            const [c] = cands.splice(bad, 1);
            c.p.adapter.free(c.backend);
            c.p.model.free();
            c.backend.dispose();
          }
        }
      }
      if (cands.length === 0) throw new Error('no backend could start');
      cands.sort((a, b) => a.ms - b.ms);
      const [win, ...rest] = cands;
      for (const r of rest) {
        r.p.adapter.free(r.backend);
        r.p.model.free();
        r.backend.dispose();
      }
      const gpuC = cands.find((c) => c.kind === 'webgpu');
      const cpuC = cands.find((c) => c.kind !== 'webgpu');
      if (gpuC && cpuC) calibration = { tokens: CAL_TOKENS, webgpuMs: gpuC.ms, cpuFastMs: cpuC.ms };
      const times = cands.map((c) => `${c.kind} ${c.ms.toFixed(0)} ms`).join(', ');
      const note =
        `${win.kind}, measured: the WebGPU adapter is a software one (${adapter.description}), so the lab timed the same work ` +
        `(${CAL_SEQS} sequences × ${CAL_TOKENS} new tokens on this model): ${times}. The faster one runs; pick another with the Backend control.`;
      chosen = { backend: win.backend, kind: win.kind, note, p: win.p };
    } else {
      const { backend, kind, note } = await pickBackend(req.backend);
      onProgress({ phase: 'loading weights', done: 1, total: 3 });
      const why = !req.backend && kind === 'webgpu' && adapter ? `webgpu: a hardware adapter (${adapter.description})` : note;
      chosen = { backend, kind, note: why, p: await loadPolicy(req, backend, domain, onProgress) };
    }
    const { backend, kind, note, p } = chosen;
    this.policy = { ...p, backend, backendKind: kind, backendNote: note };
    this.budget = null;
    onProgress({ phase: 'ready', done: 3, total: 3 });
    const c = p.model.config;
    return {
      backend: kind,
      backendNote: note,
      threads: kind === 'webgpu' ? null : ((backend as Backend & { threads?: number }).threads ?? 1),
      isolated: self.crossOriginIsolated === true,
      adapter,
      calibration,
      modelLabel: p.label,
      untrained: p.untrained,
      params: paramCount(c),
      format: p.model.format,
      layers: c.numLayers,
      hidden: c.hiddenSize,
      vocab: c.vocabSize,
      contextLength: c.maxPositionEmbeddings,
      loraRank: p.adapter.rank,
      loadMs: performance.now() - t0,
      memory: p.memory,
      ceiling: p.ceiling,
      ceilingProblem: p.ceilingProblem,
    };
  }

  memory(): MemoryNow | null {
    return this.policy ? memoryNow(this.policy.backend) : null;
  }

  cancel(): void {
    this.abort?.abort();
  }

  private need(): Policy {
    if (!this.policy) throw new Error('no model is loaded');
    return this.policy;
  }

  /** Run one operation with a fresh abort signal; the shared flag lets the page cancel a busy CPU loop. */
  private async guarded<T>(fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const ac = new AbortController();
    this.abort = ac;
    if (this.cancelFlag) Atomics.store(this.cancelFlag, 0, 0);
    try {
      return await fn(ac.signal);
    } finally {
      if (this.abort === ac) this.abort = null;
    }
  }

  private checkCancel(signal: AbortSignal): void {
    if (this.cancelFlag && Atomics.load(this.cancelFlag, 0) === 1) (this.abort?.abort(), Atomics.store(this.cancelFlag, 0, 0));
    if (signal.aborted) throw new DOMException('cancelled', 'AbortError');
  }

  /** The "try it" box: one sample of a free prompt, with its per-token log-probabilities. */
  generate(prompt: string, maxNew: number, seed: number, onProgress: ProgressFn): Promise<GenView> {
    const p = this.need();
    return this.guarded(async (signal) => {
      const t0 = performance.now();
      let steps = 0;
      const [r] = await generate(p.model, p.tok, [{ prompt, maxNewTokens: maxNew, sampling: { temperature: 1, topP: 1, seed } }], {
        adapter: p.adapter,
        signal,
        onStep: () => {
          steps++;
          this.checkCancel(signal);
          onProgress({ phase: `generating: token ${steps} of up to ${maxNew}`, done: steps, total: maxNew });
        },
      });
      return genView(p.tok, prompt, r, r.text, 'policy', performance.now() - t0);
    });
  }

  /** Rollouts of a task (or a typed request) through the training loop, viewed (./episode.ts). */
  private newRollouts(taskId: string | null, request: string, cfg: LabRolloutConfig): LabRollouts {
    if (!this.domain) throw new Error('the environment is not initialised');
    const task = taskId ? this.tasks.get(taskId) : null;
    if (taskId && !task) throw new Error(`unknown task ${taskId}`);
    if (!task && !request.trim()) throw new Error('pick a task or type a request');
    const p = this.need();
    return new LabRollouts({ model: p.model, tokenizer: p.tok, adapter: p.adapter }, this.domain, task ?? null, request, cfg);
  }

  /** One round of the training loop; progress per generated token, cancellable from the page. */
  private round(r: LabRollouts, signal: AbortSignal, onProgress: ProgressFn, what: string, tokens = { n: 0 }): Promise<unknown> {
    const budget = { act: r.cfg.maxNewTokens, rehearse: r.cfg.rehearseTokens };
    const turn = Math.max(...r.stepper.episodes.map((e) => e.turns)) + 1;
    const eps = r.stepper.episodes;
    const finished = eps.filter((e) => e.done).length;
    let steps = 0;
    let phase = '';
    return r.step({
      signal,
      onStep: (role, done, total) => {
        if (role !== phase) {
          phase = role;
          steps = 0;
        }
        steps++;
        tokens.n += total - done; // sequences still writing after this step (≈ tokens generated)
        this.checkCancel(signal);
        const name = role === 'act' ? 'Act' : 'Rehearse';
        const roll = eps.length > 1 ? `${finished} of ${eps.length} rollouts finished · ` : '';
        onProgress({
          phase: `${roll}turn ${turn} ${name}${what}: token ${steps} of up to ${budget[role]}, ${done} of ${total} ${name} generations done · ≈${tokens.n} tokens generated so far`,
          done: eps.length > 1 ? finished : steps,
          total: eps.length > 1 ? eps.length : budget[role],
        });
      },
    });
  }

  async rolloutStart(req: RolloutRequest): Promise<RolloutView> {
    this.need();
    const b = this.limitsOf(req);
    this.rollouts = this.newRollouts(req.taskId, req.request, { ...req, maxNewTokens: b.act, rehearseTokens: b.rehearse, k: 1 });
    return this.rollouts.view();
  }

  /** Advance the stepper's rollout by one round: its Act turn, then (rehearse mode) a Rehearse per call. */
  rolloutStep(onProgress: ProgressFn): Promise<RolloutView> {
    return this.guarded(async (signal) => {
      const r = this.rollouts;
      if (!r) throw new Error('start a rollout first');
      // The rollout keeps the adapter it started with (as a training step does); a new one means a new rollout.
      if (r.policy.adapter !== this.need().adapter) throw new Error('the adapter has changed since this rollout started: press Reset');
      if (!r.done) await this.round(r, signal, onProgress, '');
      return r.view();
    });
  }

  /** K rollouts of one task decoded together (exactly runRollouts with this seed), judged, with their rows. */
  group(req: GroupRequest, onProgress: ProgressFn): Promise<GroupView> {
    return this.guarded(async (signal) => {
      if (!(req.k >= 1 && req.k <= 16)) throw new Error('K must be between 1 and 16');
      const b = this.limitsOf(req);
      const r = this.newRollouts(req.taskId, '', { ...req, maxNewTokens: b.act, rehearseTokens: b.rehearse, actSource: 'policy' });
      const tokens = { n: 0 };
      while (!r.done) await this.round(r, signal, onProgress, '', tokens);
      return {
        taskId: req.taskId,
        mode: req.mode,
        k: req.k,
        rows: r.stepper.episodes.map((_, i) => r.groupRow(i)),
        rollouts: r.stepper.episodes.map((_, i) => r.view(i)),
      };
    });
  }

  trainStart(req: TrainRequest, onPoint: (p: TrainPoint) => void, onProgress: ProgressFn, extend = 0, onStart?: (e: HeldOutEval) => void): Promise<TrainStatus> {
    const p = this.need();
    if (!this.domain) throw new Error('the environment is not initialised');
    if (this.taskFile) throw new Error('training samples generated tasks of a world: switch the world from the task file to mini or retail');
    const domain = this.domain;
    const b = this.limitsOf({ maxNewTokens: req.maxActTokens, rehearseTokens: req.maxRehearseTokens });
    const resolved = { ...req, maxActTokens: b.act, maxRehearseTokens: b.rehearse };
    return this.guarded((signal) =>
      this.training.start(p, domain, this.world, resolved, signal, onPoint, onProgress, extend, () => this.checkCancel(signal), onStart),
    );
  }

  trainPause(): void {
    this.training.pause();
  }

  trainStatus(): Promise<TrainStatus> {
    return this.training.status();
  }

  trainFiles(): Promise<NamedFile[]> {
    return this.training.files();
  }

  trainReset(): Promise<void> {
    return this.training.reset();
  }

  tts(req: TtsRequest, onProgress: ProgressFn): Promise<TtsView> {
    const p = this.need();
    const domain = this.domain;
    const task = this.tasks.get(req.taskId);
    if (!domain || !task) throw new Error(`unknown task ${req.taskId}`);
    return this.guarded(async (signal) => {
      const b = this.limitsOf(req);
      const names = { imagine: 'imagining attempts (rehearse mode)', evaluate: 'self-evaluation of the attempts', commit: 'the committed real execution' } as Record<string, string>;
      const phases = req.n > 0 ? 4 : 3;
      const opts = (n: number, onPhase: (phase: string, attempt: number | null) => void) => ({
        mode: req.mode,
        n,
        seed: req.seed,
        limits: { maxTurns: req.maxTurns, maxActTokens: b.act, maxRehearseTokens: b.rehearse },
        rehearsePrompt: { decoding: req.rehearseDecoding },
        signal,
        onPhase,
      });
      const policy = { model: p.model, tokenizer: p.tok, actAdapter: p.adapter };
      const r = await privateRehearsalTask(policy, domain, task, opts(req.n, (phase, attempt) => {
        this.checkCancel(signal);
        onProgress({ phase: `phase ${phase === 'commit' ? 3 : phase === 'evaluate' ? 2 : 1} of ${phases}: ${names[phase] ?? phase}${attempt === null ? '' : ` (attempt ${attempt + 1} of ${req.n})`}`, done: phase === 'commit' ? 2 : phase === 'evaluate' ? 1 : 0, total: phases });
      }));
      // The same task without memory (N = 0, same seed and limits, greedy as the committed episode): what the
      // memory changed is the difference between the two.
      let without: TtsView['withoutMemory'] = null;
      if (req.n > 0) {
        const r0 = await privateRehearsalTask(policy, domain, task, opts(0, () => {
          this.checkCancel(signal);
          onProgress({ phase: `phase 4 of 4: the same task committed without memory (N = 0), for comparison`, done: 3, total: 4 });
        }));
        const c0 = r0.committed;
        without = { end: c0.end, endText: endText(c0.end, c0.rehearseFailure, c0.rehearseCut, req.maxTurns), reward: c0.reward, steps: stepLines(c0.steps) };
      }
      const t = r.tokens;
      return {
        taskId: r.taskId,
        mode: req.mode,
        n: req.n,
        attempts: r.attempts.map((a) => ({
          index: a.index,
          end: a.rollout.end,
          endText: endText(a.rollout.end, a.rollout.rehearseFailure, a.rollout.rehearseCut, req.maxTurns),
          reward: a.judge.reward,
          steps: stepLines(a.rollout.steps),
          rehearsals: rehearsedCalls(a.rollout),
          selfEval: a.selfEval,
          judgeUnmet: a.judge.unmet,
          memoryBefore: a.memoryBefore?.text ?? null,
        })),
        memory: { text: r.memory.text, tokens: r.memory.tokens, maxTokens: r.memory.maxTokens },
        committed: { end: r.committed.end, endText: endText(r.committed.end, r.committed.rehearseFailure, r.committed.rehearseCut, req.maxTurns), reward: r.committed.reward, steps: stepLines(r.committed.steps) },
        withoutMemory: without,
        tokensTotal: t.total,
        tokensByPhase: [
          { phase: 'imagined attempts', prompt: t.imagined.prompt, generated: t.imagined.generated },
          { phase: 'self-evaluations', prompt: t.evaluation.prompt, generated: t.evaluation.generated },
          { phase: 'committed real execution', prompt: t.committed.prompt, generated: t.committed.generated },
        ],
      };
    });
  }

  async exportAdapter(): Promise<NamedFile[]> {
    const p = this.need();
    const files = await adapterToPeftFiles(p.backend, p.adapter, { baseModel: p.label });
    return [...files].map(([name, bytes]) => ({ name, bytes }));
  }

  async importAdapter(files: File[]): Promise<{ rank: number; alpha: number; targets: string[] }> {
    const p = this.need();
    const a = await loadPeftAdapter(p.backend, p.model.config, new FileMapSource(files), 'imported');
    p.adapter.free(p.backend);
    p.adapter = a;
    return { rank: a.rank, alpha: a.alpha, targets: [...a.targets] };
  }
}

const CAL_SEQS = 2;
const CAL_TOKENS = 16;

/** Milliseconds of a short batched generation (after a warm-up that compiles the kernels). */
async function calibrate(p: Pick<Policy, 'model' | 'tok' | 'adapter'>, signal: AbortSignal, onStep: () => void): Promise<number> {
  const prompt = Array.from({ length: 48 }, (_, i) => (i * 7919) % Math.max(2, p.model.config.vocabSize - 16));
  const reqs = (n: number) => Array.from({ length: CAL_SEQS }, (_, i) => ({ prompt, maxNewTokens: n, stopTokens: [], sampling: { temperature: 1, topP: 1, seed: i + 1 } }));
  await gen(p.model, p.tok, reqs(2), { adapter: p.adapter, signal, onStep });
  const t0 = performance.now();
  await gen(p.model, p.tok, reqs(CAL_TOKENS), { adapter: p.adapter, signal, onStep });
  return performance.now() - t0;
}

function stepLines(steps: readonly Step[]): string[] {
  return steps.map((s) => (s.kind === 'call' ? `${callText(s.call)} -> ${serializeObservation(s.observation)}` : `reply: ${s.text}`));
}
