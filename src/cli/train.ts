// npm run train -- --mode M --steps N --out DIR [options] (M: a rollout mode of src/method/modes.ts)
// Role-Wise GRPO on LoRA adapters of a model folder (default: the bundled policy in models/default).
// Progress lines on stderr, the result JSON on stdout; exit 0 ok, 1 failure, 2 usage error, 130 interrupted
// (the run folder then resumes with --resume exactly where the last checkpoint left it).
import { resolve } from 'node:path';
import { z } from 'zod';
import type { Domain } from '../env/domain';
import { WORLD_NAMES, type WorldName } from '../env/retail/index';
import { loadWorldDomain } from '../env/retail/node';
import { CheckpointError, readRunInfo } from '../rl/checkpoint';
import { MODES, ROLLOUT_MODES } from '../method/modes';
import { ADVANTAGES, BASELINES, defaultLoraAlpha, evalLine, grpoRunConfig, splitTasks, stepLine, DEFAULT_LIMITS } from '../rl/grpo-config';
import { GrpoRun, type EvalMetrics, type RunHooks, type StepMetrics } from '../rl/run';
import { DirStore } from '../rl/store-node';
import { TASK_SAMPLINGS } from '../rl/task-sampler';
import { AGGREGATIONS, DEFAULT_AGGREGATION } from '../train/batch';
import { REHEARSE_DECODINGS } from '../rollout/rehearse-prompt';
import { REWARD_RULES } from '../method/reward-rules';
import { parseJsonl, type FileOps } from '../util/atomic-file';
import {
  ArgError, BACKEND_FLAG, BACKEND_NAMES, enumFlag, GROUNDING_CHARS_FLAG, HELP_FLAG, helpText, HISTORY_CHARS_FLAG, intFlag, isEntry, numFlag, openBackend, openModel, parseFlags, processIo, progress, runCli, strFlag, THREADS_FLAG, threadsFlag, WORLD_FLAG, type CliIo, type FlagSpec,
} from './args';

const MAX_STEPS = 1_000_000;
const MAX_TASKS = 100_000;
const MAX_TOKENS = 65_536;

export const TRAIN_USAGE = `usage: npm run train -- --mode ${ROLLOUT_MODES.join('|')} --steps N --out DIR [flags]
       npm run train -- --out DIR --resume [--mode M --steps N ...]`;

export const TRAIN_FLAGS: FlagSpec = {
  mode: { type: 'string', arg: 'M', help: `rollout mode (required): ${ROLLOUT_MODES.join(', ')}; see below` },
  steps: { type: 'string', arg: 'N', help: `GRPO steps to train, 1..${MAX_STEPS} (required)` },
  out: { type: 'string', arg: 'DIR', help: 'run folder: run.json, checkpoints ckpt/<step>/, metrics/rollouts/eval JSONL (required)' },
  resume: { type: 'boolean', help: 'continue the run in --out from its last checkpoint with its saved configuration' },
  'ignore-changed': { type: 'boolean', help: 'with --resume: run on although flags differ from the saved run (the saved values are used)' },
  world: WORLD_FLAG,
  advantage: { type: 'string', arg: 'A', help: 'advantage groups: role-wise (per prompt and role) or pooled', default: 'role-wise' },
  baseline: { type: 'string', arg: 'B', help: 'group baseline: row-weighted (as the reference code) or rollout-mean', default: 'row-weighted' },
  seed: { type: 'string', arg: 'S', help: 'seed of adapters, sampling and task split, 0..2^32-1', default: '0' },
  model: { type: 'string', arg: 'DIR', help: 'model folder (config.json, model.safetensors, tokenizer)', default: "the world's bundled policy: models/default (mini), models/retail (retail)" },
  backend: BACKEND_FLAG,
  threads: THREADS_FLAG,
  k: { type: 'string', arg: 'K', help: 'rollouts per prompt (group size), 1..64', default: '4' },
  prompts: { type: 'string', arg: 'P', help: 'prompts (tasks) per step, 1..256', default: '4' },
  lr: { type: 'string', arg: 'LR', help: 'AdamW learning rate, > 0', default: '1e-3' },
  'task-sampling': { type: 'string', arg: 'S', help: 'how a step draws its tasks: uniform, or signal (each task in proportion to the chance a group of its family has rewards that differ, estimated from the run\'s rollouts)', default: 'uniform' },
  epochs: { type: 'string', arg: 'E', help: 'optimizer steps per batch of rollouts (PPO epochs, clipped against the sampling policy), 1..16', default: '1' },
  rank: { type: 'string', arg: 'R', help: 'LoRA rank, 1..256', default: '8' },
  alpha: { type: 'string', arg: 'A', help: 'LoRA alpha, > 0', default: '2 × rank' },
  'loss-agg': { type: 'string', arg: 'M', help: 'how token losses sum to the step\'s loss: seq-mean-token-mean (every row alike, as the GRPO paper), token-mean (every token alike: long rows count more, as DAPO and verl\'s default) or seq-mean-token-sum (rows weighed by length, as Dr. GRPO)', default: 'seq-mean-token-mean' },
  kl: { type: 'string', arg: 'C', help: 'KL coefficient to the base policy (adapter off), >= 0', default: '0' },
  temperature: { type: 'string', arg: 'T', help: 'sampling temperature of training rollouts, > 0', default: '1' },
  'greedy-member': { type: 'boolean', help: 'decode the first of each group\'s K rollouts greedily, as the held-out evaluation does (a self-critical group: a sample that beats the greedy answer pushes its tokens down)', default: 'false (all K sampled)' },
  'top-p': { type: 'string', arg: 'P', help: 'nucleus sampling of training rollouts: only the fewest tokens whose probability reaches P, in (0, 1]', default: '1 (off)' },
  'real-episodes': { type: 'string', arg: 'B', help: 'a real-interaction budget for a rehearsing mode: B real episodes over the run (B / (steps × k) of each step\'s prompts run their rollouts in the real environment, scored by the verifier; the rest rehearse); must be a multiple of steps × k', default: '0 (every rollout rehearsed); real mode: all' },
  'observation-coef': { type: 'string', arg: 'C', help: 'train the simulator on real observations: every call the real environment answered this step becomes a Rehearse row with the real observation as target and advantage C (a cross-entropy coefficient); needs real rollouts (real mode, or --real-episodes)', default: '0 (off)' },
  reward: { type: 'string', arg: 'R', help: 'how training rollouts are scored: verifier (τ²-bench\'s DB × communicate on the calls replayed against the real database, 0 or 1), checklist (the rule-based judge\'s partial credit) or strict-checklist (the judge, 1 only when every item is satisfied); held-out evaluation always uses the verifier', default: 'the mode\'s: verifier for real, checklist when rehearsing' },
  'eval-every': { type: 'string', arg: 'N', help: 'held-out evaluation every N steps and after the last; 0 = never', default: '--steps' },
  'eval-tasks': { type: 'string', arg: 'N', help: `held-out tasks, 0..${MAX_TASKS}`, default: '20' },
  'train-tasks': { type: 'string', arg: 'N', help: `training tasks, 1..${MAX_TASKS}`, default: '200' },
  'fidelity-tokens': { type: 'string', arg: 'N', help: 'token budget per rehearsal in the fidelity evaluation; 0 = skip it', default: String(DEFAULT_LIMITS.maxRehearseTokens) },
  'max-turns': { type: 'string', arg: 'N', help: 'turns per episode, 1..100', default: String(DEFAULT_LIMITS.maxTurns) },
  'max-act-tokens': { type: 'string', arg: 'N', help: `tokens per Act generation, 1..${MAX_TOKENS}`, default: String(DEFAULT_LIMITS.maxActTokens) },
  'max-rehearse-tokens': { type: 'string', arg: 'N', help: `tokens per Rehearse generation, 1..${MAX_TOKENS}`, default: String(DEFAULT_LIMITS.maxRehearseTokens) },
  'grounding-chars': GROUNDING_CHARS_FLAG,
  'history-chars': HISTORY_CHARS_FLAG,
  'rehearse-decoding': { type: 'string', arg: 'D', help: 'structured (only tokens that keep a rehearsal a well-formed observation, with a loop guard) or free (the policy alone)', default: 'structured' },
  help: HELP_FLAG,
};

/** --real-episodes B as real prompts per step: B must spread evenly over the run's steps and groups of k. */
function realPromptsFlag(v: Parameters<typeof numFlag>[0], steps: number, k: number): number {
  const b = intFlag(v, 'real-episodes', 0, 0, MAX_STEPS * 64 * 64);
  if (b % (steps * k) !== 0) throw new ArgError(`--real-episodes ${b} must be a multiple of steps × k = ${steps * k} (whole groups of real rollouts in every step)`);
  return b / (steps * k);
}

function topPFlag(v: Parameters<typeof numFlag>[0]): number {
  const p = numFlag(v, 'top-p', 1);
  if (p > 1) throw new ArgError(`--top-p must be in (0, 1], got ${p}`);
  return p;
}

const TRAIN_NOTES = `rollout modes:
${ROLLOUT_MODES.map((m) => `  ${m.padEnd(18)}${MODES[m].description}`).join('\n')}
exit status: 0 ok, 1 failure, 2 usage error, 74 I/O error (the message names the file), 130 interrupted
(Ctrl-C, SIGTERM, or the parent process gone; the run then resumes with --resume from its last checkpoint).
One process at a time may write a run folder (it holds DIR/.lock).`;

/** Flags that change a saved run, and where each lives in run.json's config (or train-cli.json). */
const RESUME_KEYS: Record<string, string> = {
  mode: 'mode', advantage: 'groups', baseline: 'baseline', steps: 'steps', seed: 'seed', k: 'k', prompts: 'promptsPerStep', lr: 'lr', epochs: 'updateEpochs', 'task-sampling': 'taskSampling',
  rank: 'lora.rank', alpha: 'lora.alpha', kl: 'klCoef', 'loss-agg': 'lossAggregation', temperature: 'temperature', 'top-p': 'topP', 'greedy-member': 'greedyMember', 'real-episodes': 'realPrompts', 'observation-coef': 'observationCoef', reward: 'reward', 'eval-every': 'evalEvery',
  'fidelity-tokens': 'evalFidelityTokens', 'max-turns': 'limits.maxTurns', 'max-act-tokens': 'limits.maxActTokens',
  'max-rehearse-tokens': 'limits.maxRehearseTokens', 'grounding-chars': 'rehearsePrompt.maxGroundingChars', 'history-chars': 'rehearsePrompt.maxHistoryChars', 'rehearse-decoding': 'rehearsePrompt.decoding',
  world: 'cli.world', 'train-tasks': 'cli.trainTasks', 'eval-tasks': 'cli.evalTasks', model: 'cli.model',
};

const at = (o: unknown, path: string): unknown => path.split('.').reduce<unknown>((x, k) => (x && typeof x === 'object' ? (x as Record<string, unknown>)[k] : undefined), o);

const CliStateSchema = z.object({
  model: z.string(),
  world: z.enum(WORLD_NAMES).optional(),
  trainTasks: z.number().int().min(1).max(MAX_TASKS),
  evalTasks: z.number().int().min(0).max(MAX_TASKS),
  taskSeed: z.number().int().min(0).max(0xffffffff),
});

/** What the CLI itself needs to reopen a run identically (the run's own state is run.json). */
interface CliState {
  model: string;
  /** Absent in runs started before worlds existed: those ran on the full retail world. */
  world?: WorldName;
  trainTasks: number;
  evalTasks: number;
  taskSeed: number;
}

export interface TrainResult {
  out: string;
  mode: string;
  advantage: string;
  baseline: string;
  seed: number;
  steps: number;
  model: string;
  backend: string;
  resumedFrom: number;
  wallS: number;
  meanStepS: number;
  last: { reward: number; success: number; fidelityExact: number } | null;
  eval: EvalMetrics | null;
}

/** Injected by tests: a smaller domain (fewer tools, a shorter policy); everything else runs for real. */
export interface TrainDeps {
  domain?: Domain;
  /** The run folder's file operations (tests: a full disk, a kill in the middle of a write). */
  storeOps?: FileOps;
  /** A test-chosen reward, so that a random-weight policy gets non-zero advantages (tests only). */
  reward?: RunHooks['reward'];
}

/**
 * Stops the run cleanly (checkpointed steps kept) on SIGINT, SIGTERM, SIGHUP, or when the parent process
 * goes away: `npm run` does not always pass a signal on, and a trainer whose npm was killed must not run
 * on as an orphan.
 */
function watchInterrupts(onStop: (why: string) => void): () => void {
  const sigs = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  const handlers = sigs.map((sig) => [sig, () => onStop(sig)] as const);
  for (const [sig, h] of handlers) process.on(sig, h);
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid !== parent) onStop(`parent process ${parent} exited`);
  }, 500);
  timer.unref();
  return () => {
    clearInterval(timer);
    for (const [sig, h] of handlers) process.off(sig, h);
  };
}

export async function trainCli(argv: readonly string[], io: CliIo = processIo, deps: TrainDeps = {}): Promise<number> {
  let interrupted = false;
  const ac = new AbortController();
  let stopWatching = () => {};
  const code = await runCli(io, TRAIN_USAGE, async () => {
    const v = parseFlags(argv, TRAIN_FLAGS);
    if (v.help) {
      io.out(helpText(TRAIN_USAGE, TRAIN_FLAGS, TRAIN_NOTES));
      return;
    }
    const log = progress(io, 'train');
    const mode = enumFlag(v, 'mode', ROLLOUT_MODES, undefined);
    if (!mode && !v.resume) throw new ArgError('--mode is required');
    const out = strFlag(v, 'out');
    if (!out) throw new ArgError('--out DIR is required (the run folder: checkpoints and JSONL logs)');
    if (v.steps === undefined && !v.resume) throw new ArgError('--steps N is required');
    if (v['ignore-changed'] && !v.resume) throw new ArgError('--ignore-changed only applies with --resume');
    const steps = intFlag(v, 'steps', 1, 1, MAX_STEPS);
    const backendName = enumFlag(v, 'backend', BACKEND_NAMES, 'cpu-fast');
    const threads = threadsFlag(v);
    const rank = intFlag(v, 'rank', 8, 1, 256);
    const options = {
      mode: mode ?? 'rehearse',
      advantage: enumFlag(v, 'advantage', ADVANTAGES, 'role-wise'),
      baseline: enumFlag(v, 'baseline', BASELINES, 'row-weighted'),
      steps,
      seed: intFlag(v, 'seed', 0, 0, 0xffffffff),
      k: intFlag(v, 'k', 4, 1, 64),
      promptsPerStep: intFlag(v, 'prompts', 4, 1, 256),
      lr: numFlag(v, 'lr', 1e-3),
      epochs: intFlag(v, 'epochs', 1, 1, 16),
      taskSampling: enumFlag(v, 'task-sampling', TASK_SAMPLINGS, 'uniform'),
      rank,
      alpha: numFlag(v, 'alpha', defaultLoraAlpha(rank)),
      evalEvery: intFlag(v, 'eval-every', steps, 0, MAX_STEPS),
      evalFidelityTokens: intFlag(v, 'fidelity-tokens', DEFAULT_LIMITS.maxRehearseTokens, 0, MAX_TOKENS),
      limits: {
        maxTurns: intFlag(v, 'max-turns', DEFAULT_LIMITS.maxTurns, 1, 100),
        maxActTokens: intFlag(v, 'max-act-tokens', DEFAULT_LIMITS.maxActTokens, 1, MAX_TOKENS),
        maxRehearseTokens: intFlag(v, 'max-rehearse-tokens', DEFAULT_LIMITS.maxRehearseTokens, 1, MAX_TOKENS),
      },
      rehearsePrompt: {
        ...(v['grounding-chars'] !== undefined ? { maxGroundingChars: intFlag(v, 'grounding-chars', 0, 0, 10_000_000) } : {}),
        ...(v['history-chars'] !== undefined ? { maxHistoryChars: intFlag(v, 'history-chars', 0, 0, 10_000_000) } : {}),
        ...(v['rehearse-decoding'] !== undefined ? { decoding: enumFlag(v, 'rehearse-decoding', REHEARSE_DECODINGS, 'structured') } : {}),
      },
      temperature: numFlag(v, 'temperature', 1),
      topP: topPFlag(v),
      greedyMember: v['greedy-member'] === true,
      ...(v.reward !== undefined ? { reward: enumFlag(v, 'reward', REWARD_RULES, 'verifier') } : {}),
      realPrompts: realPromptsFlag(v, steps, intFlag(v, 'k', 4, 1, 64)),
      observationCoef: numFlag(v, 'observation-coef', 0, 0, true),
      klCoef: numFlag(v, 'kl', 0, 0, true),
      lossAggregation: enumFlag(v, 'loss-agg', AGGREGATIONS, DEFAULT_AGGREGATION),
    };
    const modelFlag = strFlag(v, 'model');
    let cli: CliState = { model: modelFlag ?? '', world: enumFlag(v, 'world', WORLD_NAMES, 'mini'), trainTasks: intFlag(v, 'train-tasks', 200, 1, MAX_TASKS), evalTasks: intFlag(v, 'eval-tasks', 20, 0, MAX_TASKS), taskSeed: options.seed };
    const config = grpoRunConfig(options);

    // The lock comes first: it also proves the folder can be created and written before any work starts.
    const store = new DirStore(out, { warn: log, ops: deps.storeOps });
    const unlock = await store.lock();
    try {
      const saved = await readRunInfo(store);
      if (saved && !v.resume) throw new ArgError(`${store.root} already holds a run (${saved.step}/${saved.config.steps} steps); pass --resume to continue it or choose another --out`);
      if (!saved && v.resume) throw new ArgError(`--resume: ${store.root} holds no run (no run.json)`);
      if (saved) {
        const s = await store.read('train-cli.json');
        if (!s) throw new ArgError(`--resume: ${store.root}/train-cli.json is missing (was the run started by this CLI?)`);
        let raw: unknown;
        try {
          raw = JSON.parse(new TextDecoder().decode(s));
        } catch (e) {
          throw new CheckpointError(`${store.root}/train-cli.json is not valid JSON (${(e as Error).message})`);
        }
        const parsed = CliStateSchema.safeParse(raw);
        if (!parsed.success) {
          const iss = parsed.error.issues[0];
          throw new CheckpointError(`${store.root}/train-cli.json: ${iss.path.join('.') || '(root)'}: ${iss.message}`);
        }
        cli = parsed.data;
        const asked = { ...config, cli: { ...cli, model: modelFlag === undefined ? cli.model : resolve(modelFlag), world: v.world === undefined ? cli.world : enumFlag(v, 'world', WORLD_NAMES, 'mini'), trainTasks: intFlag(v, 'train-tasks', cli.trainTasks, 1, MAX_TASKS), evalTasks: intFlag(v, 'eval-tasks', cli.evalTasks, 0, MAX_TASKS) } };
        const have = { ...saved.config, cli: { ...cli, world: cli.world ?? 'retail' } };
        const differ = Object.entries(RESUME_KEYS)
          .filter(([flag, path]) => v[flag] !== undefined && JSON.stringify(at(asked, path)) !== JSON.stringify(at(have, path)))
          .map(([flag, path]) => `--${flag} ${JSON.stringify(at(asked, path))} (the run has ${path.replace(/^cli\./, '')} = ${JSON.stringify(at(have, path))})`);
        if (differ.length && !v['ignore-changed'])
          throw new ArgError(`--resume: flags differ from the saved run: ${differ.join('; ')}. Drop them, or pass --ignore-changed to continue with the saved values`);
        if (differ.length) log(`ignoring flags that differ from the saved run: ${differ.join('; ')}`);
        log(`resuming ${saved.config.mode} run at step ${saved.step}/${saved.config.steps}; its saved configuration is used`);
        if (saved.step >= saved.config.steps) throw new ArgError(`--resume: the run is already finished (${saved.step}/${saved.config.steps} steps)`);
      }

      const domain = deps.domain ?? loadWorldDomain(cli.world ?? 'retail');
      const tasks = splitTasks(domain, { train: cli.trainTasks, eval: cli.evalTasks, seed: cli.taskSeed });
      const backend = await openBackend(backendName, threads);
      stopWatching = watchInterrupts((why) => {
        if (interrupted) return;
        interrupted = true;
        log(`${why}: stopping after the current operation`);
        ac.abort(new Error('interrupted'));
      });
      try {
        const policy = await openModel(cli.model || undefined, backend, { world: cli.world ?? 'retail' });
        if (!saved) {
          cli.model = policy.dir;
          await store.write('train-cli.json', new TextEncoder().encode(JSON.stringify(cli, null, 1)));
        }
        const run = await GrpoRun.open(policy.model, policy.tokenizer, domain, tasks, store, config, { signal: ac.signal, ...(deps.reward ? { reward: deps.reward } : {}) });
        const c = run.config;
        const startStep = run.step;
        log(`${c.mode} (${c.groups}, ${c.baseline}) on ${policy.dir} [${backendName}]: ${c.promptsPerStep} prompts × ${c.k} rollouts, lr ${c.lr}, LoRA r${run.actAdapter.rank} alpha ${run.actAdapter.alpha}; ${tasks.train.length} train / ${tasks.eval.length} held-out tasks`);
        const t0 = performance.now();
        let last: StepMetrics | null = null;
        let lastEval: EvalMetrics | null = null;
        try {
          while (!run.done) {
            last = await run.trainStep();
            log(stepLine(last, c.steps));
            const every = c.evalEvery ?? 0;
            if (every > 0 && tasks.eval.length > 0 && (last.step % every === 0 || run.done)) {
              const lines = parseJsonl(new TextDecoder().decode((await store.read('eval.jsonl')) ?? new Uint8Array()), `${store.root}/eval.jsonl`, log);
              lastEval = (lines.at(-1) as EvalMetrics | undefined) ?? null;
              if (lastEval) log(evalLine(lastEval));
            }
          }
        } finally {
          run.free();
          policy.model.free();
        }
        const wallS = (performance.now() - t0) / 1000;
        const result: TrainResult = {
          out: store.root, mode: c.mode, advantage: c.groups ?? 'role-wise', baseline: c.baseline ?? 'row-weighted', seed: c.seed, steps: c.steps,
          model: policy.dir, backend: backendName, resumedFrom: startStep, wallS, meanStepS: wallS / Math.max(1, c.steps - startStep),
          last: last ? { reward: last.rollouts.meanReward, success: last.rollouts.success, fidelityExact: last.rollouts.fidelity.exact } : null,
          eval: lastEval,
        };
        io.out(JSON.stringify(result) + '\n');
      } catch (e) {
        if (interrupted) throw new Error(`interrupted; the run folder resumes from its last checkpoint with --resume`);
        throw e;
      } finally {
        stopWatching();
        backend.dispose();
      }
    } finally {
      await unlock();
    }
  });
  return interrupted && code !== 0 ? 130 : code;
}

if (isEntry(import.meta.url)) process.exitCode = await trainCli(process.argv.slice(2));
