// node --import tsx research/scripts/card-sweeps.ts <model folder> [--write-committed]
// Assembles <model folder>/sweeps.json (the model card's "recipe search" table) from the per-run records
// kept in <model folder>/sweeps/<label>/: pretrain.json (the run's command, spec, timings, losses),
// heldout.json (`npm run eval`'s JSON for what the run produced; absent for a run stopped early) and note.json ({"change", "kept", "order"}).
// Every figure in the table comes from those records.
// A folder the repository commits (models/default, models/retail) is rewritten only with --write-committed.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { HeldOutRecord, SweepRecord } from '../pretrain/card-world';
import { ArgError, checkOutput, HELP_FLAG, helpText, isEntry, parseFlags, processIo, runCli, WRITE_COMMITTED_FLAG, type CliIo, type FlagSpec } from '../../src/cli/args';

export const CARD_SWEEPS_USAGE = 'usage: node --import tsx research/scripts/card-sweeps.ts <model folder> [--write-committed]';
export const CARD_SWEEPS_FLAGS: FlagSpec = {
  'write-committed': WRITE_COMMITTED_FLAG,
  help: HELP_FLAG,
};

export async function cardSweepsCli(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  return runCli(io, CARD_SWEEPS_USAGE, async () => {
    const { values: v, positionals } = parseFlags(argv, CARD_SWEEPS_FLAGS, true);
    if (v.help) return void io.out(helpText(CARD_SWEEPS_USAGE, CARD_SWEEPS_FLAGS, 'exit status: 0 ok, 1 failure, 2 usage error.'));
    if (positionals.length !== 1) throw new ArgError('give one model folder (it holds sweeps/<label>/)');
    const dir = positionals[0];
    const root = join(dir, 'sweeps');
    if (!existsSync(root)) throw new ArgError(`${dir}: no sweeps/ folder of per-run records`);
    // The bundled models' sweeps.json is committed: their cards are regenerated only on purpose.
    const target = checkOutput(join(dir, 'sweeps.json'), 'the model folder', v);
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
    writeFileSync(target, JSON.stringify(rows.map(({ order, ...r }) => (void order, r)), null, 1) + '\n');
    io.out(`wrote ${target}: ${rows.length} runs\n`);
  });
}

if (isEntry(import.meta.url)) process.exitCode = await cardSweepsCli(process.argv.slice(2));
