// Real WebGPU in Node: Dawn (npm `webgpu`) on Mesa's lavapipe. Under CI=true a missing adapter fails
// the run; elsewhere GPU tests are skipped loudly.
import { nodeAdapter } from '../../bench/gpu';

export { nodeAdapter, nodeGpu } from '../../bench/gpu';

/** True when GPU tests should run. Throws under CI when no adapter is found. */
export async function gpuAvailable(): Promise<boolean> {
  const a = await nodeAdapter();
  if (a) return true;
  const msg = 'No WebGPU adapter (Dawn + lavapipe): run scripts/setup-system.sh to install Mesa >= 25.';
  if (process.env.CI === 'true') throw new Error(`${msg} CI requires WebGPU.`);
  console.warn(`\n*** SKIPPING WebGPU tests: ${msg} ***\n`);
  return false;
}
