// node --import tsx research/scripts/lesson-table.ts OUT_DIR [--figure docs/figures/lesson-curves.png] > docs/lesson.md (--help lists every flag)
// The lesson run's report (does the lab's default GRPO run raise held-out success within 10 minutes?) from the records research/scripts/lesson-grpo.sh wrote: the base policy's evaluation (base-s0/eval.json),
// each seed's held-out evaluations (<mode>-s<seed>/eval.jsonl), configuration (run.json) and wall-clock
// (done.json). Success differences are per seed against the same 100 held-out tasks; the mean over seeds
// carries a 95 % t-interval (research/ablation/stats.ts meanCI).
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ArgError, HELP_FLAG, helpText, isEntry, parseFlags, processIo, runCli, strFlag, type CliIo, type FlagSpec } from '../../src/cli/args';
import { meanCI } from '../ablation/stats';
import { isRolloutMode, MODES } from '../../src/method/modes';
import { DEFAULT_BASELINE, setting } from '../../src/method/run-config';

const json = <T>(p: string): T => JSON.parse(readFileSync(p, 'utf8')) as T;
const pct = (x: number) => (Number.isFinite(x) ? `${(100 * x).toFixed(1)}%` : 'n/a');
const pts = (x: number) => (Number.isFinite(x) ? `${x >= 0 ? '+' : ''}${(100 * x).toFixed(1)}` : 'n/a');

export const LESSON_TABLE_USAGE = 'usage: node --import tsx research/scripts/lesson-table.ts OUT_DIR [--figure PNG] > docs/lesson.md\n       node --import tsx research/scripts/lesson-table.ts --summary OUT_DIR [OUT_DIR ...]   (one row per records folder)';

export const LESSON_TABLE_FLAGS: FlagSpec = {
  figure: { type: 'string', arg: 'PNG', help: 'the learning-curve figure to link under the table (as the document will reference it)', default: 'no figure' },
  summary: { type: 'boolean', help: 'one row per records folder (its settings off the lesson\'s, base, seeds, mean change), for comparing runs', default: 'false: the full report of one folder' },
  help: HELP_FLAG,
};

interface EvalPoint {
  step: number;
  success: number;
  fidelity: { exact: number; f1: number } | null;
}

/** The options off the lab's defaults, as run.json records them (absent there = the default). */
function optionList(c: Pick<RunConfig, 'updateEpochs' | 'taskSampling' | 'topP' | 'reward' | 'lossAggregation' | 'greedyMember'>): string[] {
  return [
    (c.updateEpochs ?? 1) > 1 ? `${c.updateEpochs} epochs per batch` : '',
    c.taskSampling === 'signal' ? 'signal-seeking task sampling' : '',
    c.topP !== undefined && c.topP < 1 ? `top-p ${c.topP}` : '',
    c.reward ? `training reward: ${c.reward}` : '',
    c.lossAggregation ? `loss aggregation ${c.lossAggregation}` : '',
    c.greedyMember ? 'a greedy member in every group' : '',
  ].filter(Boolean);
}

/** optionList as the report's settings sentence ends: "; a, b", or nothing. */
function options(c: Parameters<typeof optionList>[0]): string {
  const o = optionList(c);
  return o.length ? `; ${o.join(', ')}` : '';
}

/** A lesson run's records (research/scripts/lesson-grpo.sh): the base policy's evaluation and every finished seed. */
function loadLesson(dir: string) {
  if (!existsSync(join(dir, 'base-s0/eval.json'))) throw new Error(`${dir}: not a lesson run's records (no base-s0/eval.json: research/scripts/lesson-grpo.sh writes one)`);
  const base = json<{ model?: string; success: number; tasks: number; fidelity: { exact: number; f1: number } | null; wallS: number }>(join(dir, 'base-s0/eval.json'));
  const seeds = readdirSync(dir)
    .map((d) => /^(?!base-)[\w-]+-s(\d+)$/.exec(d))
    .filter((m): m is RegExpExecArray => m !== null && existsSync(join(dir, m[0], 'done.json')))
    .map((m) => {
      const d = join(dir, m[0]);
      const evals = readFileSync(join(d, 'eval.jsonl'), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as EvalPoint);
      const last = new Map(evals.map((e) => [e.step, e]));
      return { seed: Number(m[1]), evals: [...last.values()].sort((a, b) => a.step - b.step), wallS: json<{ wallS: number }>(join(d, 'done.json')).wallS, config: json<{ config: RunConfig }>(join(d, 'run.json')).config };
    })
    .sort((a, b) => a.seed - b.seed);
  if (seeds.length === 0) throw new Error(`${dir}: no finished seed`);
  return { base, seeds };
}

/** run.json's configuration, the fields these tables read (older records lack the newer options). */
interface RunConfig {
  mode: string; groups: string; baseline: string; promptsPerStep: number; k: number; lr: number; lora: { rank: number; alpha: number }; steps: number;
  limits: { maxTurns: number; maxActTokens: number; maxRehearseTokens: number }; temperature: number; klCoef?: number;
  updateEpochs?: number; taskSampling?: string; topP?: number; reward?: string; lossAggregation?: string; greedyMember?: boolean;
}

/** The lesson's length: src/ui/settings.svelte.ts DEFAULTS.steps (a runes module tsx cannot load; the test ties them). 40 until commit de6fbd8, so older runs read "40 steps". */
export const LESSON_STEPS = 100;

/** What a run changed from the lesson's settings (research/scripts/lesson-grpo.sh defaults), or "the lesson's settings". */
function offLesson(c: RunConfig): string {
  const o = [
    c.mode !== 'real' ? `mode ${c.mode}` : '',
    c.baseline !== DEFAULT_BASELINE ? `${c.baseline} baseline` : '',
    c.promptsPerStep !== 4 || c.k !== 4 ? `${c.promptsPerStep} prompts × K ${c.k}` : '',
    c.steps !== LESSON_STEPS ? `${c.steps} steps` : '',
    c.lr !== setting('lr').default ? `lr ${c.lr}` : '',
    c.lora.rank !== 8 ? `rank ${c.lora.rank}` : '',
    c.temperature !== 1 ? `temperature ${c.temperature}` : '',
    (c.klCoef ?? 0) !== 0 ? `KL ${c.klCoef}` : '',
    c.limits.maxTurns !== 12 ? `${c.limits.maxTurns} turns` : '',
    ...optionList(c),
  ].filter(Boolean);
  return o.join(', ') || "the lesson's settings";
}

/** The bundled policy's folders: runs/sv1 is where its last stage wrote it before it became models/default (2026-12-02, commit 8cfa1da). */
const BUNDLED = new Set(['models/default', 'runs/sv1']);

/** The base's folder when it is not the bundled policy (eval.json records it as an absolute path of its machine). */
function baseName(model: string | undefined): string {
  const rel = model ? /(?:^|\/)((?:runs|models)\/.*)$/.exec(model)?.[1] : undefined;
  return rel && !BUNDLED.has(rel) ? ` (${rel})` : '';
}

/** One row per records folder: its settings off the lesson's, its base, each seed's last evaluation, the mean change. */
export function summaryTable(dirs: readonly string[]): string {
  const out = ['| records | settings off the lesson\'s | base | seeds | held-out success after the last step, per seed | mean change (95 % t-interval) | mean wall-clock |', '|---|---|---|---|---|---|---|'];
  for (const dir of dirs) {
    const { base, seeds } = loadLesson(dir);
    const finals = seeds.map((s) => s.evals[s.evals.length - 1].success);
    const ci = meanCI(finals.map((f) => f - base.success));
    const interval = seeds.length > 1 ? ` (${pts(ci.lo)} to ${pts(ci.hi)})` : ' (one seed)';
    const wall = seeds.reduce((a, s) => a + s.wallS, 0) / seeds.length / 60;
    out.push(`| ${dir} | ${offLesson(seeds[0].config)} | ${pct(base.success)}${baseName(base.model)} | ${seeds.map((s) => s.seed).join(', ')} | ${finals.map(pct).join(', ')} | **${pts(ci.mean)}**${interval} | ${wall.toFixed(1)} min |`);
  }
  return out.join('\n');
}

export async function lessonTableCli(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  return runCli(io, LESSON_TABLE_USAGE, () => main(argv, io));
}

async function main(argv: readonly string[], io: CliIo): Promise<void> {
  const { values, positionals } = parseFlags(argv, LESSON_TABLE_FLAGS, true);
  if (values.help) return void io.out(helpText(LESSON_TABLE_USAGE, LESSON_TABLE_FLAGS));
  if (values.summary) {
    if (positionals.length === 0) throw new ArgError('--summary needs at least one OUT_DIR (a lesson run\'s records folder)');
    return void io.out(summaryTable(positionals));
  }
  if (positionals.length !== 1) throw new ArgError(positionals.length === 0 ? 'OUT_DIR (the lesson run\'s records folder) is required' : `one OUT_DIR, got ${positionals.length}: ${positionals.join(' ')}`);
  io.out(lessonReport(positionals[0], strFlag(values, 'figure')));
}

/** One lesson run's full report (as docs/lesson.md quotes it): settings, per-seed table, mean change, the figure's line. */
export function lessonReport(dir: string, figure?: string): string {
  const { base, seeds } = loadLesson(dir);
  const steps = [...new Set(seeds.flatMap((s) => s.evals.map((e) => e.step)))].sort((a, b) => a - b);
  const c = seeds[0].config;

  const out: string[] = [];
  out.push('# The lesson run: the lab\'s default GRPO settings on the mini world');
  out.push('');
  out.push(`Produced by \`bash research/scripts/lesson-grpo.sh ${dir}\` and \`node --import tsx research/scripts/lesson-table.ts ${dir}\` from the run records. Each seed is one \`npm run train\` run — the lab's own training code (src/rl/run.ts GrpoRun) with the lab's default settings (src/ui/settings.svelte.ts), on the CPU fast path, on the 2-core development machine — evaluated greedily on the same ${base.tasks} held-out tasks of the mini world (\`npm run eval -- --world mini --tasks test --count ${base.tasks}\`; held-out *tasks*, not users).`);
  out.push('');
  out.push(`Settings: mode ${c.mode}${isRolloutMode(c.mode) ? ` (${MODES[c.mode].description})` : ''}, ${c.groups} advantages with the ${c.baseline} baseline, ${c.promptsPerStep} prompts × K ${c.k} per step, temperature ${c.temperature}, LoRA rank ${c.lora.rank} (alpha ${c.lora.alpha}), lr ${c.lr}, ${c.steps} steps, at most ${c.limits.maxTurns} turns, ${c.limits.maxActTokens} Act / ${c.limits.maxRehearseTokens} Rehearse tokens${options(c)}.`);
  out.push('');
  out.push(`| seed | ${steps.map((s) => `success @ step ${s}`).join(' | ')} | change vs base (${pct(base.success)}) | fidelity exact @ last | wall-clock (training + evaluations) |`);
  out.push(`|---|${steps.map(() => '---|').join('')}---|---|---|`);
  const deltas: number[] = [];
  for (const s of seeds) {
    const by = new Map(s.evals.map((e) => [e.step, e]));
    const last = s.evals[s.evals.length - 1];
    deltas.push(last.success - base.success);
    out.push(`| ${s.seed} | ${steps.map((st) => pct(by.get(st)?.success ?? NaN)).join(' | ')} | **${pts(last.success - base.success)} points** | ${pct(last.fidelity?.exact ?? NaN)} | ${(s.wallS / 60).toFixed(1)} min |`);
  }
  const ci = meanCI(deltas);
  out.push('');
  out.push(`Mean change over ${seeds.length} seeds: **${pts(ci.mean)} points** of held-out success (95 % t-interval over seeds ${pts(ci.lo)} to ${pts(ci.hi)}); base fidelity exact ${pct(base.fidelity?.exact ?? NaN)}. Every seed's wall-clock includes its held-out evaluations.`);
  out.push('');
  if (steps.length > 1) {
    // The same runs read at every evaluation: what a shorter run (same constant learning rate) would have reached.
    const at = steps.map((st) => {
      const d = seeds.map((s) => s.evals.find((e) => e.step === st)?.success).filter((x): x is number => x !== undefined).map((x) => x - base.success);
      const m = meanCI(d);
      return `step ${st}: ${pts(m.mean)} (${pts(m.lo)} to ${pts(m.hi)}, ${d.length} seeds)`;
    });
    out.push(`Mean change at each evaluation (95 % t-interval): ${at.join('; ')}.`);
    out.push('');
  }
  if (figure) {
    out.push(`![Learning curves of the lesson run](${figure})`);
    out.push('');
    out.push('Curves: `npm run plots -- ' + dir + ' --out ' + figure + '` (mean over seeds, band = 95 % t-interval; step 0 = the base policy).');
    out.push('');
  }
  return out.join('\n');
}

if (isEntry(import.meta.url)) process.exitCode = await lessonTableCli(process.argv.slice(2));
