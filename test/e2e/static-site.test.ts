// The built lab on a plain static host (issue 48: a demo anyone can open from a link). The app is built as
// GitHub Pages serves a project (base /envace-lab/) and served by the tiny Node file server below, which sends
// no COOP/COEP headers and forbids HTTP caching (Cache-Control: no-store, so only the lab's own cache can spare
// a request). Every request it receives is logged: the network log the model-cache assertion reads.
// 1. With its service worker (public/coi-sw.js) the page becomes cross-origin isolated anyway: the CPU fast
//    path runs on several threads and the UI says how; a rollout and a training step complete; a reload
//    loads the model again without one model or data file reaching the server.
// 2. Where no service worker can run (playwright's serviceWorkers: 'block'), the single-thread path: the UI says
//    so and why, and a rollout and a training step still complete.
// The CPU fast path is forced (?backend=cpu-fast): it is the path isolation changes, and it skips the load-time
// timing of two backends. Smallest settings: the bundled mini policy, Act budget 24, 3 turns, K = 2, one prompt,
// one step, a held-out evaluation of 1 task.
import { createReadStream, existsSync, rmSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { extname, join, normalize, sep } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, chromiumAvailable, freePort, launchChromium } from './harness';

const BASE = '/envace-lab/';
const SETTINGS = '?backend=cpu-fast&maxNew=24&turns=3&steps=1&k=2&prompts=1&evalEvery=1&evalTasks=1';
const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.wasm': 'application/wasm',
  '.md': 'text/markdown; charset=utf-8',
};

/** A static file server and nothing more: GET and HEAD of files under `root` at `base`, 404 otherwise, no isolation headers. */
function staticServer(root: string, base: string, log: { method: string; path: string }[]): Server {
  return createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
    log.push({ method: req.method ?? '', path });
    const rel = path.startsWith(base) ? path.slice(base.length) : null;
    let file = rel === null ? null : normalize(join(root, rel));
    if (file && !file.startsWith(root + sep) && file !== root) file = null;
    if (file && existsSync(file) && statSync(file).isDirectory()) file = join(file, 'index.html');
    if (!file || !existsSync(file) || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'Content-Type': 'text/plain', 'Cache-Control': 'no-store' }).end('not found');
      return;
    }
    res.writeHead(200, { 'Content-Type': TYPES[extname(file)] ?? 'application/octet-stream', 'Content-Length': statSync(file).size, 'Cache-Control': 'no-store' });
    if (req.method === 'HEAD') res.end();
    else createReadStream(file).pipe(res);
  });
}

const run = chromiumAvailable();

describe.runIf(run)('the built lab on a static host without COOP/COEP headers (headless Chromium)', () => {
  let outDir = '';
  let server: Server;
  let browser: Browser;
  let url = '';
  const log: { method: string; path: string }[] = [];
  const contexts: BrowserContext[] = [];

  beforeAll(async () => {
    outDir = await buildApp({ base: BASE });
    const port = await freePort();
    server = staticServer(outDir, BASE, log);
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${port}${BASE}`;
    browser = await launchChromium();
  }, 300_000); // a build on a loaded 2-core machine
  afterAll(async () => {
    for (const c of contexts) await c.close().catch(() => undefined);
    await browser?.close().catch(() => undefined);
    if (server?.listening) {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
    if (outDir) rmSync(outDir, { recursive: true, force: true });
  });

  const ready = (page: Page) => page.waitForSelector('[data-testid=load-status][data-state=ready]', { timeout: 180_000 });
  const idle = (page: Page) => page.waitForSelector('[data-testid=busy]', { state: 'detached', timeout: 240_000 });
  const served = (dir: string) => log.filter((r) => r.path.startsWith(`${BASE}${dir}/`));

  /** A policy rollout to its end, then one GRPO step with its held-out evaluations. */
  async function rolloutAndStep(page: Page): Promise<void> {
    await page.click('[data-testid=play]');
    await page.waitForSelector('[data-testid=reward]', { timeout: 240_000 });
    await idle(page);
    expect(await page.locator('[data-testid=turn-act]').count()).toBeGreaterThan(0);
    await page.click('[data-testid=train-start]');
    await expect.poll(() => page.textContent('[data-testid=train-step-count]'), { timeout: 360_000, interval: 500 }).toBe('1 of 1 training steps');
    await idle(page);
    expect(await page.isVisible('[data-testid=error]')).toBe(false);
    expect(await page.getAttribute('[data-testid=loss-plot]', 'data-points')).toBe('1');
  }

  it('is cross-origin isolated by its service worker: several CPU threads, a rollout and a training step, and a reload fetches no model file', async () => {
    // The host is plain: no isolation header on the page.
    const plain = await fetch(url);
    expect([plain.headers.get('cross-origin-opener-policy'), plain.headers.get('cross-origin-embedder-policy')]).toEqual([null, null]);
    expect(await plain.text()).toContain('<div id="app">');
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    contexts.push(ctx);
    const page = await ctx.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    log.length = 0;
    const t0 = Date.now();
    await page.goto(url + SETTINGS);
    await ready(page);
    const loadS = (Date.now() - t0) / 1000;
    // The server sent no isolation header, yet the page is isolated: the service worker added them.
    expect(log.some((r) => r.path === `${BASE}coi-sw.js`)).toBe(true);
    expect(await page.evaluate(() => [crossOriginIsolated, !!navigator.serviceWorker.controller])).toEqual([true, true]);
    expect(await page.textContent('[data-testid=load-status]')).toContain('on cpu-fast');
    const threads = await page.evaluate(() => Math.min(4, navigator.hardwareConcurrency || 1));
    const says = (await page.textContent('[data-testid=isolation]')) ?? '';
    expect(says).toMatch(/^Cross-origin isolated by this site's service worker \(it adds the COOP\/COEP headers a static host cannot send\): shared memory is on, /);
    expect(says).toContain(threads > 1 ? `the CPU fast path runs on ${threads} threads` : 'runs on one thread');
    expect(await page.locator('[data-testid=single-thread-notice]').count()).toBe(0);
    // The bundled model came from the server once: each of its files one GET.
    const weights = served('models').filter((r) => r.method === 'GET' && r.path.endsWith('/model.safetensors'));
    expect(weights.map((r) => r.path)).toEqual([`${BASE}models/default/model.safetensors`]);

    const t1 = Date.now();
    await rolloutAndStep(page);
    const workS = (Date.now() - t1) / 1000;

    // Second load: the model loads again, from the service worker's cache: no model or data file reaches the
    // server, and every model-file response the page saw came from the service worker.
    log.length = 0;
    const modelResponses: { url: string; fromSw: boolean }[] = [];
    page.on('response', (r) => {
      if (new URL(r.url()).pathname.startsWith(`${BASE}models/`)) modelResponses.push({ url: r.url(), fromSw: r.fromServiceWorker() });
    });
    const swNetwork: string[] = [];
    ctx.on('request', (r) => {
      if (r.serviceWorker()) swNetwork.push(r.url());
    });
    const t2 = Date.now();
    await page.reload();
    await ready(page);
    const reloadS = (Date.now() - t2) / 1000;
    expect(await page.textContent('[data-testid=load-status]')).toMatch(/Ready: bundled mini policy \(models\/default\) on cpu-fast/);
    expect(log.length).toBeGreaterThan(0); // the page itself is fetched again (the worker does not cache it)
    expect(served('models')).toEqual([]);
    expect(served('data')).toEqual([]);
    expect(swNetwork.filter((u) => u.includes(`${BASE}models/`) || u.includes(`${BASE}data/`))).toEqual([]);
    expect(modelResponses.map((r) => r.url)).toContain(`${url}models/default/model.safetensors`);
    expect(modelResponses.filter((r) => !r.fromSw)).toEqual([]);
    expect(errors).toEqual([]);
    console.log(`static site, service worker: first load ${loadS.toFixed(1)} s, rollout + step ${workS.toFixed(1)} s, reload ${reloadS.toFixed(1)} s`);
  }, 900_000);

  it('without a service worker runs the single-thread path, says so, and still completes a rollout and a training step', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 }, serviceWorkers: 'block' });
    contexts.push(ctx);
    const page = await ctx.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    const t0 = Date.now();
    await page.goto(url + SETTINGS);
    await ready(page);
    expect(await page.evaluate(() => crossOriginIsolated)).toBe(false);
    const notice = (await page.textContent('[data-testid=single-thread-notice]')) ?? '';
    expect(notice).toMatch(/^Single-thread path: this page is not cross-origin isolated \(.+\), so there is no shared memory: the CPU runs on one thread, and Cancel waits/);
    expect(await page.textContent('[data-testid=isolation]')).toBe(notice);
    await rolloutAndStep(page);
    expect(errors).toEqual([]);
    console.log(`static site, single thread: load, rollout and step ${((Date.now() - t0) / 1000).toFixed(1)} s; notice: ${notice}`);
  }, 900_000);
});
