// npm run train -- --mode M --steps N --out DIR [options] (M: a rollout mode of src/method/modes.ts)
// Role-Wise GRPO on LoRA adapters of a model folder (default: the bundled policy in models/default).
// Progress lines on stderr, the result JSON on stdout; exit 0 ok, 1 failure, 2 usage error, 130 interrupted
// (the run folder then resumes with --resume exactly where the last checkpoint left it).
import { closeSync, existsSync, fstatSync, openSync, readdirSync, readFileSync, readSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import type { Domain } from '../env/domain';
import { WORLD_NAMES, type WorldName } from '../env/retail/index';
import { loadWorldDomain } from '../env/retail/node';
import { CheckpointError, readRunInfo } from '../rl/checkpoint';
import { MODES, ROLLOUT_MODES } from '../method/modes';
import { cliDefault, readRecorded, RUN_SETTINGS, setting, type BaseEval } from '../method/run-config';
import { tokenBudgets } from '../rollout/budget';
import { BASE_EVAL_FILE, baseEvalKey, baseEvaluation, changeFromBase, fileFingerprint, parseBaseEvalRecord, sampleOffsets, weightsFingerprint, type BaseEvalRecord, type BaseEvalSource } from '../rl/base-eval';
import { evalLine, grpoRunConfig, splitTasks, stepLine, type TrainOptions } from '../rl/grpo-config';
import { GrpoRun, type EvalMetrics, type RunHooks, type StepMetrics } from '../rl/run';
import { DirStore } from '../rl/store-node';
import { parseJsonl, type FileOps } from '../util/atomic-file';
import {
  ArgError, BACKEND_FLAG, BACKEND_NAMES, enumFlag, HELP_FLAG, helpText, intFlag, isEntry, openBackend, openModel, parseFlags, processIo, progress, runCli, strFlag, THREADS_FLAG, threadsFlag, WORLD_FLAG, type CliIo, type FlagSpec,
} from './args';
import { readRunFlags, resumeDiffs, runFlags } from './run-flags';
import { pathFromRecord, recordPath } from '../util/record-path';


export const TRAIN_USAGE = `usage: npm run train -- --mode ${ROLLOUT_MODES.join('|')} --steps N --out DIR [flags]
       npm run train -- --out DIR --resume [--mode M --steps N ...]`;

export const TRAIN_FLAGS: FlagSpec = {
  // The run's settings: one flag per row of src/method/run-config.ts that has one.
  ...runFlags(),
  out: { type: 'string', arg: 'DIR', help: 'run folder: run.json, checkpoints ckpt/<step>/, metrics/rollouts/eval JSONL, base-eval.json (required)' },
  'base-record': { type: 'string', arg: 'FILE', help: `with --base-eval reuse: the base evaluation to reuse, a ${BASE_EVAL_FILE} or a run folder holding one (refused unless it was measured on the same model, world, held-out tasks and limits)`, default: `DIR/${BASE_EVAL_FILE}, if there` },
  'base-wait': { type: 'string', arg: 'S', help: `with --base-record: the record may still be being measured by another process (npm run lesson's two runs side by side): train at once, and log step 0 from the record when it appears, waiting at most S seconds for it before the run's first held-out evaluation` },
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
  /** The starting policy on the same held-out tasks (step 0): measured, reused from a record, or skipped (null). */
  base: EvalMetrics | null;
  baseSource: BaseEvalSource;
  /** The last evaluation's held-out success minus the base's, in points (null: no base or no evaluation). */
  changePoints: number | null;
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

/** The last evaluation of `step` in the run's eval.jsonl (a resumed run's step 0, the evaluation a step just logged). */
async function loggedEval(store: DirStore, step: number, log: (s: string) => void): Promise<EvalMetrics | null> {
  const lines = parseJsonl(new TextDecoder().decode((await store.read('eval.jsonl')) ?? new Uint8Array()), `${store.root}/eval.jsonl`, log) as EvalMetrics[];
  return lines.filter((e) => e.step === step).at(-1) ?? null;
}

/** The file --base-record names: the file itself, or the base record of the run folder it names. */
const baseRecordFile = (flag: string): string => (existsSync(flag) && statSync(flag).isDirectory() ? join(flag, BASE_EVAL_FILE) : flag);

/** A base evaluation to reuse: --base-record's (a file, or a run folder holding one), else the run folder's own, if there. */
async function readBaseRecord(flag: string | undefined, store: DirStore): Promise<{ record: BaseEvalRecord; where: string } | null> {
  if (flag === undefined) {
    const own = await store.read(BASE_EVAL_FILE);
    const where = join(store.root, BASE_EVAL_FILE);
    return own ? { record: parseBaseEvalRecord(own, where), where } : null;
  }
  const where = baseRecordFile(flag);
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(where);
  } catch (e) {
    throw new ArgError(`--base-record ${flag}: cannot read ${where} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  try {
    return { record: parseBaseEvalRecord(bytes, where), where };
  } catch (e) {
    throw new ArgError(`--base-record ${flag}: ${(e as Error).message}`);
  }
}

/** The weights of a model folder (src/rl/base-eval.ts): a sample of each .safetensors file, read in place, as loaded (f32). */
function dirWeights(dir: string): string {
  const prints: string[] = [];
  for (const name of readdirSync(dir).filter((n) => n.endsWith('.safetensors'))) {
    const fd = openSync(join(dir, name), 'r');
    try {
      const size = fstatSync(fd).size;
      const offsets = sampleOffsets(size);
      const sample = new Uint8Array(offsets.length);
      // A positioned one-byte read per offset: 65,536 system calls (tens of milliseconds), not the whole file.
      for (let i = 0; i < offsets.length; i++) readSync(fd, sample, i, 1, offsets[i]);
      prints.push(fileFingerprint(name, size, sample));
    } finally {
      closeSync(fd);
    }
  }
  return weightsFingerprint(prints, 'f32');
}

/** Waits until `file` exists (another process writes it atomically), at most `seconds`. */
async function waitForFile(file: string, seconds: number, signal: AbortSignal, log: (s: string) => void): Promise<void> {
  const until = performance.now() + seconds * 1000;
  if (!existsSync(file)) log(`waiting for ${file} (at most ${seconds} s)`);
  while (!existsSync(file)) {
    signal.throwIfAborted();
    if (performance.now() > until) throw new Error(`--base-wait ${seconds}: ${file} did not appear in ${seconds} s; the run keeps its checkpoints (--resume continues it)`);
    await new Promise((r) => setTimeout(r, 250));
  }
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
    // The lab's defaults where the lab has its own (src/method/run-config.ts cliDefault): its seed, held-out tasks and
    // evaluation schedule, and budgets measured under the model's tokenizer (0 here, until the tokenizer is loaded).
    // Checked against the table by grpoRunConfig; readRunFlags has already parsed each by its row.
    const labDefaults = Object.fromEntries(RUN_SETTINGS.flatMap((r) => (cliDefault(r) === undefined ? [] : [[r.name, cliDefault(r)]])));
    const options = { mode: 'rehearse', ...labDefaults, ...given, steps } as TrainOptions;
    const budgets = { maxActTokens: options.maxActTokens || setting('maxActTokens').default, maxRehearseTokens: options.maxRehearseTokens || setting('maxRehearseTokens').default };
    const baseHow = (given.baseEval as BaseEval | undefined) ?? setting('baseEval').default;
    const baseRecordFlag = strFlag(v, 'base-record');
    if (baseRecordFlag !== undefined && baseHow !== 'reuse') throw new ArgError(`--base-record only applies with --base-eval reuse (not ${baseHow})`);
    const baseWaitS = v['base-wait'] === undefined ? null : intFlag(v, 'base-wait', 0, 1, 86_400);
    if (baseWaitS !== null && baseRecordFlag === undefined) throw new ArgError('--base-wait needs --base-record (the record another process is measuring)');
    const modelFlag = strFlag(v, 'model');
    let cli: CliState = { model: modelFlag ?? '', world: enumFlag(v, 'world', WORLD_NAMES, 'mini'), trainTasks: options.trainTasks ?? setting('trainTasks').default, evalTasks: options.evalTasks ?? setting('evalTasks').default, taskSeed: options.seed };
    // What --resume compares the flags with (a budget flag given is never the 0 of "measured").
    let config = grpoRunConfig({ ...options, ...budgets });

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
        cli = { ...parsed.data, model: parsed.data.model && pathFromRecord(parsed.data.model) };
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
          // As a record names it (repository-relative or $TMPDIR/…): the folder may be committed; a resume reads it back.
          cli.model = recordPath(policy.dir);
          await store.write('train-cli.json', new TextEncoder().encode(JSON.stringify(cli, null, 1)));
          if (!options.maxActTokens || !options.maxRehearseTokens) {
            // The lab's budgets: measured on the world's expert trajectories (100 train tasks) under this tokenizer.
            const m = tokenBudgets(domain, policy.tokenizer, { tasks: 100 });
            config = grpoRunConfig({ ...options, maxActTokens: options.maxActTokens || m.act, maxRehearseTokens: options.maxRehearseTokens || m.rehearse });
            log(`budgets: Act ${config.limits.maxActTokens}, Rehearse ${config.limits.maxRehearseTokens} tokens (measured as the lab does: p99 of the world's expert turns and real observations)`);
          }
        }
        // With --base-wait, step 0 may be logged late: just before the first held-out evaluation, or after a step.
        let pendingBase: (() => Promise<void>) | null = null;
        const logPendingBase = async () => {
          const f = pendingBase;
          pendingBase = null;
          await f?.();
        };
        const run = await GrpoRun.open(policy.model, policy.tokenizer, domain, tasks, store, config, { signal: ac.signal, beforeEvaluate: logPendingBase, ...(deps.reward ? { reward: deps.reward } : {}) });
        const c = run.config;
        const rc = c as unknown as Record<string, unknown>;
        const startStep = run.step;
        log(`${c.mode} (${c.groups}, ${c.baseline}) on ${policy.dir} [${backendName}]: ${c.promptsPerStep} prompts × ${c.k} rollouts, lr ${c.lr}, LoRA r${run.actAdapter.rank} alpha ${run.actAdapter.alpha}; ${tasks.train.length} train / ${tasks.eval.length} held-out tasks`);
        const t0 = performance.now();
        let last: StepMetrics | null = null;
        let lastEval: EvalMetrics | null = null;
        let base: { eval: EvalMetrics | null; source: BaseEvalSource } = { eval: null, source: 'off' };
        try {
          // Step 0: the starting policy on the same held-out tasks, what every later evaluation is reported against.
          const key = baseEvalKey(dirWeights(policy.dir), cli.world ?? 'retail', tasks.eval, c);
          const logBase = async () => {
            const stored = baseHow === 'reuse' ? await readBaseRecord(baseRecordFlag, store) : null;
            const out = await baseEvaluation(run, baseHow, key, stored?.record ?? null);
            if (stored && out.notReused.length) {
              if (baseRecordFlag !== undefined) throw new ArgError(`--base-record ${stored.where}: measured on another base or other tasks: ${out.notReused.join('; ')}`);
              log(`${stored.where} was not reused (${out.notReused.join('; ')}): ${out.source === 'measured' ? 'the base was measured again' : 'the run has stepped, so it has no base evaluation'}`);
            }
            if (out.record || out.source === 'reused') await store.write(BASE_EVAL_FILE, new TextEncoder().encode(JSON.stringify(out.record ?? stored!.record, null, 1)));
            base = { eval: out.source === 'logged' ? await loggedEval(store, 0, log) : out.eval, source: out.source };
            if (out.source === 'reused') log(`base (reused from ${stored!.where}, measured ${stored!.record.measuredAt}): ${evalLine(out.eval!)}`);
            else if (out.source === 'measured') log(`base: ${evalLine(out.eval!)}`);
            else if (out.source === 'skipped') log('base evaluation skipped (--base-eval skip): held-out results are not compared with the starting policy');
          };
          const recordFile = baseRecordFlag === undefined ? null : baseRecordFile(baseRecordFlag);
          if (baseWaitS !== null && recordFile && !existsSync(recordFile) && !(await run.evaluationsLogged()).length) {
            log(`base: ${recordFile} is not there yet; training at once, step 0 is logged from it when it appears (waiting at most ${baseWaitS} s before the first evaluation)`);
            pendingBase = async () => {
              await waitForFile(recordFile, baseWaitS, ac.signal, log);
              await logBase();
            };
          } else await logBase();
          while (!run.done) {
            last = await run.trainStep();
            log(stepLine(last, c.steps));
            if (pendingBase && recordFile && existsSync(recordFile)) await logPendingBase();
            const every = c.evalEvery ?? 0;
            if (every > 0 && tasks.eval.length > 0 && (last.step % every === 0 || run.done)) {
              lastEval = await loggedEval(store, last.step, log);
              if (lastEval) log(`${evalLine(lastEval)}  (${changeFromBase(base.eval, lastEval, tasks.eval.length, base.source)})`);
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
          base: base.eval,
          baseSource: base.source,
          changePoints: base.eval && lastEval ? Math.round(100 * (lastEval.success - base.eval.success)) : null,
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
