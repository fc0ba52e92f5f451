// WebGPU matmul cases for the matmul suite: every kernel version (src/engine/webgpu/kernels/matmul.ts)
// times the same cases as ./cpu.ts and ./ort.ts. Uploads are excluded: x and W are uploaded once, then
// each sample records `inner` products into one command batch and is timed from submit to
// onSubmittedWorkDone (the GPU's completion), so small products are not dominated by one submit each.
import { create, globals } from 'webgpu';
import { type WebGpuBackend, createWebGpuBackend } from '../../src/engine/webgpu/backend';
import { MATMUL_VERSIONS, type MatmulVersion } from '../../src/engine/webgpu/kernels/matmul';
import type { Tensor } from '../../src/engine/backend';
import { caseData, type MatmulCase, type MatmulRunner } from './cpu';

/** Kernel versions a case can ask for ('auto' = what the backend uses: block for K <= 512, else gemv2 for M <= 16, tiled otherwise). */
export const WEBGPU_MATMUL_VERSIONS: string[] = [...MATMUL_VERSIONS, 'auto'];

/** Dawn's GPU in Node, navigator.gpu in a browser. */
function gpuObject(): GPU {
  if (typeof navigator !== 'undefined' && navigator.gpu) return navigator.gpu;
  Object.assign(globalThis, globals);
  return create([]);
}

let shared: Promise<WebGpuBackend> | null = null;
function backend(): Promise<WebGpuBackend> {
  shared ??= createWebGpuBackend({ gpu: gpuObject() });
  return shared;
}

/** Median seconds per product of `c` with kernel `version`; `reps` samples of >= 20 ms each. */
async function secondsPerProduct(b: WebGpuBackend, c: MatmulCase, version: string, reps: number): Promise<number> {
  if (!WEBGPU_MATMUL_VERSIONS.includes(version)) throw new Error(`unknown WebGPU matmul version ${version} (${WEBGPU_MATMUL_VERSIONS.join(', ')})`);
  const { x, w, q } = caseData(c);
  const xt = b.tensor(x, [c.M, c.K]);
  const wt: Tensor = q ? b.uploadQuantized(q) : b.tensor(w, [c.N, c.K]);
  const prev = b.matmulVersion;
  b.matmulVersion = version as MatmulVersion;
  const batch = async (n: number) => {
    for (let i = 0; i < n; i++) b.free(b.matmul(xt, wt));
    const t0 = performance.now();
    b.ctx.flush(); // uploads and earlier work were awaited before, so this times the products alone
    await b.ctx.device.queue.onSubmittedWorkDone();
    return (performance.now() - t0) / 1000;
  };
  try {
    await b.sync(); // uploads done
    const first = await batch(1); // warm-up: pipeline compilation
    const second = await batch(1);
    const inner = Math.max(1, Math.min(64, Math.ceil(0.02 / Math.max(Math.min(first, second), 1e-6))));
    const times: number[] = [];
    for (let i = 0; i < reps; i++) times.push((await batch(inner)) / inner);
    await b.sync(); // surfaces any GPU error as an EngineError
    times.sort((a, z) => a - z);
    return times[Math.floor(times.length / 2)];
  } finally {
    b.matmulVersion = prev;
    b.free(xt);
    b.free(wt);
  }
}

/**
 * Measured GFLOP/s of y (M,N) = x (M,K) W^T on WebGPU, W of `dtype`, with kernel `version`
 * (one of WEBGPU_MATMUL_VERSIONS, default 'auto'); median of `reps` samples (default 5), upload excluded.
 * Rejects with EngineError('no-adapter') when there is no WebGPU adapter.
 */
export async function benchWebgpuMatmul(
  shape: { M: number; K: number; N: number },
  dtype: 'f32' | 'q8' | 'q4',
  version = 'auto',
  reps = 5,
): Promise<{ gflops: number; seconds: number; adapter: string; version: string }> {
  const b = await backend();
  const seconds = await secondsPerProduct(b, { ...shape, kind: dtype }, version, reps);
  return { gflops: (2 * shape.M * shape.K * shape.N) / seconds / 1e9, seconds, adapter: b.ctx.adapterName, version };
}

/** A MatmulRunner (see ./cpu.ts) for one kernel version; `time` returns null (with a log line) without an adapter. */
export async function webgpuMatmulRunner(version = 'auto', log: (m: string) => void = console.warn): Promise<MatmulRunner & { adapter: string | null }> {
  let b: WebGpuBackend | null = null;
  try {
    b = await backend();
  } catch (e) {
    log(`webgpu matmul: skipped (${(e as Error).message})`);
  }
  return {
    backend: 'webgpu',
    threads: 1,
    adapter: b?.ctx.adapterName ?? null,
    async time(c, samples) {
      return b ? secondsPerProduct(b, c, version, samples) : null;
    },
    dispose() {},
  };
}

/** Everything the matmul suite needs: the versions, a timing function and runners. */
export async function webgpuMatmulCases() {
  return { versions: WEBGPU_MATMUL_VERSIONS, bench: benchWebgpuMatmul, runner: webgpuMatmulRunner };
}
