// npm run eval -- [--adapter DIR] [--model DIR] --tasks test [--count N] [--tts parallel|sequential --n N]
// Held-out evaluation in the real environment (src/eval/evaluate.ts): success, mean reward, tool precision and
// recall against the reference actions, and rehearsal fidelity on the reference calls. Without --adapter it
// evaluates the base policy; --adapter takes a PEFT adapter folder or a training run folder (its last
// checkpoint; a per-role run rehearses with its Rehearse adapter). With --tts and N > 0 each task goes
// through test-time private rehearsal (src/eval/private-rehearsal.ts) before its one real episode.
// Progress on stderr, the result JSON on stdout; exit 0 ok, 1 failure, 2 usage error, 74 I/O error (--help lists flags).
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { HELD_OUT_TASK_SEED, type Domain, type Task } from '../env/domain';
import { WORLD_NAMES } from '../env/retail/index';
import { loadWorldDomain } from '../env/retail/node';
import { checkTaskWorld } from '../server/tasks';
import { loadTaskFile } from '../env/tau2';
import { loadAdapters } from '../rl/checkpoint';
import { evaluateHeldOut, type HeldOutReport } from '../eval/evaluate';
import { cliDefault, setting } from '../method/run-config';
import { DEFAULT_LIMITS } from '../rl/grpo-config';
import { tokenBudgets } from '../rollout/budget';
import { REHEARSE_DECODINGS, type RehearseDecoding } from '../rollout/rehearse-prompt';
import { DirStore } from '../rl/store-node';
import { privateRehearsal } from '../eval/private-rehearsal';
import { REVISE_SCOPES } from '../rollout/episode';
import { recordPath } from '../util/record-path';
import { checkConversationTasks, CONVERSATION_FLAGS, CONVERSATION_MAX_TURNS, conversationArgs, runConversationEval } from './eval-conversation';
import {
  ArgError, BACKEND_FLAG, BACKEND_NAMES, enumFlag, GROUNDING_CHARS_FLAG, HELP_FLAG, helpText, HISTORY_CHARS_FLAG, intFlag, isEntry, meter, openBackend, openModel, parseFlags, processIo, progress, runCli, strFlag, THREADS_FLAG, threadsFlag, WORLD_FLAG, type CliIo, type FlagSpec,
} from './args';

export const EVAL_USAGE = `usage: npm run eval -- --tasks test|train|FILE.json [--world mini|retail] [--count N] [--adapter DIR] [--model DIR]
       [--tts parallel|sequential|revise --n N] [--user scripted|model|endpoint [--samples N] [--user-fidelity]] [flags]`;

const MAX_TOKENS = 65_536;
/** Held-out tasks one evaluation may run (each is a full episode). */
export const MAX_EVAL_COUNT = 10_000;
/** The lab's held-out set (and the train CLI's): an `npm run eval` without --count measures what a run's step 0 does. */
const EVAL_COUNT = cliDefault(setting('evalTasks')) as number;

export const EVAL_FLAGS: FlagSpec = {
  tasks: { type: 'string', arg: 'T', help: 'test or train (generated split of --world) or a task file (τ²-bench or lab format) (required)' },
  world: WORLD_FLAG,
  count: { type: 'string', arg: 'N', help: `tasks to evaluate (the first N of a file), 1..${MAX_EVAL_COUNT}`, default: `${EVAL_COUNT} (the lab's held-out tasks)` },
  adapter: { type: 'string', arg: 'DIR', help: 'a PEFT adapter folder or a training run folder (its last checkpoint)', default: 'none: the base policy' },
  model: { type: 'string', arg: 'DIR', help: 'model folder (config.json, model.safetensors, tokenizer)', default: "the world's bundled policy: models/default (mini), models/retail (retail)" },
  seed: { type: 'string', arg: 'S', help: 'sampling seed, 0..2^32-1', default: '0' },
  'task-seed': { type: 'string', arg: 'S', help: 'seed of the generated task split, 0..2^32-1', default: `${HELD_OUT_TASK_SEED}` },
  backend: BACKEND_FLAG,
  threads: THREADS_FLAG,
  'fidelity-tokens': { type: 'string', arg: 'N', help: 'token budget per rehearsal in the fidelity measurement; 0 = skip it', default: '--max-rehearse-tokens' },
  'max-turns': { type: 'string', arg: 'N', help: 'turns per episode, 1..100', default: String(DEFAULT_LIMITS.maxTurns) },
  'max-act-tokens': { type: 'string', arg: 'N', help: `tokens per Act generation, 1..${MAX_TOKENS}`, default: `measured: p99 of the world's expert turns, at least ${DEFAULT_LIMITS.maxActTokens}` },
  'max-rehearse-tokens': { type: 'string', arg: 'N', help: `tokens per Rehearse generation, 1..${MAX_TOKENS}`, default: "measured: p99 of the world's real observations (tags included)" },
  'grounding-chars': GROUNDING_CHARS_FLAG,
  'history-chars': HISTORY_CHARS_FLAG,
  'rehearse-decoding': { type: 'string', arg: 'D', help: 'structured (only tokens that keep a rehearsal a well-formed observation, with a loop guard) or free (the policy alone)', default: 'structured' },
  tts: { type: 'string', arg: 'M', help: 'test-time private rehearsal: parallel or sequential (imagined episodes before each real one), or revise (rehearse each turn\'s calls before they run; a predicted error makes the policy write the turn again) (needs --n)', default: 'off' },
  n: { type: 'string', arg: 'N', help: 'with --tts parallel|sequential: imagined episodes per task; with --tts revise: revisions per episode at most; 0..16 (0 = plain evaluation)' },
  'revise-scope': { type: 'string', arg: 'S', help: 'with --tts revise: calls (every turn with a call is rehearsed first) or writes (only a turn that holds a write)', default: 'calls' },
  'revise-control': { type: 'boolean', help: 'with --tts revise: the compute-matched control: a checked turn is discarded and sampled again, with no rehearsal' },
  ...CONVERSATION_FLAGS,
  help: HELP_FLAG,
};

const EVAL_NOTES = 'exit status: 0 ok, 1 failure, 2 usage error, 74 I/O error (the message names the file).';

export interface EvalResult extends Omit<HeldOutReport, 'perTask'> {
  model: string;
  adapter: string | null;
  run: { mode: string | null; step: number | null } | null;
  world: string;
  tasksFrom: string;
  /** How rehearsals were decoded (src/rollout/rehearse-prompt.ts RehearseDecoding). */
  rehearseDecoding: RehearseDecoding;
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
    const v = parseFlags(argv, EVAL_FLAGS);
    if (v.help) {
      io.out(helpText(EVAL_USAGE, EVAL_FLAGS, EVAL_NOTES));
      return;
    }
    const log = progress(io, 'eval');
    const bar = meter(io, 'eval');
    const tasksArg = strFlag(v, 'tasks');
    if (!tasksArg) throw new ArgError('--tasks is required (test, train, or a task file)');
    const count = intFlag(v, 'count', EVAL_COUNT, 1, MAX_EVAL_COUNT);
    const seed = intFlag(v, 'seed', 0, 0, 0xffffffff);
    const taskSeed = intFlag(v, 'task-seed', HELD_OUT_TASK_SEED, 0, 0xffffffff);
    const backendName = enumFlag(v, 'backend', BACKEND_NAMES, 'cpu-fast');
    const threads = threadsFlag(v);
    const tts = enumFlag(v, 'tts', ['parallel', 'sequential', 'revise'] as const, undefined);
    if (v.n !== undefined && !tts) throw new ArgError('--n needs --tts parallel|sequential|revise');
    const n = intFlag(v, 'n', tts ? -1 : 0, 0, 16);
    if (tts && n < 0) throw new ArgError('--tts needs --n N (N = 0: plain evaluation)');
    if ((v['revise-scope'] !== undefined || v['revise-control']) && tts !== 'revise') throw new ArgError('--revise-scope and --revise-control need --tts revise');
    const revise = tts === 'revise' && n > 0 ? { max: n, scope: enumFlag(v, 'revise-scope', REVISE_SCOPES, 'calls'), ...(v['revise-control'] ? { control: true } : {}) } : undefined;
    const conv = conversationArgs(v, { tts: tts !== undefined });
    // Token budgets not given on the command line are measured on the world's real trajectories under the
    // model's tokenizer (src/rollout/budget.ts), once the model is open: a fixed number cuts long observations.
    const limits = {
      maxTurns: intFlag(v, 'max-turns', conv ? CONVERSATION_MAX_TURNS : DEFAULT_LIMITS.maxTurns, 1, 100),
      maxActTokens: intFlag(v, 'max-act-tokens', 0, 1, MAX_TOKENS),
      maxRehearseTokens: intFlag(v, 'max-rehearse-tokens', 0, 1, MAX_TOKENS),
    };
    let fidelityTokens = intFlag(v, 'fidelity-tokens', -1, 0, MAX_TOKENS);
    const rehearsePrompt = {
      ...(v['grounding-chars'] !== undefined ? { maxGroundingChars: intFlag(v, 'grounding-chars', 0, 0, 10_000_000) } : {}),
      ...(v['history-chars'] !== undefined ? { maxHistoryChars: intFlag(v, 'history-chars', 0, 0, 10_000_000) } : {}),
      ...(v['rehearse-decoding'] !== undefined ? { decoding: enumFlag(v, 'rehearse-decoding', REHEARSE_DECODINGS, 'structured') } : {}),
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
    // A task file on the wrong world fails at its first call ("User not found"): refuse it here instead.
    else if (tasksArg !== 'test' && tasksArg !== 'train') checkTaskWorld(tasks, world, domain, `--tasks ${tasksArg}`);
    if (conv) checkConversationTasks(tasks, tasksArg, conv, domain);

    const backend = await openBackend(backendName, threads);
    try {
      const t0 = performance.now();
      const policy = await openModel(strFlag(v, 'model'), backend, { world });
      if (limits.maxActTokens === 0 || limits.maxRehearseTokens === 0) {
        const measured = tokenBudgets(domain, policy.tokenizer, { conversations: !!conv });
        if (limits.maxActTokens === 0) limits.maxActTokens = measured.act;
        if (limits.maxRehearseTokens === 0) limits.maxRehearseTokens = measured.rehearse;
        log(`budgets: Act ${limits.maxActTokens}, Rehearse ${limits.maxRehearseTokens} tokens (p99 of the world's real ${conv ? "turns and observations in the expert's conversations with the scripted user" : 'turns and observations'})`);
      }
      if (fidelityTokens < 0) fidelityTokens = limits.maxRehearseTokens;
      const adapterDir = strFlag(v, 'adapter');
      const adapters = adapterDir ? await loadAdapters(new DirStore(adapterDir), backend, policy.model.config) : null;
      log(`${tasks.length} ${tasksArg} tasks, model ${policy.dir}${adapterDir ? `, adapter ${resolve(adapterDir)}${adapters?.mode ? ` (${adapters.mode} run, step ${adapters.step})` : ''}` : ' (base policy)'}${tts ? `, tts ${tts} n=${n}` : ''}`);
      try {
        if (conv) {
          const out = await runConversationEval({ model: policy.model, tokenizer: policy.tokenizer, actAdapter: adapters?.act ?? null }, domain, tasks, conv, { limits, seed, log, backend, world });
          io.out(JSON.stringify({ model: recordPath(policy.dir), adapter: adapterDir ? recordPath(adapterDir) : null, run: adapters ? { mode: adapters.mode, step: adapters.step } : null, world: domain.name, tasksFrom: tasksArg, backend: backendName, limits, wallS: (performance.now() - t0) / 1000, ...out }) + '\n');
          return;
        }
        let report: HeldOutReport;
        if (tts && tts !== 'revise' && n > 0) {
          report = await privateRehearsal({ model: policy.model, tokenizer: policy.tokenizer, actAdapter: adapters?.act ?? null, rehearseAdapter: adapters?.rehearse ?? adapters?.act ?? null }, domain, tasks, {
            mode: tts, n, seed, limits, fidelityTokens, rehearsePrompt, log,
          });
        } else {
          report = await evaluateHeldOut(
            { model: policy.model, tokenizer: policy.tokenizer, actAdapter: adapters?.act ?? null, ...(adapters?.rehearse ? { rehearseAdapter: adapters.rehearse } : {}) },
            domain, tasks, {
              limits, seed, fidelityTokens, rehearsePrompt, kvReuse: true, ...(revise ? { revise } : {}), log,
              onProgress: (p) => bar.update(p.phase === 'episodes' ? 'held-out episodes (real environment, greedy) finished' : 'fidelity check: rehearsals of the reference calls decoded', p.done, p.total, p.etaMs),
            },
          );
          bar.end();
        }
        const f = (x: number) => (Number.isFinite(x) ? x.toFixed(3) : '-');
        log(`success ${f(report.success)}  reward ${f(report.meanReward)}  calls without error ${f(report.callsWithoutError)}  tool P ${f(report.toolPrecision)} R ${f(report.toolRecall)}${report.fidelity ? `  fidelity exact ${f(report.fidelity.exact)} f1 ${f(report.fidelity.f1)} invalid ${f(report.fidelity.invalid)}` : ''}${report.fidelityGrounded ? ` (grounded as in rollouts: exact ${f(report.fidelityGrounded.exact)} invalid ${f(report.fidelityGrounded.invalid)})` : ''}`);
        if (report.revise) {
          const r = report.revise;
          log(`revise: ${r.checked} calls checked, the environment would refuse ${r.realErrors}, the rehearsal predicted ${r.predictedErrors} refusals, ${r.caught} caught (recall ${f(r.recall)}, precision ${f(r.precision)}); ${f(r.revisionsPerTask)} revisions and ${r.generatedPerTask.toFixed(0)} generated tokens per task`);
        }
        log(`by tier: ${Object.entries(report.byTier).map(([k, g]) => `${k} ${f(g.success)} (${g.tasks})`).join(', ') || '-'}`);
        const result: EvalResult = {
          model: recordPath(policy.dir), adapter: adapterDir ? recordPath(adapterDir) : null, run: adapters ? { mode: adapters.mode, step: adapters.step } : null,
          world: domain.name, tasksFrom: tasksArg, rehearseDecoding: rehearsePrompt.decoding ?? 'structured', backend: backendName, tts: tts ? { mode: tts, n } : null, wallS: (performance.now() - t0) / 1000, ...report,
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
