// The kernels the CPU fast path spends a training step in, timed on one shape each: the same function runs in
// Node (bench/suites/cpu-browser.ts) and in a Chromium Web Worker (./worker.ts), so the two engines' figures
// are side by side. Shapes are the bundled policy's (4 query heads, 2 KV heads, head size 32, hidden 128,
// MLP 384) at a GRPO update's size: 2,048 tokens over 16 cached sequences of up to 640 positions.
import type { Tensor } from '../../src/engine/backend';
import { createCpuFastBackend } from '../../src/engine/cpu/fast/backend';

export interface KernelTiming {
  kernel: string;
  shape: string;
  threads: number;
  /** Median over the repeats, after one warm-up call. */
  ms: number;
}

export async function timeKernels(threads: number, quick = false): Promise<KernelTiming[]> {
  const b = await createCpuFastBackend({ threads });
  try {
    const [Hq, Hkv, D, S, maxT, T, C, F] = [4, 2, 32, 16, 640, quick ? 256 : 2048, 128, 384];
    const wave = (n: number, f: number) => Float32Array.from({ length: n }, (_, i) => Math.sin(i * f) * 0.5);
    const slot = Int32Array.from({ length: T }, (_, t) => t % S);
    const pos = Int32Array.from({ length: T }, (_, t) => (t * 7) % maxT);
    const layout = { slot: b.tensor(slot, [T]), pos: b.tensor(pos, [T]) };
    const q = b.tensor(wave(T * Hq * D, 1.37), [T, Hq, D]);
    const dOut = b.tensor(wave(T * Hq * D, 0.91), [T, Hq, D]);
    const kc = b.tensor(wave(S * maxT * Hkv * D, 0.73), [S, maxT, Hkv, D]);
    const vc = b.tensor(wave(S * maxT * Hkv * D, 0.53), [S, maxT, Hkv, D]);
    const x = b.tensor(wave(T * C, 0.29), [T, C]);
    const w = b.tensor(wave(F * C, 0.17), [F, C]);
    const freeAll = (r: Tensor | Record<string, Tensor>) => ('shape' in r ? b.free(r as Tensor) : Object.values(r).forEach((t) => b.free(t)));
    const out: KernelTiming[] = [];
    const time = (kernel: string, shape: string, reps: number, f: () => Tensor | Record<string, Tensor>) => {
      freeAll(f());
      const ms: number[] = [];
      for (let i = 0; i < reps; i++) {
        const t0 = performance.now();
        const r = f();
        ms.push(performance.now() - t0);
        freeAll(r);
      }
      ms.sort((a, c) => a - c);
      out.push({ kernel, shape, threads, ms: ms[reps >> 1] });
    };
    const at = `T=${T} Hq=${Hq} Hkv=${Hkv} D=${D} cache ${S}x${maxT}`;
    time('attention', at, quick ? 3 : 7, () => b.attention(q, kc, vc, layout));
    time('attention backward', at, quick ? 3 : 5, () => b.train.attentionBackward(dOut, q, kc, vc, layout));
    time('matmul', `${T}x${C} @ ${F}x${C}^T`, quick ? 5 : 21, () => b.matmul(x, w));
    time('kv-write backward (gather)', at, quick ? 5 : 21, () => b.train.kvWriteBackward(kc, vc, layout));
    return out;
  } finally {
    b.dispose();
  }
}
