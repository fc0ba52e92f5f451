// Matmul bench cases on the CPU backends (cpu-fast and cpu-ref), and what every matmul case module
// shares: the case description, its deterministic data and the timing rule. The ort-wasm cases
// (./ort.ts) and the WebGPU ones (./webgpu.ts, optional) time the same cases by the same rule.
import type { Backend, Tensor } from '../../src/engine/backend';
import { createCpuFastBackend } from '../../src/engine/cpu/fast/backend';
import { CpuRefBackend } from '../../src/engine/cpu/ref';
import { quantize, type QuantizedWeight } from '../../src/engine/quant';

export type WeightKind = 'f32' | 'q8' | 'q4';

/** y (M,N) = x (M,K) W^T, W (N,K) of the given kind. */
export interface MatmulCase {
  M: number;
  K: number;
  N: number;
  kind: WeightKind;
}

export const caseName = (c: MatmulCase) => `matmul-${c.kind}`;
export const caseShape = (c: MatmulCase) => `M=${c.M} K=${c.K} N=${c.N}`;
export const caseFlops = (c: MatmulCase) => 2 * c.M * c.K * c.N;

/** Deterministic inputs in [-1, 1] (same bytes in every process that asks for the same case). */
export function caseData(c: MatmulCase): { x: Float32Array; w: Float32Array; q: QuantizedWeight | null } {
  let s = (c.M * 73856093) ^ (c.K * 19349663) ^ (c.N * 83492791);
  const next = () => {
    s = (Math.imul(s, 1664525) + 1013904223) | 0;
    return ((s >>> 8) / 16777216) * 2 - 1;
  };
  const x = Float32Array.from({ length: c.M * c.K }, next);
  const w = Float32Array.from({ length: c.N * c.K }, next);
  return { x, w, q: c.kind === 'f32' ? null : quantize(w, c.N, c.K, c.kind) };
}

/**
 * Median seconds per call of `fn`: calls are batched so one sample lasts at least `minSample` seconds
 * (a 1x1024x1024 product takes ~0.1 ms, below the timer's useful resolution), after a warm-up.
 */
export async function secondsPerCall(fn: () => Promise<void> | void, samples: number, minSample = 0.02, maxSeconds = 20): Promise<number> {
  const t0 = performance.now();
  await fn(); // warm-up (JIT, packing caches, first-touch of memory)
  const first = (performance.now() - t0) / 1000;
  const inner = Math.max(1, Math.ceil(minSample / Math.max(first, 1e-6)));
  const n = Math.max(1, Math.min(samples, Math.floor(maxSeconds / Math.max(first * inner, 1e-9))));
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const s = performance.now();
    for (let j = 0; j < inner; j++) await fn();
    times.push((performance.now() - s) / 1000 / inner);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)];
}

/** A backend under test: times one case; dispose when done. */
export interface MatmulRunner {
  backend: 'cpu-fast' | 'cpu-ref' | 'webgpu';
  threads: number;
  /** Median seconds per product, or null when the runner skips this case (the reason is logged). */
  time(c: MatmulCase, samples: number): Promise<number | null>;
  dispose(): void;
}

function backendRunner(b: Backend, name: 'cpu-fast' | 'cpu-ref', threads: number, dispose: () => void, prepare: (w: Tensor) => void = () => {}): MatmulRunner {
  return {
    backend: name,
    threads,
    async time(c, samples) {
      const { x, w, q } = caseData(c);
      const xt = b.tensor(x, [c.M, c.K]);
      const wt: Tensor = q ? b.uploadQuantized(q) : b.tensor(w, [c.N, c.K]);
      prepare(wt);
      const s = await secondsPerCall(() => b.free(b.matmul(xt, wt)), samples);
      b.free(xt);
      b.free(wt);
      return s;
    },
    dispose,
  };
}

export async function cpuFastRunner(threads: number): Promise<MatmulRunner> {
  const b = await createCpuFastBackend({ threads });
  // The weight as inference holds it: fixed, so frozen (packed once, as quantized weights are; onnxruntime
  // prepacks its constant weights too).
  return backendRunner(b, 'cpu-fast', threads, () => b.dispose(), (w) => {
    if (w.dtype === 'f32') b.freeze(w);
  });
}

export function cpuRefRunner(): MatmulRunner {
  return backendRunner(new CpuRefBackend(), 'cpu-ref', 1, () => {});
}
