// Benchmark records and the table printed after a run. Speed is measured here, never in tests.
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import type { LimitKind } from './limits';

export type BenchBackend = 'cpu-ref' | 'cpu-fast' | 'webgpu' | 'ort-wasm' | 'ort-webgpu' | 'transformersjs' | 'node' | 'pytorch';

export interface BenchRecord {
  suite: string;
  case: string;
  backend: BenchBackend;
  metric: string;
  value: number;
  unit: string;
  threads: number;
  shape?: string;
  model?: string;
  /** The WebGPU adapter a webgpu / ort-webgpu figure was measured on. */
  adapter?: string;
  machine: string;
  date: string;
  /** The commit the code ran at; '+dirty' when src/ or bench/ had uncommitted changes. */
  commit?: string;
  /**
   * The figure as a fraction of the machine limit that bounds it, measured in the same run beside it
   * (bench/limits.ts): e.g. GFLOP/s over the wasm-simd mul+add peak x threads, or weight bytes/s over the
   * read bandwidth x threads. Absent where no hardware limit applies (wall times of whole programs, errors).
   */
  fraction_of_limit?: number;
  /** Which limit, and its value: "fma x2 = 61.2 GFLOP/s". */
  limit?: string;
  /**
   * Quiet moments against quiet moments: the figure's best sample (its fastest call batch) over the best probe of
   * the same limit in the whole suite run (x threads). On a machine shared with other jobs a median figure and
   * the probes beside it can see different load (a probe lasts ~10 ms); the best of each is what the code and the
   * machine can do when left alone. Present where the suite reports a best sample.
   */
  fraction_of_best_limit?: number;
  /** That limit: "fma x2 = 130 GFLOP/s (best of 73 probes)". */
  best_limit?: string;
}

/** The limit a record is measured against: its kind and the record's rate in that limit's unit (all threads together). */
export interface Bound {
  kind: LimitKind;
  use: number;
  /** The same rate at the figure's best sample (for fraction_of_best_limit). */
  best?: number;
  /**
   * Round by round, the figure's rate and this limit probed in the same round (`BenchContext.probe`, one thread):
   * fraction_of_limit is then the median of the per-round ratios, each sample against the machine as it was in
   * that round, instead of the figure's median against probes taken before and after it.
   */
  paired?: { use: readonly number[]; limit: readonly number[] };
}

export interface BenchContext {
  /** Record one measurement; machine, date and commit are filled in. */
  record(r: Omit<BenchRecord, 'machine' | 'date' | 'suite' | 'commit' | 'fraction_of_limit' | 'limit' | 'fraction_of_best_limit' | 'best_limit'> & { bound?: Bound }): void;
  /** A CPU limit probed now, for one thread (kept with the run's probes), to pair with the samples of a round. */
  probe(kind: Exclude<LimitKind, 'gpu-copy'>): number;
  /** Quick mode (smaller shapes, fewer repeats) for smoke runs. */
  quick: boolean;
  /** --device-report: the gpu suite prints each adapter's name, features and limits first. */
  deviceReport?: boolean;
  log(msg: string): void;
}

export interface BenchSuite {
  name: string;
  run(ctx: BenchContext): Promise<void>;
}

export function machineName(gpuAdapter?: string): string {
  const cpu = os.cpus()[0]?.model ?? 'unknown cpu';
  return `${os.cpus().length}x ${cpu.trim()}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, ${os.platform()} ${os.release()}, Node ${process.versions.node}${gpuAdapter ? `; gpu: ${gpuAdapter}` : ''}`;
}

/** The commit the benchmark code runs at, with '+dirty' when src/ or bench/ differ from it. */
export function commitName(): string {
  try {
    const head = execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], { encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no', '--', 'src', 'bench', 'workers', ':!bench/results'], { encoding: 'utf8' }).trim();
    return dirty ? `${head}+dirty` : head;
  } catch {
    return 'unknown';
  }
}

/** The median of xs (the upper one of the middle two for an even count). */
export const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1];

/** Median wall-clock seconds of fn over `reps` runs after `warmup` runs. */
export async function timeIt(fn: () => Promise<void> | void, reps = 5, warmup = 1): Promise<number> {
  for (let i = 0; i < warmup; i++) await fn();
  const times: number[] = [];
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now();
    await fn();
    times.push((performance.now() - t0) / 1000);
  }
  return median(times);
}

/** The committed records' folder (written only with --write-committed). */
export const COMMITTED_DIR = 'bench/results';
/** Where a plain `npm run bench` writes (git-ignored). */
export const DEFAULT_OUT_DIR = 'runs/bench';

export function writeResults(suite: string, records: BenchRecord[], dir = DEFAULT_OUT_DIR): string {
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `${suite}.json`);
  writeFileSync(path, JSON.stringify(records, null, 2) + '\n');
  return path;
}

/** One row per (case, shape, metric, threads); one column per backend; ratios to the ort-* baseline. */
export function formatTable(records: BenchRecord[]): string {
  const baseline = (b: string) => b.startsWith('ort-');
  const groups = new Map<string, BenchRecord[]>();
  for (const r of records) {
    const key = `${r.case} | ${r.shape ?? r.model ?? ''} | ${r.metric} | t=${r.threads}`;
    groups.set(key, [...(groups.get(key) ?? []), r]);
  }
  const lines = [`${'case | shape | metric | threads'.padEnd(58)} ${'backend'.padEnd(12)} ${'value'.padStart(12)}  unit        vs ort   of limit`];
  for (const [key, rs] of groups) {
    const base = rs.find((r) => baseline(r.backend));
    for (const r of rs) {
      const ratio = base && !baseline(r.backend) ? `${(r.value / base.value).toFixed(2)}x` : '';
      const lim = (r.fraction_of_limit === undefined ? '' : `${(100 * r.fraction_of_limit).toFixed(1)}% of ${r.limit}`) + (r.fraction_of_best_limit === undefined ? '' : `; best ${(100 * r.fraction_of_best_limit).toFixed(1)}% of ${r.best_limit}`);
      lines.push(`${key.padEnd(58)} ${r.backend.padEnd(12)} ${r.value.toPrecision(4).padStart(12)}  ${r.unit.padEnd(10)}  ${ratio.padEnd(7)}  ${lim}`);
    }
  }
  return lines.join('\n');
}
