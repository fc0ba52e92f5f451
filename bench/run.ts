// npm run bench [suite…] [--quick]: runs the named suites (all but gpu by default), writes
// bench/results/<suite>.json and prints a table with ratios to the onnxruntime-web baseline.
// npm run bench -- --table: regenerates docs/benchmarks.md's benchmark tables from bench/results/*.json
// (--check-table: only checks they match).
import { formatTable, writeResults, type BenchRecord, type BenchSuite } from './lib';
import { commitName, machineName } from './lib';

const SUITES: Record<string, () => Promise<BenchSuite>> = {
  matmul: async () => (await import('./suites/matmul')).default,
  inference: async () => (await import('./suites/inference')).default,
  training: async () => (await import('./suites/training')).default,
  quant: async () => (await import('./suites/quant')).default,
  serve: async () => (await import('./suites/serve')).default,
  gpu: async () => (await import('./suites/gpu')).default,
  decoding: async () => (await import('./suites/decoding')).default,
  grpo: async () => (await import('./suites/grpo')).default,
  'cpu-browser': async () => (await import('./suites/cpu-browser')).default,
};

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

async function main() {
  const args = process.argv.slice(2);
  if (args.includes('--table') || args.includes('--check-table')) {
    // docs/benchmarks.md's tables from the committed records (bench/table.ts); no suite runs.
    const { main: table } = await import('./table');
    process.exitCode = table(args.includes('--check-table') ? ['--check'] : []);
    return;
  }
  const quick = args.includes('--quick');
  const names = args.filter((a) => !a.startsWith('--'));
  // gpu and cpu-browser are run by name only (they drive Chromium too): npm run bench -- gpu
  const chosen = names.length ? names : Object.keys(SUITES).filter((n) => n !== 'gpu' && n !== 'cpu-browser');
  for (const n of chosen) if (!SUITES[n]) throw new Error(`unknown suite '${n}' (have: ${Object.keys(SUITES).join(', ')})`);
  let failed = false;
  for (const name of chosen) {
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
    const machine = machineName(process.env.BENCH_GPU_NAME ?? (await nodeAdapterName()));
    const commit = commitName();
    console.error(`[bench] ${name}${quick ? ' (quick)' : ''}`);
    await suite.run({
      quick,
      log: (m) => console.error(`[bench] ${name}: ${m}`),
      record: (r) => records.push({ suite: name, ...r, machine, date, commit }),
    });
    const path = writeResults(name, records);
    console.log(`\n## ${name}  (${path})\n${formatTable(records)}`);
  }
  if (failed) process.exitCode = 1;
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
