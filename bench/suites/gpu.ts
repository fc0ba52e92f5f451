// npm run bench -- gpu: our WebGPU engine beside onnxruntime-web's WebGPU execution provider, on the
// same exported model, on every WebGPU adapter this machine offers (bench/gpu/common.ts says what is
// measured and how):
//  - Node, Dawn's adapter (lavapipe here; the real GPU on a GPU machine): our engine. onnxruntime-web's
//    WebGPU EP does not run under Node/Dawn (1.30: its wasm writes from shared memory, which Dawn's
//    writeBuffer rejects with "Invalid argument"; with that worked around, the first run never returns),
//    so ORT's side runs in the browser.
//  - Chromium (headless, --enable-unsafe-webgpu; SwiftShader here, the real GPU elsewhere): both engines
//    in one page (bench/gpu/page.ts), served by Vite and driven with playwright-core.
// Options (environment): BENCH_GPU_MODELS=bundled,0.6b  BENCH_GPU_WHERE=node,chromium
//   BENCH_GPU_PROMPT / BENCH_GPU_DECODE (token counts; default: small on software adapters, 128 / 64 on
//   a real GPU)  BENCH_GPU_HOST_STEPS (steady decode steps counted per buffer-reuse order)  BENCH_GPU_BANDWIDTH_GBS (the GPU's memory bandwidth, when known)
//   BENCH_GPU_PREFILL (prompt lengths whose prefill both engines run side by side, bench/gpu/prefill.ts; default
//   4,32,128 in Chromium, none in Node)  BENCH_GPU_LAYERS (layers of the 0.6B shape; default 28, and 2 on a software
//   adapter in Chromium: fewer keep every matrix's shape)  BENCH_GPU_COMPARE=0 (leave out the side-by-side decode
//   comparisons of buffer reuse, fused ops and GEMV versions)
//   BENCH_CHROMIUM (default /usr/bin/chromium)  BENCH_GPU_CHROMIUM_ARGS (extra flags, e.g. --use-angle=vulkan)
import { existsSync, realpathSync } from 'node:fs';
import { createServer as netServer } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createBackend } from '../../src/engine/index';
import { DirSource } from '../../src/model/source-node';
import { nodeAdapter, nodeGpu } from '../gpu';
import { adapterReport, runGpuBench, type GpuBenchOptions, type GpuRecord } from '../gpu/common';
import type { BenchContext, BenchSuite } from '../lib';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');

function options(where: 'node' | 'chromium'): GpuBenchOptions {
  const num = (v: string | undefined) => (v ? Number(v) : undefined);
  return {
    models: (process.env.BENCH_GPU_MODELS ?? 'bundled,0.6b').split(',').filter(Boolean),
    engines: where === 'node' ? ['ours'] : ['ours', 'ort'],
    prompt: num(process.env.BENCH_GPU_PROMPT),
    decode: num(process.env.BENCH_GPU_DECODE),
    bandwidthGBs: num(process.env.BENCH_GPU_BANDWIDTH_GBS),
    hostSteps: num(process.env.BENCH_GPU_HOST_STEPS),
    // prefill side by side with ORT, which runs in the page only
    prefillPrompts: (process.env.BENCH_GPU_PREFILL ?? (where === 'chromium' ? '4,32,128' : '')).split(',').filter(Boolean).map(Number),
    layers: num(process.env.BENCH_GPU_LAYERS),
    compare: process.env.BENCH_GPU_COMPARE !== '0',
    // SwiftShader runs all 28 layers of the 0.6B shape at minutes per token: 2 of them unless asked otherwise
    // (every matrix keeps its shape; the prefill bar against ORT is measured there).
    softwareLayers: where === 'chromium' ? 2 : undefined,
  };
}

function put(ctx: BenchContext, where: string, rs: GpuRecord[]): void {
  // The runner's gpu-copy limit is Dawn's adapter in Node: it bounds the Node figures only (the page's figures
  // carry bandwidth_fraction, against the copy bandwidth measured in the page).
  for (const { bound, ...r } of rs) ctx.record({ ...r, case: `${r.case} (${where})`, bound: where === 'node' ? bound : undefined });
}

async function inNode(ctx: BenchContext): Promise<void> {
  const adapter = await nodeAdapter();
  if (!adapter) {
    if (ctx.deviceReport) console.log('## WebGPU in Node (Dawn)\nno adapter');
    ctx.log('node: no WebGPU adapter (Dawn) — skipped');
    return;
  }
  if (ctx.deviceReport) console.log(`## WebGPU in Node (Dawn)\n${adapterReport(adapter)}\n`);
  const rs = await runGpuBench(
    {
      makeBackend: async () => (await createBackend('webgpu', { gpu: nodeGpu() })) as never,
      ort: null,
      bundled: existsSync(join(ROOT, 'models/default/config.json')) ? new DirSource(join(ROOT, 'models/default')) : null,
      makeCpu: () => createBackend('cpu-fast'),
      log: (m) => ctx.log(`node: ${m}`),
    },
    options('node'),
  );
  put(ctx, 'node', rs);
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = netServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

async function inChromium(ctx: BenchContext): Promise<void> {
  const exe = process.env.BENCH_CHROMIUM ?? '/usr/bin/chromium';
  if (!existsSync(exe)) {
    ctx.log(`chromium: ${exe} not found — skipped`);
    return;
  }
  const { createServer } = await import('vite');
  const { chromium } = await import('playwright-core');
  const ortDist = realpathSync(join(ROOT, 'node_modules/onnxruntime-web/dist'));
  const port = await freePort();
  const server = await createServer({
    configFile: false,
    root: ROOT,
    appType: 'mpa', // a missing file is a 404, not index.html (FetchSource probes for optional files)
    logLevel: 'warn',
    server: { host: '127.0.0.1', port, strictPort: true, fs: { allow: [ROOT, realpathSync(join(ROOT, 'node_modules')), ortDist] }, hmr: false },
    optimizeDeps: { exclude: ['onnxruntime-web'], entries: ['bench/gpu/page.html'] },
  });
  await server.listen();
  const browser = await chromium.launch({
    executablePath: exe,
    ignoreDefaultArgs: ['--headless'],
    args: ['--headless=new', '--no-sandbox', '--enable-unsafe-webgpu', '--enable-features=Vulkan', ...(process.env.BENCH_GPU_CHROMIUM_ARGS?.split(' ').filter(Boolean) ?? [])],
    handleSIGTERM: false,
  });
  try {
    const page = await browser.newPage();
    page.on('console', (m) => {
      const t = m.text();
      if (t.startsWith('[gpu page]')) ctx.log(`chromium: ${t.slice(11)}`);
    });
    page.on('pageerror', (e) => ctx.log(`chromium page error: ${e.message}`));
    await page.goto(`http://127.0.0.1:${port}/bench/gpu/page.html`);
    await page.waitForFunction(() => (window as unknown as { gpuBenchReady?: boolean }).gpuBenchReady === true, undefined, { timeout: 120_000 });
    if (ctx.deviceReport)
      console.log(`## WebGPU in Chromium (${exe})\n${await page.evaluate(() => (window as unknown as { gpuAdapterReport(): Promise<string> }).gpuAdapterReport())}\n`);
    const o = { ...options('chromium'), wasmPaths: `/@fs${ortDist}/` };
    page.setDefaultTimeout(0);
    const r = await page.evaluate((opts) => (window as unknown as { runGpuBench(o: unknown): Promise<{ records: GpuRecord[] }> }).runGpuBench(opts), o);
    put(ctx, 'chromium', r.records);
  } finally {
    await browser.close().catch(() => undefined);
    await server.close();
  }
}

const suite: BenchSuite = {
  name: 'gpu',
  async run(ctx) {
    const where = (process.env.BENCH_GPU_WHERE ?? 'node,chromium').split(',');
    if (where.includes('node')) await inNode(ctx).catch((e: Error) => ctx.log(`node: failed: ${e.message}`));
    if (where.includes('chromium')) await inChromium(ctx).catch((e: Error) => ctx.log(`chromium: failed: ${e.message}`));
  },
};

export default suite;
