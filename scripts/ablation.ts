// npm run ablation -- [--model DIR] [--steps N] [--seeds N] [--tasks N] [--train-tasks N] [--k K] [--prompts P]
//                     [--lr LR] [--rank R] [--configs id,id,..] [--out DIR] [--estimate] [--reduced "why"] [--no-write]
// The paper's ablation in miniature (DESIGN §1, src/rl/grpo-ablation.ts): the base policy, GRPO against the real
// environment, GRPO against a frozen simulator, per-role policies, EnvACE role-wise and EnvACE pooled; the
// same step budget and seeds for each; every run evaluated on the same held-out test tasks in the real
// environment (src/rl/evaluate.ts). Each finished run is appended to <out>/runs.jsonl at once, so a stopped
// ablation continues where it stopped when rerun with the same budget. At the end the table goes into
// docs/results.md between the ablation markers.
// --estimate: one step of each trained mode and one evaluation, then the projected wall-clock of the
// requested budget (nothing is written to docs/). --table-only: no new runs; the table from runs.jsonl.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync, appendFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { cpus } from 'node:os';
import { join, resolve } from 'node:path';
import {
  ArgError, BACKEND_NAMES, enumFlag, intFlag, numFlag, openBackend, openModel, parseFlags, processIo, progress, runCli, strFlag, type FlagSpec,
} from '../src/cli/args';
import { retailDomain } from '../src/env/retail/index';
import { loadRetailBase } from '../src/env/retail/node';
import { paramCount } from '../src/model/config';
import { evaluateHeldOut, type HeldOutReport } from '../src/rl/evaluate';
import {
  ABLATION_CONFIGS, ABLATION_END, ABLATION_START, aggregate, emptyResultsDoc, renderAblation, replaceSection, type AblationMeta, type AblationRun,
} from '../src/rl/grpo-ablation';
import { DEFAULT_LIMITS, grpoRunConfig, splitTasks, stepLine } from '../src/rl/grpo-trainer';
import { GrpoRun } from '../src/rl/run';
import { DirStore } from '../src/rl/store-node';
import { MemoryStore } from '../src/rl/store';

const USAGE = `usage: npm run ablation -- [--model DIR] [--steps N] [--seeds N] [--tasks N] [--train-tasks N] [--k K] [--prompts P]
  [--lr LR] [--rank R] [--configs ${ABLATION_CONFIGS.map((c) => c.id).join(',')}] [--out DIR] [--backend B] [--threads T]
  [--max-turns N] [--max-act-tokens N] [--max-rehearse-tokens N] [--fidelity-tokens N] [--estimate] [--table-only]
  [--reduced "why"] [--note "findings"] [--no-write] [--results FILE]`;

const FLAGS: FlagSpec = {
  model: { type: 'string' }, steps: { type: 'string' }, seeds: { type: 'string' }, tasks: { type: 'string' }, 'train-tasks': { type: 'string' },
  k: { type: 'string' }, prompts: { type: 'string' }, lr: { type: 'string' }, rank: { type: 'string' }, configs: { type: 'string' },
  out: { type: 'string' }, backend: { type: 'string' }, threads: { type: 'string' }, 'max-turns': { type: 'string' },
  'max-act-tokens': { type: 'string' }, 'max-rehearse-tokens': { type: 'string' }, 'fidelity-tokens': { type: 'string' },
  estimate: { type: 'boolean' }, 'table-only': { type: 'boolean' }, note: { type: 'string' }, reduced: { type: 'string' }, 'no-write': { type: 'boolean' }, results: { type: 'string' },
};

const io = processIo;
const ROOT = resolve(import.meta.dirname, '..');

process.exitCode = await runCli(io, USAGE, async () => {
  const v = parseFlags(process.argv.slice(2), FLAGS);
  const log = progress(io, 'ablation');
  const budget = {
    steps: intFlag(v, 'steps', 6, 1),
    seeds: intFlag(v, 'seeds', 3, 1, 100),
    evalTasks: intFlag(v, 'tasks', 20, 1),
    trainTasks: intFlag(v, 'train-tasks', 200, 1),
    k: intFlag(v, 'k', 4, 1, 64),
    prompts: intFlag(v, 'prompts', 2, 1, 64),
    lr: numFlag(v, 'lr', 2e-3),
    rank: intFlag(v, 'rank', 8, 1, 256),
    baseline: 'row-weighted',
  };
  // Training rollouts may be cut shorter than the evaluation's episodes (the cost of a step grows with them);
  // evaluation always uses the model card's limits, so the table compares with the card.
  const limits = {
    maxTurns: intFlag(v, 'max-turns', 8, 1, 100),
    maxActTokens: intFlag(v, 'max-act-tokens', DEFAULT_LIMITS.maxActTokens, 1),
    maxRehearseTokens: intFlag(v, 'max-rehearse-tokens', 320, 1),
  };
  const evalLimits = DEFAULT_LIMITS;
  const fidelityTokens = intFlag(v, 'fidelity-tokens', evalLimits.maxRehearseTokens, 0);
  const ids = (strFlag(v, 'configs') ?? ABLATION_CONFIGS.map((c) => c.id).join(',')).split(',');
  for (const id of ids) if (!ABLATION_CONFIGS.some((c) => c.id === id)) throw new ArgError(`--configs: unknown configuration ${JSON.stringify(id)} (known: ${ABLATION_CONFIGS.map((c) => c.id).join(', ')})`);
  const configs = ABLATION_CONFIGS.filter((c) => ids.includes(c.id));
  const out = resolve(strFlag(v, 'out') ?? '/tmp/envace-ablation');
  const backendName = enumFlag(v, 'backend', BACKEND_NAMES, 'cpu-fast');
  const threads = v.threads === undefined ? undefined : intFlag(v, 'threads', 1, 1, 64);
  const resultsPath = resolve(strFlag(v, 'results') ?? join(ROOT, 'docs/results.md'));

  const domain = retailDomain(loadRetailBase());
  const evalTasks = splitTasks(domain, { train: 1, eval: budget.evalTasks, seed: 0 }).eval;
  const backend = await openBackend(backendName, threads);
  const policy = await openModel(strFlag(v, 'model'), backend);
  const { model, tokenizer } = policy;
  // Which weights: the bundled folder may be rebuilt while an ablation runs (the run keeps what it loaded).
  const modelHash = createHash('sha256').update(readFileSync(join(policy.dir, 'model.safetensors'))).digest('hex').slice(0, 12);
  const machine = `${cpus()[0]?.model.trim() ?? 'unknown CPU'} (${cpus().length} cores visible, shared), Node ${process.version}`;
  log(`model ${policy.dir} (${paramCount(model.config)} parameters) on ${backendName}; ${machine}`);

  const evaluate = async (act: GrpoRun['actAdapter'] | null, reh: GrpoRun['actAdapter'] | null): Promise<{ report: HeldOutReport; s: number }> => {
    const t0 = performance.now();
    const report = await evaluateHeldOut({ model, tokenizer, actAdapter: act, rehearseAdapter: reh }, domain, evalTasks, { limits: evalLimits, seed: 0, fidelityTokens, kvReuse: true });
    return { report, s: (performance.now() - t0) / 1000 };
  };
  const train = async (mode: NonNullable<(typeof configs)[number]['mode']>, advantage: 'role-wise' | 'pooled', seed: number, steps: number, storeDir: string | null) => {
    const tasks = splitTasks(domain, { train: budget.trainTasks, eval: 0, seed });
    const config = grpoRunConfig({
      mode, advantage, steps, seed, k: budget.k, promptsPerStep: budget.prompts, lr: budget.lr, rank: budget.rank, limits, evalEvery: 0, checkpointEvery: steps,
    });
    if (storeDir) rmSync(storeDir, { recursive: true, force: true });
    const run = await GrpoRun.open(model, tokenizer, domain, tasks, storeDir ? new DirStore(storeDir) : new MemoryStore(), config);
    const t0 = performance.now();
    const rewards: number[] = [];
    const stepS: number[] = [];
    while (!run.done) {
      const m = await run.trainStep();
      rewards.push(m.rollouts.meanReward);
      stepS.push(m.wallMs / 1000);
      log(`  ${mode}/${advantage} seed ${seed}: ${stepLine(m, steps)}`);
    }
    return { run, trainS: (performance.now() - t0) / 1000, rewards, stepS };
  };

  try {
    if (v.estimate) {
      const base = await evaluate(null, null);
      log(`base evaluation: ${base.s.toFixed(1)} s, success ${base.report.success}`);
      const stepS: Record<string, number> = {};
      for (const c of configs) {
        if (!c.mode || stepS[c.mode] !== undefined) continue;
        const t = await train(c.mode, c.advantage, 0, 1, null);
        stepS[c.mode] = t.stepS[0];
        log(`one ${c.mode} step: ${t.stepS[0].toFixed(1)} s`);
        t.run.free();
      }
      const trained = configs.filter((c) => c.mode);
      const totalS = base.s + trained.reduce((s, c) => s + budget.seeds * (budget.steps * stepS[c.mode!] + base.s), 0);
      io.out(JSON.stringify({ budget, limits, evalS: base.s, stepS, projectedS: totalS, projectedMin: totalS / 60 }) + '\n');
      return;
    }

    mkdirSync(out, { recursive: true });
    const runsFile = join(out, 'runs.jsonl');
    const key = JSON.stringify({ budget, limits, fidelityTokens, modelHash });
    const done: AblationRun[] = existsSync(runsFile)
      ? readFileSync(runsFile, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l) as AblationRun & { key: string }).filter((r) => r.key === key)
      : [];
    if (done.length) log(`${done.length} runs of this budget already in ${runsFile}; continuing`);
    const record = (r: AblationRun) => {
      appendFileSync(runsFile, JSON.stringify({ ...r, key }) + '\n');
      done.push(r);
    };
    const fid = (r: HeldOutReport) => (r.fidelity ? { exact: r.fidelity.exact, f1: r.fidelity.f1, errorAgree: r.fidelity.errorAgree, invalid: r.fidelity.invalid, steps: r.fidelity.steps } : null);
    const measured: Record<string, number[]> = {};
    for (const c of configs) {
      // The base policy under greedy evaluation is deterministic: one run stands for every seed.
      const seeds = c.mode ? budget.seeds : 1;
      for (let seed = 0; seed < seeds; seed++) {
        if (done.some((r) => r.config === c.id && r.seed === seed) || v['table-only']) continue;
        log(`${c.label}, seed ${seed}`);
        if (!c.mode) {
          const e = await evaluate(null, null);
          record({ config: c.id, seed, steps: 0, success: e.report.success, meanReward: e.report.meanReward, toolPrecision: e.report.toolPrecision, toolRecall: e.report.toolRecall, fidelity: fid(e.report), trainReward: null, trainS: 0, evalS: e.s });
        } else {
          const t = await train(c.mode, c.advantage, seed, budget.steps, join(out, `${c.id}-s${seed}`));
          (measured[c.mode] ??= []).push(...t.stepS);
          const e = await evaluate(t.run.actAdapter, t.run.rehearseAdapter ?? t.run.actAdapter);
          t.run.free();
          record({
            config: c.id, seed, steps: budget.steps, success: e.report.success, meanReward: e.report.meanReward, toolPrecision: e.report.toolPrecision,
            toolRecall: e.report.toolRecall, fidelity: fid(e.report), trainReward: { first: t.rewards[0], last: t.rewards.at(-1)! }, trainS: t.trainS, evalS: e.s,
          });
        }
        const last = done.at(-1)!;
        log(`  -> success ${last.success.toFixed(3)}, reward ${last.meanReward.toFixed(3)}, tool P ${last.toolPrecision.toFixed(3)}, fidelity exact ${last.fidelity?.exact.toFixed(3) ?? '-'}, train ${last.trainS.toFixed(0)} s, eval ${last.evalS.toFixed(0)} s`);
      }
    }
    const rows = aggregate(done, configs);
    const meta: AblationMeta = {
      date: new Date().toISOString().slice(0, 16).replace('T', ' ') + ' UTC',
      model: policy.dir.startsWith(ROOT) ? policy.dir.slice(ROOT.length + 1) : policy.dir,
      modelHash,
      modelParams: paramCount(model.config),
      backend: backendName + (threads ? ` (${threads} threads)` : ''),
      machine,
      // As it would be typed to reproduce the runs (--table-only / --no-write only change what this call does).
      command: `npm run ablation -- ${process.argv.slice(2).filter((a, i, all) => a !== '--table-only' && a !== '--no-write' && a !== '--note' && all[i - 1] !== '--note').map((a) => (/[\s"']/.test(a) ? JSON.stringify(a) : a)).join(' ')}`.trim(),
      budget,
      limits: { train: limits, eval: evalLimits },
      reduced: strFlag(v, 'reduced') ?? null,
      note: strFlag(v, 'note') ?? null,
      measuredStepS: Object.keys(measured).length ? Object.fromEntries(Object.entries(measured).map(([k, xs]) => [k, xs.reduce((s, x) => s + x, 0) / xs.length])) : null,
    };
    const md = renderAblation(rows, meta);
    writeFileSync(join(out, 'table.md'), md + '\n');
    if (!v['no-write']) {
      const doc = existsSync(resultsPath) ? readFileSync(resultsPath, 'utf8') : emptyResultsDoc();
      writeFileSync(resultsPath, replaceSection(doc, ABLATION_START, ABLATION_END, md));
      log(`table written to ${resultsPath}`);
    }
    io.out(JSON.stringify({ out, runs: done.length, rows: rows.map((r) => ({ config: r.config.id, runs: r.runs, success: r.success, precision: r.precision, fidelityExact: r.fidelityExact, trainS: r.trainS.mean })) }) + '\n');
  } finally {
    model.free();
    backend.dispose();
  }
});
