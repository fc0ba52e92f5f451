// Test-time private rehearsal: before its one committed real execution, the
// policy tries the task N times in its head (Act + Rehearse with the same parameters, nothing executed),
// evaluates each attempt, condenses attempts and evaluations into a rehearsal memory m_x, and then runs ONE
// real episode whose Act context carries m_x. Only that episode is scored.
//
//   parallel    N independent imagined attempts (all tasks × N decode together), then one evaluation pass.
//   sequential  attempt k's Act context carries the memory of attempts < k and their evaluations;
//               attempt → evaluation → next attempt, all tasks advancing together round by round.
//
// The real environment is `domain.createEnv()`: the committed episode acts in it and its reward replays on
// it. Steps 1-2 never call it: the imagined attempts' hidden shadow environment (used only to measure
// rehearsal fidelity, never shown to the policy) and their grounding replay use `opts.sandbox`. In this lab
// every createEnv() is a fresh copy-on-write copy of the frozen base, so the default sandbox is
// domain.createEnv itself; where the real environment has effects, pass a sandbox (a copy, a recorder).
// N = 0 runs exactly the plain held-out evaluation (src/eval/evaluate.ts): same call, same settings.
//
// Where m enters the Act context is an option (memoryPlacement): by default an extra user message after the
// request; or a note in the system prompt. Batching: a runRollouts call shares one Act system prompt, so
// episodes are grouped by it: with the user placement every phase is one batch over all tasks; with the system
// placement, conditioned attempts and committed episodes run one group per task.
// Browser-safe: no Node imports.
import { deriveSeed } from '../util/rng';
import type { Task } from '../env/domain';
import type { Environment } from '../env/env';
import { generate, type GenerateRequest } from '../model/generate';
import { hasRehearseAdapter, type RolloutMode } from '../method/modes';
import { heldOutReport, taskResult, type EvalPolicy, type HeldOutReport, type TaskResult } from './evaluate';
import type { TrainingRow } from '../rollout/rows';
import { buildActPrompt } from '../rollout/act-prompt';
import { evalRehearsalFidelity } from '../rollout/fidelity-eval';
import { summarizeFidelity } from '../rollout/fidelity';
import { summarizeRollouts } from '../rollout/metrics';
import type { RehearsePromptOptions } from '../rollout/rehearse-prompt';
import { buildRehearsalMemory, MEMORY_EVALUATIONS, withMemory, type JudgeVerdict, type MemoryEvaluation, type MemoryOptions, type RehearsalMemory } from '../rollout/rehearsal-memory';
import { runRollouts, type RolloutBatch, type RolloutConfig, type RolloutDomain, type RolloutLimits, type RolloutRecord } from '../rollout/rollout';
import { buildSelfEvalPrompt, cleanEvaluation, judgeVerdict } from '../rollout/self-eval';

export type TtsMode = 'parallel' | 'sequential';
export const TTS_MODES: readonly TtsMode[] = ['parallel', 'sequential'];
export type TtsPhase = 'imagine' | 'evaluate' | 'commit';
export type MemoryPlacement = 'user' | 'system';
export const MEMORY_PLACEMENTS: readonly MemoryPlacement[] = ['user', 'system'];

export interface PrivateRehearsalOptions {
  mode: TtsMode;
  /** Imagined attempts per task; 0 = the plain held-out evaluation. */
  n: number;
  seed: number;
  limits: RolloutLimits;
  /** Token budget per rehearsal of the held-out fidelity measurement (as evaluateHeldOut); 0/undefined skips it. */
  fidelityTokens?: number;
  rehearsePrompt?: RehearsePromptOptions;
  /** Hard cap on the rehearsal memory in policy tokens (default 256). */
  memoryTokens?: number;
  /**
   * Tokens kept free past the memory in a task's first Act prompt: the memory cap shrinks, per task, to
   * maxContext − (first Act prompt without memory) − contextReserve. Default limits.maxActTokens (the first Act
   * turn always fits); null lets the memory push episodes into the context limit (the paper's N = 3 fall-back).
   */
  contextReserve?: number | null;
  /**
   * Where m enters the Act context (default 'user'): 'user' = an extra user message after the request (the
   * system prompt stays byte-identical, so a domain tokenizer's merges over the fixed system prompt survive, and
   * all tasks still batch together); 'system' = a note appended to the system prompt (after the policy, before
   * the tools block). Measured on the bundled model: a system note re-tokenizes the whole fixed prefix (its first
   * 9 tokens become a different 35), a user message leaves the first 33 tokens unchanged.
   */
  memoryPlacement?: MemoryPlacement;
  /** Which evaluation enters the memory (default 'self', the paper's mechanism). Both are always returned. */
  memoryEvaluation?: MemoryEvaluation;
  /** Clips inside the memory (rehearsal-memory.ts defaults). */
  memoryClips?: Pick<MemoryOptions, 'maxResultChars' | 'maxReplyChars' | 'maxEvalChars' | 'maxSteps'>;
  /** Generate the policy's self-evaluation of each attempt (default true). */
  selfEvaluate?: boolean;
  /** New tokens per self-evaluation (default 64, greedy). */
  maxEvalTokens?: number;
  /** Sampling of the imagined attempts (default 1, 1: diverse attempts); the committed episode is greedy. */
  attemptTemperature?: number;
  attemptTopP?: number;
  /** Keep each role's KV cache across turns (default true, as `npm run eval`). */
  kvReuse?: boolean;
  /** Environments for the imagined attempts' hidden shadow and grounding replay (default domain.createEnv). */
  sandbox?: () => Environment;
  /** Scripted Act turns (tests with random-weight policies), in imagined attempts and the committed episode. */
  actScript?: RolloutConfig['actScript'];
  signal?: AbortSignal;
  log?: (s: string) => void;
  /** Called as each phase starts: sequential imagine/evaluate get the attempt index; parallel ones and commit get null. */
  onPhase?: (phase: TtsPhase, attempt: number | null) => void;
  /** Every rollout batch as it completes (for inspection: prompts, rows). */
  onBatch?: (phase: 'imagine' | 'commit', batch: RolloutBatch) => void;
}

export interface TokenCount {
  generated: number;
  prompt: number;
}

export interface AttemptRecord {
  /** 0-based. */
  index: number;
  /** The memory this attempt's Act context carried (sequential k > 0), else null. */
  memoryBefore: RehearsalMemory | null;
  /** The imagined episode: steps and messages (rehearsed observations), end, fidelity vs the sandbox. */
  rollout: RolloutRecord;
  /** The policy's own evaluation (null when off, or when its prompt did not fit the context). */
  selfEval: string | null;
  /** The deterministic checklist judge's verdict (privileged: reads the reference checklist). */
  judge: JudgeVerdict;
  tokens: TokenCount;
  evalTokens: TokenCount;
}

export interface TaskRehearsal {
  taskId: string;
  attempts: AttemptRecord[];
  /** The memory that conditioned the committed episode (empty for N = 0). */
  memory: RehearsalMemory;
  /** The one real episode; `committed.reward` is the task's score. */
  committed: RolloutRecord;
  tokens: { imagined: TokenCount; evaluation: TokenCount; committed: TokenCount; total: number };
}

export interface PrivateRehearsalSummary {
  mode: TtsMode;
  n: number;
  memoryTokens: number;
  memoryEvaluation: MemoryEvaluation;
  perTask: TaskRehearsal[];
  /** Mean over tasks of every token processed (prompt + generated) in all three phases. */
  tokensPerTask: number;
  /** Mean imagined-attempt judge reward (NaN with N = 0). */
  meanAttemptJudge: number;
  wallMs: { imagine: number; evaluate: number; commit: number };
}

/** The held-out report of the committed episodes (same fields as evaluateHeldOut) plus every artefact. */
export interface PrivateRehearsalReport extends HeldOutReport {
  privateRehearsal: PrivateRehearsalSummary;
}

/** The rehearsal memory's default cap in policy tokens (pretraining's memory-conditioned rows use it too). */
export const DEFAULT_MEMORY_TOKENS = 256;

export class TtsConfigError extends Error {
  override readonly name = 'TtsConfigError';
}

const ZERO = (): TokenCount => ({ generated: 0, prompt: 0 });

/** The rollout seed of an imagined attempt (0 = all parallel attempts, k = sequential attempt k) of a task group. */
export const attemptSeed = (seed: number, attempt: number, firstTask: number) => deriveSeed(0x7e57, seed, attempt, firstTask);

function rolloutTokens(batch: RolloutBatch, r: RolloutRecord): TokenCount {
  const t = ZERO();
  for (const i of r.rows) {
    t.generated += batch.rows[i].responseTokens.length;
    t.prompt += batch.rows[i].promptTokens.length;
  }
  return t;
}

/** A view of the domain with another Act system prompt and/or environment factory. */
function view(domain: RolloutDomain, policy: string, createEnv: () => Environment): RolloutDomain {
  return { policy, definitions: () => domain.definitions(), createEnv, ...(domain.normaliseArgs ? { normaliseArgs: (n: string, a: Record<string, unknown>) => domain.normaliseArgs!(n, a) } : {}) };
}

/** Concatenates batches (row indices remapped) so one summary covers them all. */
function mergeBatches(batches: readonly RolloutBatch[]): RolloutBatch {
  if (batches.length === 1) return batches[0];
  const rows: TrainingRow[] = [];
  const rollouts: RolloutRecord[] = [];
  const stats = { rounds: 0, actGenerations: 0, rehearseGenerations: 0, generatedTokens: 0, promptTokens: 0, reusedPromptTokens: 0, wallMs: 0 };
  for (const b of batches) {
    const off = rows.length;
    rows.push(...b.rows);
    for (const r of b.rollouts) rollouts.push({ ...r, rows: r.rows.map((i) => i + off) });
    for (const k of Object.keys(stats) as (keyof typeof stats)[]) stats[k] = k === 'rounds' ? Math.max(stats[k], b.stats[k]) : stats[k] + b.stats[k];
  }
  return { rollouts, rows, fidelity: summarizeFidelity(rollouts.flatMap((r) => r.fidelity)), stats };
}

export async function privateRehearsal(policy: EvalPolicy, domain: RolloutDomain, tasks: readonly Task[], opts: PrivateRehearsalOptions): Promise<PrivateRehearsalReport> {
  if (!TTS_MODES.includes(opts.mode)) throw new TtsConfigError(`mode must be parallel or sequential, got ${String(opts.mode)}`);
  if (!(Number.isInteger(opts.n) && opts.n >= 0)) throw new TtsConfigError(`n must be an integer >= 0, got ${opts.n}`);
  if (tasks.length === 0) throw new TtsConfigError('no tasks');
  const memoryTokens = opts.memoryTokens ?? DEFAULT_MEMORY_TOKENS;
  if (!(Number.isInteger(memoryTokens) && memoryTokens >= 0)) throw new TtsConfigError(`memoryTokens must be an integer >= 0, got ${memoryTokens}`);
  const memoryEvaluation = opts.memoryEvaluation ?? 'self';
  if (!MEMORY_EVALUATIONS.includes(memoryEvaluation)) throw new TtsConfigError(`memoryEvaluation must be one of ${MEMORY_EVALUATIONS.join(', ')}`);
  const maxEvalTokens = opts.maxEvalTokens ?? 64;
  if (!(Number.isInteger(maxEvalTokens) && maxEvalTokens >= 1)) throw new TtsConfigError(`maxEvalTokens must be a positive integer, got ${maxEvalTokens}`);
  const fidelityTokens = opts.fidelityTokens ?? 0;
  if (!(Number.isInteger(fidelityTokens) && fidelityTokens >= 0)) throw new TtsConfigError(`fidelityTokens must be an integer >= 0, got ${fidelityTokens}`);
  const log = opts.log ?? (() => {});
  const { model, tokenizer: tok } = policy;
  const actAdapter = policy.actAdapter;
  const rehearser = policy.rehearseAdapter === undefined ? actAdapter : policy.rehearseAdapter;
  // One policy for both roles = EnvACE's rehearse mode; a separate Rehearse adapter = a per-role policy.
  const imagineMode: RolloutMode = rehearser === actAdapter ? 'rehearse' : 'per-role';
  const sandbox = opts.sandbox ?? (() => domain.createEnv());
  const probe = sandbox(); // tool kinds for the judge; never executes anything
  const maxContext = Math.min(opts.limits.maxContext ?? Infinity, model.config.maxPositionEmbeddings);
  const countTokens = (s: string) => tok.encode(s).length;
  const placement = opts.memoryPlacement ?? 'user';
  if (!MEMORY_PLACEMENTS.includes(placement)) throw new TtsConfigError(`memoryPlacement must be user or system, got ${String(placement)}`);
  const reserve = opts.contextReserve === undefined ? opts.limits.maxActTokens : opts.contextReserve;
  if (reserve !== null && !(Number.isInteger(reserve) && reserve >= 0)) throw new TtsConfigError(`contextReserve must be an integer >= 0 or null, got ${reserve}`);
  // A task and the Act system prompt conditioned on a memory (unchanged for an empty one).
  const conditioned = (task: Task, m: RehearsalMemory | null): { task: Task; system: string } =>
    m === null || m.text === '' ? { task, system: domain.policy }
      : placement === 'user' ? { task: { ...task, userMessages: [...task.userMessages, m.text] }, system: domain.policy }
        : { task, system: withMemory(domain.policy, m) };
  // Per-task memory cap: the hard cap, or less where the first Act prompt (with an empty note in its place)
  // leaves less room; 2 tokens for BPE merges across the seam.
  const capOf = tasks.map((task) => {
    if (reserve === null || !Number.isFinite(maxContext)) return memoryTokens;
    const users = task.userMessages.map((content) => ({ role: 'user' as const, content }));
    const first = countTokens(placement === 'user'
      ? buildActPrompt(domain.policy, domain.definitions(), [...users, { role: 'user', content: '' }])
      : buildActPrompt(`${domain.policy}\n\n`, domain.definitions(), users));
    return Math.max(0, Math.min(memoryTokens, maxContext - first - reserve - 2));
  });
  const kvReuse = opts.kvReuse ?? true;
  const wallMs = { imagine: 0, evaluate: 0, commit: 0 };

  const attempts: AttemptRecord[][] = tasks.map(() => []);
  const memoryOf = (t: number) => buildRehearsalMemory(
    attempts[t].map((a) => ({ index: a.index, steps: a.rollout.steps, end: a.rollout.end, selfEval: a.selfEval, judge: a.judge })), countTokens,
    { maxTokens: capOf[t], evaluation: memoryEvaluation, ...opts.memoryClips });

  // Runs the tasks' rollouts, one runRollouts call per distinct Act system prompt; returns each task's
  // records and token counts.
  const runGrouped = async (phase: 'imagine' | 'commit', idx: readonly number[], memOf: (t: number) => RehearsalMemory | null, cfgOf: (firstTask: number) => RolloutConfig, k: number) => {
    const groups = new Map<string, number[]>();
    const cond = new Map(idx.map((t) => [t, conditioned(tasks[t], memOf(t))]));
    for (const t of idx) {
      const s = cond.get(t)!.system;
      groups.set(s, [...(groups.get(s) ?? []), t]);
    }
    const out = new Map<number, { records: RolloutRecord[]; tokens: TokenCount[] }>();
    const batches: RolloutBatch[] = [];
    for (const [system, ts] of groups) {
      const d = phase === 'commit'
        ? (system === domain.policy ? domain : view(domain, system, () => domain.createEnv()))
        : view(domain, system, sandbox);
      const batch = await runRollouts(
        { model, tokenizer: tok, adapter: actAdapter, ...(phase === 'imagine' && hasRehearseAdapter(imagineMode) ? { rehearseAdapter: rehearser } : {}) },
        d, ts.map((t) => cond.get(t)!.task), cfgOf(ts[0]),
      );
      opts.onBatch?.(phase, batch);
      batches.push(batch);
      ts.forEach((t, j) => {
        const recs = batch.rollouts.slice(j * k, (j + 1) * k);
        out.set(t, { records: recs, tokens: recs.map((r) => rolloutTokens(batch, r)) });
      });
    }
    return { out, batches };
  };

  const imagineCfg = (attempt: number, k: number) => (firstTask: number): RolloutConfig => ({
    mode: imagineMode, k, seed: attemptSeed(opts.seed, attempt, firstTask), limits: opts.limits, temperature: opts.attemptTemperature ?? 1, topP: opts.attemptTopP ?? 1,
    rehearsePrompt: opts.rehearsePrompt, kvReuse, actScript: opts.actScript, signal: opts.signal,
  });

  // Self-evaluations of the given attempts, one batched greedy generation.
  const evaluate = async (items: { t: number; a: AttemptRecord }[]) => {
    const t0 = performance.now();
    for (const { t, a } of items) a.judge = judgeVerdict(tasks[t], a.rollout.steps, { isWrite: (n) => probe.isWrite(n), normaliseArgs: domain.normaliseArgs?.bind(domain) });
    if (opts.selfEvaluate ?? true) {
      const reqs: GenerateRequest[] = [];
      const owners: AttemptRecord[] = [];
      for (const { t, a } of items) {
        const prompt = tok.encode(buildSelfEvalPrompt(tasks[t], a.rollout.steps, a.rollout.end));
        if (prompt.length + maxEvalTokens > maxContext) continue; // stays null: shown as "no evaluation"
        reqs.push({ prompt, maxNewTokens: maxEvalTokens, sampling: { temperature: 0, topP: 1, seed: 0 } });
        owners.push(a);
      }
      const outs = reqs.length ? await generate(model, tok, reqs, { adapter: actAdapter, signal: opts.signal }) : [];
      outs.forEach((r, i) => {
        owners[i].selfEval = cleanEvaluation(r.text);
        owners[i].evalTokens = { generated: r.tokens.length, prompt: r.promptTokens.length };
      });
    }
    wallMs.evaluate += performance.now() - t0;
  };

  const all = tasks.map((_, t) => t);
  const newAttempt = (index: number, memoryBefore: RehearsalMemory | null, rollout: RolloutRecord, tokens: TokenCount): AttemptRecord =>
    ({ index, memoryBefore, rollout, selfEval: null, judge: { reward: NaN, unmet: [] }, tokens, evalTokens: ZERO() });

  // ---- Steps 1-2: imagined attempts and their evaluations (sandbox only).
  if (opts.n > 0 && opts.mode === 'parallel') {
    opts.onPhase?.('imagine', null);
    log(`tts parallel: ${tasks.length} tasks × ${opts.n} imagined attempts`);
    const t0 = performance.now();
    const { out } = await runGrouped('imagine', all, () => null, imagineCfg(0, opts.n), opts.n);
    wallMs.imagine += performance.now() - t0;
    for (const t of all) out.get(t)!.records.forEach((r, i) => attempts[t].push(newAttempt(i, null, r, out.get(t)!.tokens[i])));
    opts.onPhase?.('evaluate', null);
    await evaluate(all.flatMap((t) => attempts[t].map((a) => ({ t, a }))));
  } else if (opts.n > 0) {
    for (let k = 0; k < opts.n; k++) {
      opts.onPhase?.('imagine', k);
      log(`tts sequential: attempt ${k + 1}/${opts.n} for ${tasks.length} tasks`);
      const before = all.map((t) => (k === 0 ? null : memoryOf(t)));
      const t0 = performance.now();
      const { out } = await runGrouped('imagine', all, (t) => before[t], imagineCfg(k + 1, 1), 1);
      wallMs.imagine += performance.now() - t0;
      for (const t of all) attempts[t].push(newAttempt(k, before[t], out.get(t)!.records[0], out.get(t)!.tokens[0]));
      opts.onPhase?.('evaluate', k);
      await evaluate(all.map((t) => ({ t, a: attempts[t][k] })));
    }
  }

  // ---- Step 3: one real episode per task, conditioned on its memory; only this is scored.
  const memories = all.map((t) => memoryOf(t));
  opts.onPhase?.('commit', null);
  log(`tts commit: ${tasks.length} real episodes (memory ${memories.reduce((s, m) => s + m.tokens, 0) / tasks.length} tokens/task)`);
  const t0 = performance.now();
  const commitCfg = (): RolloutConfig => ({ mode: 'real', k: 1, seed: opts.seed, limits: opts.limits, temperature: 0, kvReuse, actScript: opts.actScript, signal: opts.signal });
  const { out: committedOut, batches } = await runGrouped('commit', all, (t) => memories[t], commitCfg, 1);
  wallMs.commit = performance.now() - t0;

  // The report exactly as evaluateHeldOut builds it, over the committed episodes in task order.
  const merged = mergeBatches(batches);
  const refs = new Map(tasks.map((t) => [t.id, t.referenceActions]));
  const s = summarizeRollouts(merged, (id) => refs.get(id) ?? []);
  const committed = all.map((t) => committedOut.get(t)!.records[0]);
  const family = new Map(tasks.map((t) => [t.id, t.family ?? null]));
  const perTask = committed.map((r): TaskResult => taskResult(r.taskId, family.get(r.taskId) ?? null, r, refs.get(r.taskId) ?? []));

  let fidelity: HeldOutReport['fidelity'] = null;
  let fidelityMs = 0;
  if (fidelityTokens > 0) {
    const f0 = performance.now();
    // A property of the policy, not of the memory: measured as in the plain evaluation, on the sandbox.
    const f = await evalRehearsalFidelity(model, tok, rehearser, view(domain, domain.policy, sandbox), tasks, {
      maxRehearseTokens: fidelityTokens, rehearsePrompt: opts.rehearsePrompt, maxContext: opts.limits.maxContext, signal: opts.signal,
    });
    fidelity = { steps: f.summary.steps, exact: f.summary.exact, f1: f.summary.f1, errorAgree: f.summary.errorAgree, invalid: f.invalid, skipped: f.skipped };
    fidelityMs = performance.now() - f0;
  }

  const sum = (xs: TokenCount[]) => xs.reduce((a, x) => ({ generated: a.generated + x.generated, prompt: a.prompt + x.prompt }), ZERO());
  const perTaskTts: TaskRehearsal[] = all.map((t) => {
    const imagined = sum(attempts[t].map((a) => a.tokens));
    const evaluation = sum(attempts[t].map((a) => a.evalTokens));
    const com = committedOut.get(t)!.tokens[0];
    return {
      taskId: tasks[t].id, attempts: attempts[t], memory: memories[t], committed: committed[t],
      tokens: { imagined, evaluation, committed: com, total: imagined.generated + imagined.prompt + evaluation.generated + evaluation.prompt + com.generated + com.prompt },
    };
  });
  const judged = perTaskTts.flatMap((p) => p.attempts.map((a) => a.judge.reward));
  return {
    ...heldOutReport(tasks.length, s, fidelity, perTask, { real: wallMs.commit, fidelity: fidelityMs }),
    privateRehearsal: {
      mode: opts.mode, n: opts.n, memoryTokens, memoryEvaluation, perTask: perTaskTts,
      tokensPerTask: perTaskTts.reduce((a, p) => a + p.tokens.total, 0) / tasks.length,
      meanAttemptJudge: judged.length ? judged.reduce((a, x) => a + x, 0) / judged.length : NaN,
      wallMs,
    },
  };
}

/** One task's artefacts (the lab's single-task view): attempts, evaluations, memory, committed episode, tokens. */
export async function privateRehearsalTask(policy: EvalPolicy, domain: RolloutDomain, task: Task, opts: PrivateRehearsalOptions): Promise<TaskRehearsal> {
  return (await privateRehearsal(policy, domain, [task], opts)).privateRehearsal.perTask[0];
}
