// The run settings' flags, help and resume check, derived from the table (src/method/run-config.ts): a row with
// a `cli` column is a flag of the train CLI, parsed by its kind and range, named in --help with its default, and
// compared with the saved run on --resume. The train CLI adds only its own flags (folder, model, backend, tasks).
import { checkValue, defaultOf, readRecorded, RUN_SETTINGS, SettingValueError, type RunSetting, type RunSettingsTable } from '../method/run-config';
import { ArgError, enumFlag, intFlag, numFlag, settingFlag, type FlagSpec, type FlagValues } from './args';

type CliRow = RunSetting & { cli: NonNullable<RunSetting['cli']> };
const cliRows = (table: RunSettingsTable) => table.filter((r): r is CliRow => r.cli !== undefined);

/** The flags of the table's settings, in table order, as parseFlags and helpText take them. */
export function runFlags(table: RunSettingsTable = RUN_SETTINGS): FlagSpec {
  const spec: FlagSpec = {};
  for (const r of cliRows(table)) spec[r.cli.flag] = settingFlag(r);
  return spec;
}

function parseOne(v: FlagValues, r: CliRow): unknown {
  const { flag } = r.cli;
  const k = r.kind;
  if (v[flag] === undefined) return undefined;
  if (k.type === 'bool') return v[flag] === true;
  if (k.type === 'enum') return enumFlag(v, flag, k.values, undefined);
  if (k.type === 'list') throw new ArgError(`--${flag}: list settings take no flag`);
  if (r.cli.fromFlag) return intFlag(v, flag, 0, 0);
  if (k.type === 'int') return intFlag(v, flag, 0, k.min, k.max);
  const n = numFlag(v, flag, 0, k.min, !k.above);
  if (k.max !== undefined && n > k.max) throw new ArgError(`--${flag} must be in ${k.above ? '(' : '['}${k.min}, ${k.max}], got ${n}`);
  return n;
}

/**
 * The settings given on the command line, by their names (flags not given are absent: the run's defaults
 * apply). A flag that stands for another quantity (--real-episodes) is converted once the others are read.
 */
export function readRunFlags(v: FlagValues, table: RunSettingsTable = RUN_SETTINGS): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const r of cliRows(table)) {
    const x = parseOne(v, r);
    if (x !== undefined) out[r.name] = x;
  }
  for (const r of cliRows(table)) {
    if (!r.cli.fromFlag || out[r.name] === undefined) continue;
    const s: Record<string, unknown> = {};
    for (const o of table) s[o.name] = out[o.name] ?? (o.fallback ? undefined : defaultOf(o, s));
    try {
      out[r.name] = r.cli.fromFlag(out[r.name] as number, s);
    } catch (e) {
      if (e instanceof SettingValueError) throw new ArgError(`--${r.cli.flag} ${e.message}`);
      throw e;
    }
    const bad = checkValue(r, out[r.name]);
    if (bad) throw new ArgError(`--${r.cli.flag} ${String(v[r.cli.flag])}: the ${r.name} it makes (${String(out[r.name])}) ${bad}`);
  }
  return out;
}

/**
 * The flags given on --resume that differ from the saved run (fixed settings only): each names the flag, the
 * value asked and the saved one at its run.json path. Both sides are read through the table, so a value a run
 * recorded only when it differed from its default compares as that default.
 */
export function resumeDiffs(v: FlagValues, asked: Record<string, unknown>, saved: Record<string, unknown>, table: RunSettingsTable = RUN_SETTINGS): string[] {
  return cliRows(table)
    .filter((r) => r.resume === 'fixed' && r.record && v[r.cli.flag] !== undefined)
    .map((r) => [r, readRecorded(asked, r, table), readRecorded(saved, r, table)] as const)
    .filter(([, a, h]) => JSON.stringify(a) !== JSON.stringify(h))
    .map(([r, a, h]) => `--${r.cli.flag} ${JSON.stringify(a)} (the run has ${r.record!.at ?? r.name} = ${JSON.stringify(h)})`);
}
