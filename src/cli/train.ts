// npm run train -- --mode rehearse|real|per-role|frozen-simulator --steps N --out DIR [options]
// Role-Wise GRPO on LoRA adapters of a model folder (default: the bundled policy in models/default).
// Progress lines on stderr, the result JSON on stdout; exit 0 ok, 1 failure, 2 usage error, 130 interrupted
// (the run folder then resumes with --resume exactly where the last checkpoint left it).
import type { Domain } from '../env/domain';
import { WORLD_NAMES, type WorldName } from '../env/retail/index';
import { loadWorldDomain } from '../env/retail/node';
import { readRunInfo } from '../rl/checkpoint';
import { ADVANTAGES, BASELINES, evalLine, grpoRunConfig, ROLLOUT_MODES, splitTasks, stepLine, DEFAULT_LIMITS } from '../rl/grpo-trainer';
import { GrpoRun, type EvalMetrics, type StepMetrics } from '../rl/run';
import { DirStore } from '../rl/store-node';
import {
  ArgError, BACKEND_NAMES, enumFlag, intFlag, isEntry, numFlag, openBackend, openModel, parseFlags, processIo, progress, runCli, strFlag,
  type CliIo, type FlagSpec,
} from './args';

export const TRAIN_USAGE = `usage: npm run train -- --mode rehearse|real|per-role|frozen-simulator --steps N --out DIR
  [--world mini|retail]  [--advantage role-wise|pooled] [--baseline row-weighted|rollout-mean] [--seed S] [--model DIR]
  [--backend cpu-fast|cpu-ref|webgpu] [--threads T] [--k K] [--prompts P] [--lr LR] [--rank R] [--alpha A]
  [--eval-every N] [--eval-tasks N] [--train-tasks N] [--fidelity-tokens N] [--max-turns N]
  [--max-act-tokens N] [--max-rehearse-tokens N] [--grounding-chars N] [--history-chars N] [--temperature T]
  [--kl C] [--resume]`;

const FLAGS: FlagSpec = {
  mode: { type: 'string' }, world: { type: 'string' }, advantage: { type: 'string' }, baseline: { type: 'string' }, steps: { type: 'string' },
  seed: { type: 'string' }, out: { type: 'string' }, model: { type: 'string' }, backend: { type: 'string' },
  threads: { type: 'string' }, k: { type: 'string' }, prompts: { type: 'string' }, lr: { type: 'string' },
  rank: { type: 'string' }, alpha: { type: 'string' }, 'eval-every': { type: 'string' }, 'eval-tasks': { type: 'string' },
  'train-tasks': { type: 'string' }, 'fidelity-tokens': { type: 'string' }, 'max-turns': { type: 'string' },
  'max-act-tokens': { type: 'string' }, 'max-rehearse-tokens': { type: 'string' }, temperature: { type: 'string' },
  'grounding-chars': { type: 'string' }, 'history-chars': { type: 'string' }, kl: { type: 'string' }, resume: { type: 'boolean' }, help: { type: 'boolean', short: 'h' },
};

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
}

export async function trainCli(argv: readonly string[], io: CliIo = processIo, deps: TrainDeps = {}): Promise<number> {
  let interrupted = false;
  const ac = new AbortController();
  const onSigint = () => {
    interrupted = true;
    ac.abort(new Error('interrupted'));
  };
  const code = await runCli(io, TRAIN_USAGE, async () => {
    const v = parseFlags(argv, FLAGS);
    if (v.help) {
      io.out(TRAIN_USAGE + '\n');
      return;
    }
    const log = progress(io, 'train');
    const mode = enumFlag(v, 'mode', ROLLOUT_MODES, undefined);
    if (!mode) throw new ArgError('--mode is required');
    const out = strFlag(v, 'out');
    if (!out) throw new ArgError('--out DIR is required (the run folder: checkpoints and JSONL logs)');
    if (v.steps === undefined) throw new ArgError('--steps N is required');
    const steps = intFlag(v, 'steps', 0, 1);
    const backendName = enumFlag(v, 'backend', BACKEND_NAMES, 'cpu-fast');
    const threads = v.threads === undefined ? undefined : intFlag(v, 'threads', 1, 1, 64);
    const rank = intFlag(v, 'rank', 8, 1, 256);
    const options = {
      mode,
      advantage: enumFlag(v, 'advantage', ADVANTAGES, 'role-wise'),
      baseline: enumFlag(v, 'baseline', BASELINES, 'row-weighted'),
      steps,
      seed: intFlag(v, 'seed', 0, 0, 0xffffffff),
      k: intFlag(v, 'k', 4, 1, 64),
      promptsPerStep: intFlag(v, 'prompts', 4, 1, 256),
      lr: numFlag(v, 'lr', 1e-3),
      rank,
      alpha: numFlag(v, 'alpha', 2 * rank),
      evalEvery: intFlag(v, 'eval-every', steps, 0),
      evalFidelityTokens: intFlag(v, 'fidelity-tokens', DEFAULT_LIMITS.maxRehearseTokens, 0),
      limits: {
        maxTurns: intFlag(v, 'max-turns', DEFAULT_LIMITS.maxTurns, 1, 100),
        maxActTokens: intFlag(v, 'max-act-tokens', DEFAULT_LIMITS.maxActTokens, 1),
        maxRehearseTokens: intFlag(v, 'max-rehearse-tokens', DEFAULT_LIMITS.maxRehearseTokens, 1),
      },
      rehearsePrompt: {
        ...(v['grounding-chars'] !== undefined ? { maxGroundingChars: intFlag(v, 'grounding-chars', 0, 0) } : {}),
        ...(v['history-chars'] !== undefined ? { maxHistoryChars: intFlag(v, 'history-chars', 0, 0) } : {}),
      },
      temperature: numFlag(v, 'temperature', 1),
      klCoef: numFlag(v, 'kl', 0, 0, true),
    };
    let cli: CliState = { model: strFlag(v, 'model') ?? '', world: enumFlag(v, 'world', WORLD_NAMES, 'mini'), trainTasks: intFlag(v, 'train-tasks', 200, 1), evalTasks: intFlag(v, 'eval-tasks', 20, 0), taskSeed: options.seed };

    const store = new DirStore(out);
    const saved = await readRunInfo(store);
    if (saved && !v.resume) throw new ArgError(`${store.root} already holds a run (${saved.step}/${saved.config.steps} steps); pass --resume to continue it or choose another --out`);
    if (!saved && v.resume) throw new ArgError(`--resume: ${store.root} holds no run (no run.json)`);
    if (saved) {
      const s = await store.read('train-cli.json');
      if (!s) throw new ArgError(`--resume: ${store.root}/train-cli.json is missing (was the run started by this CLI?)`);
      cli = JSON.parse(new TextDecoder().decode(s)) as CliState;
      log(`resuming ${saved.config.mode} run at step ${saved.step}/${saved.config.steps}; its saved configuration is used`);
      if (saved.step >= saved.config.steps) throw new ArgError(`--resume: the run is already finished (${saved.step}/${saved.config.steps} steps)`);
    }

    const domain = deps.domain ?? loadWorldDomain(cli.world ?? 'retail');
    const tasks = splitTasks(domain, { train: cli.trainTasks, eval: cli.evalTasks, seed: cli.taskSeed });
    const backend = await openBackend(backendName, threads);
    process.on('SIGINT', onSigint);
    try {
      const policy = await openModel(cli.model || undefined, backend);
      if (!saved) {
        cli.model = policy.dir;
        await store.write('train-cli.json', new TextEncoder().encode(JSON.stringify(cli, null, 1)));
      }
      const config = grpoRunConfig(options);
      const run = await GrpoRun.open(policy.model, policy.tokenizer, domain, tasks, store, config, { signal: ac.signal });
      const c = run.config;
      const startStep = run.step;
      log(`${c.mode} (${c.groups}, ${c.baseline}) on ${policy.dir} [${backendName}]: ${c.promptsPerStep} prompts × ${c.k} rollouts, lr ${c.lr}, LoRA r${c.lora.rank}; ${tasks.train.length} train / ${tasks.eval.length} held-out tasks`);
      const t0 = performance.now();
      let last: StepMetrics | null = null;
      let lastEval: EvalMetrics | null = null;
      try {
        while (!run.done) {
          last = await run.trainStep();
          log(stepLine(last, c.steps));
          const every = c.evalEvery ?? 0;
          if (every > 0 && tasks.eval.length > 0 && (last.step % every === 0 || run.done)) {
            const lines = new TextDecoder().decode((await store.read('eval.jsonl')) ?? new Uint8Array()).trim().split('\n');
            lastEval = JSON.parse(lines.at(-1)!) as EvalMetrics;
            log(evalLine(lastEval));
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
      process.off('SIGINT', onSigint);
      backend.dispose();
    }
  });
  return interrupted && code !== 0 ? 130 : code;
}

if (isEntry(import.meta.url)) process.exitCode = await trainCli(process.argv.slice(2));
