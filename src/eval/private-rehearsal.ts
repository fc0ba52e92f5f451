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
import type { Task } from '../env/domain';
import type { Environment } from '../env/env';
import { evalRehearsalFidelity } from '../rollout/fidelity-eval';
import { summarizeRollouts } from '../rollout/metrics';
import type { RehearsePromptOptions } from '../rollout/rehearse-prompt';
import { MEMORY_EVALUATIONS, type JudgeVerdict, type MemoryEvaluation, type MemoryOptions, type RehearsalMemory } from '../rollout/rehearsal-memory';
import { mergeBatches, type RolloutBatch, type RolloutConfig, type RolloutDomain, type RolloutLimits, type RolloutRecord } from '../rollout/rollout';
import { heldOutReport, taskResult, toHeldOutFidelity, type EvalPolicy, type HeldOutReport, type TaskResult } from './evaluate';
import { RehearsalPhases, view, ZERO, type RehearsalSettings } from './rehearsal-phases';

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

/** The options' defaults applied, every value checked before anything runs. */
function settingsOf(opts: PrivateRehearsalOptions, tasks: readonly Task[]): RehearsalSettings {
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
  const placement = opts.memoryPlacement ?? 'user';
  if (!MEMORY_PLACEMENTS.includes(placement)) throw new TtsConfigError(`memoryPlacement must be user or system, got ${String(placement)}`);
  const reserve = opts.contextReserve === undefined ? opts.limits.maxActTokens : opts.contextReserve;
  if (reserve !== null && !(Number.isInteger(reserve) && reserve >= 0)) throw new TtsConfigError(`contextReserve must be an integer >= 0 or null, got ${reserve}`);
  return { memoryTokens, memoryEvaluation, maxEvalTokens, placement, reserve, kvReuse: opts.kvReuse ?? true };
}

export async function privateRehearsal(policy: EvalPolicy, domain: RolloutDomain, tasks: readonly Task[], opts: PrivateRehearsalOptions): Promise<PrivateRehearsalReport> {
  const settings = settingsOf(opts, tasks);
  const fidelityTokens = opts.fidelityTokens ?? 0;
  const log = opts.log ?? (() => {});
  const phases = new RehearsalPhases(policy, domain, tasks, opts, settings);
  const all = tasks.map((_, t) => t);

  // ---- Steps 1-2: imagined attempts and their evaluations (sandbox only).
  if (opts.n > 0 && opts.mode === 'parallel') await phases.imagineParallel(log);
  else if (opts.n > 0) await phases.imagineSequential(log);

  // ---- Step 3: one real episode per task, conditioned on its memory; only this is scored.
  const memories = all.map((t) => phases.memoryOf(t));
  opts.onPhase?.('commit', null);
  log(`tts commit: ${tasks.length} real episodes (memory ${memories.reduce((s, m) => s + m.tokens, 0) / tasks.length} tokens/task)`);
  const { out: committedOut, batches } = await phases.commit(memories);

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
    const f = await evalRehearsalFidelity(policy.model, policy.tokenizer, phases.rehearser, view(domain, domain.policy, phases.sandbox), tasks, {
      maxRehearseTokens: fidelityTokens, rehearsePrompt: opts.rehearsePrompt, maxContext: opts.limits.maxContext, signal: opts.signal,
    });
    fidelity = toHeldOutFidelity(f);
    fidelityMs = performance.now() - f0;
  }

  const sum = (xs: TokenCount[]) => xs.reduce((a, x) => ({ generated: a.generated + x.generated, prompt: a.prompt + x.prompt }), ZERO());
  const perTaskTts: TaskRehearsal[] = all.map((t) => {
    const imagined = sum(phases.attempts[t].map((a) => a.tokens));
    const evaluation = sum(phases.attempts[t].map((a) => a.evalTokens));
    const com = committedOut.get(t)!.tokens[0];
    return {
      taskId: tasks[t].id, attempts: phases.attempts[t], memory: memories[t], committed: committed[t],
      tokens: { imagined, evaluation, committed: com, total: imagined.generated + imagined.prompt + evaluation.generated + evaluation.prompt + com.generated + com.prompt },
    };
  });
  const judged = perTaskTts.flatMap((p) => p.attempts.map((a) => a.judge.reward));
  return {
    ...heldOutReport(tasks.length, s, fidelity, perTask, { real: phases.wallMs.commit, fidelity: fidelityMs }),
    privateRehearsal: {
      mode: opts.mode, n: opts.n, memoryTokens: settings.memoryTokens, memoryEvaluation: settings.memoryEvaluation, perTask: perTaskTts,
      tokensPerTask: perTaskTts.reduce((a, p) => a + p.tokens.total, 0) / tasks.length,
      meanAttemptJudge: judged.length ? judged.reduce((a, x) => a + x, 0) / judged.length : NaN,
      wallMs: phases.wallMs,
    },
  };
}

/** One task's artefacts (the lab's single-task view): attempts, evaluations, memory, committed episode, tokens. */
export async function privateRehearsalTask(policy: EvalPolicy, domain: RolloutDomain, task: Task, opts: PrivateRehearsalOptions): Promise<TaskRehearsal> {
  return (await privateRehearsal(policy, domain, [task], opts)).privateRehearsal.perTask[0];
}
