// Shareable state: every setting a person would want to send to someone else lives in the URL query
// (TensorFlow Playground style). Values read from the URL are untrusted and clamped/validated here.
import { ROLLOUT_MODES } from '../method/modes';
import { REWARD_RULES, type RewardRule } from '../method/reward-rules';
import { LOSS_AGGREGATIONS, type ActSource, type BackendKind, type LossAggregation, type RehearseDecoding, type RolloutMode, type TrainMode, type WeightFormat, type WorldName } from '../worker-protocol';

export interface Settings {
  /** The world the lab serves: 'mini' (compact retail, the default) or 'retail' (the full database). */
  world: WorldName;
  task: string;
  request: string;
  mode: RolloutMode;
  seed: number;
  src: ActSource;
  /** Act token budget; 0 = measured from the world's expert turns under the loaded tokenizer. */
  maxNew: number;
  /** Rehearse token budget; 0 = measured from the world's real observations (p99, tags included). */
  reh: number;
  /** How rehearsals are decoded: 'structured' (well-formed observations, loop guard) or 'free' (the policy alone). */
  rdec: RehearseDecoding;
  temp: number;
  turns: number;
  k: number;
  grouping: 'role-wise' | 'pooled';
  baseline: 'row-weighted' | 'rollout-mean';
  format: WeightFormat;
  rank: number;
  backend: BackendKind | '';
  model: string;
  lr: number;
  steps: number;
  ttsMode: 'parallel' | 'sequential';
  ttsN: number;
  tmode: TrainMode;
  evalEvery: number;
  evalTasks: number;
  prompts: number;
  /** Optimizer steps per batch of rollouts (PPO epochs). */
  epochs: number;
  /** How a training step draws its tasks: uniform, or signal-seeking (src/rl/task-sampler.ts). */
  tsamp: 'uniform' | 'signal';
  /** Nucleus sampling of training rollouts (1 = off). */
  topP: number;
  /** How training rollouts are scored: the mode's own rule (auto) or one of REWARD_RULES. */
  reward: 'auto' | RewardRule;
  /** How the GRPO update sums token losses (src/train/batch.ts AGGREGATIONS). */
  lossAgg: LossAggregation;
  /** Decode the first of each group's K training rollouts greedily, as the held-out evaluation (src/rollout/rollout.ts greedyMember). */
  greedy: boolean;
}

export const DEFAULTS: Settings = {
  world: 'mini',
  task: '',
  request: '',
  mode: 'rehearse',
  seed: 1,
  src: 'policy',
  maxNew: 0,
  reh: 0,
  rdec: 'structured',
  temp: 1,
  // As training's DEFAULT_LIMITS (src/rl/grpo-config.ts): the longest expert trajectory is 7 turns.
  turns: 12,
  k: 4,
  grouping: 'role-wise',
  baseline: 'row-weighted',
  format: 'f32',
  rank: 8,
  backend: '',
  model: '',
  // The lesson's run: measured on the mini world on the CPU path (docs/lesson.md;
  // research/scripts/lesson-grpo.sh runs the same settings in Node).
  lr: 1e-3,
  steps: 100,
  ttsMode: 'parallel',
  ttsN: 1,
  tmode: 'real',
  evalEvery: 50,
  evalTasks: 100,
  prompts: 4,
  // Measured on the lesson's run and not better than these (docs/lesson.md, commits df999c5, d353515 and e2519dd); here to try.
  epochs: 1,
  tsamp: 'uniform',
  topP: 1,
  reward: 'auto',
  lossAgg: 'seq-mean-token-mean',
  greedy: false,
};

const int = (v: string, lo: number, hi: number, d: number) => {
  const n = Number.parseInt(v, 10);
  return Number.isFinite(n) ? Math.min(hi, Math.max(lo, n)) : d;
};
const num = (v: string, lo: number, hi: number, d: number) => {
  const n = Number(v);
  return Number.isFinite(n) ? Math.min(hi, Math.max(lo, n)) : d;
};
const oneOf = <T extends string>(v: string, all: readonly T[], d: T): T => ((all as readonly string[]).includes(v) ? (v as T) : d);

export function parseSettings(query: string): Settings {
  const q = new URLSearchParams(query);
  const s: Settings = { ...DEFAULTS };
  const get = (k: keyof Settings) => q.get(k);
  for (const key of Object.keys(DEFAULTS) as (keyof Settings)[]) {
    const v = get(key);
    if (v === null) continue;
    switch (key) {
      case 'task':
        s.task = /^[\w.-]{1,64}$/.test(v) ? v : '';
        break;
      case 'request':
        s.request = v.slice(0, 2000);
        break;
      case 'model':
        s.model = v.slice(0, 2000);
        break;
      case 'world':
        s.world = oneOf(v, ['mini', 'retail'] as const, DEFAULTS.world);
        break;
      case 'mode':
        s.mode = oneOf(v, ['rehearse', 'real'] as const, DEFAULTS.mode);
        break;
      case 'rdec':
        s.rdec = oneOf(v, ['structured', 'free'] as const, DEFAULTS.rdec);
        break;
      case 'src':
        s.src = oneOf(v, ['policy', 'expert-act', 'expert'] as const, DEFAULTS.src);
        break;
      case 'grouping':
        s.grouping = oneOf(v, ['role-wise', 'pooled'] as const, DEFAULTS.grouping);
        break;
      case 'baseline':
        s.baseline = oneOf(v, ['row-weighted', 'rollout-mean'] as const, DEFAULTS.baseline);
        break;
      case 'format':
        s.format = oneOf(v, ['f32', 'q8', 'q4'] as const, DEFAULTS.format);
        break;
      case 'backend':
        s.backend = oneOf(v, ['webgpu', 'cpu-fast', 'cpu-ref', ''] as const, '');
        break;
      case 'tmode':
        s.tmode = oneOf(v, ROLLOUT_MODES, DEFAULTS.tmode);
        break;
      case 'evalEvery':
        s.evalEvery = int(v, 0, 1000, DEFAULTS.evalEvery);
        break;
      case 'evalTasks':
        s.evalTasks = int(v, 1, 500, DEFAULTS.evalTasks);
        break;
      case 'prompts':
        s.prompts = int(v, 1, 16, DEFAULTS.prompts);
        break;
      case 'epochs':
        s.epochs = int(v, 1, 16, DEFAULTS.epochs);
        break;
      case 'tsamp':
        s.tsamp = oneOf(v, ['uniform', 'signal'] as const, DEFAULTS.tsamp);
        break;
      case 'topP':
        s.topP = num(v, 0.01, 1, DEFAULTS.topP);
        break;
      case 'lossAgg':
        s.lossAgg = oneOf(v, LOSS_AGGREGATIONS, DEFAULTS.lossAgg);
        break;
      case 'greedy':
        s.greedy = v === 'true' ? true : v === 'false' ? false : DEFAULTS.greedy;
        break;
      case 'reward':
        s.reward = oneOf(v, ['auto', ...REWARD_RULES] as const, DEFAULTS.reward);
        break;
      case 'ttsMode':
        s.ttsMode = oneOf(v, ['parallel', 'sequential'] as const, DEFAULTS.ttsMode);
        break;
      case 'seed':
        s.seed = int(v, 0, 2 ** 31 - 1, DEFAULTS.seed);
        break;
      case 'maxNew':
        s.maxNew = int(v, 0, 512, DEFAULTS.maxNew);
        break;
      case 'reh':
        s.reh = int(v, 0, 8192, DEFAULTS.reh);
        break;
      case 'turns':
        s.turns = int(v, 1, 30, DEFAULTS.turns);
        break;
      case 'k':
        s.k = int(v, 1, 16, DEFAULTS.k);
        break;
      case 'rank':
        s.rank = int(v, 1, 64, DEFAULTS.rank);
        break;
      case 'steps':
        s.steps = int(v, 1, 10000, DEFAULTS.steps);
        break;
      case 'ttsN':
        s.ttsN = int(v, 0, 8, DEFAULTS.ttsN);
        break;
      case 'temp':
        s.temp = num(v, 0, 2, DEFAULTS.temp);
        break;
      case 'lr':
        s.lr = num(v, 1e-8, 1, DEFAULTS.lr);
        break;
    }
  }
  return s;
}

/** Only non-default values go in the URL, so a shared link stays short. */
export function settingsQuery(s: Settings): string {
  const q = new URLSearchParams();
  for (const key of Object.keys(DEFAULTS) as (keyof Settings)[]) if (s[key] !== DEFAULTS[key]) q.set(key, String(s[key]));
  const str = q.toString();
  return str ? `?${str}` : '';
}

export const settings: Settings = $state(parseSettings(typeof location === 'undefined' ? '' : location.search));

/** Keep the URL in step with the settings (replaceState: no history entry per keystroke). */
export function syncUrl(): void {
  $effect(() => {
    const q = settingsQuery(settings);
    if (q !== location.search) history.replaceState(null, '', `${location.pathname}${q}${location.hash}`);
  });
}
