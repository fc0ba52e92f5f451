// The Chromium half of `npm run bench -- cpu-browser`: times the kernels in a dedicated Web Worker (where the
// lab's policy runs, and where a thread may block on the kernel workers) and posts the figures back.
import { timeKernels, type KernelTiming } from './kernels';

self.onmessage = async (e: MessageEvent<{ threads: number[]; quick: boolean }>) => {
  try {
    const out: KernelTiming[] = [];
    for (const t of e.data.threads) out.push(...(await timeKernels(t, e.data.quick)));
    self.postMessage({ ok: true, out });
  } catch (err) {
    self.postMessage({ ok: false, error: (err as Error).message });
  }
};
