// Real WebGPU in Node for the benches (and the tests, through test/helpers/gpu.ts): Dawn (npm `webgpu`),
// on Mesa's lavapipe where there is no GPU.
import { create, globals } from 'webgpu';

let cached: Promise<GPUAdapter | null> | null = null;

export function nodeGpu(): GPU {
  Object.assign(globalThis, globals);
  return create([]);
}

/** Dawn's adapter, or null when there is none (asked once per process). */
export function nodeAdapter(): Promise<GPUAdapter | null> {
  cached ??= (async () => {
    try {
      return await nodeGpu().requestAdapter();
    } catch {
      return null;
    }
  })();
  return cached;
}
