// Every setting of a GRPO run, one row each: its one name, type, default, range and help, its train-CLI flag,
// its lab control's URL key, where run.json records it and whether a resume may change it. The train CLI's flags,
// help and resume check (src/cli/run-flags.ts), the checkpoint schema (src/rl/run-schema.ts), the run
// configuration (src/rl/grpo-config.ts), the lab's settings and URL state (src/ui/settings.svelte.ts) and the
// worker protocol's TrainRequest derive from these rows, so a new setting is one row plus its behaviour
// (test/method/run-config.test.ts adds a dummy row and follows it everywhere). Pure data: the page imports it.
import { effectiveGroups, rehearses, ROLLOUT_MODES } from './modes';
import { defaultRewardRule, REWARD_RULES } from './reward-rules';
import type { GroupMode } from './advantage';

export type SettingKind =
  | { readonly type: 'int'; readonly min: number; readonly max: number }
  /** A finite number >= min (> min when `above`), <= max when given. */
  | { readonly type: 'number'; readonly min: number; readonly above?: boolean; readonly max?: number }
  | { readonly type: 'bool' }
  | { readonly type: 'enum'; readonly values: readonly string[] }
  | { readonly type: 'list'; readonly values: readonly string[] };

export type KindValue<K> = K extends { type: 'int' | 'number' } ? number
  : K extends { type: 'bool' } ? boolean
  : K extends { type: 'enum'; values: readonly (infer V)[] } ? V
  : K extends { type: 'list'; values: readonly (infer V)[] } ? V[]
  : never;

/** Other settings' values by name (loosely typed: the rows cannot name their own table's type). */
export type Values = Readonly<Record<string, unknown>>;

/**
 * How run.json's config keeps a setting. 'required': always written, and every run.json ever written has it;
 * 'always': always written, but older run.json files may lack it (read as the default); 'changed': written only
 * when it differs from the default, so a run.json from before the setting reads the same.
 */
export type Record_ = 'required' | 'always' | 'changed';

export interface RunSetting {
  readonly name: string;
  readonly kind: SettingKind;
  /** Absent: none (the behaviour's own), or `fallback` computes it from the other settings. */
  readonly default?: unknown;
  readonly fallback?: (s: Values) => unknown;
  readonly help: string;
  /**
   * The train CLI's flag. `required`: the CLI refuses to start a run without it; `default`: the help's default
   * when it is not the row's; `fromFlag`: the flag's value is another quantity (checked and converted here), and
   * `toFlag` its inverse (the flag that says a value: the headless lesson, src/cli/lesson.ts).
   */
  readonly cli?: { readonly flag: string; readonly arg?: string; readonly required?: boolean; readonly default?: string; readonly fromFlag?: (v: number, s: Values) => number; readonly toFlag?: (v: number, s: Values) => number };
  /**
   * The lab's control: its URL key, the lab's default and range where the page's differ (a tighter range for a
   * browser), `was`, the name the setting had in lab runs saved before the table (read back by labRequest), and
   * `says`, how the run comparison names a value other than the lab's default (src/ui/compare.ts), and `appliesIf`,
   * when the setting means something for the other settings (a rehearsing mode's budget in real mode does not): where
   * it does not, the lab's request carries the row's default (labRequestOf), so a value kept for another mode never
   * reaches a run that would refuse it, and the control is disabled.
   */
  readonly lab?: { readonly key: string; readonly default?: unknown; readonly min?: number; readonly max?: number; readonly was?: string; readonly says?: (v: never) => string; readonly appliesIf?: (s: Values) => boolean };
  /** Where run.json's config keeps it (`at`: a dotted path, default the name) and when. Absent: not recorded. */
  readonly record?: { readonly when: Record_; readonly at?: string };
  /** The value run.json records for the value asked (the grouping a mode forces). */
  readonly recordAs?: (v: unknown, s: Values) => unknown;
  /** Whether `--resume` may change it; every setting that changes what a saved run computes may not. */
  readonly resume: 'fixed' | 'free';
}

/** A flag value that is not a setting's own (src/cli/run-flags.ts turns it into a usage error). */
export class SettingValueError extends Error {
  override readonly name = 'SettingValueError';
}

const MAX_TOKENS = 65_536;
const MAX_STEPS = 1_000_000;
// src/rollout/budget.ts MIN_ACT_TOKENS (test/method/run-config.test.ts holds them equal).
const ACT_FLOOR = 96;

// Enumerations whose owners sit in layers the page cannot import restate theirs here; src/rl/run-schema.ts
// checks at compile time that both name the same values.
export const GROUPINGS = ['role-wise', 'pooled'] as const;
export const BASELINES = ['row-weighted', 'rollout-mean'] as const;
export const TASK_SAMPLINGS = ['uniform', 'signal'] as const;
export const AGGREGATIONS = ['seq-mean-token-mean', 'token-mean', 'seq-mean-token-sum'] as const;
export const REHEARSE_DECODINGS = ['structured', 'free'] as const;
export const OBSERVATION_GROUNDINGS = ['with-call', 'without-call'] as const;
export const OBSERVATION_WEIGHTINGS = ['token', 'row'] as const;
export const LORA_TARGETS = ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] as const;
export const BASE_EVALS = ['reuse', 'run', 'skip'] as const;
/** How a rehearsing rollout answers a call whose real answer the task's reference trajectory holds (src/rollout/recall.ts). */
export const REHEARSAL_RECALLS = ['none', 'reference'] as const;
/**
 * Who answers the agent's replies (issue 47): nobody (off: one-message episodes, the agent's first reply ends
 * it) or the domain's scripted τ² user (a conversation, src/rollout/conversation.ts). The lab's stepper offers
 * the same two (src/worker-protocol.ts STEPPER_USERS is this list).
 */
export const CONVERSATION_USERS = ['off', 'scripted'] as const;

/** Whether the settings' mode rehearses (the rows that only a rehearsing mode reads apply). */
const rehearsingMode = (s: Values): boolean => rehearses(s.mode as (typeof ROLLOUT_MODES)[number]);

const int = (min: number, max = Number.MAX_SAFE_INTEGER) => ({ type: 'int', min, max }) as const;
const oneOf = <V extends readonly string[]>(values: V) => ({ type: 'enum', values }) as const;

export const RUN_SETTINGS = [
  { name: 'mode', kind: oneOf(ROLLOUT_MODES), help: 'rollout mode: who answers tool calls and which adapters learn',
    cli: { flag: 'mode', arg: 'M', required: true }, lab: { key: 'tmode', default: 'real' }, record: { when: 'required' }, resume: 'fixed' },
  { name: 'groups', kind: oneOf(GROUPINGS), default: 'role-wise', help: 'advantage groups: role-wise (per prompt and role) or pooled',
    cli: { flag: 'advantage', arg: 'A' }, lab: { key: 'grouping', was: 'grouping' }, record: { when: 'always' },
    // Recorded as used, not as asked: a mode may force its grouping.
    recordAs: (v, s) => effectiveGroups(s.mode as (typeof ROLLOUT_MODES)[number], v as (typeof GROUPINGS)[number]), resume: 'fixed' },
  { name: 'baseline', kind: oneOf(BASELINES), default: 'row-weighted', help: 'group baseline: row-weighted (as the reference code) or rollout-mean',
    cli: { flag: 'baseline', arg: 'B' }, lab: { key: 'baseline' }, record: { when: 'always' }, resume: 'fixed' },
  { name: 'steps', kind: int(1, MAX_STEPS), help: 'GRPO steps to train', cli: { flag: 'steps', arg: 'N', required: true },
    lab: { key: 'steps', default: 100, max: 10_000 }, record: { when: 'required' }, resume: 'fixed' },
  { name: 'promptsPerStep', kind: int(1, 256), default: 4, help: 'prompts (tasks) per step', cli: { flag: 'prompts', arg: 'P' },
    lab: { key: 'prompts', max: 16 }, record: { when: 'required' }, resume: 'fixed' },
  { name: 'k', kind: int(1, 64), default: 4, help: 'rollouts per prompt (group size)', cli: { flag: 'k', arg: 'K' },
    lab: { key: 'k', max: 16 }, record: { when: 'required' }, resume: 'fixed' },
  { name: 'seed', kind: int(0, 0xffffffff), default: 0, help: 'seed of adapters, sampling and task split', cli: { flag: 'seed', arg: 'S' },
    lab: { key: 'seed', default: 1, max: 2 ** 31 - 1 }, record: { when: 'required' }, resume: 'fixed' },
  { name: 'lr', kind: { type: 'number', min: 0, above: true }, default: 1e-3, help: 'AdamW learning rate', cli: { flag: 'lr', arg: 'LR' },
    lab: { key: 'lr', min: 1e-8, max: 1 }, record: { when: 'required' }, resume: 'fixed' },
  { name: 'updateEpochs', kind: int(1, 16), default: 1, help: 'optimizer steps per batch of rollouts (PPO epochs, clipped against the sampling policy)',
    cli: { flag: 'epochs', arg: 'E' }, lab: { key: 'epochs', was: 'epochs', says: (v: number) => `${v} epochs per batch` }, record: { when: 'always' }, resume: 'fixed' },
  { name: 'taskSampling', kind: oneOf(TASK_SAMPLINGS), default: 'uniform',
    help: "how a step draws its tasks: uniform, or signal (each task in proportion to the chance a group of its family has rewards that differ, estimated from the run's rollouts)",
    cli: { flag: 'task-sampling', arg: 'S' }, lab: { key: 'tsamp', says: (v: string) => `${v} task sampling` }, record: { when: 'always' }, resume: 'fixed' },
  { name: 'rank', kind: int(1, 256), default: 8, help: 'LoRA rank', cli: { flag: 'rank', arg: 'R' }, lab: { key: 'rank', max: 64 },
    record: { when: 'required', at: 'lora.rank' }, resume: 'fixed' },
  { name: 'alpha', kind: { type: 'number', min: 0, above: true }, fallback: (s) => 2 * (s.rank as number), help: 'LoRA alpha (the bundled policy\'s: 2 × rank)',
    cli: { flag: 'alpha', arg: 'A', default: '2 × rank' }, record: { when: 'required', at: 'lora.alpha' }, resume: 'fixed' },
  { name: 'loraTargets', kind: { type: 'list', values: LORA_TARGETS }, help: 'the projections that carry a LoRA adapter; absent: all',
    record: { when: 'changed', at: 'lora.targets' }, resume: 'fixed' },
  { name: 'lossAggregation', kind: oneOf(AGGREGATIONS), default: 'seq-mean-token-mean',
    help: "how token losses sum to the step's loss: seq-mean-token-mean (every row alike, as the GRPO paper), token-mean (every token alike: long rows count more, as DAPO and verl's default) or seq-mean-token-sum (rows weighed by length, as Dr. GRPO)",
    cli: { flag: 'loss-agg', arg: 'M' }, lab: { key: 'lossAgg', says: (v: string) => `${v} loss` }, record: { when: 'changed' }, resume: 'fixed' },
  { name: 'klCoef', kind: { type: 'number', min: 0 }, default: 0, help: 'KL coefficient to the base policy (adapter off)', cli: { flag: 'kl', arg: 'C' },
    record: { when: 'always' }, resume: 'fixed' },
  { name: 'temperature', kind: { type: 'number', min: 0 }, default: 1, help: 'sampling temperature of training rollouts', cli: { flag: 'temperature', arg: 'T' },
    record: { when: 'always' }, resume: 'fixed' },
  { name: 'topP', kind: { type: 'number', min: 0, above: true, max: 1 }, default: 1,
    help: 'nucleus sampling of training rollouts: only the fewest tokens whose probability reaches P (1: off)',
    cli: { flag: 'top-p', arg: 'P' }, lab: { key: 'topP', min: 0.01, says: (v: number) => `top-p ${v}` }, record: { when: 'changed' }, resume: 'fixed' },
  { name: 'greedyMember', kind: { type: 'bool' }, default: false,
    help: "decode the first of each group's K rollouts greedily, as the held-out evaluation does (a self-critical group: a sample that beats the greedy answer pushes its tokens down)",
    cli: { flag: 'greedy-member', default: 'off (all K sampled)' }, lab: { key: 'greedy', says: (v: boolean) => (v ? 'a greedy member per group' : 'no greedy member') }, record: { when: 'changed' }, resume: 'fixed' },
  { name: 'reward', kind: oneOf(REWARD_RULES), fallback: (s) => defaultRewardRule(s.mode as (typeof ROLLOUT_MODES)[number]),
    help: "how training rollouts are scored: verifier (τ²-bench's DB × communicate on the calls replayed against the real database, 0 or 1), checklist (the rule-based judge's partial credit) or strict-checklist (the judge, 1 only when every item is satisfied); held-out evaluation always uses the verifier",
    cli: { flag: 'reward', arg: 'R', default: "the mode's: verifier for real, checklist when rehearsing" }, lab: { key: 'reward', says: (v: string) => `${v} reward` },
    record: { when: 'changed' }, resume: 'fixed' },
  { name: 'realPrompts', kind: int(0, 256), default: 0,
    help: "a real-interaction budget for a rehearsing mode: B real episodes over the run (B / (steps × k) of each step's prompts run their rollouts in the real environment, scored by the verifier; the rest rehearse); must be a multiple of steps × k",
    cli: { flag: 'real-episodes', arg: 'B', default: '0 (every rollout rehearsed); real mode: all', fromFlag: realPromptsOfEpisodes, toFlag: (p, s) => p * (s.steps as number) * (s.k as number) },
    // The lab sets it per step (real prompts of each step) and shows it as real episodes per run (src/ui/panels/TrainPanel.svelte).
    lab: { key: 'real', max: 16, says: (v: number) => `${v} real prompt${v === 1 ? '' : 's'} per step`, appliesIf: rehearsingMode },
    record: { when: 'changed' }, resume: 'fixed' },
  { name: 'observationCoef', kind: { type: 'number', min: 0 }, default: 0,
    help: 'train the simulator on real observations: every call the real environment answered this step becomes a Rehearse row with the real observation as target and advantage C (a cross-entropy coefficient); needs real rollouts (real mode, or --real-episodes)',
    cli: { flag: 'observation-coef', arg: 'C', default: '0 (off)' }, record: { when: 'changed' }, resume: 'fixed' },
  { name: 'observationGrounding', kind: oneOf(OBSERVATION_GROUNDINGS), default: 'with-call',
    help: "the grounding of those rows: with-call (keeps the call's own reference result) or without-call (teaches the dynamics, not a copy of the example)",
    cli: { flag: 'observation-grounding', arg: 'G' }, record: { when: 'changed' }, resume: 'fixed' },
  // 'row' is what the first runs (to 2026-12-05) did, unnamed: under seq-mean-token-mean each row weighs alike, so
  // a 10-token error weighs its first token ~30× a 300-token order's, and the simulator learned to predict errors
  // (research/records/2026-12-04-budget: error agreement 97 → 56 %). Their run.json files name it.
  { name: 'observationWeighting', kind: oneOf(OBSERVATION_WEIGHTINGS), default: 'token',
    help: "how those rows weigh against each other: token (every target token alike, the usual cross-entropy, whatever the loss aggregation) or row (every row alike: a short error target counts as much as a long result)",
    cli: { flag: 'observation-weighting', arg: 'W' }, record: { when: 'changed' }, resume: 'fixed' },
  { name: 'rehearsalRecall', kind: oneOf(REHEARSAL_RECALLS), default: 'none',
    help: "rehearsing modes: none (the policy rehearses every call) or reference (a call the task's reference trajectory made, with the same writes before it, is answered with the reference's real observation instead of a rehearsal; a training task's data, no real interaction)",
    cli: { flag: 'recall', arg: 'R' },
    lab: { key: 'recall', says: (v: string) => (v === 'reference' ? "rehearsal recalls the reference's observations" : 'no recall'), appliesIf: rehearsingMode },
    record: { when: 'changed' }, resume: 'fixed' },
  { name: 'user', kind: oneOf(CONVERSATION_USERS), default: 'off',
    help: "who answers the agent: off (one-message episodes) or scripted (conversations with the world's scripted τ² user, in training rollouts and held-out evaluations alike; the confirmation rule gates every reward)",
    cli: { flag: 'user', arg: 'U' }, lab: { key: 'tuser', says: (v: string) => (v === 'scripted' ? 'conversations with the scripted user' : 'one-message episodes') },
    record: { when: 'changed' }, resume: 'fixed' },
  { name: 'evalEvery', kind: int(0, MAX_STEPS), default: 0, help: 'held-out evaluation every N steps and after the last; 0 = never',
    cli: { flag: 'eval-every', arg: 'N' }, lab: { key: 'evalEvery', default: 50, max: 1000 }, record: { when: 'always' }, resume: 'fixed' },
  { name: 'evalFidelityTokens', kind: int(0, MAX_TOKENS), fallback: (s) => s.maxRehearseTokens,
    help: 'token budget per rehearsal in the fidelity evaluation; 0 = skip it', cli: { flag: 'fidelity-tokens', arg: 'N', default: '--max-rehearse-tokens' }, record: { when: 'always' }, resume: 'fixed' },
  // The fidelity check is most of a held-out evaluation's time (all reference calls of every task, each prompt a few
  // hundred tokens); the world-rehearsal lesson measures it on part of the tasks (src/method/lesson-runs.ts).
  { name: 'evalFidelityTasks', kind: int(0, 100_000), default: 0,
    help: "held-out tasks of the fidelity evaluation: the first N of the evaluation's tasks; 0 = all of them",
    cli: { flag: 'fidelity-tasks', arg: 'N', default: '0 (all)' },
    lab: { key: 'fidTasks', says: (v: number) => (v ? `fidelity on ${v} held-out tasks` : 'fidelity on every held-out task') },
    record: { when: 'changed' }, resume: 'fixed' },
  // Not recorded: it changes no step (the evaluation reads no random numbers), only whether the run has a step 0.
  { name: 'baseEval', kind: oneOf(BASE_EVALS), default: 'reuse',
    help: "the starting policy's held-out evaluation before the first step (the run's step 0, what later evaluations are compared with): reuse (a record of the same model, world, held-out tasks and limits, else run it), run (measure it afresh) or skip (no starting point: the change against the base is not reported)",
    cli: { flag: 'base-eval', arg: 'B' }, lab: { key: 'baseEval', says: (v: string) => `base evaluation: ${v}` }, resume: 'free' },
  // Not recorded in run.json: the train CLI keeps them in train-cli.json, the lab in its lab.json.
  { name: 'trainTasks', kind: int(1, 100_000), default: 200, help: 'training tasks (the world\'s train split)', cli: { flag: 'train-tasks', arg: 'N' }, resume: 'fixed' },
  { name: 'evalTasks', kind: int(0, 100_000), default: 20, help: 'held-out tasks (the world\'s test split, task seed 1)', cli: { flag: 'eval-tasks', arg: 'N' },
    lab: { key: 'evalTasks', default: 100, min: 1, max: 500, says: (v: number) => `held-out eval of ${v} tasks` }, resume: 'fixed' },
  { name: 'maxTurns', kind: int(1, 100), default: 12, help: 'turns per episode (retail tasks need up to ~8 calls)', cli: { flag: 'max-turns', arg: 'N' },
    lab: { key: 'turns', max: 30, says: (v: number) => `at most ${v} turns` }, record: { when: 'required', at: 'limits.maxTurns' }, resume: 'fixed' },
  { name: 'maxActTokens', kind: int(1, MAX_TOKENS), default: ACT_FLOOR, help: 'tokens per Act generation', cli: { flag: 'max-act-tokens', arg: 'N', default: `measured as the lab's: p99 of the world's expert turns under the model's tokenizer, at least ${ACT_FLOOR}` },
    lab: { key: 'maxNew', default: 0, min: 0, max: 512, was: 'maxNewTokens', says: (v: number) => `${v} Act tokens` }, record: { when: 'required', at: 'limits.maxActTokens' }, resume: 'fixed' },
  { name: 'maxRehearseTokens', kind: int(1, MAX_TOKENS), default: 640, help: 'tokens per Rehearse generation (an order with its items runs to a few hundred)',
    cli: { flag: 'max-rehearse-tokens', arg: 'N', default: "measured as the lab's: p99 of the world's real observations under the model's tokenizer" }, lab: { key: 'reh', default: 0, min: 0, max: 8192, was: 'rehearseTokens', says: (v: number) => `${v} Rehearse tokens` }, record: { when: 'required', at: 'limits.maxRehearseTokens' }, resume: 'fixed' },
  { name: 'maxContext', kind: int(1), help: "context tokens of an episode; absent: the model's", record: { when: 'changed', at: 'limits.maxContext' }, resume: 'fixed' },
  { name: 'maxGroundingChars', kind: int(0, 10_000_000), help: 'characters of grounding examples in a Rehearse prompt',
    cli: { flag: 'grounding-chars', arg: 'N', default: "the rehearse prompt's own" }, record: { when: 'changed', at: 'rehearsePrompt.maxGroundingChars' }, resume: 'fixed' },
  { name: 'maxHistoryChars', kind: int(0, 10_000_000), help: 'characters of history in a Rehearse prompt',
    cli: { flag: 'history-chars', arg: 'N', default: "the rehearse prompt's own" }, record: { when: 'changed', at: 'rehearsePrompt.maxHistoryChars' }, resume: 'fixed' },
  { name: 'rehearseDecoding', kind: oneOf(REHEARSE_DECODINGS), default: 'structured',
    help: 'structured (only tokens that keep a rehearsal a well-formed observation, with a loop guard) or free (the policy alone)',
    cli: { flag: 'rehearse-decoding', arg: 'D' }, lab: { key: 'rdec' }, record: { when: 'changed', at: 'rehearsePrompt.decoding' }, resume: 'fixed' },
  { name: 'kvReuse', kind: { type: 'bool' }, default: true, help: "reuse the KV cache across a rollout's turns", record: { when: 'always' }, resume: 'fixed' },
  { name: 'warmupSteps', kind: int(0), default: 0, help: 'linear warmup then cosine decay over the steps; 0: constant lr', record: { when: 'changed' }, resume: 'fixed' },
  { name: 'weightDecay', kind: { type: 'number', min: 0 }, default: 0, help: 'AdamW weight decay', record: { when: 'changed' }, resume: 'fixed' },
  { name: 'maxGradNorm', kind: { type: 'number', min: 0, above: true }, default: 1, help: 'gradient clipping norm', record: { when: 'changed' }, resume: 'fixed' },
  { name: 'clipEps', kind: { type: 'number', min: 0, above: true }, default: 0.2, help: "the surrogate's ratio clip ε", record: { when: 'changed' }, resume: 'fixed' },
  { name: 'dualClip', kind: { type: 'number', min: 0, above: true }, default: 3, help: 'dual-clip bound of negative advantages', record: { when: 'changed' }, resume: 'fixed' },
  { name: 'maxBatchTokens', kind: int(1), default: 4096, help: 'tokens per micro-batch of the update', record: { when: 'always' }, resume: 'fixed' },
  { name: 'checkpointEvery', kind: int(1), default: 1, help: 'checkpoint every N steps and after the last', record: { when: 'always' }, resume: 'fixed' },
] as const satisfies readonly RunSetting[];

export type RunSettingsTable = readonly RunSetting[];
type Row = (typeof RUN_SETTINGS)[number];
export type RunSettingName = Row['name'];
/** Every setting's value by its one name. */
export type RunValues = { -readonly [R in Row as R['name']]: KindValue<R['kind']> };
/** The settings the lab has a control for (the worker protocol's TrainRequest carries them). */
export type LabSettingName = Extract<Row, { lab: object }>['name'];
type FallbackName = Extract<Row, { fallback: unknown }>['name'];
/** The lab's values: a setting whose default follows from the others has a control value 'auto' (= that default). */
export type LabRunValues = { -readonly [R in Extract<Row, { lab: object }> as R['name']]: R extends { fallback: unknown } ? KindValue<R['kind']> | 'auto' : KindValue<R['kind']> };
/** What the page asks the worker to train: the lab's settings, one name each; a derived one absent when 'auto'. */
export type LabRequest = Pick<RunValues, Exclude<LabSettingName, FallbackName>> & Partial<Pick<RunValues, Extract<LabSettingName, FallbackName>>>;
export type Grouping = (typeof GROUPINGS)[number];
// run.json's config as a type, from the rows' `record` columns: a row recorded at `a.b` is field b of group a; a
// 'required' row is a required field (and makes its group required), the others optional. The grouping is
// recorded as used, so its type is the advantage module's GroupMode ('standard' included).
type Recorded = Extract<Row, { record: object }>;
type RecordedValue<R> = R extends { name: 'groups' } ? GroupMode : R extends { kind: infer K } ? KindValue<K> : never;
type LeafOf<R> = R extends { record: { at: `${string}.${infer L}` } } ? L : R extends { name: infer N extends string } ? N : never;
type Fields<Rs> = { -readonly [R in Extract<Rs, { record: { when: 'required' } }> as LeafOf<R>]: RecordedValue<R> } & {
  -readonly [R in Exclude<Rs, { record: { when: 'required' } }> as LeafOf<R>]?: RecordedValue<R>;
};
type InGroup<H extends string> = Extract<Recorded, { record: { at: `${H}.${string}` } }>;
type GroupName = Recorded extends infer R ? (R extends { record: { at: `${infer H}.${string}` } } ? H : never) : never;
type Groups = { -readonly [H in GroupName as Extract<InGroup<H>, { record: { when: 'required' } }> extends never ? never : H]: Fields<InGroup<H>> } & {
  -readonly [H in GroupName as Extract<InGroup<H>, { record: { when: 'required' } }> extends never ? H : never]?: Fields<InGroup<H>>;
};
/** run.json's config: what a run records of its settings (src/rl/run.ts reads it; src/rl/run-schema.ts checks it). */
export type RecordedConfig = Fields<Exclude<Recorded, { record: { at: string } }>> & Groups;

export type Baseline = (typeof BASELINES)[number];
export type TaskSampling = (typeof TASK_SAMPLINGS)[number];
export type Aggregation = (typeof AGGREGATIONS)[number];
export type ObservationGrounding = (typeof OBSERVATION_GROUNDINGS)[number];
export type ObservationWeighting = (typeof OBSERVATION_WEIGHTINGS)[number];
export type RehearseDecoding = (typeof REHEARSE_DECODINGS)[number];
export type BaseEval = (typeof BASE_EVALS)[number];
export type ConversationUser = (typeof CONVERSATION_USERS)[number];

export const DEFAULT_BASELINE: Baseline = setting('baseline').default;
export const DEFAULT_AGGREGATION: Aggregation = setting('lossAggregation').default;

/** A row of the table by name (typed: its default is the row's own). */
export function setting<N extends RunSettingName>(name: N): Extract<Row, { name: N }> {
  return RUN_SETTINGS.find((r) => r.name === name) as Extract<Row, { name: N }>;
}

/** --real-episodes B as real prompts per step: B must spread evenly over the run's steps and groups of k. */
function realPromptsOfEpisodes(b: number, s: Values): number {
  const per = (s.steps as number) * (s.k as number);
  if (!Number.isInteger(b) || b < 0 || b % per !== 0) throw new SettingValueError(`${b} must be a multiple of steps × k = ${per} (whole groups of real rollouts in every step)`);
  return b / per;
}

/** A value's check against a row's kind and range; the message says what was expected. */
export function checkValue(row: RunSetting, v: unknown, range: { min?: number; max?: number } = {}): string | null {
  const k = row.kind;
  if (k.type === 'bool') return typeof v === 'boolean' ? null : 'must be true or false';
  if (k.type === 'enum') return k.values.includes(v as string) ? null : `must be one of ${k.values.join(', ')}`;
  if (k.type === 'list') return Array.isArray(v) && v.every((x) => k.values.includes(x)) ? null : `must be a list of ${k.values.join(', ')}`;
  const min = range.min ?? k.min;
  const max = range.max ?? k.max;
  const above = k.type === 'number' && k.above && range.min === undefined;
  const ok = typeof v === 'number' && Number.isFinite(v) && (k.type === 'number' || Number.isInteger(v)) && (above ? v > min : v >= min) && (max === undefined || v <= max);
  if (ok) return null;
  const what = k.type === 'int' ? 'an integer' : 'a number';
  return max !== undefined && max < Number.MAX_SAFE_INTEGER ? `must be ${what} in ${above ? '(' : '['}${min}, ${max}]` : `must be ${what} ${above ? '>' : '>='} ${min}`;
}

/** A setting's value when none is given: its default, or what it follows from the others. */
export function defaultOf(row: RunSetting, s: Values): unknown {
  return row.fallback ? row.fallback(s) : row.default;
}

const pathOf = (row: RunSetting) => (row.record?.at ?? row.name).split('.');

/** The value a run.json config holds for a row (absent: what the run used, the default). */
export function readRecorded(config: Values, row: RunSetting, table: RunSettingsTable = RUN_SETTINGS): unknown {
  const v = pathOf(row).reduce<unknown>((x, k) => (x && typeof x === 'object' ? (x as Values)[k] : undefined), config);
  if (v !== undefined) return v;
  if (!row.fallback) return row.default;
  // A fallback reads only rows without one, so this recursion is one level deep.
  const others: Record<string, unknown> = {};
  for (const r of table) if (!r.fallback) others[r.name] = readRecorded(config, r, table);
  return row.fallback(others);
}

/**
 * run.json's config of a complete set of values: each recorded row at its path, as its rule says. Values not
 * given take their defaults first (`complete`).
 */
export function recordConfig(values: Values, table: RunSettingsTable = RUN_SETTINGS): Record<string, unknown> {
  const s = complete(values, table);
  const out: Record<string, unknown> = {};
  for (const row of table) {
    if (!row.record) continue;
    let v = s[row.name];
    if (v === undefined) continue;
    if (row.record.when === 'changed' && JSON.stringify(v) === JSON.stringify(defaultOf(row, s))) continue;
    if (row.recordAs) v = row.recordAs(v, s);
    const path = pathOf(row);
    let o = out;
    for (const k of path.slice(0, -1)) o = (o[k] ??= {}) as Record<string, unknown>;
    o[path[path.length - 1]] = v;
  }
  return out;
}

/** Every setting's value: the given ones, then defaults (rows with a fallback after the rows it reads). */
export function complete(values: Values, table: RunSettingsTable = RUN_SETTINGS): Record<string, unknown> {
  const s: Record<string, unknown> = {};
  for (const row of table) if (!row.fallback) s[row.name] = values[row.name] ?? row.default;
  for (const row of table) if (row.fallback) s[row.name] = values[row.name] ?? row.fallback(s);
  return s;
}

/**
 * The train CLI's value of a row when no flag gives one: the lab's own default where the lab has one, so that a run
 * started from the command line is the run the lab starts (issue 48: the CLI ran seed 0 on 20 held-out tasks, so its
 * "eval @2: success 0.45" read as a gain over the 0.40 the lab measured on other tasks); else undefined (the row's
 * default applies). A budget of 0 is the lab's "measured": the CLI measures it as the lab does, once it has the
 * tokenizer. Required rows have no default.
 */
export function cliDefault(row: RunSetting): unknown {
  return row.cli && !row.cli.required && row.lab?.default !== undefined ? row.lab.default : undefined;
}

/** The lab's value of a row when the URL names none: the lab's own default, the row's, or 'auto' for a derived one. */
export function labDefault(row: RunSetting): unknown {
  return row.lab?.default !== undefined ? row.lab.default : row.fallback ? 'auto' : row.default;
}

/** Whether a lab row means something for these values (its `appliesIf`; true without one). */
export function labApplies(row: RunSetting, values: Values): boolean {
  return !row.lab?.appliesIf || row.lab.appliesIf(values);
}

/**
 * The request of the lab's values: every lab row by its name, 'auto' left out (the run derives it); a row that does
 * not apply to the other values (`appliesIf`) at its default.
 */
export function labRequestOf(values: Values, table: RunSettingsTable = RUN_SETTINGS): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const row of table) {
    if (!row.lab || values[row.name] === undefined || values[row.name] === 'auto') continue;
    const v = labApplies(row, values) ? values[row.name] : row.default;
    if (v !== undefined) out[row.name] = v;
  }
  return out;
}

/**
 * A lab request as saved by any version (a run in this browser's storage, a kept run): a setting saved under its
 * old name (`lab.was`) is read under its one name; one saved before it existed is `absent`'s (the value such runs
 * had, default: the row's default), so a kept run keeps meaning what it ran with.
 */
export function labRequest(saved: Values, absent: Values = {}, table: RunSettingsTable = RUN_SETTINGS): LabRequest {
  const out: Record<string, unknown> = {};
  for (const row of table) {
    if (!row.lab) continue;
    const v = saved[row.name] ?? (row.lab.was !== undefined ? saved[row.lab.was] : undefined) ?? absent[row.name] ?? row.lab.default ?? row.default;
    if (v !== undefined) out[row.name] = v;
  }
  return out as LabRequest;
}
