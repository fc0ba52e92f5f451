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
import { readRecorded, setting } from '../method/run-config';
import { evalLine, grpoRunConfig, splitTasks, stepLine, type TrainOptions } from '../rl/grpo-config';
import { GrpoRun, type EvalMetrics, type RunHooks, type StepMetrics } from '../rl/run';
import { DirStore } from '../rl/store-node';
import { parseJsonl, type FileOps } from '../util/atomic-file';
import {
  ArgError, BACKEND_FLAG, BACKEND_NAMES, enumFlag, HELP_FLAG, helpText, intFlag, isEntry, openBackend, openModel, parseFlags, processIo, progress, runCli, strFlag, THREADS_FLAG, threadsFlag, WORLD_FLAG, type CliIo, type FlagSpec,
} from './args';
import { readRunFlags, resumeDiffs, runFlags } from './run-flags';


export const TRAIN_USAGE = `usage: npm run train -- --mode ${ROLLOUT_MODES.join('|')} --steps N --out DIR [flags]
       npm run train -- --out DIR --resume [--mode M --steps N ...]`;

export const TRAIN_FLAGS: FlagSpec = {
  // The run's settings: one flag per row of src/method/run-config.ts that has one.
  ...runFlags(),
  out: { type: 'string', arg: 'DIR', help: 'run folder: run.json, checkpoints ckpt/<step>/, metrics/rollouts/eval JSONL (required)' },
  resume: { type: 'boolean', help: 'continue the run in --out from its last checkpoint with its saved configuration' },
  'ignore-changed': { type: 'boolean', help: 'with --resume: run on although flags differ from the saved run (the saved values are used)' },
  world: WORLD_FLAG,
  model: { type: 'string', arg: 'DIR', help: 'model folder (config.json, model.safetensors, tokenizer)', default: "the world's bundled policy: models/default (mini), models/retail (retail)" },
  backend: BACKEND_FLAG,
  threads: THREADS_FLAG,
  help: HELP_FLAG,
};

const TRAIN_NOTES = `rollout modes:
${ROLLOUT_MODES.map((m) => `  ${m.padEnd(18)}${MODES[m].description}`).join('\n')}
exit status: 0 ok, 1 failure, 2 usage error, 74 I/O error (the message names the file), 130 interrupted
(Ctrl-C, SIGTERM, or the parent process gone; the run then resumes with --resume from its last checkpoint).
One process at a time may write a run folder (it holds DIR/.lock).`;

/** The CLI's own flags that change a saved run, and where each lives in train-cli.json (the settings' are the table's). */
const CLI_RESUME_KEYS: Record<string, string> = { world: 'cli.world', 'train-tasks': 'cli.trainTasks', 'eval-tasks': 'cli.evalTasks', model: 'cli.model' };

const at = (o: unknown, path: string): unknown => path.split('.').reduce<unknown>((x, k) => (x && typeof x === 'object' ? (x as Record<string, unknown>)[k] : undefined), o);

const CliStateSchema = z.object({
  model: z.string(),
  world: z.enum(WORLD_NAMES).optional(),
  trainTasks: z.number().int().min(setting('trainTasks').kind.min).max(setting('trainTasks').kind.max),
  evalTasks: z.number().int().min(setting('evalTasks').kind.min).max(setting('evalTasks').kind.max),
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
    const given = readRunFlags(v);
    if (given.mode === undefined && !v.resume) throw new ArgError('--mode is required');
    const out = strFlag(v, 'out');
    if (!out) throw new ArgError('--out DIR is required (the run folder: checkpoints and JSONL logs)');
    if (v.steps === undefined && !v.resume) throw new ArgError('--steps N is required');
    if (v['ignore-changed'] && !v.resume) throw new ArgError('--ignore-changed only applies with --resume');
    const steps = (given.steps as number | undefined) ?? 1;
    const backendName = enumFlag(v, 'backend', BACKEND_NAMES, 'cpu-fast');
    const threads = threadsFlag(v);
    // Held-out evaluation after the last step unless asked otherwise (the run's own default is never).
    // Checked against the table by grpoRunConfig; readRunFlags has already parsed each by its row.
    const options = { mode: 'rehearse', evalEvery: steps, ...given, steps, seed: (given.seed as number | undefined) ?? 0 } as TrainOptions;
    const modelFlag = strFlag(v, 'model');
    let cli: CliState = { model: modelFlag ?? '', world: enumFlag(v, 'world', WORLD_NAMES, 'mini'), trainTasks: options.trainTasks ?? setting('trainTasks').default, evalTasks: options.evalTasks ?? setting('evalTasks').default, taskSeed: options.seed };
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
        const asked = { cli: { ...cli, model: modelFlag === undefined ? cli.model : resolve(modelFlag), world: v.world === undefined ? cli.world : enumFlag(v, 'world', WORLD_NAMES, 'mini'), trainTasks: options.trainTasks ?? cli.trainTasks, evalTasks: options.evalTasks ?? cli.evalTasks } };
        const have = { cli: { ...cli, world: cli.world ?? 'retail' } };
        const differ = [
          ...resumeDiffs(v, config as unknown as Record<string, unknown>, saved.config as unknown as Record<string, unknown>),
          ...Object.entries(CLI_RESUME_KEYS)
            .filter(([flag, path]) => v[flag] !== undefined && JSON.stringify(at(asked, path)) !== JSON.stringify(at(have, path)))
            .map(([flag, path]) => `--${flag} ${JSON.stringify(at(asked, path))} (the run has ${path.replace(/^cli\./, '')} = ${JSON.stringify(at(have, path))})`),
        ];
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
        const rc = c as unknown as Record<string, unknown>;
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
          out: store.root, mode: c.mode, advantage: String(readRecorded(rc, setting('groups'))), baseline: String(readRecorded(rc, setting('baseline'))), seed: c.seed, steps: c.steps,
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
