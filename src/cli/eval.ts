// npm run eval -- [--adapter DIR] [--model DIR] --tasks test [--count N] [--tts parallel|sequential --n N]
// Held-out evaluation in the real environment (src/rl/evaluate.ts): success, mean reward, tool precision and
// recall against the reference actions, and rehearsal fidelity on the reference calls. Without --adapter it
// evaluates the base policy; --adapter takes a PEFT adapter folder or a training run folder (its last
// checkpoint; a per-role run rehearses with its Rehearse adapter). With --tts and N > 0 each task goes
// through test-time private rehearsal (src/rollout/private-rehearsal.ts) before its one real episode.
// Progress on stderr, the result JSON on stdout; exit 0 ok, 1 failure, 2 usage error.
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { Domain, Task } from '../env/domain';
import { WORLD_NAMES } from '../env/retail/index';
import { loadWorldDomain } from '../env/retail/node';
import { loadTaskFile } from '../env/tau2';
import { loadAdapters } from '../rl/checkpoint';
import { evaluateHeldOut, type HeldOutReport } from '../rl/evaluate';
import { DEFAULT_LIMITS } from '../rl/grpo-trainer';
import { DirStore } from '../rl/store-node';
import { privateRehearsal } from '../rollout/private-rehearsal';
import {
  ArgError, BACKEND_NAMES, enumFlag, intFlag, isEntry, openBackend, openModel, parseFlags, processIo, progress, runCli, strFlag,
  type CliIo, type FlagSpec,
} from './args';

export const EVAL_USAGE = `usage: npm run eval -- --tasks test|train|FILE.json [--world mini|retail] [--count N] [--adapter DIR] [--model DIR]
  [--seed S] [--task-seed S] [--backend cpu-fast|cpu-ref|webgpu] [--threads T] [--fidelity-tokens N]
  [--max-turns N] [--max-act-tokens N] [--max-rehearse-tokens N] [--grounding-chars N] [--history-chars N]
  [--tts parallel|sequential --n N]`;

const FLAGS: FlagSpec = {
  tasks: { type: 'string' }, world: { type: 'string' }, count: { type: 'string' }, adapter: { type: 'string' }, model: { type: 'string' },
  seed: { type: 'string' }, 'task-seed': { type: 'string' }, backend: { type: 'string' }, threads: { type: 'string' },
  'fidelity-tokens': { type: 'string' }, 'max-turns': { type: 'string' }, 'max-act-tokens': { type: 'string' },
  'max-rehearse-tokens': { type: 'string' }, 'grounding-chars': { type: 'string' }, 'history-chars': { type: 'string' }, tts: { type: 'string' }, n: { type: 'string' }, help: { type: 'boolean', short: 'h' },
};

export interface EvalResult extends Omit<HeldOutReport, 'perTask'> {
  model: string;
  adapter: string | null;
  run: { mode: string | null; step: number | null } | null;
  world: string;
  tasksFrom: string;
  backend: string;
  tts: { mode: string; n: number } | null;
  wallS: number;
  perTask: HeldOutReport['perTask'];
}

/** Injected by tests: a smaller domain or task list; everything else runs for real. */
export interface EvalDeps {
  domain?: Domain;
}

export async function evalCli(argv: readonly string[], io: CliIo = processIo, deps: EvalDeps = {}): Promise<number> {
  return runCli(io, EVAL_USAGE, async () => {
    const v = parseFlags(argv, FLAGS);
    if (v.help) {
      io.out(EVAL_USAGE + '\n');
      return;
    }
    const log = progress(io, 'eval');
    const tasksArg = strFlag(v, 'tasks');
    if (!tasksArg) throw new ArgError('--tasks is required (test, train, or a task file)');
    const count = intFlag(v, 'count', 40, 1);
    const seed = intFlag(v, 'seed', 0, 0, 0xffffffff);
    const taskSeed = intFlag(v, 'task-seed', 1, 0, 0xffffffff);
    const backendName = enumFlag(v, 'backend', BACKEND_NAMES, 'cpu-fast');
    const threads = v.threads === undefined ? undefined : intFlag(v, 'threads', 1, 1, 64);
    const tts = enumFlag(v, 'tts', ['parallel', 'sequential'] as const, undefined);
    if (v.n !== undefined && !tts) throw new ArgError('--n needs --tts parallel|sequential');
    const n = intFlag(v, 'n', tts ? -1 : 0, 0, 16);
    if (tts && n < 0) throw new ArgError('--tts needs --n N (N = 0: plain evaluation)');
    const limits = {
      maxTurns: intFlag(v, 'max-turns', DEFAULT_LIMITS.maxTurns, 1, 100),
      maxActTokens: intFlag(v, 'max-act-tokens', DEFAULT_LIMITS.maxActTokens, 1),
      maxRehearseTokens: intFlag(v, 'max-rehearse-tokens', DEFAULT_LIMITS.maxRehearseTokens, 1),
    };
    const fidelityTokens = intFlag(v, 'fidelity-tokens', limits.maxRehearseTokens, 0);
    const rehearsePrompt = {
      ...(v['grounding-chars'] !== undefined ? { maxGroundingChars: intFlag(v, 'grounding-chars', 0, 0) } : {}),
      ...(v['history-chars'] !== undefined ? { maxHistoryChars: intFlag(v, 'history-chars', 0, 0) } : {}),
    };

    const world = enumFlag(v, 'world', WORLD_NAMES, 'mini');
    const domain = deps.domain ?? loadWorldDomain(world);
    let tasks: Task[];
    if (tasksArg === 'test' || tasksArg === 'train') tasks = domain.tasks.generate({ split: tasksArg, count, seed: taskSeed });
    else {
      const text = await readFile(resolve(tasksArg), 'utf8').catch((e: Error) => {
        throw new ArgError(`--tasks ${tasksArg}: not test, train or a readable task file (${e.message})`);
      });
      tasks = loadTaskFile(text).slice(0, count);
    }
    if (tasks.length === 0) throw new ArgError(`--tasks ${tasksArg}: no tasks`);

    const backend = await openBackend(backendName, threads);
    try {
      const t0 = performance.now();
      const policy = await openModel(strFlag(v, 'model'), backend);
      const adapterDir = strFlag(v, 'adapter');
      const adapters = adapterDir ? await loadAdapters(new DirStore(adapterDir), backend, policy.model.config) : null;
      log(`${tasks.length} ${tasksArg} tasks, model ${policy.dir}${adapterDir ? `, adapter ${resolve(adapterDir)}${adapters?.mode ? ` (${adapters.mode} run, step ${adapters.step})` : ''}` : ' (base policy)'}${tts ? `, tts ${tts} n=${n}` : ''}`);
      try {
        let report: HeldOutReport;
        if (tts && n > 0) {
          report = await privateRehearsal({ model: policy.model, tokenizer: policy.tokenizer, actAdapter: adapters?.act ?? null, rehearseAdapter: adapters?.rehearse ?? adapters?.act ?? null }, domain, tasks, {
            mode: tts, n, seed, limits, fidelityTokens, rehearsePrompt, log,
          });
        } else {
          report = await evaluateHeldOut(
            { model: policy.model, tokenizer: policy.tokenizer, actAdapter: adapters?.act ?? null, ...(adapters?.rehearse ? { rehearseAdapter: adapters.rehearse } : {}) },
            domain, tasks, { limits, seed, fidelityTokens, rehearsePrompt, kvReuse: true, log },
          );
        }
        const f = (x: number) => (Number.isFinite(x) ? x.toFixed(3) : '-');
        log(`success ${f(report.success)}  reward ${f(report.meanReward)}  calls without error ${f(report.callsWithoutError)}  tool P ${f(report.toolPrecision)} R ${f(report.toolRecall)}${report.fidelity ? `  fidelity exact ${f(report.fidelity.exact)} f1 ${f(report.fidelity.f1)} invalid ${f(report.fidelity.invalid)}` : ''}`);
        log(`by tier: ${Object.entries(report.byTier).map(([k, g]) => `${k} ${f(g.success)} (${g.tasks})`).join(', ') || '-'}`);
        const result: EvalResult = {
          model: policy.dir, adapter: adapterDir ? resolve(adapterDir) : null, run: adapters ? { mode: adapters.mode, step: adapters.step } : null,
          world: domain.name, tasksFrom: tasksArg, backend: backendName, tts: tts ? { mode: tts, n } : null, wallS: (performance.now() - t0) / 1000, ...report,
        };
        io.out(JSON.stringify(result) + '\n');
      } finally {
        adapters?.act.free(backend);
        adapters?.rehearse?.free(backend);
        policy.model.free();
      }
    } finally {
      backend.dispose();
    }
  });
}

if (isEntry(import.meta.url)) process.exitCode = await evalCli(process.argv.slice(2));
