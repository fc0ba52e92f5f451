// Command-line plumbing shared by every CLI (`npm run env`, `pretrain`, `train`, `eval`): flag parsing with
// typed, strict checks that name the flag and the accepted values, --help generated from the same flag
// table (meaning and default of each flag), a progress logger on stderr, the exit-status convention
// (0 ok, 1 failure, 2 usage error, 74 I/O error naming the file, 130 interrupted), and opening the backend
// and the model folder. Node only.
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { Backend } from '../engine/backend';
import { createBackend } from '../engine/index';
import { loadModel, type LoadedPolicy } from '../model/load';
import type { WeightFormat } from '../model/qwen3';
import { DirSource } from '../model/source-node';
import { EXIT_IO, IoError, isSystemError } from '../util/atomic-file';
import { TaskSetError } from '../server/tasks';
import { WORLDS, type WorldName } from '../env/retail/index';

/** A usage error: a bad, missing or unknown flag. */
export class ArgError extends Error {
  override readonly name = 'ArgError';
}

export interface Flag {
  type: 'string' | 'boolean';
  short?: string;
  /** The value's placeholder in --help (N, DIR, ...). */
  arg?: string;
  /** What the flag does, for --help (every flag of the lab's CLIs has one; test/cli/help.test.ts checks). */
  help?: string;
  /** The default as --help shows it (omitted: none / off). */
  default?: string;
}
export type FlagSpec = Record<string, Flag>;
export type FlagValues = Record<string, string | boolean | undefined>;

export const HELP_FLAG: Flag = { type: 'boolean', short: 'h', help: 'print this help and exit' };

// Flags several CLIs take with one meaning: defined once, so their help reads the same everywhere.
export const WORLD_FLAG: Flag = { type: 'string', arg: 'W', help: 'task world: mini (16 users, 35 orders) or retail (full τ²-bench retail)', default: 'mini' };
export const BACKEND_FLAG: Flag = { type: 'string', arg: 'B', help: 'cpu-fast, cpu-ref or webgpu', default: 'cpu-fast' };
export const THREADS_FLAG: Flag = { type: 'string', arg: 'T', help: 'worker threads of cpu-fast, 1..64', default: 'all cores' };
export const GROUNDING_CHARS_FLAG: Flag = { type: 'string', arg: 'N', help: 'characters of grounding examples in a Rehearse prompt', default: "the rehearse prompt's own" };
export const HISTORY_CHARS_FLAG: Flag = { type: 'string', arg: 'N', help: 'characters of history in a Rehearse prompt', default: "the rehearse prompt's own" };

/** Parses `argv` against `spec` (no unknown flags; positionals only when asked for). */
export function parseFlags(argv: readonly string[], spec: FlagSpec): FlagValues;
export function parseFlags(argv: readonly string[], spec: FlagSpec, positionals: true): { values: FlagValues; positionals: string[] };
export function parseFlags(argv: readonly string[], spec: FlagSpec, positionals = false): FlagValues | { values: FlagValues; positionals: string[] } {
  const options = Object.fromEntries(Object.entries(spec).map(([k, f]) => [k, f.short ? { type: f.type, short: f.short } : { type: f.type }]));
  try {
    const r = parseArgs({ args: [...argv], options, strict: true, allowPositionals: positionals });
    return positionals ? { values: r.values as FlagValues, positionals: r.positionals } : (r.values as FlagValues);
  } catch (e) {
    // node:util's messages are clear ("Unknown option '--x'"); keep them, drop its extra advice.
    throw new ArgError((e as Error).message.split('. To specify')[0]);
  }
}

function defaultNote(f: Flag): string {
  if (f.default !== undefined) return ` (default: ${f.default})`;
  if (f.help?.includes('(required)') || f === HELP_FLAG) return '';
  return f.type === 'boolean' ? ' (default: off)' : ' (default: none)';
}

/** The --help text: the usage line(s), then every flag with its meaning and default. */
export function helpText(usage: string, spec: FlagSpec, notes = ''): string {
  const rows = Object.entries(spec).map(([k, f]) => [`${f.short ? `-${f.short}, ` : '    '}--${k}${f.type === 'string' ? ` ${f.arg ?? 'X'}` : ''}`, `${f.help ?? ''}${defaultNote(f)}`]);
  const w = Math.max(...rows.map((r) => r[0].length)) + 2;
  return `${usage}\n\nflags:\n${rows.map(([a, b]) => `  ${a.padEnd(w)}${b}`).join('\n')}\n${notes ? `\n${notes}\n` : ''}`;
}

function str(v: FlagValues, name: string): string | undefined {
  const x = v[name];
  if (x === undefined) return undefined;
  if (typeof x !== 'string') throw new ArgError(`--${name} needs a value`);
  return x;
}

export function intFlag(v: FlagValues, name: string, dflt: number, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  const s = str(v, name);
  if (s === undefined) return dflt;
  // Decimal digits only: Number() would also take "0x2", "1e3" and " 2".
  const n = /^[+-]?\d+$/.test(s) ? Number(s) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max)
    throw new ArgError(`--${name} must be an integer${max < Number.MAX_SAFE_INTEGER ? ` in [${min}, ${max}]` : ` >= ${min}`}, got ${JSON.stringify(s)}`);
  return n;
}

/** --threads (THREADS_FLAG): worker threads of cpu-fast, 1..64; undefined when not given (all cores). */
export function threadsFlag(v: FlagValues): number | undefined {
  return v.threads === undefined ? undefined : intFlag(v, 'threads', 1, 1, 64);
}

/** A finite number above `min` (or equal to it when `inclusive`). */
export function numFlag(v: FlagValues, name: string, dflt: number, min = 0, inclusive = false): number {
  const s = str(v, name);
  if (s === undefined) return dflt;
  const n = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(s) ? Number(s) : NaN;
  if (!Number.isFinite(n) || !(inclusive ? n >= min : n > min))
    throw new ArgError(`--${name} must be a number ${inclusive ? '>=' : '>'} ${min}, got ${JSON.stringify(s)}`);
  return n;
}

export function enumFlag<T extends string>(v: FlagValues, name: string, choices: readonly T[], dflt: T): T;
export function enumFlag<T extends string>(v: FlagValues, name: string, choices: readonly T[], dflt: undefined): T | undefined;
export function enumFlag<T extends string>(v: FlagValues, name: string, choices: readonly T[], dflt: T | undefined): T | undefined {
  const s = str(v, name);
  if (s === undefined) return dflt;
  if (!(choices as readonly string[]).includes(s)) throw new ArgError(`--${name} must be one of ${choices.join(', ')}, got ${JSON.stringify(s)}`);
  return s as T;
}

export function strFlag(v: FlagValues, name: string, dflt?: string): string | undefined {
  const s = str(v, name);
  if (s !== undefined && s.trim() === '') throw new ArgError(`--${name} must not be empty`);
  return s ?? dflt;
}

export interface CliIo {
  out: (s: string) => void;
  err: (s: string) => void;
}

export const processIo: CliIo = {
  out: (s) => process.stdout.write(s),
  err: (s) => process.stderr.write(s),
};

/** A timestamped progress line on stderr. */
export function progress(io: CliIo, tag: string): (s: string) => void {
  return (s) => io.err(`[${tag} ${new Date().toISOString().slice(11, 19)}] ${s}\n`);
}

/** Runs a CLI body and turns its outcome into an exit status; errors are printed, never thrown. */
export async function runCli(io: CliIo, usage: string, body: () => Promise<void>): Promise<number> {
  try {
    await body();
    return 0;
  } catch (e) {
    if (e instanceof ArgError || e instanceof TaskSetError) {
      io.err(`error: ${e.message}\n\n${usage}\n(--help lists every flag)\n`);
      return 2;
    }
    if (e instanceof IoError || isSystemError(e)) {
      io.err(`error: ${(e as Error).message}\n`);
      return EXIT_IO;
    }
    const err = e as Error;
    io.err(`error: ${err?.name && err.name !== 'Error' ? `${err.name}: ` : ''}${err?.message ?? String(e)}\n`);
    return 1;
  }
}

/** True when this module file is the process entry point (so tests can import CLIs without running them). */
export function isEntry(metaUrl: string): boolean {
  const arg = process.argv[1];
  if (!arg) return false;
  const norm = (p: string) => p.replace(/\.[cm]?[jt]s$/, '');
  return norm(new URL(metaUrl).pathname) === norm(new URL(`file://${arg.startsWith('/') ? '' : process.cwd() + '/'}${arg}`).pathname);
}

// ---- Model and backend, as both CLIs open them.

export const BACKEND_NAMES = ['cpu-fast', 'cpu-ref', 'webgpu'] as const;
export type CliBackend = (typeof BACKEND_NAMES)[number];

const MODELS = resolve(dirname(fileURLToPath(import.meta.url)), '../../models');
/** The bundled default policy's folder (models/default at the repository root), whatever the cwd. */
export const DEFAULT_MODEL_DIR = join(MODELS, 'default');
/** A world's bundled policy, trained on that world (its model card says how). */
export const bundledModelDir = (world: WorldName): string => join(MODELS, WORLDS[world].bundledModel);

export async function openBackend(name: CliBackend, threads?: number): Promise<Backend> {
  if (name !== 'webgpu') return createBackend(name, { threads });
  const { create, globals } = await import('webgpu');
  Object.assign(globalThis, globals);
  return createBackend('webgpu', { gpu: create([]) });
}

/**
 * Loads a model folder, by default the bundled policy of the world (models/default without one); a missing
 * folder gets an error that says what to do.
 */
export async function openModel(dir: string | undefined, backend: Backend, o: { world?: WorldName; format?: WeightFormat } = {}): Promise<LoadedPolicy & { dir: string }> {
  const format = o.format ?? 'f32';
  const d = resolve(dir ?? (o.world ? bundledModelDir(o.world) : DEFAULT_MODEL_DIR));
  if (!existsSync(join(d, 'config.json'))) {
    if (dir === undefined) throw new ArgError(`no model at ${d}: the bundled policy is not built yet (npm run pretrain), or pass --model DIR`);
    throw new ArgError(`--model ${dir}: no config.json in ${d}`);
  }
  return { ...(await loadModel(new DirSource(d), backend, { format })), dir: d };
}
