// The fast path's wasm heap: blocks never overlap, freed space is reused whatever the next sizes are
// (training batches change shape every step), and bad requests fail with a typed error; the backend's resident tensors give
// their blocks back when freed and, when forgotten, once the collector finds them.
import { describe, expect, it } from 'vitest';
import { WasmHeap } from '../../src/engine/cpu/fast/heap';
import { EngineError } from '../../src/engine/errors';

function rng(seed: number) {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296);
}

describe('WasmHeap', () => {
  it('hands out 64-byte aligned, non-overlapping blocks and merges freed neighbours', () => {
    const h = new WasmHeap(false, 1024);
    const r = rng(1);
    const live = new Map<number, number>();
    for (let i = 0; i < 3000; i++) {
      if (live.size && r() < 0.45) {
        const keys = [...live.keys()];
        const p = keys[Math.floor(r() * keys.length)];
        h.release(p);
        live.delete(p);
      } else {
        const bytes = 1 + Math.floor(r() * 50_000);
        const p = h.alloc(bytes);
        expect(p % 64).toBe(0);
        live.set(p, bytes);
      }
    }
    const spans = [...live].sort((a, b) => a[0] - b[0]);
    for (let i = 1; i < spans.length; i++) expect(spans[i][0]).toBeGreaterThanOrEqual(spans[i - 1][0] + spans[i - 1][1]);
    for (const p of live.keys()) h.release(p);
    expect(h.live).toBe(0);
    expect(h.footprint).toBe(0); // everything merged back into the bump region
  });

  it('reuses memory across steps whose shapes all differ', () => {
    const h = new WasmHeap(false, 4096);
    const r = rng(2);
    let peak = 0;
    for (let step = 0; step < 200; step++) {
      // a "step": activations of a random token count, freed at the end of the step
      const T = 16 + Math.floor(r() * 500);
      const ptrs = [T * 128, T * 384, T * 384, T * 4096, T * 128].map((n) => h.alloc(n * 4));
      peak = Math.max(peak, h.live);
      for (const p of ptrs.reverse()) h.release(p);
    }
    // Never more than about two steps' worth, however many distinct sizes went through.
    expect(h.footprint).toBeLessThanOrEqual(2 * peak);
  });

  it('refuses what cannot fit with an out-of-memory EngineError, and ignores double frees', () => {
    const h = new WasmHeap(false, 16); // 1 MiB at most
    expect(() => h.alloc(2 * 65536 * 16)).toThrow(/out-of-memory/);
    expect(() => h.alloc(2 ** 33)).toThrow(EngineError);
    const p = h.alloc(100);
    h.release(p);
    h.release(p);
    expect(h.live).toBe(0);
    expect(h.alloc(100)).toBe(p);
  });
});

describe('cpu-fast resident tensors', () => {
  it('give their wasm memory back when freed, and when a forgotten one is collected', async () => {
    const { setFlagsFromString } = await import('node:v8');
    const { runInNewContext } = await import('node:vm');
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const { createCpuFastBackend } = await import('../../src/engine/cpu/fast/backend');
    const b = await createCpuFastBackend({ threads: 1 });
    try {
      const x = b.tensor(Float32Array.from({ length: 4096 }, (_, i) => i / 4096), [64, 64]);
      const before = b.liveBytes;
      const y = b.add(x, x);
      expect(b.liveBytes).toBeGreaterThan(before);
      b.free(y);
      expect(b.liveBytes).toBe(before);
      b.free(y); // a second free gives nothing back twice
      expect(b.liveBytes).toBe(before);
      // Forgotten: no reference is kept, so the collector finds them and the registry gives their blocks back.
      (() => {
        for (let i = 0; i < 8; i++) b.add(x, x);
      })();
      expect(b.liveBytes).toBeGreaterThan(before);
      for (let i = 0; i < 50 && b.liveBytes > before; i++) {
        gc();
        await new Promise((r) => setTimeout(r, 10));
      }
      expect(b.liveBytes).toBe(before);
      b.free(x);
    } finally {
      b.dispose();
    }
  });
});
