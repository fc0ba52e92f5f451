// npm run bench [suite…] [--quick]: runs the named suites (all by default), writes
// bench/results/<suite>.json and prints a table with ratios to the onnxruntime-web baseline.
import { formatTable, writeResults, type BenchRecord, type BenchSuite } from './lib';
import { machineName } from './lib';

const SUITES: Record<string, () => Promise<BenchSuite>> = {
  matmul: async () => (await import('./suites/matmul')).default,
  inference: async () => (await import('./suites/inference')).default,
  training: async () => (await import('./suites/training')).default,
  serve: async () => (await import('./suites/serve')).default,
};

async function main() {
  const args = process.argv.slice(2);
  const quick = args.includes('--quick');
  const names = args.filter((a) => !a.startsWith('--'));
  const chosen = names.length ? names : Object.keys(SUITES);
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
    const machine = machineName(process.env.BENCH_GPU_NAME);
    console.error(`[bench] ${name}${quick ? ' (quick)' : ''}`);
    await suite.run({
      quick,
      log: (m) => console.error(`[bench] ${name}: ${m}`),
      record: (r) => records.push({ suite: name, ...r, machine, date }),
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
