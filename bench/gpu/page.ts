// The browser half of `npm run bench -- gpu` (bench/suites/gpu.ts serves this page with Vite and drives
// it with playwright-core): the same measurement as in Node, on the page's navigator.gpu, with
// onnxruntime-web's WebGPU execution provider beside our engine.
import * as ort from 'onnxruntime-web/webgpu';
import { createBackend } from '../../src/engine/index';
import { FetchSource } from '../../src/model/source';
import { adapterReport, runGpuBench, type GpuBenchOptions, type GpuEnv, type GpuRecord } from './common';

const logEl = document.getElementById('log')!;
const lines: string[] = [];
function log(m: string): void {
  lines.push(m);
  logEl.textContent += m + '\n';
  console.log(`[gpu page] ${m}`);
}

declare global {
  interface Window {
    runGpuBench(o: GpuBenchOptions & { wasmPaths: string }): Promise<{ records: GpuRecord[]; log: string[] }>;
    gpuAdapterReport(): Promise<string>;
    gpuBenchReady: boolean;
  }
}

window.runGpuBench = async (o) => {
  ort.env.wasm.wasmPaths = o.wasmPaths;
  ort.env.wasm.numThreads = 1;
  const env: GpuEnv = {
    makeBackend: async () => (await createBackend('webgpu', { gpu: navigator.gpu })) as never,
    ort,
    bundled: new FetchSource(new URL('/models/default', location.href).href),
    log,
  };
  const records = await runGpuBench(env, o);
  return { records, log: lines };
};
window.gpuAdapterReport = async () => {
  const adapter = await navigator.gpu?.requestAdapter({ powerPreference: 'high-performance' });
  return adapter ? adapterReport(adapter) : 'no adapter (navigator.gpu missing or requestAdapter() returned null)';
};
window.gpuBenchReady = true;
