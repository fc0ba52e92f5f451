// npm run bench -- cpu-browser: the CPU fast path's kernels in Node and in a Chromium Web Worker, side by side
// (bench/cpu-browser/kernels.ts: the same code and shapes in both), on 1 and 2 threads, with the ratio
// Chromium / Node per kernel. Why: the lab's training runs in a worker of the page, and on this machine a step
// takes 1.3-1.5x as long there as the same step in Node (docs/lesson.md); this says how much of that is the
// kernels. Run by name only (it drives Chromium). BENCH_CHROMIUM overrides /usr/bin/chromium;
// BENCH_CPU_CHROMIUM_ARGS adds Chromium flags (e.g. --js-flags=--no-wasm-dynamic-tiering).
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { timeKernels, type KernelTiming } from '../cpu-browser/kernels';
import type { BenchContext, BenchSuite } from '../lib';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');

/** The kernels timed in a dedicated worker of a cross-origin isolated page (shared memory, as the lab has). */
async function inChromium(ctx: BenchContext, threads: number[]): Promise<KernelTiming[]> {
  const exe = process.env.BENCH_CHROMIUM ?? '/usr/bin/chromium';
  if (!existsSync(exe)) throw new Error(`${exe} not found`);
  const { serveProbePage, ISOLATION } = await import('../probe-page');
  const { chromium } = await import('playwright-core');
  const server = await serveProbePage(ROOT, ISOLATION);
  const browser = await chromium.launch({ executablePath: exe, ignoreDefaultArgs: ['--headless'], args: ['--headless=new', '--no-sandbox', ...(process.env.BENCH_CPU_CHROMIUM_ARGS?.split(' ').filter(Boolean) ?? [])], handleSIGTERM: false });
  try {
    const page = await browser.newPage();
    await page.goto(`${server.resolvedUrls!.local[0]}probe.html`);
    ctx.log(`chromium ${browser.version()}: cross-origin isolated ${await page.evaluate('crossOriginIsolated')}`);
    const r = (await page.evaluate(
      `new Promise((res) => {
        const w = new Worker('/bench/cpu-browser/worker.ts', { type: 'module' });
        w.onmessage = (e) => res(e.data);
        w.onerror = (e) => res({ ok: false, error: e.message });
        w.postMessage(${JSON.stringify({ threads, quick: ctx.quick })});
      })`,
    )) as { ok: true; out: KernelTiming[] } | { ok: false; error: string };
    if (!r.ok) throw new Error(r.error);
    return r.out;
  } finally {
    await browser.close().catch(() => undefined);
    await server.close();
  }
}

const suite: BenchSuite = {
  name: 'cpu-browser',
  async run(ctx) {
    const threads = [1, 2];
    const node: KernelTiming[] = [];
    for (const t of threads) node.push(...(await timeKernels(t, ctx.quick)));
    ctx.log(`node ${process.versions.node} (V8 ${process.versions.v8}): done`);
    const web = await inChromium(ctx, threads);
    for (const n of node) {
      const c = web.find((w) => w.kernel === n.kernel && w.threads === n.threads);
      ctx.record({ case: `${n.kernel} (node)`, backend: 'cpu-fast', metric: 'median time', value: n.ms, unit: 'ms', threads: n.threads, shape: n.shape });
      if (!c) continue;
      ctx.record({ case: `${n.kernel} (chromium worker)`, backend: 'cpu-fast', metric: 'median time', value: c.ms, unit: 'ms', threads: c.threads, shape: c.shape });
      ctx.record({ case: `${n.kernel}: chromium / node`, backend: 'cpu-fast', metric: 'time ratio', value: c.ms / n.ms, unit: 'x', threads: n.threads, shape: n.shape });
    }
  },
};

export default suite;
