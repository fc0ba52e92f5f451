// The one typed protocol between the lab page and the policy worker (workers/policy.worker.ts), spoken
// through comlink. Everything here is structured-clone data; callbacks cross as comlink.proxy(fn).
// Strings coming back (model output, tool results, imported files) are untrusted: the page renders
// them as text only.
import type { RolloutMode as TrainMode } from './method/modes';
import type { RewardRule } from './method/reward-rules';
import type { LabRequest } from './method/run-config';

export type { TrainMode };
export type BackendKind = 'webgpu' | 'cpu-fast' | 'cpu-ref';
export type WeightFormat = 'f32' | 'q8' | 'q4';
/** The stepper's and the group view's modes: one policy adapter, rehearsing or in the real environment. */
export type RolloutMode = Extract<TrainMode, 'rehearse' | 'real'>;
/**
 * Who plays the rollout: the policy samples every turn; 'expert-act': the task's scripted expert writes each
 * Act turn and the policy rehearses; 'expert': the expert writes the Act turns *and* the Rehearse turns (the
 * real observation, held to the Rehearse token budget like a generation). Expert text is teacher-forced:
 * scored token by token by the policy, never trained on.
 */
export type ActSource = 'policy' | 'expert-act' | 'expert';
/**
 * Who answers the agent in the stepper's episode: 'off', nobody (one message, the first reply ends it); 'scripted',
 * the domain's scripted τ² user (src/rollout/conversation.ts): it answers each reply, confirms or not, and stops.
 */
export { CONVERSATION_USERS as STEPPER_USERS } from './method/run-config';
export type StepperUser = ConversationUser;
import type { ConversationUser } from './method/run-config';
/** How rehearsals are decoded (src/rollout/rehearse-prompt.ts RehearseDecoding; the UI may not import src/rollout). */
export type { RehearseDecoding } from './method/run-config';
import type { RehearseDecoding } from './method/run-config';
export type WorldName = 'mini' | 'retail';

/** Which world the lab serves: a named world, or a user's task file over the full retail world. */
export interface WorldRequest {
  world: WorldName;
  /** A τ²-bench task file (or the lab's own task JSON); its tasks replace the generated ones. */
  taskFile?: { name: string; text: string };
}

export type ModelChoice =
  /** The bundled policy of a world (models/<WORLDS[world].bundledModel>/), or one of its lesson policies by name. */
  | { kind: 'bundled'; world: WorldName; policy?: string }
  | { kind: 'random' }
  | { kind: 'url'; url: string }
  | { kind: 'files'; files: File[] };

export interface LoadRequest {
  model: ModelChoice;
  format: WeightFormat;
  /**
   * Force a backend (the Backend control, URL ?backend=). Default: measured. A hardware WebGPU adapter is
   * used as it is; a software/fallback one (SwiftShader, llvmpipe) is timed against the CPU fast path on
   * the model itself and the faster one wins; no WebGPU: cpu-fast, else cpu-ref.
   */
  backend?: BackendKind;
  loraRank: number;
}

export interface Progress {
  /** What is running, in words (phase names, counts with what they count). */
  phase: string;
  done: number;
  total: number;
  /** Estimated time left of the whole operation, once there is a measurement to base it on. */
  etaMs?: number;
}
export type ProgressFn = (p: Progress) => void;

export interface LoadInfo {
  backend: BackendKind;
  /** Why this backend (e.g. "no WebGPU adapter: CPU fast path"), with the measurement when one was made. */
  backendNote: string;
  /** The WebGPU adapter as the browser describes it (null: none). */
  adapter: { description: string; software: boolean } | null;
  /** Threads of a CPU backend (1 without shared memory); null on WebGPU. */
  threads: number | null;
  /** Whether the policy worker is cross-origin isolated (shared memory: the CPU fast path's threads, an instant cancel). */
  isolated: boolean;
  /** The load-time calibration that chose the backend (ms per forward of the same tokens), when it ran. */
  calibration: { tokens: number; webgpuMs: number; cpuFastMs: number } | null;
  modelLabel: string;
  /** True for the random-weight placeholder: the UI says so everywhere it shows output. */
  untrained: boolean;
  params: number;
  format: WeightFormat;
  layers: number;
  hidden: number;
  vocab: number;
  contextLength: number;
  loraRank: number;
  loadMs: number;
  /** What loading took in memory (absent where not measured). */
  memory?: LoadMemory;
  /** The policy's pass@k ceiling on the held-out tasks, from ceiling.json in its folder; null: the folder has none. */
  ceiling: ModelCeiling | null;
  /** Why the folder's ceiling.json could not be used (null: there was none, or it was read). */
  ceilingProblem: string | null;
}

/**
 * pass@k of the starting policy on the held-out tasks (the lab's: the test split, task seed 1), measured by
 * `npm run signal -- --split test --task-seed 1 --modes real --k K --count N --out <model folder>/ceiling.json`:
 * the share of tasks that at least one of K sampled real-environment episodes solves, a ceiling for what sharpening
 * the policy toward its own best samples can reach on them.
 */
export interface ModelCeiling {
  passAtK: number;
  k: number;
  /** Held-out tasks it was measured on (the first N of the lab's held-out draw). */
  tasks: number;
  world: string;
  /** Sampling temperature of the K episodes. */
  temperature: number;
}

/** Memory of a load: the JS heap's peak (null where the browser does not expose it), GPU buffers (null on a CPU backend). */
export interface LoadMemory {
  /** Highest V8 JS heap in use seen while loading (Chromium's performance.memory; ArrayBuffers not included). */
  jsHeapPeak: number | null;
  /** Bytes of GPU buffers alive after the load, and their peak during it. */
  gpuBytes: number | null;
  gpuPeak: number | null;
  /** Bytes of the weights as stored on the backend (computed from the config and format). */
  weightBytes: number;
}

/**
 * Memory of the loaded policy now (the lab's "Memory now" readout, refreshed after every operation): the JS heap
 * in use (null where the browser does not expose it), GPU buffers alive and their peak since the load (null on
 * a CPU backend).
 */
export interface MemoryNow {
  jsHeap: number | null;
  gpuBytes: number | null;
  gpuPeak: number | null;
}

/** What a picked model folder holds, read before any weight is loaded. */
export interface FolderInfo {
  files: { name: string; bytes: number }[];
  totalBytes: number;
  params: number | null;
  /** Estimated memory of the weights after load, per format. */
  memoryBytes: Record<WeightFormat, number> | null;
  problems: string[];
}

export interface TaskSummary {
  id: string;
  family: string;
  split: 'train' | 'test';
  request: string;
  checklist: string[];
}

export interface EnvInfo {
  domain: string;
  world: WorldName;
  /** One line: what the world holds. */
  worldDescription: string;
  /** The world's lesson policies, by name (src/env/retail/worlds.ts lessonPolicies): the bundled models a lesson loads on request. */
  lessonPolicies: string[];
  /**
   * The lesson policy trained on conversations with the scripted τ² user (src/env/retail/worlds.ts CONVERSATION_POLICY),
   * when the world bundles one: the page plays the world with that user when it is loaded. null: none.
   */
  conversationPolicy: string | null;
  size: { users: number; orders: number; products: number };
  /** The user's task file the tasks come from (null: generated tasks of the world). */
  taskFile: string | null;
  tools: number;
  tasks: TaskSummary[];
}

/** Token budgets measured on the world's real observations under the loaded tokenizer (src/rollout/budget.ts). */
export interface BudgetInfo {
  rehearse: number;
  /** The p99 of the expert's Act turns, at least 96 (src/rollout/budget.ts MIN_ACT_TOKENS); acts.atQuantile is the p99 itself. */
  act: number;
  observations: { count: number; p50: number; quantile: number; atQuantile: number; max: number };
  acts: { count: number; p50: number; quantile: number; atQuantile: number; max: number };
  tasks: number;
  world: string;
  /** The model's context (a prompt plus its budget must fit it). */
  context: number;
}

/** One generated token with its log-probability under the sampling distribution. */
export interface TokenLp {
  text: string;
  lp: number;
}

export interface GenView {
  source: ActSource | 'policy';
  /** The exact prompt text the role saw (chat-rendered). */
  prompt: string;
  promptTokens: number;
  text: string;
  tokens: TokenLp[];
  ms: number;
}

export interface FidelityView {
  exact: boolean;
  f1: number;
  errorAgree: boolean;
}

export interface CallView {
  /** The call as written (JSON), or the parse error. */
  call: string;
  name: string;
  /** Rehearse mode: the policy playing the environment for this call. */
  rehearse: GenView | null;
  /** The rehearsed observation as parsed, or why it could not be. */
  rehearsed: string | null;
  rehearseError: string | null;
  /** The rehearsal stopped at its token budget (this many tokens) before closing: cut, not malformed. */
  rehearseCut: number | null;
  /** What the real environment returns for the same call (the shadow environment in rehearse mode). */
  real: string;
  fidelity: FidelityView | null;
}

export interface TurnView {
  index: number;
  act: GenView;
  calls: CallView[];
  /** The reply to the user this turn wrote: the one that ends a one-message episode, or any reply of a conversation. */
  reply: string | null;
}

/** A user turn of a conversation, placed before the Act turn `before` (the turns' count: after the last one). */
export interface UserTurnView {
  before: number;
  text: string;
  /** The conversation's first user message. */
  opening: boolean;
  /** An explicit yes (src/env/confirmation.ts isExplicitYes): what makes the next write confirmed. */
  confirms: boolean;
}

/** A conversation episode's user side (RolloutRequest.user 'scripted'). */
export interface ConversationView {
  user: Exclude<StepperUser, 'off'>;
  /** The fixed first agent message (τ²'s orchestrator writes it; the policy never generates it). */
  greeting: string;
  userTurns: UserTurnView[];
  /** The stop token the user ended the call with (null while it goes on, or when a cap ended it). */
  stop: string | null;
  /** Writes made without the user's explicit yes to their details, in order (the confirmation rule). */
  unconfirmed: { turn: number; call: string; why: string }[];
}

export interface RewardView {
  value: number;
  kind: 'checklist judge' | 'real environment' | 'none';
  /** Each item with why it passed or failed: which call, which observation (real or rehearsed), the rule. */
  items: { label: string; satisfied: boolean; reason: string }[];
  note: string;
}

/**
 * One step of the trajectory the judge scored (src/env/domain.ts Step, which this layer may not import: the
 * worker assigns the episode's steps here, so the compiler keeps the two shapes compatible), with the 0-based
 * Act turn that made it (the turn a verdict is numbered by).
 */
export type JudgedStep = (
  | { kind: 'call'; call: { name: string; arguments: Record<string, unknown> }; observation: { ok: true; name: string; result: unknown } | { ok: false; name: string; error: string; code: string } }
  | { kind: 'reply'; text: string }
) & { turn: number };

export interface RolloutView {
  taskId: string | null;
  request: string;
  mode: RolloutMode;
  seed: number;
  turns: TurnView[];
  /**
   * The steps as the reward scored them, so an exported rollout can be judged again (src/env/judge.ts).
   * Absent on rollouts imported from files that did not carry them.
   */
  steps?: JudgedStep[];
  done: boolean;
  endReason: string | null;
  reward: RewardView | null;
  /** Over the rehearsed calls: `steps` counts every rehearsal scored, an unparseable one as a miss (`misses`). */
  fidelity: { steps: number; misses: number; exact: number; f1: number; errorAgree: number } | null;
  /** Conversation episodes only: the user's turns, how the user ended it, and the confirmation rule's findings. */
  conversation?: ConversationView;
}

export interface RolloutRequest {
  taskId: string | null;
  /** Used when taskId is null: a typed user request (no checklist, no reward). */
  request: string;
  mode: RolloutMode;
  seed: number;
  actSource: ActSource;
  /** Act budget; 0 = measured (BudgetInfo.act). */
  maxNewTokens: number;
  /** Rehearse budget; 0 = measured (BudgetInfo.rehearse). */
  rehearseTokens: number;
  /** 'structured' (default): rehearsals decoded as well-formed observations with a loop guard; 'free': the policy alone. */
  rehearseDecoding?: RehearseDecoding;
  temperature: number;
  maxTurns: number;
  /** Who answers the agent: 'off' (default), a one-message episode; 'scripted', a conversation with the domain's user. */
  user?: StepperUser;
}

export interface GroupRow {
  rollout: number;
  reward: number;
  passed: string[];
  failed: string[];
  actRows: number;
  rehearseRows: number;
  endReason: string;
  turns: number;
}

export interface GroupView {
  taskId: string;
  mode: RolloutMode;
  k: number;
  /** One per rollout; the page groups their rows into baselines and advantages (src/method/advantage.ts). */
  rows: GroupRow[];
  rollouts: RolloutView[];
}

export interface GroupRequest extends Omit<RolloutRequest, 'taskId' | 'request' | 'actSource' | 'user'> {
  taskId: string;
  k: number;
}

/**
 * A training run's settings as the page sends them: the rows of the run settings' table with a lab control
 * (src/method/run-config.ts), by their one names. Saved requests of older versions are read through labRequest.
 */
export type TrainRequest = LabRequest;

/** The GRPO update's loss aggregations (the run settings' table's). */
export { AGGREGATIONS as LOSS_AGGREGATIONS, type Aggregation as LossAggregation } from './method/run-config';

/** Held-out success over a subset of the tasks (src/rollout/metrics.ts GroupSuccess, restated: this module imports no library layer but method). */
export interface GroupSuccess {
  tasks: number;
  success: number;
}

/** One training step as the dashboard plots it (from src/rl/run.ts StepMetrics and EvalMetrics). */
export interface TrainPoint {
  step: number;
  reward: number;
  success: number;
  rowsAct: number;
  rowsRehearse: number;
  /** Rehearsal fidelity of the step's rollouts (null: nothing was rehearsed). */
  fidelityF1: number | null;
  loss: { act: number | null; rehearse: number | null; shared: number | null };
  kl: number | null;
  clipFrac: number | null;
  heldOutSuccess: number | null;
  /** Held-out rehearsal fidelity measured with that evaluation (null: none this step): exact-match rate, mean field F1. */
  heldOutFidelityExact: number | null;
  heldOutFidelityF1: number | null;
  /** Held-out success per task family with that evaluation (null or absent: none this step, tasks without families, or a run kept before the field existed). */
  heldOutByFamily?: Record<string, GroupSuccess> | null;
  /** Groups (prompt × role) of the step, and how many had a non-zero reward spread (the only ones that teach). */
  groups: number;
  groupsWithSpread: number;
  /** Prompts of the step, and how many had rollouts with different rewards. */
  prompts: number;
  promptsWithSpread: number;
  gradNorm: number | null;
  line: string;
  wallMs: number;
}

/** A held-out evaluation outside the steps: the starting policy's, before the first update. */
export interface HeldOutEval {
  step: number;
  success: number;
  /** Share of the held-out tasks' reference calls rehearsed exactly (null: not measured). */
  fidelityExact: number | null;
  /** Success per task family (null: the tasks name none). */
  byFamily: Record<string, GroupSuccess> | null;
  /** Reused from an earlier run's measurement of the same model, world, tasks and limits: when it was measured. */
  reused: string | null;
}

export interface TrainStatus {
  /** The run's saved settings (null: no run in this browser). */
  config: TrainRequest | null;
  /** The starting policy on the held-out tasks (step 0), measured before the first update when held-out evaluation is on. */
  start: HeldOutEval | null;
  step: number;
  total: number;
  running: boolean;
  points: TrainPoint[];
  model: string;
  /** The world the run trains in; null when there is no run (a world must never be guessed for it). */
  world: string | null;
}

export interface TtsRequest {
  taskId: string;
  mode: 'parallel' | 'sequential';
  n: number;
  seed: number;
  maxTurns: number;
  maxNewTokens: number;
  rehearseTokens: number;
  /** 'structured' (default): rehearsals decoded as well-formed observations with a loop guard; 'free': the policy alone. */
  rehearseDecoding?: RehearseDecoding;
}

export interface TtsEpisodeView {
  end: string;
  /** The end in words (the true one: e.g. which rehearsal did not parse, and why). */
  endText: string;
  reward: number;
  /** One line per step: a call with its (imagined or real) observation, or the reply. */
  steps: string[];
  /**
   * Imagined attempts: per step, the call and its rehearsed observation beside what the real environment would
   * have answered (the attempt's hidden shadow, never shown to the policy); null for a reply. Absent elsewhere.
   */
  rehearsals?: (RehearsedCallView | null)[];
}

/** A rehearsed call beside the real answer to it (observations as JSON text, as CallView's). */
export interface RehearsedCallView {
  call: string;
  rehearsed: string;
  real: string;
}

export interface TtsView {
  taskId: string;
  mode: 'parallel' | 'sequential';
  n: number;
  attempts: (TtsEpisodeView & { index: number; selfEval: string | null; judgeUnmet: string[]; memoryBefore: string | null })[];
  memory: { text: string; tokens: number; maxTokens: number };
  /** The one real execution, conditioned on the memory; its reward is the task's score. */
  committed: TtsEpisodeView;
  /**
   * The same task committed without memory (N = 0: same seed, same limits, same greedy decoding), so the page
   * can show what the memory changed; null when this run itself had N = 0.
   */
  withoutMemory: TtsEpisodeView | null;
  tokensTotal: number;
  /** Tokens (prompt + generated) per phase: imagined attempts, self-evaluations, the committed execution. */
  tokensByPhase: { phase: string; prompt: number; generated: number }[];
}

export interface NamedFile {
  name: string;
  bytes: Uint8Array;
}

export interface PolicyApi {
  /** Fetch the environment data, build the world's domain (or read a task file); list tasks. Safe before a model is loaded. */
  init(cancelFlag: SharedArrayBuffer | null, world: WorldRequest): Promise<EnvInfo>;
  /** Token budgets of the current world under the loaded tokenizer (null: no model yet). */
  budgets(): BudgetInfo | null;
  inspectFiles(files: File[]): Promise<FolderInfo>;
  load(req: LoadRequest, onProgress: ProgressFn): Promise<LoadInfo>;
  /** The loaded policy's memory now (null before a model is loaded). */
  memory(): MemoryNow | null;
  generate(prompt: string, maxNewTokens: number, seed: number, onProgress: ProgressFn): Promise<GenView>;
  rolloutStart(req: RolloutRequest): Promise<RolloutView>;
  rolloutStep(onProgress: ProgressFn): Promise<RolloutView>;
  group(req: GroupRequest, onProgress: ProgressFn): Promise<GroupView>;
  exportAdapter(): Promise<NamedFile[]>;
  importAdapter(files: File[]): Promise<{ rank: number; alpha: number; targets: string[] }>;
  /**
   * Run (or resume) GRPO steps until the run ends or trainPause(); onPoint fires after every step. `extend`:
   * add that many steps to a run (a finished one continues from its last checkpoint).
   */
  trainStart(req: TrainRequest, onPoint: (p: TrainPoint) => void, onProgress: ProgressFn, extend?: number, onStart?: (e: HeldOutEval) => void): Promise<TrainStatus>;
  /** Stop after the current step. */
  trainPause(): void;
  /** The run kept in this browser (OPFS), if any: its settings and every step so far. */
  trainStatus(): Promise<TrainStatus>;
  /** The run's logs as files (run.json, metrics.jsonl, rollouts.jsonl, eval.jsonl), those that exist. */
  trainFiles(): Promise<NamedFile[]>;
  /** Forget the run (its checkpoints and logs). */
  trainReset(): Promise<void>;
  /** Test-time private rehearsal of one task: N imagined attempts, evaluations, memory, one real episode. */
  tts(req: TtsRequest, onProgress: ProgressFn): Promise<TtsView>;
  /** Aborts the running operation (it rejects with an AbortError). */
  cancel(): void;
}
