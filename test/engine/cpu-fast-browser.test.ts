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
  /** Largest difference of attention (forward, dq, dk, dv) from the reference. */
  attnErr: number;
}

/**
 * In the page: a 64x96x160 product (2.0 Mflop: threaded when possible) against a plain JS loop, then the attention
 * kernels (forward and backward, two slots, one continuing at an offset) against the reference backend.
 */
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
      const r = { isolated: crossOriginIsolated, shared: b.sharedMemory, threads: b.threads, parallelJobs: b.parallelJobs, maxErr, attnErr: 0 };
      // attention (tiled version 2, threaded where possible: 2.6 Mflop) and its backward against the reference
      const { CpuRefBackend } = await import('/src/engine/cpu/ref.ts');
      const { CpuRefTrainOps } = await import('/src/engine/cpu/train-ops.ts');
      const ref = new CpuRefBackend();
      const [T, Hq, Hkv, D, S, maxT] = [100, 4, 2, 32, 2, 90];
      const slot = Int32Array.from({ length: T }, (_, t) => (t < 90 ? 0 : 1));
      const pos = Int32Array.from({ length: T }, (_, t) => (t < 90 ? t : t - 50));
      const q = Float32Array.from({ length: T * Hq * D }, (_, i) => Math.sin(i * 0.37));
      const g = Float32Array.from({ length: T * Hq * D }, (_, i) => Math.cos(i * 0.23));
      const kc = Float32Array.from({ length: S * maxT * Hkv * D }, (_, i) => Math.sin(i * 0.71));
      const vc = Float32Array.from({ length: S * maxT * Hkv * D }, (_, i) => Math.cos(i * 0.53));
      const run = async (be, f) => {
        const lay = { slot: be.tensor(slot, [T]), pos: be.tensor(pos, [T]) };
        const args = [be.tensor(q, [T, Hq, D]), be.tensor(kc, [S, maxT, Hkv, D]), be.tensor(vc, [S, maxT, Hkv, D]), lay];
        const out = await be.read(be.attention(...args));
        const gr = f(be.tensor(g, [T, Hq, D]), ...args);
        return [out, await be.read(gr.dq), await be.read(gr.dkCache), await be.read(gr.dvCache)];
      };
      const refTrain = new CpuRefTrainOps(ref);
      const want = await run(ref, (...a) => refTrain.attentionBackward(...a));
      const got = await run(b, (...a) => b.train.attentionBackward(...a));
      for (let k = 0; k < 4; k++) for (let i = 0; i < want[k].length; i++) r.attnErr = Math.max(r.attnErr, Math.abs(want[k][i] - got[k][i]));
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
    expect(r.attnErr).toBeLessThan(2e-5);
  });

  it('falls back to one thread on a page that is not cross-origin isolated', async () => {
    const server = await serveProbePage(process.cwd(), {});
    servers.push(server);
    const r = await probe(browser, server);
    expect(r).toMatchObject({ isolated: false, shared: false, threads: 1, parallelJobs: 0 });
    expect(r.maxErr).toBeLessThan(1e-4);
    expect(r.attnErr).toBeLessThan(2e-5);
  });
});
