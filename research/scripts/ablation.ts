// npm run ablation -- [--world mini|retail] [--model DIR] [--steps N] [--seeds N] [--tasks N] [--train-tasks N] [--k K]
//   [--prompts P] [--lr LR] [--rank R] [--configs id,id,..] [--out DIR] [--eval-every N] [--curve-tasks M] [--pilot]
//   [--only-seeds 0,1] [--estimate] [--table-only] [--reduced "why"] [--note "findings"] [--no-write] ...
// The paper's ablation in miniature (research/ablation/grpo-ablation.ts): the base policy, GRPO against the real
// environment, GRPO against a frozen simulator, per-role policies, EnvACE role-wise, EnvACE pooled, EnvACE with the
// rollout-mean baseline (and, when named, EnvACE with the k3 KL term); the same step budget and seeds for each;
// every run evaluated on the same held-out test tasks in the real environment (src/eval/evaluate.ts).
//
// Background-friendly: each (configuration, seed) run lives in its own folder <out>/<config>-s<seed>/ (the GRPO
// run store: run.json, ckpt/, metrics.jsonl, rollouts.jsonl; curve.jsonl: learning-curve evaluations;
// result.json, written last: the finished run with its per-task results). A rerun skips finished runs,
// continues unfinished ones from their last checkpoint (checkpoints every step by default), and aggregates
// whatever finished runs of this budget exist into the tables (bootstrap intervals over tasks and seeds,
// paired differences; research/ablation/stats.ts), also on another machine with a copy of <out>. Seeds run outermost,
// so a stopped ablation has every configuration at the same number of seeds. --only-seeds lets two processes
// (or machines) share an ablation.
// --pilot: a learning-curve run to size budgets (default: real and EnvACE, one seed, held-out success every
// ~steps/6 steps); prints success vs step and the measured minutes per configuration × seed; writes no docs.
// --estimate: one step of each trained mode and one evaluation, then the projected wall-clock.
// --table-only: no new runs; the tables from the finished records.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { cpus, hostname, tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import {
  ArgError, BACKEND_FLAG, BACKEND_NAMES, checkOutput, enumFlag, HELP_FLAG, helpText, intFlag, isEntry, openBackend, openModel, parseFlags, processIo, progress, runCli, strFlag, THREADS_FLAG, threadsFlag, WORLD_FLAG, WRITE_COMMITTED_FLAG, type CliIo, type FlagSpec,
} from '../../src/cli/args';
import type { Domain, Task } from '../../src/env/domain';
import { WORLD_NAMES } from '../../src/env/retail/index';
import { loadWorldDomain } from '../../src/env/retail/node';
import { paramCount } from '../../src/model/config';
import { evaluateHeldOut, type HeldOutReport } from '../../src/eval/evaluate';
import {
  ABLATION_CONFIGS, ABLATION_END, ABLATION_START, DEFAULT_CONFIG_IDS, emptyResultsDoc, renderAblation, replaceSection, summarize,
  type AblationConfig, type AblationMeta, type AblationRun, type CurvePoint, type FidelityFigures,
} from '../ablation/grpo-ablation';
import { DEFAULT_LIMITS, grpoRunConfig, splitTasks, stepLine } from '../../src/rl/grpo-config';
import { complete, RUN_SETTINGS, type RunValues } from '../../src/method/run-config';
import { readRunFlags, runFlags } from '../../src/cli/run-flags';
import { GrpoRun, type StepMetrics } from '../../src/rl/run';
import { DirStore } from '../../src/rl/store-node';
import { MemoryStore } from '../../src/rl/store';

export const ABLATION_USAGE = `usage: npm run ablation -- [--world ${WORLD_NAMES.join('|')}] [--model DIR] [--steps N] [--seeds N] [--tasks N] [--train-tasks N]
  [--k K] [--prompts P] [--lr LR] [--rank R] [--configs ${ABLATION_CONFIGS.map((c) => c.id).join(',')}]
  [--out DIR] [--only-seeds 0,1,..] [--backend B] [--threads T] [--max-turns N] [--max-act-tokens N] [--max-rehearse-tokens N]
  [--grounding-chars N] [--history-chars N] [--fidelity-tokens N] [--eval-limits card|train] [--eval-every N] [--curve-tasks M]
  [--checkpoint-every N] [--boot-reps N] [--pilot] [--estimate] [--table-only] [--figures a.png,b.png]
  [--reduced "why"] [--note "findings"] [--no-write] [--results FILE] [--write-committed]
  Default configurations: ${DEFAULT_CONFIG_IDS.join(',')} (${ABLATION_CONFIGS.filter((c) => c.optional).map((c) => c.id).join(', ')} only when named).`;

/** The run settings every configuration of the ablation shares; the rest is each configuration's (ABLATION_CONFIGS). */
const SHARED = ['trainTasks', 'k', 'promptsPerStep', 'lr', 'rank', 'maxTurns', 'maxActTokens', 'maxRehearseTokens', 'maxGroundingChars', 'maxHistoryChars'] as const;
const SHARED_ROWS = RUN_SETTINGS.filter((r) => (SHARED as readonly string[]).includes(r.name));

export const ABLATION_FLAGS: FlagSpec = {
  world: WORLD_FLAG,
  model: { type: 'string', arg: 'DIR', help: 'model folder (config.json, model.safetensors, tokenizer)', default: "the world's bundled policy" },
  steps: { type: 'string', arg: 'N', help: 'GRPO steps per trained run', default: '8 (--pilot: 24)' },
  seeds: { type: 'string', arg: 'N', help: 'seeds 0..N-1 per configuration (seeds run outermost)', default: '5 (--pilot: 1)' },
  tasks: { type: 'string', arg: 'N', help: 'held-out test tasks of the final evaluation', default: '100' },
  // The run settings every configuration shares: the train CLI's flags, defaults and ranges (src/method/run-config.ts).
  ...runFlags(SHARED_ROWS),
  configs: { type: 'string', arg: 'IDS', help: `configurations to run, comma-separated: ${ABLATION_CONFIGS.map((c) => c.id).join(', ')}`, default: `${DEFAULT_CONFIG_IDS.join(',')} (--pilot: real,envace)` },
  out: { type: 'string', arg: 'DIR', help: 'records folder: one <config>-s<seed>/ per run; finished runs are skipped, unfinished ones resumed', default: '$TMPDIR/envace-ablation (--pilot: $TMPDIR/envace-pilot)' },
  'only-seeds': { type: 'string', arg: 'LIST', help: 'run only these seeds (comma-separated), so two processes or machines can share an ablation', default: 'all' },
  backend: BACKEND_FLAG,
  threads: THREADS_FLAG,
  'fidelity-tokens': { type: 'string', arg: 'N', help: 'token budget per rehearsal in the fidelity evaluation; 0 = skip it', default: "the evaluation's Rehearse budget" },
  'eval-limits': { type: 'string', arg: 'L', help: "episode limits of the held-out evaluation: card (the model card's) or train (the training ones above)", default: 'card' },
  'eval-every': { type: 'string', arg: 'N', help: 'learning-curve evaluation every N steps; 0 = only before and after', default: '0 (--pilot: about steps/6)' },
  'curve-tasks': { type: 'string', arg: 'M', help: "the learning curve's tasks: the first M held-out tasks", default: 'min(--tasks, 50)' },
  'checkpoint-every': { type: 'string', arg: 'N', help: 'checkpoint every N steps (a stopped run resumes from the last)', default: '1' },
  'boot-reps': { type: 'string', arg: 'N', help: 'bootstrap replicates of the intervals, 100..100000', default: '2000' },
  pilot: { type: 'boolean', help: 'a learning-curve run to size budgets: prints success against step and minutes per run; writes no docs' },
  estimate: { type: 'boolean', help: 'one step of each trained mode and one evaluation, then the projected wall-clock' },
  'table-only': { type: 'boolean', help: 'run nothing: write the tables from the finished records' },
  figures: { type: 'string', arg: 'LIST', help: 'figure files (relative to docs/) the results section links, comma-separated', default: 'figures/ablation-curves.png when it exists' },
  note: { type: 'string', arg: 'TEXT', help: 'findings written under the tables', default: 'none' },
  reduced: { type: 'string', arg: 'WHY', help: 'states why the budget is smaller than the full one, above the tables', default: 'none' },
  'no-write': { type: 'boolean', help: 'write the tables to <out>/table.md only, not into the results file (what happens anyway without --results or --write-committed)' },
  results: { type: 'string', arg: 'FILE', help: 'the results file whose ablation section is replaced (named, it is written; a committed one needs --write-committed)', default: 'docs/results.md, written only with --write-committed' },
  'write-committed': WRITE_COMMITTED_FLAG,
  help: HELP_FLAG,
};

const ROOT = resolve(import.meta.dirname, '../..');

/** Injected by tests: a smaller domain (fewer tools, a shorter policy). */
export interface AblationDeps {
  domain?: Domain;
  /** Called after each training step (tests: throw to simulate a crash between steps). */
  afterStep?: (config: string, seed: number, step: number) => void;
}

const readJsonl = <T>(path: string): T[] => (existsSync(path) ? readFileSync(path, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as T) : []);
/** Append-only logs may repeat a step after a resume: the last occurrence wins. */
const lastPerStep = <T extends { step: number }>(xs: readonly T[]): T[] => [...new Map(xs.map((x) => [x.step, x])).values()].sort((a, b) => a.step - b.step);

/** The finished runs of this budget under `out` (any configuration). */
export function readRuns(out: string, key: string | null): AblationRun[] {
  if (!existsSync(out)) return [];
  const runs: AblationRun[] = [];
  for (const d of readdirSync(out).sort()) {
    const f = join(out, d, 'result.json');
    if (!existsSync(f)) continue;
    const r = JSON.parse(readFileSync(f, 'utf8')) as AblationRun;
    if (key === null || r.key === key) runs.push(r);
  }
  return runs;
}

export async function ablationCli(argv: readonly string[], io: CliIo = processIo, deps: AblationDeps = {}): Promise<number> {
  return runCli(io, ABLATION_USAGE, async () => {
    const v = parseFlags(argv, ABLATION_FLAGS);
    if (v.help) return void io.out(helpText(ABLATION_USAGE, ABLATION_FLAGS));
    const log = progress(io, 'ablation');
    const pilot = !!v.pilot;
    const world = enumFlag(v, 'world', WORLD_NAMES, 'mini');
    const shared = complete(readRunFlags(v, SHARED_ROWS), SHARED_ROWS) as Pick<RunValues, (typeof SHARED)[number]>;
    // Recorded in every run's ablation.json under these keys since the first records (a budget must compare equal).
    const budget = {
      steps: intFlag(v, 'steps', pilot ? 24 : 8, 1),
      seeds: intFlag(v, 'seeds', pilot ? 1 : 5, 1, 100),
      evalTasks: intFlag(v, 'tasks', 100, 1),
      trainTasks: shared.trainTasks,
      k: shared.k,
      prompts: shared.promptsPerStep,
      lr: shared.lr,
      rank: shared.rank,
    };
    // Training rollouts may be cut shorter than the evaluation's episodes (the cost of a step grows with them);
    // evaluation uses the model card's limits (--eval-limits card) unless told to use the training ones.
    const limits = { maxTurns: shared.maxTurns, maxActTokens: shared.maxActTokens, maxRehearseTokens: shared.maxRehearseTokens };
    const evalLimits = enumFlag(v, 'eval-limits', ['card', 'train'] as const, 'card') === 'card' ? DEFAULT_LIMITS : limits;
    const rehearsePrompt = {
      ...(shared.maxGroundingChars !== undefined ? { maxGroundingChars: shared.maxGroundingChars } : {}),
      ...(shared.maxHistoryChars !== undefined ? { maxHistoryChars: shared.maxHistoryChars } : {}),
    };
    const fidelityTokens = intFlag(v, 'fidelity-tokens', evalLimits.maxRehearseTokens, 0);
    const evalEvery = intFlag(v, 'eval-every', pilot ? Math.max(1, Math.round(budget.steps / 6)) : 0, 0);
    const curveTasks = Math.min(budget.evalTasks, intFlag(v, 'curve-tasks', Math.min(budget.evalTasks, 50), 1));
    const checkpointEvery = intFlag(v, 'checkpoint-every', 1, 1);
    const boot = { reps: intFlag(v, 'boot-reps', 2000, 100, 100000), seed: 0 };
    const ids = (strFlag(v, 'configs') ?? (pilot ? 'real,envace' : DEFAULT_CONFIG_IDS.join(','))).split(',').map((s) => s.trim()).filter(Boolean);
    for (const id of ids) if (!ABLATION_CONFIGS.some((c) => c.id === id)) throw new ArgError(`--configs: unknown configuration ${JSON.stringify(id)} (known: ${ABLATION_CONFIGS.map((c) => c.id).join(', ')})`);
    const configs = ABLATION_CONFIGS.filter((c) => ids.includes(c.id));
    const onlySeeds = strFlag(v, 'only-seeds')?.split(',').map((s) => {
      const n = Number(s);
      if (!(Number.isInteger(n) && n >= 0)) throw new ArgError(`--only-seeds: ${JSON.stringify(s)} is not a seed`);
      return n;
    });
    const out = resolve(strFlag(v, 'out') ?? join(tmpdir(), pilot ? 'envace-pilot' : 'envace-ablation'));
    const backendName = enumFlag(v, 'backend', BACKEND_NAMES, 'cpu-fast');
    const threads = threadsFlag(v);
    const resultsPath = resolve(strFlag(v, 'results') ?? join(ROOT, 'docs/results.md'));
    // The results file changes only when asked for (a named --results, or --write-committed), and a committed
    // one only with --write-committed: checked now, not after hours of training.
    const writeResults = !v['no-write'] && (v.results !== undefined || !!v['write-committed']);
    if (writeResults) checkOutput(resultsPath, '--results', v);

    const domain = deps.domain ?? loadWorldDomain(world);
    const evalTasks = splitTasks(domain, { train: 1, eval: budget.evalTasks, seed: 0 }).eval;
    if (evalTasks.length < budget.evalTasks) log(`warning: the ${world} test split gave ${evalTasks.length} of ${budget.evalTasks} held-out tasks`);
    const curveSet = evalTasks.slice(0, curveTasks);
    const backend = await openBackend(backendName, threads);
    try {
      const policy = await openModel(strFlag(v, 'model'), backend, { world });
      const { model, tokenizer } = policy;
      // Which weights: the bundled folder may be rebuilt while an ablation runs (the run keeps what it loaded).
      const modelHash = createHash('sha256').update(readFileSync(join(policy.dir, 'model.safetensors'))).digest('hex').slice(0, 12);
      const machine = `${cpus()[0]?.model.trim() ?? 'unknown CPU'} (${cpus().length} cores visible, shared), Node ${process.version}`;
      log(`model ${policy.dir} (${paramCount(model.config)} parameters) on ${backendName}; world ${world}; ${machine}`);
      // Everything a finished run's figures depend on (not the seed count: seeds can be added later).
      const { seeds: _seeds, ...perRun } = budget;
      const key = createHash('sha256').update(JSON.stringify({ perRun, limits, evalLimits, rehearsePrompt, fidelityTokens, world, modelHash, tasks: evalTasks.map((t) => t.id) })).digest('hex').slice(0, 16);

      const evaluate = async (act: GrpoRun['actAdapter'] | null, reh: GrpoRun['actAdapter'] | null, tasks: readonly Task[]): Promise<{ report: HeldOutReport; s: number }> => {
        const t0 = performance.now();
        const report = await evaluateHeldOut({ model, tokenizer, actAdapter: act, rehearseAdapter: reh }, domain, tasks, { limits: evalLimits, seed: 0, fidelityTokens, rehearsePrompt, kvReuse: true });
        return { report, s: (performance.now() - t0) / 1000 };
      };
      const figuresOf = (f: HeldOutReport['fidelity']): FidelityFigures | null => (f ? { exact: f.exact, f1: f.f1, errorAgree: f.errorAgree, invalid: f.invalid, steps: f.steps } : null);
      const fid = (r: HeldOutReport): FidelityFigures | null => figuresOf(r.fidelity);
      const curvePoint = (step: number, r: HeldOutReport, s: number, fidelity: FidelityFigures | null = fid(r)): CurvePoint => {
        // From a larger evaluation: the curve's tasks are its first ones.
        const per = r.perTask.slice(0, curveTasks);
        return { step, tasks: per.length, success: per.filter((t) => t.reward >= 1).length / per.length, meanReward: per.reduce((a, t) => a + t.reward, 0) / per.length, fidelity, s };
      };
      const openRun = async (c: AblationConfig, seed: number, steps: number, store: DirStore | MemoryStore) => {
        const tasks = splitTasks(domain, { train: budget.trainTasks, eval: 0, seed });
        const config = grpoRunConfig({
          mode: c.mode!, groups: c.groups, baseline: c.baseline, klCoef: c.klCoef, reward: c.reward, steps, seed, k: budget.k, promptsPerStep: c.promptsPerStep ?? budget.prompts, lr: budget.lr,
          realPrompts: c.realPrompts, observationCoef: c.observationCoef, observationGrounding: c.observationGrounding, observationWeighting: c.observationWeighting, rehearsalRecall: c.rehearsalRecall,
          rank: budget.rank, ...limits, ...rehearsePrompt, evalEvery: 0, checkpointEvery,
        });
        return GrpoRun.open(model, tokenizer, domain, tasks, store, config);
      };

      if (v.estimate) {
        const base = await evaluate(null, null, evalTasks);
        log(`base evaluation: ${base.s.toFixed(1)} s on ${evalTasks.length} tasks, success ${base.report.success}`);
        const stepS: Record<string, number> = {};
        for (const c of configs) {
          if (!c.mode || stepS[c.mode] !== undefined) continue;
          const run = await openRun(c, 0, 1, new MemoryStore());
          const m = await run.trainStep();
          run.free();
          stepS[c.mode] = m.wallMs / 1000;
          log(`one ${c.mode} step: ${stepS[c.mode].toFixed(1)} s`);
        }
        const curveS = evalEvery > 0 ? (base.s * curveTasks) / evalTasks.length : 0;
        const perSeed = Object.fromEntries(configs.filter((c) => c.mode).map((c) => [c.id, (budget.steps * stepS[c.mode!] + base.s + (evalEvery > 0 ? Math.floor((budget.steps - 1) / evalEvery) * curveS : 0)) / 60]));
        const totalMin = base.s / 60 + Object.values(perSeed).reduce((a, m) => a + m * budget.seeds, 0);
        io.out(JSON.stringify({ budget, limits, evalS: base.s, stepS, minutesPerConfigSeed: perSeed, projectedMin: totalMin }) + '\n');
        return;
      }

      mkdirSync(out, { recursive: true });
      const runOne = async (c: AblationConfig, seed: number): Promise<void> => {
        const dir = join(out, `${c.id}-s${seed}`);
        const resultFile = join(dir, 'result.json');
        if (existsSync(resultFile)) {
          const r = JSON.parse(readFileSync(resultFile, 'utf8')) as AblationRun;
          if (r.key !== key) throw new ArgError(`${dir} holds a finished run of another budget (key ${r.key}, this budget ${key}): choose another --out`);
          // The base run finished without curves: its evaluation is every curve's step 0.
          if (!c.mode && evalEvery > 0 && !existsSync(join(dir, 'curve.jsonl'))) {
            const per = r.perTask.slice(0, curveTasks);
            const p: CurvePoint = { step: 0, tasks: per.length, success: per.filter((t) => t.reward >= 1).length / per.length, meanReward: per.reduce((a, t) => a + t.reward, 0) / per.length, fidelity: r.fidelity, s: 0 };
            writeFileSync(join(dir, 'curve.jsonl'), JSON.stringify(p) + '\n');
          }
          log(`${c.id} seed ${seed}: finished, skipped`);
          return;
        }
        mkdirSync(dir, { recursive: true });
        const metaFile = join(dir, 'ablation.json');
        if (existsSync(metaFile)) {
          const m = JSON.parse(readFileSync(metaFile, 'utf8')) as { key: string };
          if (m.key !== key) throw new ArgError(`${dir} holds an unfinished run of another budget (key ${m.key}, this budget ${key}): choose another --out or remove it`);
        } else writeFileSync(metaFile, JSON.stringify({ key, config: c, seed, budget, limits, evalLimits, rehearsePrompt, fidelityTokens, world, model: policy.dir.startsWith(ROOT) ? relative(ROOT, policy.dir) : policy.dir, modelHash }, null, 1) + '\n');
        // One process per run: a second process (another --only-seeds share) skips a run that a live one holds.
        const lock = join(dir, 'lock');
        if (existsSync(lock)) {
          const [host, pid] = readFileSync(lock, 'utf8').trim().split(' ');
          let alive = false;
          if (host === hostname() && Number(pid) !== process.pid) {
            try {
              process.kill(Number(pid), 0);
              alive = true;
            } catch {
              alive = false;
            }
          }
          if (alive) {
            log(`${c.id} seed ${seed}: running in process ${pid}, skipped`);
            return;
          }
        }
        writeFileSync(lock, `${hostname()} ${process.pid}\n`);
        try {
          const curveFile = join(dir, 'curve.jsonl');
          const store = new DirStore(dir);
          const addCurve = (p: CurvePoint) => store.append('curve.jsonl', JSON.stringify(p));
          let record: Omit<AblationRun, 'key' | 'config' | 'seed' | 'steps' | 'wallS'>;
          if (!c.mode) {
            log(`${c.label}: evaluating on ${evalTasks.length} held-out tasks`);
            const e = await evaluate(null, null, evalTasks);
            if (evalEvery > 0) await addCurve(curvePoint(0, e.report, 0));
            record = {
              success: e.report.success, meanReward: e.report.meanReward, toolPrecision: e.report.toolPrecision, toolRecall: e.report.toolRecall, fidelity: fid(e.report), fidelityGrounded: figuresOf(e.report.fidelityGrounded ?? null),
              perTask: e.report.perTask.map((t) => ({ taskId: t.taskId, reward: t.reward, tier: t.tier, family: t.family })), callsWithoutError: e.report.callsWithoutError, trainReward: null, spread: null, trainS: 0, curveS: 0, evalS: e.s,
            };
          } else {
            const run = await openRun(c, seed, budget.steps, store);
            try {
              log(`${c.label}, seed ${seed}: ${run.step > 0 ? `resuming at step ${run.step}/${budget.steps}` : 'starting'}`);
              const haveCurve = () => new Set(readJsonl<CurvePoint>(curveFile).map((p) => p.step));
              const curveDue = (step: number) => evalEvery > 0 && step % evalEvery === 0 && step < budget.steps;
              const curveEval = async (step: number) => {
                const e = await evaluate(run.actAdapter, run.rehearseAdapter ?? run.actAdapter, curveSet);
                await addCurve(curvePoint(step, e.report, e.s));
                log(`  ${c.id} seed ${seed} @${step}: held-out success ${e.report.success.toFixed(3)} on ${curveSet.length} tasks (${e.s.toFixed(0)} s)`);
              };
              // A session stopped between a step's checkpoint and its curve evaluation: evaluate now.
              if (run.step > 0 && curveDue(run.step) && !haveCurve().has(run.step)) await curveEval(run.step);
              while (!run.done) {
                const m = await run.trainStep();
                log(`  ${c.id} seed ${seed}: ${stepLine(m, budget.steps)}`);
                deps.afterStep?.(c.id, seed, m.step);
                if (curveDue(m.step)) await curveEval(m.step);
              }
              const e = await evaluate(run.actAdapter, run.rehearseAdapter ?? run.actAdapter, evalTasks);
              if (evalEvery > 0) await addCurve(curvePoint(budget.steps, e.report, 0));
              const steps = lastPerStep(readJsonl<StepMetrics>(join(dir, 'metrics.jsonl')));
              const rewards = steps.map((m) => m.rollouts.meanReward);
              const spreads = steps.map((m) => m.advantage.spread).filter((x) => typeof x === 'number');
              record = {
                success: e.report.success, meanReward: e.report.meanReward, toolPrecision: e.report.toolPrecision, toolRecall: e.report.toolRecall, fidelity: fid(e.report), fidelityGrounded: figuresOf(e.report.fidelityGrounded ?? null),
                perTask: e.report.perTask.map((t) => ({ taskId: t.taskId, reward: t.reward, tier: t.tier, family: t.family })), callsWithoutError: e.report.callsWithoutError,
                trainReward: rewards.length ? { first: rewards[0], last: rewards.at(-1)!, mean: rewards.reduce((a, x) => a + x, 0) / rewards.length } : null,
                spread: spreads.length ? spreads.reduce((a, x) => a + x, 0) / spreads.length : null,
                trainS: steps.reduce((a, m) => a + m.wallMs, 0) / 1000,
                curveS: lastPerStep(readJsonl<CurvePoint>(curveFile)).reduce((a, p) => a + p.s, 0),
                evalS: e.s,
              };
            } finally {
              run.free();
            }
          }
          const r: AblationRun = { key, config: c.id, seed, steps: c.mode ? budget.steps : 0, ...record, wallS: record.trainS + record.curveS + record.evalS };
          await store.write('result.json', new TextEncoder().encode(JSON.stringify(r, null, 1) + '\n'));
          log(`  -> ${c.id} seed ${seed}: success ${r.success.toFixed(3)}, reward ${r.meanReward.toFixed(3)}, fidelity exact ${r.fidelity?.exact.toFixed(3) ?? '-'}, ${(r.wallS / 60).toFixed(1)} min`);
        } finally {
          rmSync(lock, { force: true });
        }
      };

      if (!v['table-only']) {
        for (let seed = 0; seed < budget.seeds; seed++) {
          if (onlySeeds && !onlySeeds.includes(seed)) continue;
          // The base policy under greedy evaluation is deterministic: one run (seed 0) stands for every seed.
          for (const c of configs) if (c.mode || seed === 0) await runOne(c, seed);
        }
      }

      const runs = readRuns(out, key);
      const others = readRuns(out, null).length - runs.length;
      if (others > 0) log(`${others} finished run(s) of another budget in ${out} are left out`);
      if (pilot) {
        const report: Record<string, unknown> = {};
        for (const c of configs) {
          const dirs = readdirSync(out).filter((d) => d.startsWith(`${c.id}-s`) && /-s\d+$/.test(d.slice(c.id.length)));
          const curves = dirs.map((d) => lastPerStep(readJsonl<CurvePoint>(join(out, d, 'curve.jsonl'))));
          const steps = [...new Set(curves.flat().map((p) => p.step))].sort((a, b) => a - b);
          const curve = steps.map((s) => {
            const ps = curves.map((cv) => cv.find((p) => p.step === s)).filter((p): p is CurvePoint => !!p);
            return { step: s, success: ps.reduce((a, p) => a + p.success, 0) / ps.length, seeds: ps.length };
          });
          const rs = runs.filter((r) => r.config === c.id);
          const stepS = rs.length ? rs.reduce((a, r) => a + r.trainS / r.steps, 0) / rs.length : NaN;
          const evalS = rs.length ? rs.reduce((a, r) => a + r.evalS, 0) / rs.length : NaN;
          const curveEvalS = rs.length ? rs.reduce((a, r) => a + r.curveS, 0) / rs.length / Math.max(1, steps.length - 1) : NaN;
          const spread = rs.filter((r) => r.spread !== null).map((r) => r.spread!);
          report[c.id] = {
            curve, stepS, evalS, curveEvalS, minutesPerSeed: rs.length ? rs.reduce((a, r) => a + r.wallS, 0) / rs.length / 60 : NaN,
            spread: spread.length ? spread.reduce((a, x) => a + x, 0) / spread.length : null,
          };
          log(`${c.label}: ${curve.map((p) => `@${p.step} ${(100 * p.success).toFixed(1)}%`).join('  ')}; ${c.mode ? `${stepS.toFixed(1)} s/step, ` : ''}final eval ${evalS.toFixed(0)} s`);
          if (c.mode) for (const at of [4, 8, 12, 16, 24, 32, 48].filter((s) => s <= budget.steps * 2)) log(`  ${at} steps ≈ ${((at * stepS + evalS) / 60).toFixed(1)} min per seed (without curve evaluations)`);
        }
        io.out(JSON.stringify({ out, budget, curveTasks, evalEvery, pilot: report }) + '\n');
        return;
      }

      const summary = summarize(runs, ABLATION_CONFIGS, boot);
      const docsDir = resolve(resultsPath, '..');
      const figures = (strFlag(v, 'figures')?.split(',').filter(Boolean) ?? (existsSync(join(docsDir, 'figures/ablation-curves.png')) ? ['figures/ablation-curves.png'] : []));
      const meta: AblationMeta = {
        date: new Date().toISOString().slice(0, 16).replace('T', ' ') + ' UTC',
        world,
        model: policy.dir.startsWith(ROOT) ? relative(ROOT, policy.dir) : policy.dir,
        modelHash,
        modelParams: paramCount(model.config),
        backend: backendName + (threads ? ` (${threads} threads)` : ''),
        machine,
        // As it would be typed to reproduce the runs (--table-only / --no-write / --only-seeds only change what this call does).
        command: `npm run ablation -- ${argv
          .filter((a, i, all) => !['--table-only', '--no-write', '--write-committed', '--note', '--reduced', '--only-seeds', '--figures'].includes(a) && !['--note', '--reduced', '--only-seeds', '--figures'].includes(all[i - 1]))
          .map((a) => (/[\s"']/.test(a) ? JSON.stringify(a) : a))
          .join(' ')}`.trim(),
        budget,
        limits: { train: limits, eval: evalLimits },
        curve: evalEvery > 0 ? { every: evalEvery, tasks: curveTasks } : null,
        bootstrap: boot,
        reduced: strFlag(v, 'reduced') ?? null,
        note: strFlag(v, 'note') ?? null,
        figures,
      };
      const md = renderAblation(summary, meta);
      writeFileSync(join(out, 'table.md'), md + '\n');
      // npm run results re-renders the section from the records and this file alone. A meta.json someone wrote
      // by hand (a pre-registered experiment's: it has a title, the decisive pairs and the findings) is theirs.
      const metaFile = join(out, 'meta.json');
      const curated = existsSync(metaFile) && (JSON.parse(readFileSync(metaFile, 'utf8')) as { title?: unknown }).title !== undefined;
      if (curated) log(`${metaFile} is a curated section's (it has a title): left as it is`);
      else writeFileSync(metaFile, JSON.stringify({ key, ...meta }, null, 1) + '\n');
      if (writeResults) {
        const doc = existsSync(resultsPath) ? readFileSync(resultsPath, 'utf8') : emptyResultsDoc();
        writeFileSync(resultsPath, replaceSection(doc, ABLATION_START, ABLATION_END, md));
        log(`table written to ${resultsPath}`);
      }
      io.out(
        JSON.stringify({
          out, key, runs: runs.length,
          rows: summary.rows.map((r) => ({ config: r.config.id, runs: r.runs, success: r.success, vsBase: r.vsBase, wallMin: r.wallS.map((w) => w.s / 60) })),
          pairs: summary.pairs.map((p) => ({ a: p.a.id, b: p.b.id, diff: p.diff })),
        }) + '\n',
      );
      model.free();
    } finally {
      backend.dispose();
    }
  });
}

if (isEntry(import.meta.url)) process.exitCode = await ablationCli(process.argv.slice(2));
