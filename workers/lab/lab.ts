// The worker's state and operations behind the comlink API: the environment, the loaded policy, the
// stepper's current episode, batched generation with progress and cancellation.
import type { Domain, Task } from '../../src/env/domain';
import { retailBase, retailDomain } from '../../src/env/retail';
import { paramCount } from '../../src/model/config';
import { generate, logprobs, type GenerateResult } from '../../src/model/generate';
import { adapterToPeftFiles, loadPeftAdapter } from '../../src/model/peft';
import { FileMapSource } from '../../src/model/source';
import { ACT_STOP, REHEARSE_STOP } from '../../src/rollout/act-prompt';
import type {
  Capabilities, EnvInfo, FolderInfo, GenView, GroupRequest, GroupView, LoadInfo, LoadRequest, NamedFile, ProgressFn, RolloutRequest, RolloutView,
  TrainPoint, TrainRequest, TrainStatus, TtsRequest, TtsView,
} from '../../src/worker-protocol';
import { Episode, itemLabel } from './episode';
import { inspectFolder, loadPolicy, pickBackend, type Policy } from './load';
import { Training } from './training';
import { privateRehearsalTask } from '../../src/rollout/private-rehearsal';
import type { Step } from '../../src/env/domain';
import { serializeObservation } from '../../src/env/toolcall';

const DATA_URL = `${import.meta.env.BASE_URL}data/tau2-retail/db.json`;

export class Lab {
  private domain: Domain | null = null;
  private tasks = new Map<string, Task>();
  private policy: Policy | null = null;
  private episode: Episode | null = null;
  private episodeReq: RolloutRequest | null = null;
  private abort: AbortController | null = null;
  private cancelFlag: Int32Array | null = null;
  private readonly training = new Training();

  async init(flag: SharedArrayBuffer | null): Promise<EnvInfo> {
    this.cancelFlag = flag ? new Int32Array(flag) : null;
    if (!this.domain) {
      const r = await fetch(DATA_URL);
      if (!r.ok) throw new Error(`retail data not found at ${DATA_URL} (HTTP ${r.status})`);
      const text = await r.text();
      this.domain = retailDomain(retailBase(JSON.parse(text), text));
      for (const split of ['train', 'test'] as const)
        for (const t of this.domain.tasks.generate({ split, count: 12, seed: 0 })) this.tasks.set(t.id, t);
    }
    return {
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

  capabilities(): Capabilities {
    return {
      train: null,
      tts: null,
    };
  }

  inspectFiles(files: File[]): Promise<FolderInfo> {
    return inspectFolder(files);
  }

  async load(req: LoadRequest, onProgress: ProgressFn): Promise<LoadInfo> {
    const t0 = performance.now();
    onProgress({ phase: 'starting the backend', done: 0, total: 3 });
    if (this.policy) {
      this.policy.adapter.free(this.policy.backend);
      this.policy.model.free();
      this.policy = null;
      this.episode = null;
    }
    const { backend, kind, note } = await pickBackend(req.backend);
    onProgress({ phase: 'loading weights', done: 1, total: 3 });
    if (!this.domain) throw new Error('the environment is not initialised');
    const p = await loadPolicy(req, backend, this.domain);
    this.policy = { ...p, backend, backendKind: kind, backendNote: note };
    onProgress({ phase: 'ready', done: 3, total: 3 });
    const c = p.model.config;
    return {
      backend: kind,
      backendNote: note,
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
    };
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

  /** Sample a batch of prompts; every result comes back with its per-token log-probabilities. */
  private async sample(prompts: string[], maxNew: number, seeds: number[], temperature: number, phase: string, signal: AbortSignal, onProgress: ProgressFn, stop?: string): Promise<GenView[]> {
    const p = this.need();
    const t0 = performance.now();
    let steps = 0;
    const res = await generate(
      p.model,
      p.tok,
      prompts.map((prompt, i) => ({ prompt, maxNewTokens: maxNew, sampling: { temperature, topP: 1, seed: seeds[i] }, ...(stop ? { stop: [stop] } : {}) })),
      {
        adapter: p.adapter,
        signal,
        onStep: (done, total) => {
          steps++;
          this.checkCancel(signal);
          onProgress({ phase: `${phase}: token ${steps} of up to ${maxNew} (${done}/${total} sequences done)`, done: steps, total: maxNew });
        },
      },
    );
    const ms = performance.now() - t0;
    // generate() cuts the text before the stop string; the role wrote it, so it is put back (as rollouts do).
    return res.map((r, i) => this.view(prompts[i], r.finishReason === 'stop' && stop ? { ...r, text: r.text + stop } : r, 'policy', ms));
  }

  private view(prompt: string, r: Pick<GenerateResult, 'tokens' | 'logprobs' | 'text' | 'promptTokens'>, source: GenView['source'], ms: number): GenView {
    const tok = this.need().tok;
    return { source, prompt, promptTokens: r.promptTokens.length, text: r.text, tokens: r.tokens.map((t, i) => ({ text: tok.decode([t]), lp: r.logprobs[i] })), ms };
  }

  /** Teacher forcing: the expert's text, scored token by token by the policy. */
  private async score(prompt: string, text: string): Promise<GenView> {
    const p = this.need();
    const t0 = performance.now();
    const promptTokens = p.tok.encode(prompt);
    const tokens = p.tok.encode(text);
    const [lps] = await logprobs(p.model, [{ tokens: [...promptTokens, ...tokens], start: promptTokens.length }], { adapter: p.adapter });
    return this.view(prompt, { tokens, logprobs: lps, text, promptTokens }, 'expert', performance.now() - t0);
  }

  generate(prompt: string, maxNew: number, seed: number, onProgress: ProgressFn): Promise<GenView> {
    return this.guarded(async (signal) => (await this.sample([prompt], maxNew, [seed], 1, 'generating', signal, onProgress))[0]);
  }

  /** Whether a prompt and its budget fit the context; if not, the episode ends there (reward 0). */
  private fits(ep: Episode, prompt: string, budget: number): boolean {
    if (ep.done) return false;
    const p = this.need();
    const need = p.tok.encode(prompt).length + budget;
    if (need <= p.model.config.maxPositionEmbeddings) return true;
    ep.finishContext(need, p.model.config.maxPositionEmbeddings);
    return false;
  }

  private newEpisode(taskId: string | null, request: string, mode: RolloutRequest['mode'], seed: number, maxTurns: number): Episode {
    if (!this.domain) throw new Error('the environment is not initialised');
    const task = taskId ? this.tasks.get(taskId) : null;
    if (taskId && !task) throw new Error(`unknown task ${taskId}`);
    if (!task && !request.trim()) throw new Error('pick a task or type a request');
    return new Episode(this.domain, task ?? null, request, { mode, seed, maxTurns });
  }

  async rolloutStart(req: RolloutRequest): Promise<RolloutView> {
    this.need();
    this.episode = this.newEpisode(req.taskId, req.request, req.mode, req.seed, req.maxTurns);
    this.episodeReq = req;
    return this.episode.view();
  }

  /** Advance the stepper's episode by one turn: Act, then (rehearse mode) Rehearse for each call. */
  rolloutStep(onProgress: ProgressFn): Promise<RolloutView> {
    return this.guarded(async (signal) => {
      const ep = this.episode;
      const req = this.episodeReq;
      if (!ep || !req) throw new Error('start a rollout first');
      if (ep.done) return ep.view();
      const turn = ep.turns.length;
      const prompt = ep.actPrompt();
      if (!this.fits(ep, prompt, req.maxNewTokens)) return ep.view();
      const expert = req.actSource === 'expert' ? ep.expertText() : null;
      if (req.actSource === 'expert' && expert === null) throw new Error('the expert has no further turn for this task');
      const act = expert !== null ? await this.score(prompt, expert) : (await this.sample([prompt], req.maxNewTokens, [seedOf(req.seed, turn, 0)], req.temperature, `turn ${turn + 1} Act`, signal, onProgress, ACT_STOP))[0];
      ep.takeAct(act);
      const rq = ep.rehearseRequests();
      if (rq.some((r) => !this.fits(ep, r.prompt, REHEARSE_BUDGET * req.maxNewTokens))) return ep.view();
      if (rq.length) {
        const gens = await this.sample(rq.map((r) => r.prompt), REHEARSE_BUDGET * req.maxNewTokens, rq.map((r) => seedOf(req.seed, turn, 1 + r.index)), req.temperature, `turn ${turn + 1} Rehearse`, signal, onProgress, REHEARSE_STOP);
        // Stops at the first unparseable rehearsal (the episode ends there).
        for (let i = 0; i < rq.length && !ep.done; i++) ep.takeRehearse(rq[i].index, gens[i]);
      }
      return ep.view();
    });
  }

  /** K rollouts of one task decoded together, judged, with role-wise (or pooled) advantages. */
  group(req: GroupRequest, onProgress: ProgressFn): Promise<GroupView> {
    return this.guarded(async (signal) => {
      if (!(req.k >= 1 && req.k <= 16)) throw new Error('K must be between 1 and 16');
      const eps = Array.from({ length: req.k }, (_, i) => this.newEpisode(req.taskId, '', req.mode, req.seed * 1000 + i, req.maxTurns));
      for (let turn = 0; eps.some((e) => !e.done); turn++) {
        const live = eps.filter((e) => !e.done && this.fits(e, e.actPrompt(), req.maxNewTokens));
        if (live.length === 0) break;
        const acts = await this.sample(live.map((e) => e.actPrompt()), req.maxNewTokens, live.map((e) => seedOf(e.cfg.seed, turn, 0)), req.temperature, `turn ${turn + 1} Act (${live.length} rollouts)`, signal, onProgress, ACT_STOP);
        live.forEach((e, i) => e.takeAct(acts[i]));
        const rq = live.flatMap((e) => e.rehearseRequests().map((r) => ({ e, ...r }))).filter((r) => this.fits(r.e, r.prompt, REHEARSE_BUDGET * req.maxNewTokens));
        if (rq.length) {
          const gens = await this.sample(rq.map((r) => r.prompt), REHEARSE_BUDGET * req.maxNewTokens, rq.map((r) => seedOf(r.e.cfg.seed, turn, 1 + r.index)), req.temperature, `turn ${turn + 1} Rehearse (${rq.length} calls)`, signal, onProgress, REHEARSE_STOP);
          rq.forEach((r, i) => {
            if (!r.e.done) r.e.takeRehearse(r.index, gens[i]);
          });
        }
      }
      return {
        taskId: req.taskId,
        mode: req.mode,
        k: req.k,
        rows: eps.map((e, i) => ({
          rollout: i,
          reward: e.reward?.value ?? 0,
          passed: e.reward?.items.filter((x) => x.satisfied).map((x) => x.label) ?? [],
          failed: e.reward?.items.filter((x) => !x.satisfied).map((x) => x.label) ?? [],
          actRows: e.actRows,
          rehearseRows: e.rehearseRows,
          endReason: e.endReason ?? '',
          turns: e.turns.length,
        })),
        rollouts: eps.map((e) => e.view()),
      };
    });
  }

  trainStart(req: TrainRequest, onPoint: (p: TrainPoint) => void, onProgress: ProgressFn): Promise<TrainStatus> {
    const p = this.need();
    if (!this.domain) throw new Error('the environment is not initialised');
    const domain = this.domain;
    return this.guarded((signal) => this.training.start(p, domain, req, signal, onPoint, onProgress));
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
      const r = await privateRehearsalTask({ model: p.model, tokenizer: p.tok, actAdapter: p.adapter }, domain, task, {
        mode: req.mode,
        n: req.n,
        seed: req.seed,
        limits: { maxTurns: req.maxTurns, maxActTokens: req.maxNewTokens, maxRehearseTokens: REHEARSE_BUDGET * req.maxNewTokens },
        signal,
        onPhase: (phase, attempt) => onProgress({ phase: `${phase}${attempt === null ? '' : ` (attempt ${attempt + 1})`}`, done: phase === 'commit' ? 2 : phase === 'evaluate' ? 1 : 0, total: 3 }),
      });
      return {
        taskId: r.taskId,
        mode: req.mode,
        n: req.n,
        attempts: r.attempts.map((a) => ({
          index: a.index,
          end: a.rollout.end,
          reward: a.judge.reward,
          steps: stepLines(a.rollout.steps),
          selfEval: a.selfEval,
          judgeUnmet: a.judge.unmet,
          memoryBefore: a.memoryBefore?.text ?? null,
        })),
        memory: { text: r.memory.text, tokens: r.memory.tokens, maxTokens: r.memory.maxTokens },
        committed: { end: r.committed.end, reward: r.committed.reward, steps: stepLines(r.committed.steps) },
        tokensTotal: r.tokens.total,
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

/** A rehearsed observation (an order with its items) is much longer than a call: as in training (training.ts). */
const REHEARSE_BUDGET = 4;

/** A distinct, reproducible sampling seed per (rollout seed, turn, role slot). */
function seedOf(seed: number, turn: number, slot: number): number {
  return (Math.imul(seed + 1, 0x9e3779b1) ^ Math.imul(turn + 1, 0x85ebca6b) ^ Math.imul(slot + 1, 0xc2b2ae35)) >>> 0;
}

function stepLines(steps: readonly Step[]): string[] {
  return steps.map((s) => (s.kind === 'call' ? `${s.call.name}(${JSON.stringify(s.call.arguments)}) -> ${serializeObservation(s.observation)}` : `reply: ${s.text}`));
}
