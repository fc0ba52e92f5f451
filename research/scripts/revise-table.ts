// npm run revise-table -- [records dir] [--check FILE]: the rehearse-then-revise table (issue 46 item 4) from its
// committed eval records (research/records/2026-12-05-revise: plain.json, calls.json, writes.json, control.json,
// each one greedy `npm run eval` on the same held-out tasks): success with a bootstrap interval over tasks, the
// paired difference to the plain evaluation, the error predictions on the policy's own calls, and the compute.
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { bootstrapMean, fmtDiff, fmtInterval, pairedBootstrap, type Obs } from '../ablation/stats';
import { isEntry } from '../../src/cli/args';

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

if (isEntry(import.meta.url)) {
  const args = process.argv.slice(2);
  const dir = resolve(args.find((a) => !a.startsWith('--')) ?? 'research/records/2026-12-05-revise');
  process.stdout.write(renderRevise(dir) + '\n');
}
