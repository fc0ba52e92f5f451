// E2E harness: build the app once into a temp folder, serve it with `vite preview` on a free loopback
// port, and drive Debian's Chromium (SwiftShader WebGPU) with playwright-core. Under CI a missing
// Chromium fails the run instead of skipping it.
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser } from 'playwright-core';
import { build, preview, type PreviewServer } from 'vite';
import { afterAll, beforeAll } from 'vitest';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');
export const CHROMIUM = '/usr/bin/chromium';
/** Where the suites write screenshots and run records: a temp folder, or LAB_SCREENSHOTS (docs/screenshots for the README's). */
export const SHOTS = process.env.LAB_SCREENSHOTS ? resolve(ROOT, process.env.LAB_SCREENSHOTS) : join(tmpdir(), 'envace-lab-screenshots');

/** True when the E2E suite can run; throws under CI=true when it cannot. */
export function chromiumAvailable(): boolean {
  if (existsSync(CHROMIUM)) return true;
  const msg = `E2E: ${CHROMIUM} not found (scripts/setup-system.sh installs it)`;
  if (process.env.CI === 'true') throw new Error(msg);
  console.warn(`SKIPPING the lab E2E tests: ${msg}`);
  return false;
}

/** A free loopback port. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export interface Served {
  url: string;
  browser: Browser;
  /** Another Chromium without the WebGPU switch (navigator.gpu is absent there): the CPU fallback. */
  launchWithoutWebGpu(): Promise<Browser>;
  /** Whether models/default/ (the bundled model) is in this checkout. */
  hasBundledModel(): boolean;
  close(): Promise<void>;
}

/** Builds the app (what `npm run build` runs) into a new temp folder, which the caller removes; `base` as `vite build --base`. */
export async function buildApp(opts: { base?: string } = {}): Promise<string> {
  const outDir = mkdtempSync(join(tmpdir(), 'envace-lab-e2e-'));
  await build({ logLevel: 'warn', ...(opts.base ? { base: opts.base } : {}), build: { outDir, emptyOutDir: true } });
  return outDir;
}

/** Debian's Chromium, headless; with the WebGPU switch (SwiftShader) unless `webgpu` is false (no navigator.gpu then). */
export function launchChromium(webgpu = true, extraArgs: string[] = []): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    ignoreDefaultArgs: ['--headless'],
    args: ['--headless=new', '--no-sandbox', ...(webgpu ? ['--enable-unsafe-webgpu'] : []), '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run', ...extraArgs],
    handleSIGTERM: false,
  });
}

export async function serveAndLaunch(opts: { extraArgs?: string[] } = {}): Promise<Served> {
  // LAB_E2E_DIST: a folder `npm run build` already wrote (kept afterwards), to rerun a suite without building again.
  const prebuilt = process.env.LAB_E2E_DIST ? resolve(ROOT, process.env.LAB_E2E_DIST) : null;
  const outDir = prebuilt ?? (await buildApp());
  const port = await freePort();
  const server: PreviewServer = await preview({ logLevel: 'warn', build: { outDir }, preview: { host: '127.0.0.1', port, strictPort: true, open: false } });
  const launch = (webgpu: boolean) => launchChromium(webgpu, opts.extraArgs);
  const browser = await launch(true);
  const others: Browser[] = [];
  return {
    url: `http://127.0.0.1:${port}/`,
    browser,
    async launchWithoutWebGpu() {
      const b = await launch(false);
      others.push(b);
      return b;
    },
    hasBundledModel: () => existsSync(join(ROOT, 'models/default/config.json')),
    async close() {
      for (const b of [browser, ...others]) await b.close().catch(() => undefined);
      await server.close();
      if (!prebuilt) rmSync(outDir, { recursive: true, force: true });
    },
  };
}

/** One served lab and Chromium for a describe block (built before its tests, closed after); call inside describe. */
export function servedLab(): () => Served {
  let s: Served | undefined;
  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    s = await serveAndLaunch();
  }, 600_000); // a build on a loaded 2-core machine takes minutes
  afterAll(async () => {
    await s?.close();
  });
  return () => s!;
}
