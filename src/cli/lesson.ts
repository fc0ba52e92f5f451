// npm run lesson -- --out DIR [--seed S] [--model DIR] (the lab's world-rehearsal lesson, headless)
// The lab's one-click lesson (src/method/lesson-runs.ts) run in Node: the same two GRPO runs with the same settings the
// lab's Training dashboard gives them (the lab's defaults, the lab's seed and limits, the lesson's size, each run's
// configuration), through the train CLI, the second reusing the first's base evaluation. On two cores or more the two
// runs train side by side in two processes, started together (the second trains while the first measures the base):
// on a policy this small a second cpu-fast thread runs the training loop's parts 1.2-1.4× faster (npm run bench --
// threads), while two processes of one thread each run at ~0.9× their speed alone, ~1.8× together
// (research/records/2026-12-06-lesson-side-by-side); a run's results do not depend on its thread count. Writes
// DIR/real-only/ and DIR/rehearsed/ (ordinary run folders: --resume continues either) and DIR/lesson.json (both
// runs' held-out curves, the base, wall times); prints the summary table. Exit codes as the train CLI's.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createRequire } from 'node:module';
import { BASE_EVAL_FILE } from '../rl/base-eval';
import { cliDefault, defaultOf, labDefault, RUN_SETTINGS, setting, type RunSetting, type Values } from '../method/run-config';
import { LESSON_RANGE, LESSON_RUNS, LESSON_SIZE, lessonRunName, lessonValues, type LessonSize } from '../method/lesson-runs';
import { ArgError, BACKEND_FLAG, HELP_FLAG, helpText, intFlag, isEntry, parseFlags, processIo, progress, runCli, strFlag, THREADS_FLAG, WORLD_FLAG, type CliIo, type FlagSpec } from './args';
import { parseJsonl } from '../util/jsonl';
import { recordPath } from '../util/record-path';
import { trainCli, type TrainResult } from './train';

export const LESSON_USAGE = 'usage: npm run lesson -- --out DIR [--seed S] [--model DIR] [--steps N --eval-every N --eval-tasks N]';

const sizeFlag = (k: keyof LessonSize, help: string) => ({ type: 'string' as const, arg: 'N', help: `${help}, ${LESSON_RANGE[k].min}..${LESSON_RANGE[k].max}`, default: String(LESSON_SIZE[k]) });

export const LESSON_FLAGS: FlagSpec = {
  out: { type: 'string', arg: 'DIR', help: 'lesson folder: real-only/ and rehearsed/ run folders and lesson.json (required; must not hold a lesson yet)' },
  seed: { type: 'string', arg: 'S', help: "the lab's seed (the stepper's Seed): adapters, sampling and task split", default: String(labDefault(setting('seed'))) },
  steps: sizeFlag('steps', 'GRPO steps of each run'),
  'eval-every': sizeFlag('evalEvery', 'held-out evaluation every N steps and after the last'),
  'eval-tasks': sizeFlag('evalTasks', 'held-out tasks of each evaluation'),
  world: WORLD_FLAG,
  model: { type: 'string', arg: 'DIR', help: 'starting policy (model folder)', default: "the world's bundled policy" },
  backend: BACKEND_FLAG,
  threads: THREADS_FLAG,
  'one-at-a-time': { type: 'boolean', help: 'train the two runs one after the other in this process (default on a machine of 2 cores or more: side by side, in two processes of half the cores each, started together, the second logging the first\'s base evaluation as its step 0)' },
  help: HELP_FLAG,
};

/**
 * The train CLI's flags that make a run of these lab values: a flag for every setting whose value is not what the
 * train CLI would take anyway (its own default, which is the lab's where the lab has one). A lab value that no flag
 * can say is refused rather than dropped, so the headless lesson never runs something the lab would not.
 */
export function trainArgs(values: Values): string[] {
  const argv: string[] = [];
  for (const row of RUN_SETTINGS as readonly RunSetting[]) {
    const v = values[row.name];
    if (v === undefined || v === 'auto') continue;
    const cliWould = cliDefault(row) ?? defaultOf(row, values);
    if (JSON.stringify(v) === JSON.stringify(cliWould)) continue;
    if (!row.cli) throw new Error(`the lesson's ${row.name} = ${JSON.stringify(v)} has no train-CLI flag`);
    if (row.kind.type === 'bool') {
      if (v !== true) throw new Error(`the lesson's ${row.name} = false cannot be said with --${row.cli.flag}`);
      argv.push(`--${row.cli.flag}`);
    } else if (row.kind.type === 'list') throw new Error(`the lesson's ${row.name} is a list, which takes no flag`);
    else if (row.cli.fromFlag && !row.cli.toFlag) throw new Error(`the lesson's ${row.name}: --${row.cli.flag} says another quantity and has no inverse`);
    else argv.push(`--${row.cli.flag}`, String(row.cli.toFlag ? row.cli.toFlag(v as number, values) : v));
  }
  return argv;
}

interface EvalLine {
  step: number;
  success: number;
  fidelity?: { exact: number };
}

export interface LessonRecord {
  seed: number;
  size: LessonSize;
  model: string;
  world: string;
  runs: {
    role: string;
    research: string;
    name: string;
    /** The run's own train-CLI flags (the settings; world, model and folder are the lesson's). */
    flags: string[];
    wallS: number;
    /** Held-out success and fidelity at every evaluation, step 0 (the base) first. */
    curve: { step: number; success: number; fidelityExact: number | null }[];
    final: number | null;
  }[];
  base: number | null;
  /** Whether the two runs trained side by side (two processes) rather than one after the other; absent before 2026-12-06. */
  sideBySide?: boolean;
  wallS: number;
}

/** How long the second run waits for the first's base evaluation before its own first evaluation (it is ready in ~1 minute). */
const BASE_WAIT_S = 3600;

const TRAIN_CLI = fileURLToPath(new URL('./train.ts', import.meta.url));
/** Node's arguments that run the train CLI: from TypeScript source through tsx's loader (as `npm run train` does). */
const trainNodeArgs = (): string[] => (TRAIN_CLI.endsWith('.ts') ? ['--import', pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href, TRAIN_CLI] : [TRAIN_CLI]);

/**
 * The train CLI in a child process of this Node: its progress lines go to io.err under
 * the run's role, its result (the one JSON line it prints) comes back with its exit code and wall time.
 */
function trainChild(args: readonly string[], role: string, io: CliIo): { finished: boolean; stop: () => void; done: Promise<{ rc: number; result: TrainResult | null; wallS: number }> } {
  const t = performance.now();
  const child = spawn(process.execPath, [...trainNodeArgs(), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  createInterface({ input: child.stderr }).on('line', (line) => io.err(`${role}: ${line}\n`));
  const state = {
    finished: false,
    /** SIGTERM: the train CLI stops after its current operation and exits 130, its checkpoints kept. */
    stop: () => void child.kill('SIGTERM'),
    done: new Promise<{ rc: number; result: TrainResult | null; wallS: number }>((resolve) => {
      const end = (rc: number) => {
        state.finished = true;
        const last = stdout.trim().split('\n').at(-1) ?? '';
        let result: TrainResult | null = null;
        try {
          result = last ? (JSON.parse(last) as TrainResult) : null;
        } catch {
          io.err(`${role}: the train CLI's result is not JSON: ${last.slice(0, 200)}\n`);
        }
        resolve({ rc, result, wallS: (performance.now() - t) / 1000 });
      };
      child.on('error', (e) => {
        io.err(`${role}: cannot start the train CLI (${e.message})\n`);
        end(1);
      });
      child.on('close', (code, signal) => end(code ?? (signal ? 1 : 0)));
    }),
  };
  return state;
}

function curveOf(dir: string, log: (s: string) => void): LessonRecord['runs'][number]['curve'] {
  const file = join(dir, 'eval.jsonl');
  const lines = parseJsonl(readFileSync(file, 'utf8'), file, log) as EvalLine[];
  return lines.map((e) => ({ step: e.step, success: e.success, fidelityExact: e.fidelity?.exact ?? null }));
}

export async function lessonCli(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  let failed = 0;
  const code = await runCli(io, LESSON_USAGE, async () => {
    const v = parseFlags(argv, LESSON_FLAGS);
    if (v.help) {
      io.out(helpText(LESSON_USAGE, LESSON_FLAGS));
      return;
    }
    const log = progress(io, 'lesson');
    const out = strFlag(v, 'out');
    if (!out) throw new ArgError('--out DIR is required');
    const size: LessonSize = {
      steps: intFlag(v, 'steps', LESSON_SIZE.steps, LESSON_RANGE.steps.min, LESSON_RANGE.steps.max),
      evalEvery: intFlag(v, 'eval-every', LESSON_SIZE.evalEvery, LESSON_RANGE.evalEvery.min, LESSON_RANGE.evalEvery.max),
      evalTasks: intFlag(v, 'eval-tasks', LESSON_SIZE.evalTasks, LESSON_RANGE.evalTasks.min, LESSON_RANGE.evalTasks.max),
    };
    // The lab's values of the settings a lesson takes from the lab (seed and limits), as a fresh lab has them.
    const lab: Record<string, unknown> = Object.fromEntries((RUN_SETTINGS as readonly RunSetting[]).filter((r) => r.lab).map((r) => [r.name, labDefault(r)]));
    lab.seed = intFlag(v, 'seed', lab.seed as number, 0, 2 ** 31 - 1);
    const shared = ['--world', String(v.world ?? 'mini'), '--backend', String(v.backend ?? 'cpu-fast')];
    if (v.model !== undefined) shared.push('--model', String(strFlag(v, 'model')));
    if (v.threads !== undefined) shared.push('--threads', String(v.threads));
    mkdirSync(out, { recursive: true });
    const cores = availableParallelism();
    const sideBySide = !v['one-at-a-time'] && cores >= 2;
    if (sideBySide && v.threads === undefined) shared.push('--threads', String(Math.max(1, Math.floor(cores / 2))));
    const record: LessonRecord = { seed: lab.seed as number, size, model: '', world: shared[1], sideBySide, runs: [], base: null, wallS: 0 };
    const t0 = performance.now();
    const plan = LESSON_RUNS.map((spec, i) => {
      const dir = join(out, spec.role);
      const flags = trainArgs(lessonValues(spec, size, lab));
      const args = [...flags, ...shared, ...(i > 0 ? ['--base-record', join(out, LESSON_RUNS[0].role)] : []), '--out', dir];
      return { spec, dir, flags, args };
    });
    const fail = (i: number, rc: number): never => {
      failed = rc || 1;
      // The second run names the first's base record, so that a resume before its first evaluation still logs step 0.
      const base = i > 0 ? ` --base-record ${plan[0].dir}` : '';
      throw new Error(`${plan[i].spec.role} run failed (exit ${rc}); its folder ${plan[i].dir} resumes with npm run train -- --out ${plan[i].dir} --resume${base}`);
    };
    const done: { result: TrainResult; wallS: number }[] = [];
    const announce = (i: number) => log(`${lessonRunName(plan[i].spec, size.steps)} (research's ${plan[i].spec.research}): npm run train -- ${plan[i].args.join(' ')}`);
    if (sideBySide) {
      // Both start at once: the second trains while the first measures the base, and logs the first's base-eval.json
      // as its step 0 before its own first evaluation (--base-wait). If the first fails before it has measured the
      // base, the second would wait for nothing: it is stopped (its checkpoints kept).
      plan[1].args.splice(plan[1].args.indexOf('--out'), 0, '--base-wait', String(BASE_WAIT_S));
      announce(0);
      const first = trainChild(plan[0].args, plan[0].spec.role, io);
      announce(1);
      const second = trainChild(plan[1].args, plan[1].spec.role, io);
      void first.done.then((r) => {
        if (r.rc !== 0 && !existsSync(join(plan[0].dir, BASE_EVAL_FILE))) second.stop();
      });
      const results = await Promise.all([first.done, second.done]);
      results.forEach((r, i) => (r.rc !== 0 || !r.result ? fail(i, r.rc) : done.push({ result: r.result, wallS: r.wallS })));
    } else {
      for (const [i, p] of plan.entries()) {
        announce(i);
        let result: TrainResult | null = null;
        const t = performance.now();
        const rc = await trainCli(p.args, { ...io, out: (s) => { result = JSON.parse(s) as TrainResult; } });
        if (rc !== 0 || !result) fail(i, rc);
        done.push({ result: result as unknown as TrainResult, wallS: (performance.now() - t) / 1000 });
      }
    }
    for (const [i, { result: r, wallS }] of done.entries()) {
      const { spec, dir, flags } = plan[i];
      const curve = curveOf(dir, log);
      record.model = recordPath(r.model);
      record.base ??= r.base?.success ?? null;
      record.runs.push({ role: spec.role, research: spec.research, name: spec.name, flags, wallS, curve, final: r.eval?.success ?? null });
    }
    record.wallS = (performance.now() - t0) / 1000;
    writeFileSync(join(out, 'lesson.json'), JSON.stringify(record, null, 1) + '\n');
    const pct = (x: number | null) => (x === null ? '–' : `${Math.round(100 * x)} %`);
    io.out(`lesson, seed ${record.seed}, ${size.steps} steps, ${size.evalTasks} held-out tasks, from ${record.model}: base ${pct(record.base)}\n`);
    for (const r of record.runs) io.out(`  ${r.name.padEnd(16)} ${pct(r.final)} held-out success (${r.research}; ${(r.wallS / 60).toFixed(1)} min)\n`);
    io.out(`  both runs${sideBySide ? ', side by side' : ''}: ${(record.wallS / 60).toFixed(1)} min; record ${join(out, 'lesson.json')}\n`);
  });
  return failed && code !== 0 ? failed : code;
}

if (isEntry(import.meta.url)) process.exitCode = await lessonCli(process.argv.slice(2));
