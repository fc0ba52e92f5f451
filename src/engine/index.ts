// The backend registry: one place that knows how to construct each backend.
import type { Backend, BackendName } from './backend';
import { CpuRefBackend } from './cpu/ref';

export interface BackendOptions {
  /** WebGPU: the GPU object (navigator.gpu in browsers, Dawn's in Node). */
  gpu?: GPU;
  /** CPU fast path: worker threads (default: hardware concurrency). */
  threads?: number;
}

export async function createBackend(name: BackendName, opts: BackendOptions = {}): Promise<Backend> {
  switch (name) {
    case 'cpu-ref':
      return new CpuRefBackend();
    case 'cpu-fast':
      return (await import('./cpu/fast/backend')).createCpuFastBackend({ threads: opts.threads });
    case 'webgpu':
      return (await import('./webgpu/backend')).createWebGpuBackend({ gpu: opts.gpu });
    default:
      throw new Error(`backend ${name} is not built yet`);
  }
}
