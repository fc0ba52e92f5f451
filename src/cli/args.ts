// Command-line plumbing shared by every CLI (`npm run env`, `pretrain`, `train`, `eval`): flag parsing with
// typed, strict checks that name the flag and the accepted values, --help generated from the same flag
// table (meaning and default of each flag), a progress logger on stderr, the exit-status convention
// (0 ok, 1 failure, 2 usage error, 74 I/O error naming the file, 130 interrupted), and opening the backend
// and the model folder. Node only.
import { execFileSync } from 'node:child_process';
import { existsSync, realpathSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
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
import { formatLeft } from '../util/eta';
import { cliDefault, setting, type RunSetting } from '../method/run-config';

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
export const WRITE_COMMITTED_FLAG: Flag = {
  type: 'boolean',
  help: 'allow writing over files the repository commits (bundled models, model cards, docs/ figures and records); without it such an output is refused',
};

// Flags several CLIs take with one meaning: defined once, so their help reads the same everywhere.
export const WORLD_FLAG: Flag = { type: 'string', arg: 'W', help: 'task world: mini (16 users, 35 orders) or retail (full τ²-bench retail)', default: 'mini' };
export const BACKEND_FLAG: Flag = { type: 'string', arg: 'B', help: 'cpu-fast, cpu-ref or webgpu', default: 'cpu-fast' };
export const THREADS_FLAG: Flag = { type: 'string', arg: 'T', help: 'worker threads of cpu-fast, 1..64', default: 'all cores' };
// The Rehearse prompt's sizes are run settings: their flags are the table's (the train CLI has the same).
export const GROUNDING_CHARS_FLAG: Flag = settingFlag(setting('maxGroundingChars'));
export const HISTORY_CHARS_FLAG: Flag = settingFlag(setting('maxHistoryChars'));

function rangeText(r: RunSetting): string {
  const k = r.kind;
  if (r.cli?.fromFlag || k.type === 'bool' || k.type === 'enum' || k.type === 'list') return '';
  if (k.type === 'int') return k.max < Number.MAX_SAFE_INTEGER ? `, ${k.min}..${k.max}` : `, >= ${k.min}`;
  if (k.max !== undefined) return `, in ${k.above ? '(' : '['}${k.min}, ${k.max}]`;
  return `, ${k.above ? '>' : '>='} ${k.min}`;
}

function defaultText(r: RunSetting & { cli: NonNullable<RunSetting['cli']> }): string | undefined {
  if (r.cli.default !== undefined) return r.cli.default;
  const d = cliDefault(r) ?? r.default;
  if (d === undefined) return undefined;
  return Array.isArray(d) ? d.join(',') : String(d);
}

/** A run setting's flag (src/method/run-config.ts): its help with its choices, range and default. */
export function settingFlag(r: RunSetting): Flag {
  if (!r.cli) throw new Error(`run setting ${r.name} has no flag`);
  const cli = r.cli;
  const choices = r.kind.type === 'enum' && !r.help.includes(r.kind.values[0]) ? ` (${r.kind.values.join(', ')})` : '';
  const flag: Flag = r.kind.type === 'bool'
    ? { type: 'boolean', help: r.help }
    : { type: 'string', arg: cli.arg ?? 'X', help: `${r.help}${choices}${rangeText(r)}${cli.required ? ' (required)' : ''}` };
  const d = defaultText({ ...r, cli });
  if (d !== undefined && !cli.required) flag.default = d;
  return flag;
}

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
  /** stderr is a terminal: progress redraws one bar in place instead of printing lines. */
  tty?: boolean;
}

export const processIo: CliIo = {
  out: (s) => process.stdout.write(s),
  err: (s) => process.stderr.write(s),
  tty: !!process.stderr.isTTY,
};

/** The repository checkout this file belongs to. */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
/** Where outputs go when no output is named: git ignores it (.gitignore), so a command leaves the checkout clean. */
export const RUNS_DIR = join(REPO_ROOT, 'runs');
/** `runs/<rel>` at the repository root, whatever the cwd: the default place of a command's output. */
export const runsPath = (rel: string): string => join(RUNS_DIR, rel);

/**
 * The files the repository commits at `path` (the file itself, or every tracked file under a folder), relative to
 * the root; empty outside the checkout. Without git (an exported tarball) every existing path inside the checkout
 * but outside runs/ counts as committed: refusing too much is the safe side there.
 */
export function committedFiles(path: string): string[] {
  // Through symlinks (public/models -> ../models): git knows the files by their real place.
  const abs = realPathOf(resolve(path));
  const root = realPathOf(REPO_ROOT);
  const rel = relative(root, abs);
  if (rel.startsWith('..') || isAbsolute(rel)) return [];
  try {
    const out = execFileSync('git', ['ls-files', '-z', '--', rel || '.'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    return out.split('\0').filter(Boolean);
  } catch {
    const inRuns = rel === 'runs' || rel.startsWith(`runs${sep}`);
    return !inRuns && existsSync(abs) ? [rel || '.'] : [];
  }
}

/** The real path of `p`, resolved as far as it exists (the part that does not exist yet is kept as given). */
function realPathOf(p: string): string {
  let head = p;
  const tail: string[] = [];
  while (!existsSync(head)) {
    const up = dirname(head);
    if (up === head) return p;
    tail.unshift(basename(head));
    head = up;
  }
  return join(realpathSync(head), ...tail);
}

/**
 * Resolves an output path (`what` names it in errors: "--out") and refuses one that would overwrite committed
 * files unless --write-committed was given: a student's run must never replace the bundled policy or its card.
 */
export function checkOutput(path: string, what: string, v: FlagValues): string {
  const abs = resolve(path);
  if (v['write-committed']) return abs;
  const tracked = committedFiles(abs);
  if (tracked.length === 0) return abs;
  const shown = tracked.slice(0, 3).join(', ') + (tracked.length > 3 ? `, … (${tracked.length} files)` : '');
  throw new ArgError(`${what} ${path} would overwrite files the repository commits (${shown}): pass --write-committed to regenerate them, or name an output elsewhere (runs/ is git-ignored)`);
}

/** A timestamped progress line on stderr. */
export function progress(io: CliIo, tag: string): (s: string) => void {
  return (s) => io.err(`[${tag} ${new Date().toISOString().slice(11, 19)}] ${s}\n`);
}

export interface Meter {
  /** `what` is being done, `done` of `total` so far, about `etaMs` left (undefined: not yet measurable). */
  update(what: string, done: number, total: number, etaMs?: number): void;
  /** Ends the bar (a TTY gets its newline); the next update starts a new one. */
  end(): void;
}

/**
 * Progress of a long phase on stderr: on a terminal one bar redrawn in place (at most every 100 ms); otherwise a
 * plain line when the phase starts, when it ends and at most every `everyMs` between (a log file must stay readable).
 */
export function meter(io: CliIo, tag: string, o: { everyMs?: number; now?: () => number } = {}): Meter {
  const now = o.now ?? (() => performance.now());
  const everyMs = o.everyMs ?? (io.tty ? 100 : 5000);
  let lastAt = -Infinity;
  let lastWhat = '';
  let open = false;
  const text = (what: string, done: number, total: number, etaMs?: number) => {
    const left = done >= total ? 'done' : etaMs === undefined ? 'estimating the time left' : formatLeft(etaMs);
    if (!io.tty) return `[${tag} ${new Date().toISOString().slice(11, 19)}] ${what}: ${done} of ${total} (${left})`;
    const w = 24;
    const filled = total > 0 ? Math.round((w * Math.min(done, total)) / total) : 0;
    return `[${tag}] ${what} [${'#'.repeat(filled)}${'.'.repeat(w - filled)}] ${done}/${total} · ${left}`;
  };
  // The phase whose last line (done = total) is out: a repeat of it adds nothing.
  let ended = '';
  return {
    update(what, done, total, etaMs) {
      const t = now();
      const last = done >= total;
      if (what === ended) return;
      if (what === lastWhat && !last && t - lastAt < everyMs) return;
      if (open && what !== lastWhat && io.tty) io.err('\n');
      ended = '';
      lastAt = t;
      lastWhat = what;
      open = true;
      io.err(io.tty ? `\r${text(what, done, total, etaMs).padEnd(100)}` : `${text(what, done, total, etaMs)}\n`);
      if (last) {
        this.end();
        ended = what;
      }
    },
    end() {
      if (open && io.tty) io.err('\n');
      open = false;
      lastWhat = '';
      lastAt = -Infinity;
      ended = '';
    },
  };
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
