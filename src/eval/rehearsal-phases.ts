// The phases of test-time private rehearsal (private-rehearsal.ts describes the procedure): imagined
// attempts in the sandbox, their evaluations, the memory they condense into, and the one committed real
// episode per task. One RehearsalPhases holds what the phases share (the tasks, the attempts so far, the
// per-task memory caps, the wall time of each phase); privateRehearsal runs them in order and reports.
// Browser-safe: no Node imports.
import { judgeOptions } from '../env/judge';
import type { Task } from '../env/domain';
import type { Environment } from '../env/env';
import { hasRehearseAdapter, type RolloutMode } from '../method/modes';
import { generate, type GenerateRequest } from '../model/generate';
import type { LoraAdapter } from '../model/lora';
import { buildActPrompt } from '../rollout/act-prompt';
import { buildRehearsalMemory, withMemory, type MemoryEvaluation, type RehearsalMemory } from '../rollout/rehearsal-memory';
import { runRollouts, type RolloutBatch, type RolloutConfig, type RolloutDomain, type RolloutRecord } from '../rollout/rollout';
import { buildSelfEvalPrompt, cleanEvaluation, judgeVerdict } from '../rollout/self-eval';
import { deriveSeed } from '../util/rng';
import type { EvalPolicy } from './evaluate';
import type { AttemptRecord, MemoryPlacement, PrivateRehearsalOptions, TokenCount } from './private-rehearsal';

export const ZERO = (): TokenCount => ({ generated: 0, prompt: 0 });

/** The rollout seed of an imagined attempt (0 = all parallel attempts, k = sequential attempt k) of a task group. */
export const attemptSeed = (seed: number, attempt: number, firstTask: number) => deriveSeed(0x7e57, seed, attempt, firstTask);

/** The options of privateRehearsal with their defaults applied and checked. */
export interface RehearsalSettings {
  memoryTokens: number;
  memoryEvaluation: MemoryEvaluation;
  maxEvalTokens: number;
  placement: MemoryPlacement;
  /** Tokens kept free past the memory in a task's first Act prompt; null: none. */
  reserve: number | null;
  kvReuse: boolean;
}

function rolloutTokens(batch: RolloutBatch, r: RolloutRecord): TokenCount {
  const t = ZERO();
  for (const i of r.rows) {
    t.generated += batch.rows[i].responseTokens.length;
    t.prompt += batch.rows[i].promptTokens.length;
  }
  return t;
}

/** A view of the domain with another Act system prompt and/or environment factory. */
export function view(domain: RolloutDomain, policy: string, createEnv: () => Environment): RolloutDomain {
  return { policy, definitions: () => domain.definitions(), createEnv, ...(domain.normaliseArgs ? { normaliseArgs: (n: string, a: Record<string, unknown>) => domain.normaliseArgs!(n, a) } : {}) };
}

/** Each task's records and token counts of one phase's rollouts, and the batches they came from. */
interface PhaseOutput {
  out: Map<number, { records: RolloutRecord[]; tokens: TokenCount[] }>;
  batches: RolloutBatch[];
}

export class RehearsalPhases {
  /** attempts[t]: task t's imagined attempts, in order. */
  readonly attempts: AttemptRecord[][];
  readonly wallMs = { imagine: 0, evaluate: 0, commit: 0 };
  /** The policy that rehearses: the Act adapter itself, or a separate Rehearse adapter. */
  readonly rehearser: LoraAdapter | null;
  /** The sandbox's environment factory (imagined attempts, fidelity). */
  readonly sandbox: () => Environment;
  private readonly imagineMode: RolloutMode;
  private readonly probe: Environment;
  private readonly maxContext: number;
  private readonly capOf: number[];
  private readonly all: number[];

  constructor(
    private readonly policy: EvalPolicy,
    private readonly domain: RolloutDomain,
    private readonly tasks: readonly Task[],
    private readonly opts: PrivateRehearsalOptions,
    private readonly s: RehearsalSettings,
  ) {
    const actAdapter = policy.actAdapter;
    this.rehearser = policy.rehearseAdapter === undefined ? actAdapter : policy.rehearseAdapter;
    // One policy for both roles = EnvACE's rehearse mode; a separate Rehearse adapter = a per-role policy.
    this.imagineMode = this.rehearser === actAdapter ? 'rehearse' : 'per-role';
    this.sandbox = opts.sandbox ?? (() => domain.createEnv());
    this.probe = this.sandbox(); // tool kinds for the judge; never executes anything
    this.maxContext = Math.min(opts.limits.maxContext ?? Infinity, policy.model.config.maxPositionEmbeddings);
    this.attempts = tasks.map(() => []);
    this.all = tasks.map((_, t) => t);
    // Per-task memory cap: the hard cap, or less where the first Act prompt (with an empty note in its place)
    // leaves less room; 2 tokens for BPE merges across the seam.
    this.capOf = tasks.map((task) => {
      if (s.reserve === null || !Number.isFinite(this.maxContext)) return s.memoryTokens;
      const users = task.userMessages.map((content) => ({ role: 'user' as const, content }));
      const first = this.countTokens(s.placement === 'user'
        ? buildActPrompt(domain.policy, domain.definitions(), [...users, { role: 'user', content: '' }])
        : buildActPrompt(`${domain.policy}\n\n`, domain.definitions(), users));
      return Math.max(0, Math.min(s.memoryTokens, this.maxContext - first - s.reserve - 2));
    });
  }

  private countTokens(text: string): number {
    return this.policy.tokenizer.encode(text).length;
  }

  /** A task and the Act system prompt conditioned on a memory (unchanged for an empty one). */
  private conditioned(task: Task, m: RehearsalMemory | null): { task: Task; system: string } {
    const policy = this.domain.policy;
    if (m === null || m.text === '') return { task, system: policy };
    return this.s.placement === 'user' ? { task: { ...task, userMessages: [...task.userMessages, m.text] }, system: policy } : { task, system: withMemory(policy, m) };
  }

  /** Task t's memory of its attempts so far. */
  memoryOf(t: number): RehearsalMemory {
    return buildRehearsalMemory(
      this.attempts[t].map((a) => ({ index: a.index, steps: a.rollout.steps, end: a.rollout.end, selfEval: a.selfEval, judge: a.judge })),
      (text) => this.countTokens(text),
      { maxTokens: this.capOf[t], evaluation: this.s.memoryEvaluation, ...this.opts.memoryClips },
    );
  }

  /** Every task's rollouts, one runRollouts call per distinct Act system prompt. */
  private async runGrouped(phase: 'imagine' | 'commit', memOf: (t: number) => RehearsalMemory | null, cfgOf: (firstTask: number) => RolloutConfig, k: number): Promise<PhaseOutput> {
    const { domain, policy } = this;
    const groups = new Map<string, number[]>();
    const cond = new Map(this.all.map((t) => [t, this.conditioned(this.tasks[t], memOf(t))]));
    for (const t of this.all) {
      const s = cond.get(t)!.system;
      groups.set(s, [...(groups.get(s) ?? []), t]);
    }
    const out: PhaseOutput['out'] = new Map();
    const batches: RolloutBatch[] = [];
    for (const [system, ts] of groups) {
      const d = phase === 'commit'
        ? (system === domain.policy ? domain : view(domain, system, () => domain.createEnv()))
        : view(domain, system, this.sandbox);
      const batch = await runRollouts(
        { model: policy.model, tokenizer: policy.tokenizer, adapter: policy.actAdapter, ...(phase === 'imagine' && hasRehearseAdapter(this.imagineMode) ? { rehearseAdapter: this.rehearser } : {}) },
        d, ts.map((t) => cond.get(t)!.task), cfgOf(ts[0]),
      );
      this.opts.onBatch?.(phase, batch);
      batches.push(batch);
      ts.forEach((t, j) => {
        const recs = batch.rollouts.slice(j * k, (j + 1) * k);
        out.set(t, { records: recs, tokens: recs.map((r) => rolloutTokens(batch, r)) });
      });
    }
    return { out, batches };
  }

  private imagineCfg(attempt: number, k: number) {
    const o = this.opts;
    return (firstTask: number): RolloutConfig => ({
      mode: this.imagineMode, k, seed: attemptSeed(o.seed, attempt, firstTask), limits: o.limits, temperature: o.attemptTemperature ?? 1, topP: o.attemptTopP ?? 1,
      rehearsePrompt: o.rehearsePrompt, kvReuse: this.s.kvReuse, actScript: o.actScript, signal: o.signal,
    });
  }

  /** The judge's verdict on each attempt and the policy's own evaluation of it, one batched greedy generation. */
  private async evaluate(items: { t: number; a: AttemptRecord }[]): Promise<void> {
    const t0 = performance.now();
    const { model, tokenizer: tok } = this.policy;
    for (const { t, a } of items) a.judge = judgeVerdict(this.tasks[t], a.rollout.steps, judgeOptions(this.probe, this.domain.normaliseArgs?.bind(this.domain)));
    if (this.opts.selfEvaluate ?? true) {
      const reqs: GenerateRequest[] = [];
      const owners: AttemptRecord[] = [];
      for (const { t, a } of items) {
        const prompt = tok.encode(buildSelfEvalPrompt(this.tasks[t], a.rollout.steps, a.rollout.end));
        if (prompt.length + this.s.maxEvalTokens > this.maxContext) continue; // stays null: shown as "no evaluation"
        reqs.push({ prompt, maxNewTokens: this.s.maxEvalTokens, sampling: { temperature: 0, topP: 1, seed: 0 } });
        owners.push(a);
      }
      const outs = reqs.length ? await generate(model, tok, reqs, { adapter: this.policy.actAdapter, signal: this.opts.signal }) : [];
      outs.forEach((r, i) => {
        owners[i].selfEval = cleanEvaluation(r.text);
        owners[i].evalTokens = { generated: r.tokens.length, prompt: r.promptTokens.length };
      });
    }
    this.wallMs.evaluate += performance.now() - t0;
  }

  private newAttempt(index: number, memoryBefore: RehearsalMemory | null, rollout: RolloutRecord, tokens: TokenCount): AttemptRecord {
    return { index, memoryBefore, rollout, selfEval: null, judge: { reward: NaN, unmet: [] }, tokens, evalTokens: ZERO() };
  }

  /** Parallel: N independent imagined attempts of every task, then one evaluation pass over them all. */
  async imagineParallel(log: (s: string) => void): Promise<void> {
    const { opts, all, tasks } = this;
    opts.onPhase?.('imagine', null);
    log(`tts parallel: ${tasks.length} tasks × ${opts.n} imagined attempts`);
    const t0 = performance.now();
    const { out } = await this.runGrouped('imagine', () => null, this.imagineCfg(0, opts.n), opts.n);
    this.wallMs.imagine += performance.now() - t0;
    for (const t of all) out.get(t)!.records.forEach((r, i) => this.attempts[t].push(this.newAttempt(i, null, r, out.get(t)!.tokens[i])));
    opts.onPhase?.('evaluate', null);
    await this.evaluate(all.flatMap((t) => this.attempts[t].map((a) => ({ t, a }))));
  }

  /** Sequential: attempt k carries the memory of attempts < k; attempt → evaluation → next, all tasks together. */
  async imagineSequential(log: (s: string) => void): Promise<void> {
    const { opts, all, tasks } = this;
    for (let k = 0; k < opts.n; k++) {
      opts.onPhase?.('imagine', k);
      log(`tts sequential: attempt ${k + 1}/${opts.n} for ${tasks.length} tasks`);
      const before = all.map((t) => (k === 0 ? null : this.memoryOf(t)));
      const t0 = performance.now();
      const { out } = await this.runGrouped('imagine', (t) => before[t], this.imagineCfg(k + 1, 1), 1);
      this.wallMs.imagine += performance.now() - t0;
      for (const t of all) this.attempts[t].push(this.newAttempt(k, before[t], out.get(t)!.records[0], out.get(t)!.tokens[0]));
      opts.onPhase?.('evaluate', k);
      await this.evaluate(all.map((t) => ({ t, a: this.attempts[t][k] })));
    }
  }

  /** One real episode per task, conditioned on its memory (greedy); only this is scored. */
  async commit(memories: readonly RehearsalMemory[]): Promise<PhaseOutput> {
    const o = this.opts;
    const t0 = performance.now();
    const cfg = (): RolloutConfig => ({ mode: 'real', k: 1, seed: o.seed, limits: o.limits, temperature: 0, kvReuse: this.s.kvReuse, actScript: o.actScript, signal: o.signal });
    const done = await this.runGrouped('commit', (t) => memories[t], cfg, 1);
    this.wallMs.commit = performance.now() - t0;
    return done;
  }
}
