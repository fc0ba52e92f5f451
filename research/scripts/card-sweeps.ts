// node --import tsx research/scripts/card-sweeps.ts <model folder>
// Assembles <model folder>/sweeps.json (the model card's "recipe search" table) from the per-run records
// kept in <model folder>/sweeps/<label>/: pretrain.json (the run's command, spec, timings, losses),
// heldout.json (`npm run eval`'s JSON for what the run produced; absent for a run stopped early) and note.json ({"change", "kept", "order"}).
// Every figure in the table comes from those records.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { HeldOutRecord, SweepRecord } from '../pretrain/card-world';

const dir = process.argv[2];
if (!dir) throw new Error('usage: research/scripts/card-sweeps.ts <model folder>');
const root = join(dir, 'sweeps');
const read = <T>(p: string): T => JSON.parse(readFileSync(p, 'utf8')) as T;
const rows: (SweepRecord & { order: number })[] = [];
for (const label of readdirSync(root).sort()) {
  const d = join(root, label);
  if (!existsSync(join(d, 'pretrain.json'))) continue;
  const run = read<{ command: string; trainSeconds: number; finalLoss: number }>(join(d, 'pretrain.json'));
  const h = existsSync(join(d, 'heldout.json')) ? read<HeldOutRecord>(join(d, 'heldout.json')) : null;
  const note = read<{ change: string; kept: boolean; order: number }>(join(d, 'note.json'));
  rows.push({
    label,
    command: run.command,
    change: note.change,
    minutes: run.trainSeconds / 60,
    finalLoss: run.finalLoss,
    heldOut: h && { tasks: h.tasks, success: h.success, callsWithoutError: h.callsWithoutError, toolPrecision: h.toolPrecision, fidelity: h.fidelity, ...(h.fidelityGrounded ? { fidelityGrounded: h.fidelityGrounded } : {}), byTier: h.byTier },
    kept: note.kept,
    order: note.order,
  });
}
rows.sort((a, b) => a.order - b.order);
writeFileSync(join(dir, 'sweeps.json'), JSON.stringify(rows.map(({ order, ...r }) => (void order, r)), null, 1) + '\n');
process.stdout.write(`wrote ${join(dir, 'sweeps.json')}: ${rows.length} runs\n`);
