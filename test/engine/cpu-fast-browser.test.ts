// The CPU fast path in a real browser (Debian's Chromium, headless): Web Workers on a shared wasm
// memory when the page is cross-origin isolated (COOP/COEP, as vite.config.ts sends), and the
// single-thread fallback when it is not. Modules come from a Vite dev server, as in `npm run dev`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser } from 'playwright-core';
import type { ViteDevServer } from 'vite';
import { ISOLATION, serveProbePage } from '../../bench/probe-page';
import { CHROMIUM, chromiumAvailable } from '../e2e/harness';

interface Probe {
  isolated: boolean;
  shared: boolean;
  threads: number;
  parallelJobs: number;
  maxErr: number;
}

/** In the page: a 64x96x160 product (2.0 Mflop: threaded when possible) against a plain JS loop. */
async function probe(browser: Browser, server: ViteDevServer): Promise<Probe> {
  const page = await browser.newPage();
  try {
    await page.goto(`${server.resolvedUrls!.local[0]}probe.html`);
    // A string, not a function: vitest rewrites import() inside functions for Node.
    return (await page.evaluate(`(async () => {
      const { createCpuFastBackend } = await import('/src/engine/cpu/fast/backend.ts');
      const b = await createCpuFastBackend({ threads: 2 });
      const [M, K, N] = [64, 96, 160];
      const x = Float32Array.from({ length: M * K }, (_, i) => Math.sin(i));
      const w = Float32Array.from({ length: N * K }, (_, i) => Math.cos(i * 0.7));
      const y = await b.read(b.matmul(b.tensor(x, [M, K]), b.tensor(w, [N, K])));
      let maxErr = 0;
      for (let m = 0; m < M; m++)
        for (let n = 0; n < N; n++) {
          let acc = 0;
          for (let k = 0; k < K; k++) acc += x[m * K + k] * w[n * K + k];
          maxErr = Math.max(maxErr, Math.abs(acc - y[m * N + n]));
        }
      const r = { isolated: crossOriginIsolated, shared: b.sharedMemory, threads: b.threads, parallelJobs: b.parallelJobs, maxErr };
      b.dispose();
      return r;
    })()`)) as Probe;
  } finally {
    await page.close();
  }
}

describe.runIf(chromiumAvailable())('cpu-fast in Chromium', () => {
  let browser: Browser;
  const servers: ViteDevServer[] = [];
  beforeAll(async () => {
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      ignoreDefaultArgs: ['--headless'],
      args: ['--headless=new', '--no-sandbox', '--disable-background-networking', '--disable-component-update', '--no-first-run'],
      handleSIGTERM: false,
    });
  });
  afterAll(async () => {
    await browser?.close().catch(() => undefined);
    for (const s of servers) await s.close();
  });

  it('runs on 2 threads (Web Workers, SharedArrayBuffer) in a cross-origin isolated page', async () => {
    const server = await serveProbePage(process.cwd(), ISOLATION);
    servers.push(server);
    const r = await probe(browser, server);
    expect(r).toMatchObject({ isolated: true, shared: true, threads: 2, parallelJobs: 1 });
    expect(r.maxErr).toBeLessThan(1e-4);
  });

  it('falls back to one thread on a page that is not cross-origin isolated', async () => {
    const server = await serveProbePage(process.cwd(), {});
    servers.push(server);
    const r = await probe(browser, server);
    expect(r).toMatchObject({ isolated: false, shared: false, threads: 1, parallelJobs: 0 });
    expect(r.maxErr).toBeLessThan(1e-4);
  });
});
