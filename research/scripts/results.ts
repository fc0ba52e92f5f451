// npm run results -- [--check] [--write-committed] [--summary FILE]
// Every generated section of docs/results.md and docs/lesson.md, and docs/results/summary.json, re-rendered from the
// committed records alone: no model is loaded and nothing runs. Each section lies between `<!-- NAME:start -->` and
// `<!-- NAME:end -->`; what a section says that the records do not hold (command line, date, machine, the "What came
// out" paragraph) is the meta.json beside its records, written by the script that made them (or, for the sections
// made before these files existed, once from what the page said then), so a re-render is byte-identical.
// --check: compare instead of writing, exit 1 naming the first section that differs and its first differing line.
// Without --check the pages are written only with --write-committed (commands never write into the checkout unless
// told, as src/cli/args.ts checkOutput has it); without it a difference is an error that names the files.
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { ArgError, HELP_FLAG, helpText, isEntry, parseFlags, processIo, runCli, strFlag, WRITE_COMMITTED_FLAG, type CliIo, type FlagSpec } from '../../src/cli/args';
import {
  ABLATION_CONFIGS, budgetRows, renderAblation, renderBudget, summarize, summaryEntries, successObs, verdict,
  type AblationMeta, type AblationRun, type BudgetMeta, type PairRow, type SummaryEntry,
} from '../ablation/grpo-ablation';
import { fmtDiff, pairedBootstrap, type PairedInterval } from '../ablation/stats';
import { readCells, renderTtsSection, type TtsMeta, type TtsRun } from './tts-table';
import { renderReviseSection, reviseDiff, type ReviseMeta } from './revise-table';
import { lessonReport, summaryTable } from './lesson-table';
import { BUDGET_SERIES, renderBudgetSvg, renderBudgetTable, type BudgetSeries } from '../ablation/budget-figure';

export const RESULTS_USAGE = 'usage: npm run results -- [--check] [--write-committed] [--root DIR]';

export const RESULTS_FLAGS: FlagSpec = {
  check: { type: 'boolean', help: 'compare the pages and summary.json with a fresh render; exit 1 at the first difference (section and line)' },
  'write-committed': WRITE_COMMITTED_FLAG,
  root: { type: 'string', arg: 'DIR', help: 'the checkout whose records and pages are read (and written); tests point it at a copy', default: 'this checkout' },
  help: HELP_FLAG,
};

const ROOT = resolve(import.meta.dirname, '../..');
const json = <T>(p: string): T => JSON.parse(readFileSync(p, 'utf8')) as T;

export const RESULTS_PAGE = 'docs/results.md';
export const LESSON_PAGE = 'docs/lesson.md';
export const SUMMARY_FILE = 'docs/results/summary.json';
export const BUDGET_FIGURE = 'docs/figures/budget.svg';
export const ABLATION_S17 = 'research/records/ablation-records-s17';
export const ABLATION_PREVIOUS = 'research/records/ablation-records';
export const BUDGET = 'research/records/2026-12-04-budget';
export const REPLICATION = 'research/records/2026-12-05-replication';
export const FID_BUDGET = 'research/records/2026-12-05-fidelity-budget';
export const ACT_ONLY = 'research/records/2026-12-05-act-only';
export const ACT_ONLY_8 = 'research/records/2026-12-05-act-only-8';
export const G8_BUDGET = 'research/records/2026-12-05-g8-budget';
export const POWERED_BUDGET = 'research/records/2026-12-05-powered-budget';
export const EIGHTH_BUDGET = 'research/records/2026-12-06-eighth-budget';
export const TTS_S19 = 'research/records/tts-records-s19';
export const TTS_PREVIOUS = 'research/records/tts-records';
export const REVISE = 'research/records/2026-12-05-revise';
export const REVISE_FIDELITY = 'research/records/2026-12-05-revise-fidelity';
export const LESSON_RECORDS = 'research/records/lesson-records';

/** The finished runs of one budget (the meta's key) under an ablation records folder. */
export function readAblationRuns(dir: string, key: string | undefined): AblationRun[] {
  return readdirSync(dir)
    .sort()
    .filter((d) => existsSync(join(dir, d, 'result.json')))
    .map((d) => json<AblationRun>(join(dir, d, 'result.json')))
    .filter((r) => key === undefined || r.key === key);
}

type Meta = AblationMeta & { key?: string };

/** An ablation-format records folder, summarised once for its section, the claims and summary.json. */
function ablationSet(root: string, rel: string, runsDir = rel) {
  const meta = json<Meta>(join(root, rel, 'meta.json'));
  const runs = readAblationRuns(join(root, runsDir), meta.key);
  const configs = ABLATION_CONFIGS.filter((c) => runs.some((r) => r.config === c.id));
  const sum = summarize(runs, configs, meta.bootstrap);
  const rows = budgetRows(sum, runs, meta.budget, meta.bootstrap);
  return { rel, meta, runs, sum, rows };
}
type AblationSet = ReturnType<typeof ablationSet>;

/**
 * a − b paired on tasks and the seeds both have, the two configurations' records in one folder or in two of the same
 * budget (the same tasks and seeds); the base policy's one run stands for every seed.
 */
function pairAcross(setA: AblationSet, a: string, setB: AblationSet, b: string, level?: number): PairedInterval | null {
  const ra = setA.runs.filter((r) => r.config === a);
  const rb = setB.runs.filter((r) => r.config === b);
  if (!ra.length || !rb.length) return null;
  const base = ABLATION_CONFIGS.find((c) => c.id === b)?.mode === null;
  return pairedBootstrap(successObs(ra), successObs(rb), { ...setA.meta.bootstrap, broadcast: base, ...(level ? { level } : {}) });
}

/** a − b within one records folder (a 95 % interval unless `level` says otherwise). */
function pair(set: AblationSet, a: string, b: string, level?: number): PairedInterval | null {
  return pairAcross(set, a, set, b, level);
}

interface Claim {
  claim: string;
  /** Where it is measured: a section of this page. */
  where: string;
  d: PairedInterval | null;
  /** Why the figure stands where it does, or what is still missing. */
  detail?: string;
  /** A pre-registered experiment whose seeds have not all finished: its interval is shown, its verdict waits. */
  running?: boolean;
}

const seedsOf = (set: AblationSet, id: string) => set.runs.filter((r) => r.config === id).length;

/** The ablation-format records folders the claims read. */
interface ClaimSets {
  s17: AblationSet;
  budget: AblationSet;
  replication: AblationSet;
  fidBudget: AblationSet;
  actOnly: AblationSet;
  actOnly8: AblationSet;
  g8: AblationSet;
  powered: AblationSet;
  eighth: AblationSet;
}

/**
 * A ten-seed comparison of dyna-fq8-recall with real-q (and both with the base) in one record set: whether it is still
 * running, and the detail the claim gives.
 */
function tenSeedBudget(set: AblationSet, o: { attempts?: number } = {}): Pick<Claim, 'running' | 'detail'> {
  const [dyna, real] = [seedsOf(set, 'dyna-fq8-recall'), seedsOf(set, 'real-q')];
  const done = dyna === 10 && real === 10;
  // With `attempts` pre-registered tries at the same bar, the finished comparison also at the Bonferroni level.
  const corrected = done && o.attempts ? `; at 99 % (Bonferroni over the ${o.attempts} pre-registered attempts at this bar): ${fmtOr(pair(set, 'dyna-fq8-recall', 'real-q', 1 - 0.05 / o.attempts))}` : '';
  return {
    running: dyna < 10 || real < 10 || seedsOf(set, 'base') < 1,
    detail: `${dyna} of 10 seeds of dyna-fq8-recall and ${real} of real-q${done ? '' : ' so far, paired on the seeds both have'}; against the base: dyna-fq8-recall ${fmtOr(pair(set, 'dyna-fq8-recall', 'base'))}, real-q ${fmtOr(pair(set, 'real-q', 'base'))}${corrected}`,
  };
}

/** The paper's claims (and issue 46's bar), each with the paired figure that decides it here and its verdict. */
function claims(sets: ClaimSets, ttsCurrent: TtsRun[], root: string): Claim[] {
  const { s17, budget, replication, fidBudget, actOnly, actOnly8, g8, powered, eighth } = sets;
  const tts = (mode: string) => {
    const obs = (n: number) => successObs(ttsCurrent.filter((r) => r.policy === 'envace' && r.n === n && (n === 0 || r.mode === mode)).map((r) => ({ ...r, config: '', key: '' }) as unknown as AblationRun));
    return pairedBootstrap(obs(2), obs(0));
  };
  const intended = budget.meta.budget.seeds;
  const budgetDetail = (a: string) => `${seedsOf(budget, a)} of ${intended} seeds of ${a} and ${seedsOf(budget, 'real-q')} of real-q so far, paired on the seeds both have`;
  const revise = reviseDiff(join(root, REVISE), 'calls');
  const reviseFid = reviseDiff(join(root, REVISE_FIDELITY), 'calls');
  return [
    { claim: 'EnvACE (role-wise, shared weights) beats the base policy (paper: 36.7 against 30.0 on τ²-Bench, 8B)', where: 'ablation', d: pair(s17, 'envace', 'base'), detail: 'with the all-or-nothing judge instead: ' + fmtOr(pair(s17, 'envace-strict', 'base')) },
    { claim: 'EnvACE beats standard GRPO, whose observations come from a frozen simulator (36.7 against 31.2)', where: 'ablation', d: pair(s17, 'envace', 'frozen-simulator') },
    { claim: 'EnvACE beats per-role policies (36.7 against 35.5)', where: 'ablation', d: pair(s17, 'envace', 'per-role') },
    { claim: 'per-role policies beat standard GRPO (35.5 against 31.2)', where: 'ablation', d: pair(s17, 'per-role', 'frozen-simulator') },
    { claim: 'standard GRPO against a frozen simulator beats the base (31.2 against 30.0)', where: 'ablation', d: pair(s17, 'frozen-simulator', 'base') },
    { claim: 'private rehearsal before the one real episode raises success, parallel, N = 2 (EnvACE policy: 38.0 against 31.4)', where: 'private rehearsal', d: tts('parallel') },
    { claim: 'private rehearsal raises success, sequential, N = 2 (34.8 against 31.4)', where: 'private rehearsal', d: tts('sequential') },
    {
      claim: 'rehearsing a planned call lets the policy fix it before it runs (paper Figure 7, one case), measured as held-out success with rehearse-then-revise on every call against plain evaluation', where: 'rehearse, then revise', d: revise.diff,
      detail: revise.revise ? `the rehearsal caught ${revise.revise.caught} of the ${revise.revise.realErrors} calls the environment would refuse, ${revise.revise.predictedErrors} predicted` : undefined,
    },
    {
      claim: 'the same on the fidelity-stage policy, whose rehearsals are better (exact match 83.5 % from 62 %)', where: 'rehearse, then revise on the fidelity-stage policy', d: reviseFid.diff,
      detail: reviseFid.revise ? `the rehearsal caught ${reviseFid.revise.caught} of the ${reviseFid.revise.realErrors} calls the environment would refuse, ${reviseFid.revise.predictedErrors} predicted` : undefined,
    },
    {
      claim: 'rehearsed episodes beside ¼ of the real episodes, the rehearsal recalling the training task\'s reference observations where they are the real answer, beat real-only GRPO with the same ¼ (issue 46, fifth question)', where: 'real-interaction budget', d: pair(budget, 'dyna-q-recall', 'real-q'),
      detail: budgetDetail('dyna-q-recall'),
    },
    {
      claim: 'the same on fresh training seeds 5–9, pre-registered as the confirmatory replication (issue 46\'s decision for this lever)', where: 'the replication', d: pair(replication, 'dyna-q-recall', 'real-q'),
      detail: `${seedsOf(replication, 'dyna-q-recall')} of 5 seeds of dyna-q-recall and ${seedsOf(replication, 'real-q')} of real-q`,
    },
    {
      claim: 'the same on a policy whose rehearsals are better (the fidelity stage: exact match 74 % from 62 %), seeds 0–4, pre-registered', where: 'the budget on the fidelity-stage policy', d: pair(fidBudget, 'dyna-q-recall', 'real-q'),
      detail: `${seedsOf(fidBudget, 'dyna-q-recall')} of 5 seeds of dyna-q-recall and ${seedsOf(fidBudget, 'real-q')} of real-q; without recall (dyna-q): ${fmtOr(pair(fidBudget, 'dyna-q', 'real-q'))}`,
    },
    {
      claim: 'the same with only Act\'s rows trained (the simulator frozen, no Rehearse row trained on the task reward), on the fidelity-stage policy, seeds 0–4, pre-registered as an amendment', where: 'the budget on the fidelity-stage policy', d: pair(fidBudget, 'dyna-fq-recall', 'real-q'),
      detail: `${seedsOf(fidBudget, 'dyna-fq-recall')} of 5 seeds of dyna-fq-recall and ${seedsOf(fidBudget, 'real-q')} of real-q; against the same with the Rehearse rows trained (dyna-q-recall): ${fmtOr(pair(fidBudget, 'dyna-fq-recall', 'dyna-q-recall'))}`,
    },
    {
      claim: 'the same, only Act\'s rows trained, on the attentive policy where real-only GRPO has room, seeds 0–9, pre-registered', where: 'rehearsed episodes that train only Act', d: pair(actOnly, 'dyna-fq-recall', 'real-q'),
      detail: seedsOf(actOnly, 'dyna-fq-recall') === 10 && seedsOf(actOnly, 'real-q') === 10
        ? `all 10 seeds of both; against the base: ${fmtOr(pair(actOnly, 'dyna-fq-recall', 'base'))}, real-q against the base: ${fmtOr(pair(actOnly, 'real-q', 'base'))}`
        : `${seedsOf(actOnly, 'dyna-fq-recall')} of 10 seeds of dyna-fq-recall and ${seedsOf(actOnly, 'real-q')} of real-q so far, paired on the seeds both have`,
    },
    {
      claim: 'the same with 7 rehearsed prompts per step instead of 3 (1120 rehearsed episodes beside the same 160 real ones), seeds 0–9, pre-registered', where: 'seven rehearsed prompts beside one real one', d: pair(actOnly8, 'dyna-fq8-recall', 'real-q'),
      running: seedsOf(actOnly8, 'dyna-fq8-recall') < 10,
      detail: seedsOf(actOnly8, 'dyna-fq8-recall') === 10
        ? `all 10 seeds; against the base: ${fmtOr(pair(actOnly8, 'dyna-fq8-recall', 'base'))}; against 3 rehearsed prompts per step (dyna-fq-recall, the act-only experiment's runs): ${fmtOr(pairAcross(actOnly8, 'dyna-fq8-recall', actOnly, 'dyna-fq-recall'))}`
        : `${seedsOf(actOnly8, 'dyna-fq8-recall')} of 10 seeds of dyna-fq8-recall so far (real-q: the act-only experiment's 10), paired on the seeds both have`,
    },
    {
      claim: 'the same (7 rehearsed prompts per step, only Act trained) on the bundled 8-layer policy, whose rehearsals are better (exact 79.8 % strict, 84.1 % grounded), seeds 0–9, pre-registered', where: 'seven rehearsed prompts beside one real one on the bundled 8-layer policy', d: pair(g8, 'dyna-fq8-recall', 'real-q'),
      ...tenSeedBudget(g8),
    },
    {
      claim: 'the same (7 rehearsed prompts per step, only Act trained) on the attentive policy again, powered: fresh seeds 10–19 and 300 held-out tasks, pre-registered', where: 'seven rehearsed prompts beside one real one, powered', d: pair(powered, 'dyna-fq8-recall', 'real-q'),
      ...tenSeedBudget(powered),
    },
    {
      claim: 'the same (7 rehearsed prompts per step, only Act trained) at ⅛ of the real budget (20 steps: 80 real episodes, 560 rehearsed), fresh seeds 20–29, 300 held-out tasks, pre-registered (issue 46\'s fifth attempt at its bar)', where: 'seven rehearsed prompts beside one real one at ⅛ of the real budget', d: pair(eighth, 'dyna-fq8-recall', 'real-q'),
      ...tenSeedBudget(eighth, { attempts: 5 }),
    },
    {
      claim: 'EnvACE with no real observation shown to Act beats the base (issue 46): every episode rehearsed, its calls replayed on a real database at the end for one real reward', where: 'real-interaction budget', d: pair(budget, 'envace-verifier', 'base'),
      detail: `scored by the loophole-free all-or-nothing judge instead (no real interaction at all): ${fmtOr(pair(budget, 'envace-strict', 'base'))}`,
    },
    {
      claim: 'rehearsed episodes beside ¼ of the real episodes beat real-only GRPO with the same ¼ (issue 46; the simulator learning the dynamics)', where: 'real-interaction budget', d: pair(budget, 'dyna-q-sim', 'real-q'),
      detail: budgetDetail('dyna-q-sim'),
    },
    { claim: 'the same, the simulator trained on observation rows that show the call\'s own result (superseded by the line above)', where: 'real-interaction budget', d: pair(budget, 'dyna-q-obs', 'real-q'), detail: budgetDetail('dyna-q-obs') },
    { claim: 'GRPO in the real environment beats the base (the lab\'s proof that the loop learns; not in the paper)', where: 'ablation', d: pair(s17, 'real', 'base') },
  ];
}

const fmtOr = (d: PairedInterval | null) => (d ? `${fmtDiff(d)} pts, ${verdict(d)}` : 'not run');

export function renderClaims(cs: readonly Claim[]): string {
  const out = [
    '## Each claim: reproduced, contradicted or not resolved',
    '',
    'Rendered from the records of the sections named (the paired 95 % interval of the figure given: **reproduced** when it lies above zero, **contradicted** below, **not resolved** when it holds zero; "not run yet" when the records lack a side, "running, not decided" while a pre-registered experiment has seeds to go). The paper\'s figures are its 8B policy\'s on τ²-Bench; ours are a 1.3 M-parameter policy on the mini world, so only directions compare.',
    '',
  ];
  for (const c of cs) {
    const v = c.running ? 'running, not decided' : c.d === null ? 'not run yet' : verdict(c.d);
    out.push(`- **${v}**: ${c.claim}. ${c.d ? `Here ${fmtDiff(c.d)} pts (${c.d.n} paired results)` : c.running ? 'No paired result yet' : 'No records yet'}${c.detail ? `; ${c.detail}` : ''} (section: ${c.where}).`);
  }
  return out.join('\n');
}

/** Issue 46's figure: each series' points from the budget records (the all-real point from the s17 ablation, same key). */
function budgetSeries(budget: AblationSet, s17: AblationSet): BudgetSeries[] {
  const point = (id: string) => {
    const b = budget.rows.find((r) => r.row.config.id === id) ?? (id === 'real' ? s17.rows.find((r) => r.row.config.id === id) : undefined);
    if (!b || b.row.runs === 0) return [];
    return [{ config: id, label: b.row.config.label, realEpisodes: b.realEpisodes, seeds: b.row.runs, mean: b.row.success.mean, lo: b.row.success.lo, hi: b.row.success.hi, vsReal: b.vsRealSameBudget }];
  };
  return BUDGET_SERIES.map((s) => ({ label: s.label, colour: s.colour, points: s.configs.flatMap(point) }));
}

function budgetFigureSection(series: readonly BudgetSeries[], full: number): string {
  return [
    '### Success against the real budget (issue 46 item 3)',
    '',
    `Each point: a configuration's held-out success, mean over its finished seeds, with the 95 % bootstrap interval (the table above has every figure; the all-real point is real GRPO of the ablation below, ${full} real episodes, same model, tasks and evaluation). In a cell: the configuration, success % [95 % CI] (seeds; the paired difference to real-only GRPO at the same number of real episodes, pts, **yes** when significant). Rendered with the page into [figures/budget.svg](figures/budget.svg).`,
    '',
    '![held-out success against real episodes per run](figures/budget.svg)',
    '',
    renderBudgetTable(series, full),
  ].join('\n');
}

/**
 * The replication's section: its own table and decision, then the secondary figure its pre-registration names, the
 * decisive pair pooled with the original experiment's seeds (the two share one budget key, so their runs pool).
 */
function renderReplication(rep: AblationSet, original: AblationSet, pairs: PairRow[]): string {
  const [a, b] = (rep.meta as BudgetMeta).decisive[0];
  const runs = [...original.runs, ...rep.runs].filter((r) => r.key === rep.meta.key);
  const side = (id: string) => runs.filter((r) => r.config === id);
  const pooled = side(a).length && side(b).length ? pairedBootstrap(successObs(side(a)), successObs(side(b)), rep.meta.bootstrap) : null;
  const seeds = (id: string) => side(id).map((r) => r.seed).sort((x, y) => x - y).join(', ');
  const line = pooled
    ? `**Pooled with the experiment above (secondary, not the decision).** ${a} − ${b} over training seeds ${seeds(a)} (${a}) and ${seeds(b)} (${b}), paired on the seeds both have: ${fmtDiff(pooled)} pts, ${verdict(pooled)} (${pooled.n} paired results).`
    : `**Pooled with the experiment above:** not run yet.`;
  return [renderBudget(rep.rows, pairs, rep.meta as BudgetMeta), '', line].join('\n');
}

export interface Section {
  page: string;
  name: string;
  render: () => string;
}

/** Every generated section, in the order the check reports them, and summary.json's entries. */
export function sections(root = ROOT): { sections: Section[]; summary: () => unknown; figure: () => string } {
  const s17 = ablationSet(root, ABLATION_S17);
  const previous = ablationSet(root, ABLATION_PREVIOUS);
  const budget = ablationSet(root, BUDGET, join(BUDGET, 'ablation'));
  const tts = (rel: string) => ({ runs: readCells(join(root, rel)), meta: json<TtsMeta>(join(root, rel, 'meta.json')) });
  const ttsCurrent = tts(TTS_S19);
  const replication = ablationSet(root, REPLICATION, join(REPLICATION, 'ablation'));
  const fidBudget = ablationSet(root, FID_BUDGET, join(FID_BUDGET, 'ablation'));
  const actOnly = ablationSet(root, ACT_ONLY, join(ACT_ONLY, 'ablation'));
  const actOnly8 = ablationSet(root, ACT_ONLY_8, join(ACT_ONLY_8, 'ablation'));
  const g8 = ablationSet(root, G8_BUDGET, join(G8_BUDGET, 'ablation'));
  const powered = ablationSet(root, POWERED_BUDGET, join(POWERED_BUDGET, 'ablation'));
  const eighth = ablationSet(root, EIGHTH_BUDGET, join(EIGHTH_BUDGET, 'ablation'));
  const budgetMeta = budget.meta as BudgetMeta;
  const decisivePairs = (set: AblationSet): PairRow[] =>
    (set.meta as BudgetMeta).decisive.flatMap(([a, b]) => {
      const d = pair(set, a, b);
      const ca = ABLATION_CONFIGS.find((c) => c.id === a)!;
      const cb = ABLATION_CONFIGS.find((c) => c.id === b)!;
      return d ? [{ a: ca, b: cb, diff: d, expected: true }] : [];
    });
  const fullBudget = budget.meta.budget.steps * budget.meta.budget.prompts * budget.meta.budget.k;
  const lessonMeta = json<{ summary: string[]; reports: { name: string; dir: string; from: 'heading' | 'table' }[] }>(join(root, LESSON_RECORDS, 'meta.json'));
  const list: Section[] = [
    { page: RESULTS_PAGE, name: 'claims', render: () => renderClaims(claims({ s17, budget, replication, fidBudget, actOnly, actOnly8, g8, powered, eighth }, ttsCurrent.runs, root)) },
    { page: RESULTS_PAGE, name: 'budget', render: () => renderBudget(budget.rows, decisivePairs(budget), budgetMeta) },
    { page: RESULTS_PAGE, name: 'replication', render: () => renderReplication(replication, budget, decisivePairs(replication)) },
    { page: RESULTS_PAGE, name: 'fidelity-budget', render: () => renderBudget(fidBudget.rows, decisivePairs(fidBudget), fidBudget.meta as BudgetMeta) },
    { page: RESULTS_PAGE, name: 'act-only', render: () => renderBudget(actOnly.rows, decisivePairs(actOnly), actOnly.meta as BudgetMeta) },
    { page: RESULTS_PAGE, name: 'act-only-8', render: () => renderBudget(actOnly8.rows, decisivePairs(actOnly8), actOnly8.meta as BudgetMeta) },
    { page: RESULTS_PAGE, name: 'g8-budget', render: () => renderBudget(g8.rows, decisivePairs(g8), g8.meta as BudgetMeta) },
    { page: RESULTS_PAGE, name: 'powered-budget', render: () => renderBudget(powered.rows, decisivePairs(powered), powered.meta as BudgetMeta) },
    { page: RESULTS_PAGE, name: 'eighth-budget', render: () => renderBudget(eighth.rows, decisivePairs(eighth), eighth.meta as BudgetMeta) },
    { page: RESULTS_PAGE, name: 'budget-figure', render: () => budgetFigureSection(budgetSeries(budget, s17), fullBudget) },
    { page: RESULTS_PAGE, name: 'revise', render: () => renderReviseSection(join(root, REVISE), json<ReviseMeta>(join(root, REVISE, 'meta.json'))) },
    { page: RESULTS_PAGE, name: 'revise-fidelity', render: () => renderReviseSection(join(root, REVISE_FIDELITY), json<ReviseMeta>(join(root, REVISE_FIDELITY, 'meta.json'))) },
    { page: RESULTS_PAGE, name: 'ablation', render: () => renderAblation(s17.sum, s17.meta) },
    { page: RESULTS_PAGE, name: 'ablation-previous', render: () => renderAblation(previous.sum, previous.meta) },
    { page: RESULTS_PAGE, name: 'tts', render: () => renderTtsSection(ttsCurrent.runs, ttsCurrent.meta) },
    { page: RESULTS_PAGE, name: 'tts-previous', render: () => { const t = tts(TTS_PREVIOUS); return renderTtsSection(t.runs, t.meta); } },
    // Lesson records name their folders relative to the checkout; the reports print them as they were typed. A report's
    // section starts under the page's own heading (its title line is the page's first) or, where the page tells the
    // run in its own words, at the table; it ends before the figure, whose link the page words differently.
    { page: LESSON_PAGE, name: 'lesson-summary', render: () => inRoot(root, () => summaryTable(lessonMeta.summary)) },
    ...lessonMeta.reports.map((r): Section => ({ page: LESSON_PAGE, name: r.name, render: () => inRoot(root, () => {
      const lines = lessonReport(r.dir).split('\n');
      return lines.slice(r.from === 'table' ? lines.findIndex((l) => l.startsWith('| seed |')) : 2).join('\n');
    }) })),
  ];
  const summary = () => {
    const entries: SummaryEntry[] = [s17, budget, replication, fidBudget, actOnly, actOnly8, g8, powered, eighth, previous].flatMap((set) => summaryEntries(set.rows, { world: set.meta.world, records: set.rel, model: `${set.meta.model} (sha256 ${set.meta.modelHash}…)` }));
    return {
      about:
        'Generated by `npm run results -- --write-committed` from the committed records (research/scripts/results.ts). One entry per configuration and records folder (world, policy and budget are the folder\'s). ' +
        'success: the fraction of held-out tasks solved (reward 1), the mean over seeds; ci: its 95 % two-level bootstrap interval over seeds and tasks; vsBase, vsRealSameBudget: paired differences (fractions, not points) on the same tasks and seeds, ' +
        'against the base policy and against real-only GRPO (the verifier\'s reward, nothing else) with the same number of real episodes per run (null: none ran at that budget, or it is that configuration). ' +
        'realEpisodes: real-environment episodes per run. seeds: finished training seeds (the base: one deterministic run).',
      bootstrap: s17.meta.bootstrap,
      entries,
    };
  };
  const figure = () => {
    const series = budgetSeries(budget, s17);
    return renderBudgetSvg(series, series[0].points.find((p) => p.config === 'base')?.mean ?? null, fullBudget, `World ${budget.meta.world}: held-out success against the real-interaction budget`);
  };
  return { sections: list, summary, figure };
}

/** Runs f with the working directory at root (the lesson reports resolve and print their folders relative to it). */
function inRoot<T>(root: string, f: () => T): T {
  const cwd = process.cwd();
  process.chdir(root);
  try {
    return f();
  } finally {
    process.chdir(cwd);
  }
}

export const startMarker = (name: string) => `<!-- ${name}:start -->`;
export const endMarker = (name: string) => `<!-- ${name}:end -->`;

/** The text between a section's markers, or null when the page lacks them. */
export function sectionText(doc: string, name: string): string | null {
  const i = doc.indexOf(startMarker(name));
  const j = doc.indexOf(endMarker(name), i < 0 ? 0 : i);
  return i < 0 || j < 0 ? null : doc.slice(i + startMarker(name).length, j);
}

const wrap = (body: string) => `\n${body.trim()}\n`;

/** The first line where two texts differ: 1-based, with both lines. */
export function firstDifference(have: string, want: string): { line: number; have: string; want: string } | null {
  const a = have.split('\n');
  const b = want.split('\n');
  for (let i = 0; i < Math.max(a.length, b.length); i++) if (a[i] !== b[i]) return { line: i + 1, have: a[i] ?? '(end of section)', want: b[i] ?? '(end of section)' };
  return null;
}

export async function resultsCli(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  return runCli(io, RESULTS_USAGE, () => main(argv, io));
}

async function main(argv: readonly string[], io: CliIo): Promise<void> {
  const v = parseFlags(argv, RESULTS_FLAGS);
  if (v.help) return void io.out(helpText(RESULTS_USAGE, RESULTS_FLAGS));
  const root = resolve(strFlag(v, 'root') ?? ROOT);
  const check = !!v.check;
  if (check && v['write-committed']) throw new ArgError('--check compares and writes nothing: drop --write-committed');
  const { sections: list, summary, figure } = sections(root);
  const pages = new Map<string, string>();
  const page = (p: string) => pages.get(p) ?? pages.set(p, readFileSync(join(root, p), 'utf8')).get(p)!;
  const differs: string[] = [];
  for (const s of list) {
    const doc = page(s.page);
    const have = sectionText(doc, s.name);
    if (have === null) throw new ArgError(`${s.page} has no ${startMarker(s.name)} … ${endMarker(s.name)} section`);
    const want = wrap(s.render());
    if (have === want) continue;
    if (check) {
      const d = firstDifference(have, want)!;
      // The line number is the page's, so an editor can jump to it.
      const at = doc.slice(0, doc.indexOf(startMarker(s.name))).split('\n').length + d.line - 1;
      differs.push(`${s.page}: section ${s.name} differs from its records at line ${at}:\n  page:     ${d.have}\n  rendered: ${d.want}`);
      break;
    }
    const i = doc.indexOf(startMarker(s.name)) + startMarker(s.name).length;
    pages.set(s.page, doc.slice(0, i) + want + doc.slice(i + have.length));
  }
  // Whole files rendered from the records beside the pages' sections.
  const files = [
    { path: SUMMARY_FILE, text: JSON.stringify(summary(), null, 1) + '\n' },
    { path: BUDGET_FIGURE, text: figure() },
  ];
  const named = `${list.length} sections, ${files.map((f) => f.path).join(' and ')}`;
  const current = (p: string) => (existsSync(join(root, p)) ? readFileSync(join(root, p), 'utf8') : '');
  if (check) {
    for (const f of files) {
      if (differs.length) break;
      const d = firstDifference(current(f.path), f.text);
      if (d) differs.push(`${f.path} differs from its records at line ${d.line}:\n  file:     ${d.have}\n  rendered: ${d.want}`);
    }
    // runCli prints it as the error and exits 1.
    if (differs.length) throw new Error(`${differs.join('\n')}\n(npm run results -- --write-committed re-renders; change the renderer or the records' meta.json, not the section)`);
    io.out(`results: ${named} match their records\n`);
    return;
  }
  const changed = [...pages].filter(([p, text]) => readFileSync(join(root, p), 'utf8') !== text).map(([p]) => p);
  const changedFiles = files.filter((f) => current(f.path) !== f.text);
  if (!changed.length && !changedFiles.length) return void io.out(`results: ${named} already match their records\n`);
  const targets = [...changed, ...changedFiles.map((f) => f.path)];
  // Every target is a published file of the checkout, tracked or about to be: never written unasked.
  if (!v['write-committed']) throw new ArgError(`the records render differently from ${targets.join(', ')}: pass --write-committed to rewrite them (--check only compares)`);
  for (const p of changed) writeFileSync(join(root, p), pages.get(p)!);
  for (const f of changedFiles) {
    mkdirSync(dirname(join(root, f.path)), { recursive: true });
    writeFileSync(join(root, f.path), f.text);
  }
  io.out(`results: wrote ${targets.join(', ')}\n`);
}

if (isEntry(import.meta.url)) process.exitCode = await resultsCli(process.argv.slice(2));
