// npm run revise-table -- [records dir] [--check FILE]: the rehearse-then-revise table (issue 46 item 4) from its
// committed eval records (research/records/2026-12-05-revise: plain.json, calls.json, writes.json, control.json,
// each one greedy `npm run eval` on the same held-out tasks): success with a bootstrap interval over tasks, the
// paired difference to the plain evaluation, the error predictions on the policy's own calls, and the compute.
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { bootstrapMean, fmtDiff, fmtInterval, pairedBootstrap, type Obs } from '../ablation/stats';
import { ArgError, HELP_FLAG, helpText, isEntry, parseFlags, processIo, runCli, type CliIo, type FlagSpec } from '../../src/cli/args';

interface Record {
  success: number;
  callsWithoutError: number;
  tokens: { generated: number };
  tasks: number;
  tts: { mode: string; n: number } | null;
  revise?: { options: { max: number; scope: string; control?: boolean }; checked: number; realErrors: number; predictedErrors: number; caught: number; revisionsPerTask: number; generatedPerTask: number };
  perTask: { taskId: string; reward: number }[];
}

export const ARMS = [
  ['plain', 'plain evaluation'],
  ['calls', 'revise, every turn with a call (N = 2)'],
  ['writes', 'revise, turns with a write (N = 2)'],
  ['control', 'control: checked turns resampled, no rehearsal (N = 2)'],
] as const;

export function renderRevise(dir: string): string {
  const rec = Object.fromEntries(ARMS.map(([id]) => [id, JSON.parse(readFileSync(join(dir, `${id}.json`), 'utf8')) as Record]));
  const obs = (r: Record): Obs[] => r.perTask.map((t) => ({ seed: 0, task: t.taskId, value: t.reward >= 1 ? 1 : 0 }));
  const pct = (x: number) => (Number.isFinite(x) ? (100 * x).toFixed(1) : '–');
  const out = [
    '| arm | success % [95 % CI] | Δ vs plain, pts [95 % CI] | calls without error % | checked calls | the environment would refuse | rehearsal predicted a refusal | caught (recall / precision %) | revisions / task | generated tokens / task |',
    '|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const [id, label] of ARMS) {
    const r = rec[id];
    const d = id === 'plain' ? null : pairedBootstrap(obs(r), obs(rec.plain));
    const v = r.revise;
    const gen = v ? v.generatedPerTask : r.tokens.generated / r.tasks;
    out.push(
      `| ${label} | ${fmtInterval(bootstrapMean(obs(r)))} | ${d ? `${fmtDiff(d)}${d.significant ? ' **yes**' : ''}` : '–'} | ${pct(r.callsWithoutError)} | ${v ? v.checked : '–'} | ${v ? v.realErrors : '–'} | ${v ? v.predictedErrors : '–'} | ` +
        `${v && v.checked ? `${v.caught} (${pct(v.caught / v.realErrors)} / ${pct(v.caught / v.predictedErrors)})` : '–'} | ${v ? v.revisionsPerTask.toFixed(2) : '0'} | ${gen.toFixed(0)} |`,
    );
  }
  return out.join('\n');
}

/** What the section says besides the records: research/records/2026-12-05-revise/meta.json (npm run results reads it). */
export interface ReviseMeta {
  title: string;
  /** How the arms were made (policy, commit, commands): fixed text above the table. */
  intro: string;
  note: string | null;
}

/** The paired difference of one arm to the plain evaluation (tasks of one greedy run: seed 0). */
export function reviseDiff(dir: string, arm: (typeof ARMS)[number][0]) {
  const read = (id: string) => JSON.parse(readFileSync(join(dir, `${id}.json`), 'utf8')) as Record;
  const obs = (r: Record): Obs[] => r.perTask.map((t) => ({ seed: 0, task: t.taskId, value: t.reward >= 1 ? 1 : 0 }));
  return { diff: pairedBootstrap(obs(read(arm)), obs(read('plain'))), revise: read(arm).revise ?? null };
}

/** The whole section (without markers). */
export function renderReviseSection(dir: string, meta: ReviseMeta): string {
  const out = [meta.title, '', meta.intro, '', renderRevise(dir), ''];
  out.push(
    'Columns: success = reward 1 on the one greedy real episode per task, with a 95 % bootstrap interval over the tasks (2000 replicates, seed 0; research/ablation/stats.ts); Δ vs plain = the paired difference on the same tasks (**yes**: the interval excludes zero); ' +
      'calls without error = real calls that got no error observation; checked calls = planned calls the policy rehearsed before making them; the environment would refuse = of those, the ones the real environment answers with an error; ' +
      'rehearsal predicted a refusal = the rehearsal said error; caught = both (recall: of the refusals, precision: of the predictions); revisions = calls written again after a rehearsal (the control: resampled without one); generated tokens = every generated token per task, rehearsals and revisions included.',
  );
  if (meta.note) out.push('', `**What came out.** ${meta.note}`);
  return out.join('\n');
}

export const REVISE_TABLE_USAGE = 'usage: npm run revise-table -- [records dir]   (default research/records/2026-12-05-revise; prints the table)';
const FLAGS: FlagSpec = { help: HELP_FLAG };

export async function reviseTableCli(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  return runCli(io, REVISE_TABLE_USAGE, async () => {
    const { values: v, positionals } = parseFlags(argv, FLAGS, true);
    if (v.help) return void io.out(helpText(REVISE_TABLE_USAGE, FLAGS, 'exit status: 0 ok, 1 failure, 2 usage error.'));
    if (positionals.length > 1) throw new ArgError('give at most one records folder');
    io.out(renderRevise(resolve(positionals[0] ?? 'research/records/2026-12-05-revise')) + '\n');
  });
}

if (isEntry(import.meta.url)) process.exitCode = await reviseTableCli(process.argv.slice(2));
