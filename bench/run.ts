// npm run bench [-- [suite…] [options]]: runs the named suites (all but the by-name-only ones by default),
// measures this machine's limits beside them (bench/limits.ts), writes <out>/<suite>.json and prints a table
// with ratios to the onnxruntime-web baseline and each figure's fraction of its limit. `npm run bench -- --help`
// lists the options. Nothing is written into the checkout unless asked (--write-committed).
import { pathToFileURL } from 'node:url';
import { COMMITTED_DIR, DEFAULT_OUT_DIR, formatTable, writeResults, type BenchRecord, type BenchSuite } from './lib';
import { commitName, machineName, median } from './lib';
import { LIMITS, LimitProbe, LimitTracker, type LimitKind } from './limits';

const SUITES: Record<string, () => Promise<BenchSuite>> = {
  matmul: async () => (await import('./suites/matmul')).default,
  attention: async () => (await import('./suites/attention')).default,
  inference: async () => (await import('./suites/inference')).default,
  training: async () => (await import('./suites/training')).default,
  quant: async () => (await import('./suites/quant')).default,
  serve: async () => (await import('./suites/serve')).default,
  gpu: async () => (await import('./suites/gpu')).default,
  decoding: async () => (await import('./suites/decoding')).default,
  grpo: async () => (await import('./suites/grpo')).default,
  threads: async () => (await import('./suites/threads')).default,
  'cpu-browser': async () => (await import('./suites/cpu-browser')).default,
  peer: async () => (await import('./suites/peer')).default,
};
/** Suites that drive Chromium, or PyTorch in a Python environment they make: run by name only. */
const BY_NAME_ONLY = ['gpu', 'cpu-browser', 'peer'];
/** Suites that use WebGPU in Node (their records may be bounded by the adapter's copy bandwidth). */
const USES_WEBGPU = ['matmul', 'inference', 'training', 'gpu'];

export const USAGE = `usage: npm run bench -- [suite…] [options]

Runs benchmark suites, measuring this machine's limits (wasm-simd mul+add peak per thread, read and copy
bandwidth, and the WebGPU adapter's copy bandwidth for suites that use WebGPU) in the same process, interleaved
with the figures; every record that a limit bounds carries fraction_of_limit.

Suites: ${Object.keys(SUITES).join(', ')}
  (default: all but gpu and cpu-browser, which drive Chromium, and peer, which times PyTorch from a virtual
  environment it creates under runs/peer/ from this machine's package index: these run by name only)

Environment: BENCH_WEBGPU=0 leaves WebGPU out where a suite makes it optional (matmul), and its limit probe.

Options:
  --quick              smaller shapes and fewer repeats (a smoke run)
  --out DIR            write DIR/<suite>.json (default: ${DEFAULT_OUT_DIR}/, git-ignored)
  --write-committed    write the committed records, ${COMMITTED_DIR}/<suite>.json (then: npm run bench -- --table)
  --device-report      with the gpu suite: first print each WebGPU adapter's name, features and limits (for a
                       machine with a real GPU: npm run bench -- gpu --device-report)
  --table              regenerate docs/benchmarks.md's benchmark tables from ${COMMITTED_DIR}/*.json (runs no suite)
  --check-table        exit 1 if docs/benchmarks.md's tables differ from what ${COMMITTED_DIR}/*.json generate
  -h, --help           print this help and exit
`;

export type BenchArgs =
  | { kind: 'help' }
  | { kind: 'error'; message: string }
  | { kind: 'table'; check: boolean }
  | { kind: 'run'; suites: string[]; quick: boolean; outDir: string; deviceReport?: true };

/** The command line, checked: unknown options and suites are usage errors. */
export function parseArgs(argv: readonly string[]): BenchArgs {
  const names: string[] = [];
  let quick = false;
  let out: string | null = null;
  let committed = false;
  let deviceReport = false;
  let table: 'write' | 'check' | null = null;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '-h' || a === '--help') return { kind: 'help' };
    else if (a === '--quick') quick = true;
    else if (a === '--write-committed') committed = true;
    else if (a === '--device-report') deviceReport = true;
    else if (a === '--table') table = 'write';
    else if (a === '--check-table') table = 'check';
    else if (a === '--out' || a.startsWith('--out=')) {
      const v = a === '--out' ? argv[++i] : a.slice('--out='.length);
      if (!v || v.startsWith('-')) return { kind: 'error', message: '--out needs a folder' };
      out = v;
    } else if (a.startsWith('-')) return { kind: 'error', message: `unknown option '${a}'` };
    else if (!SUITES[a]) return { kind: 'error', message: `unknown suite '${a}' (suites: ${Object.keys(SUITES).join(', ')})` };
    else names.push(a);
  }
  if (table) {
    if (names.length || quick || out || committed || deviceReport) return { kind: 'error', message: `--${table === 'check' ? 'check-' : ''}table runs no suite and takes no other argument` };
    return { kind: 'table', check: table === 'check' };
  }
  if (out && committed) return { kind: 'error', message: '--out and --write-committed exclude each other' };
  const suites = names.length ? [...new Set(names)] : Object.keys(SUITES).filter((n) => !BY_NAME_ONLY.includes(n));
  if (deviceReport && !suites.includes('gpu')) return { kind: 'error', message: '--device-report goes with the gpu suite (npm run bench -- gpu --device-report)' };
  return { kind: 'run', suites, quick, outDir: committed ? COMMITTED_DIR : (out ?? DEFAULT_OUT_DIR), ...(deviceReport ? { deviceReport: true as const } : {}) };
}

/** The WebGPU adapter Node's Dawn finds (lavapipe here), for the records' machine field. */
async function nodeAdapterName(): Promise<string | undefined> {
  try {
    const { nodeAdapter } = await import('./gpu');
    const a = await nodeAdapter();
    if (!a) return undefined;
    const i = a.info;
    return [i.vendor, i.architecture, i.device, i.description].filter(Boolean).join(' ') || 'unknown adapter';
  } catch {
    return undefined;
  }
}

const PER_THREAD: LimitKind[] = ['fma', 'read', 'read-large', 'copy'];

/** The limits measured during a suite, as records (median of the probes; their range in `shape`). */
function limitRecords(tracker: LimitTracker): Omit<BenchRecord, 'suite' | 'machine' | 'date' | 'commit'>[] {
  return [...tracker.samples].map(([kind, vs]) => {
    const s = [...vs].sort((a, b) => a - b);
    return {
      case: `limit: ${LIMITS[kind].what}`,
      backend: kind === 'gpu-copy' ? ('webgpu' as const) : ('node' as const),
      metric: `limit_${kind.replace('-', '_')}`,
      value: s[s.length >> 1],
      unit: LIMITS[kind].unit,
      threads: 1,
      shape: `median of ${s.length} probes, ${s[0].toPrecision(3)}-${s[s.length - 1].toPrecision(3)}`,
    };
  });
}

async function runSuites(args: Extract<BenchArgs, { kind: 'run' }>): Promise<number> {
  let failed = false;
  const probe = await LimitProbe.create();
  try {
    for (const name of args.suites) {
      let suite: BenchSuite;
      try {
        suite = await SUITES[name]();
      } catch (e) {
        console.error(`[bench] suite ${name} is not available: ${(e as Error).message}`);
        failed = true;
        continue;
      }
      const records: BenchRecord[] = [];
      const date = new Date().toISOString();
      const webgpu = process.env.BENCH_WEBGPU !== '0';
      const machine = machineName(process.env.BENCH_GPU_NAME ?? (webgpu ? await nodeAdapterName() : undefined));
      const commit = commitName();
      const gpu = webgpu && USES_WEBGPU.includes(name);
      const tracker = new LimitTracker(probe, (m) => console.error(`[bench] ${name}: ${m}`));
      await tracker.start(gpu);
      const gpuBound = new Map<BenchRecord, number>(); // records bounded by the WebGPU copy bandwidth: set at the end
      const bestBound = new Map<BenchRecord, { kind: LimitKind; best: number; threads: number }>(); // set at the end too
      console.error(`[bench] ${name}${args.quick ? ' (quick)' : ''}`);
      await suite.run({
        quick: args.quick,
        deviceReport: args.deviceReport === true,
        log: (m) => console.error(`[bench] ${name}: ${m}`),
        probe: (kind) => tracker.probe(kind),
        record: ({ bound, ...r }) => {
          const rec: BenchRecord = { suite: name, ...r, machine, date, commit };
          if (bound?.kind === 'gpu-copy') gpuBound.set(rec, bound.use);
          else if (bound) {
            const threads = PER_THREAD.includes(bound.kind) ? r.threads : 1;
            const x = threads > 1 ? ` x${threads}` : '';
            if (bound.paired) {
              const { use, limit } = bound.paired;
              if (use.length !== limit.length || !use.length) throw new Error(`bench ${name}: ${r.case}: paired rates and limits differ in count`);
              rec.fraction_of_limit = median(use.map((u, i) => u / (limit[i] * threads)));
              rec.limit = `${bound.kind}${x} = ${(median(limit) * threads).toPrecision(3)} ${LIMITS[bound.kind].unit} (median of ${limit.length} probes, one a round, each sample against its round's)`;
            } else {
              const lim = tracker.beside(bound.kind) * threads;
              rec.fraction_of_limit = bound.use / lim;
              rec.limit = `${bound.kind}${x} = ${lim.toPrecision(3)} ${LIMITS[bound.kind].unit}`;
            }
            if (bound.best !== undefined) bestBound.set(rec, { kind: bound.kind, best: bound.best, threads });
          }
          records.push(rec);
        },
      });
      if (gpu) tracker.gpu();
      const gpuCopy = tracker.gpuCopy();
      if (gpuCopy)
        for (const [rec, use] of gpuBound) {
          rec.fraction_of_limit = use / gpuCopy;
          rec.limit = `gpu-copy = ${gpuCopy.toPrecision(3)} GB/s`;
        }
      for (const [rec, { kind, best, threads }] of bestBound) {
        const probes = tracker.samples.get(kind) ?? [];
        const lim = Math.max(...probes) * threads;
        rec.fraction_of_best_limit = best / lim;
        rec.best_limit = `${kind}${threads > 1 ? ` x${threads}` : ''} = ${lim.toPrecision(3)} ${LIMITS[kind].unit} (best of ${probes.length} probes)`;
      }
      for (const l of limitRecords(tracker)) records.push({ suite: name, ...l, machine, date, commit });
      const path = writeResults(name, records, args.outDir);
      console.log(`\n## ${name}  (${path})\n${formatTable(records)}`);
    }
  } finally {
    probe.dispose();
  }
  return failed ? 1 : 0;
}

async function main(): Promise<number> {
  const args = parseArgs(process.argv.slice(2));
  switch (args.kind) {
    case 'help':
      process.stdout.write(USAGE);
      return 0;
    case 'error':
      process.stderr.write(`bench: ${args.message}\n\n${USAGE}`);
      return 2;
    case 'table': {
      // docs/benchmarks.md's tables from the committed records (bench/table.ts); no suite runs.
      const { main: table } = await import('./table');
      return table(args.check ? ['--check'] : []);
    }
    case 'run':
      return runSuites(args);
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().then(
    (code) => {
      process.exitCode = code;
    },
    (e) => {
      console.error(e);
      process.exit(1);
    },
  );
}
