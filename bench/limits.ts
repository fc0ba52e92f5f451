// This machine's limits, measured in the benchmark's own process beside the figures they bound (issue 51: a
// figure without the machine's own limit measured in the same run misleads; on a shared machine the limit moves
// with the load). The probes are the CPU fast path's own wasm exports (src/engine/cpu/fast/kernels/probe.ts) on
// one thread, and, where a suite uses WebGPU, a copyBufferToBuffer on Dawn's adapter:
//
//   fma         f32x4 multiply + add peak of one thread (12 independent chains; mul and add apart, as the kernels
//               issue them: Node 20 has no relaxed SIMD, so no fused multiply-add), GFLOP/s
//   read        read bandwidth of one thread over a 4 MiB buffer (a 1024 x 1024 f32 matrix: in L3 here), GB/s
//   read-large  the same over 128 MiB (main memory), GB/s
//   copy        memory.copy of 32 MiB, bytes read + written, GB/s
//   gpu-copy    WebGPU copyBufferToBuffer of 64 MiB, bytes read + written, GB/s
//
// Each probe lasts ~10-40 ms and keeps the best of a few repeats (the machine's capacity at that moment).
import { WasmHeap } from '../src/engine/cpu/fast/heap';
import { WASM_PLAIN } from '../src/engine/cpu/fast/wasm.gen';

export type LimitKind = 'fma' | 'read' | 'read-large' | 'copy' | 'gpu-copy';

export const LIMITS: Record<LimitKind, { unit: string; what: string }> = {
  fma: { unit: 'GFLOP/s', what: 'wasm-simd mul+add peak' },
  read: { unit: 'GB/s', what: 'read bandwidth, 4 MiB' },
  'read-large': { unit: 'GB/s', what: 'read bandwidth, 128 MiB' },
  copy: { unit: 'GB/s', what: 'memory.copy bandwidth, 32 MiB, read+write' },
  'gpu-copy': { unit: 'GB/s', what: 'WebGPU copyBufferToBuffer bandwidth, 64 MiB, read+write' },
};

interface ProbeExports {
  probeMulAdd(iters: number): number;
  probeRead(ptr: number, bytes: number, reps: number): number;
  probeCopy(dst: number, src: number, bytes: number, reps: number): void;
}

const MiB = 1 << 20;

export class LimitProbe {
  private gpuDevice: Promise<GPUDevice | null> | null = null;
  private sink = 0;

  private constructor(
    private readonly x: ProbeExports,
    private readonly heap: WasmHeap,
    private readonly small: number,
    private readonly large: number,
    private readonly copyDst: number,
  ) {}

  static async create(): Promise<LimitProbe> {
    const heap = new WasmHeap(false);
    const module = await WebAssembly.compile(Uint8Array.from(atob(WASM_PLAIN), (c) => c.charCodeAt(0)));
    const inst = await WebAssembly.instantiate(module, { env: { memory: heap.memory } });
    const small = heap.alloc(4 * MiB);
    const large = heap.alloc(128 * MiB);
    const copyDst = heap.alloc(32 * MiB);
    // touch every page (and give the sums finite values)
    new Float32Array(heap.buffer, small, MiB).fill(1);
    new Float32Array(heap.buffer, large, 32 * MiB).fill(1);
    new Float32Array(heap.buffer, copyDst, 8 * MiB).fill(0);
    return new LimitProbe(inst.exports as unknown as ProbeExports, heap, small, large, copyDst);
  }

  /** Best rate (units per second) over `tries` runs of fn, which returns the units it did. */
  private best(tries: number, fn: () => number): number {
    let best = 0;
    for (let i = 0; i < tries; i++) {
      const t0 = performance.now();
      const units = fn();
      const s = (performance.now() - t0) / 1000;
      best = Math.max(best, units / s);
    }
    return best;
  }

  /** A CPU limit now, in LIMITS[kind].unit (one thread). */
  measure(kind: Exclude<LimitKind, 'gpu-copy'>): number {
    const x = this.x;
    switch (kind) {
      case 'fma': {
        const iters = 200_000; // x 96 flops: ~1 ms at 20 GFLOP/s
        x.probeMulAdd(iters);
        return this.best(5, () => ((this.sink += x.probeMulAdd(iters * 4)), iters * 4 * 96)) / 1e9;
      }
      case 'read':
        x.probeRead(this.small, 4 * MiB, 1);
        return this.best(5, () => ((this.sink += x.probeRead(this.small, 4 * MiB, 4)), 16 * MiB)) / 1e9;
      case 'read-large':
        return this.best(3, () => ((this.sink += x.probeRead(this.large, 128 * MiB, 1)), 128 * MiB)) / 1e9;
      case 'copy':
        x.probeCopy(this.copyDst, this.large, 32 * MiB, 1);
        return this.best(3, () => (x.probeCopy(this.copyDst, this.large, 32 * MiB, 1), 64 * MiB)) / 1e9;
    }
  }

  /** Dawn's adapter's copy bandwidth now (GB/s), or null without an adapter. */
  async measureGpu(): Promise<number | null> {
    const device = await this.device();
    if (!device) return null;
    const { copyBandwidth } = await import('./gpu/common');
    return copyBandwidth(device, 64 * MiB, 4);
  }

  private device(): Promise<GPUDevice | null> {
    this.gpuDevice ??= (async () => {
      try {
        const { nodeAdapter } = await import('./gpu');
        const a = await nodeAdapter();
        return a ? await a.requestDevice() : null;
      } catch {
        return null;
      }
    })();
    return this.gpuDevice;
  }

  dispose(): void {
    void this.gpuDevice?.then((d) => d?.destroy());
    void this.heap;
  }
}

/**
 * The limits of one suite's run. CPU limits are probed at the start and again right after every record that
 * names one, so each figure's limit is measured beside it (the best of the probes just before and just after
 * it); the WebGPU copy bandwidth (asynchronous) at the start and the end of the suite, the best of the two.
 */
export class LimitTracker {
  private readonly last = new Map<LimitKind, number>();
  readonly samples = new Map<LimitKind, number[]>();

  constructor(private readonly probe: LimitProbe) {}

  private keep(kind: LimitKind, v: number): number {
    this.samples.set(kind, [...(this.samples.get(kind) ?? []), v]);
    return v;
  }

  /** Probes every CPU limit (and, with gpu, the WebGPU one) once. */
  async start(gpu: boolean): Promise<void> {
    for (const k of ['fma', 'read', 'read-large', 'copy'] as const) this.last.set(k, this.keep(k, this.probe.measure(k)));
    if (gpu) await this.gpu();
  }

  /** Probes the WebGPU copy bandwidth (start and end of a suite that uses WebGPU). */
  async gpu(): Promise<void> {
    const v = await this.probe.measureGpu();
    if (v !== null) this.keep('gpu-copy', v);
  }

  /** A CPU limit beside a figure just measured: max(the probe before it, a probe now). */
  beside(kind: Exclude<LimitKind, 'gpu-copy'>): number {
    const now = this.keep(kind, this.probe.measure(kind));
    const before = this.last.get(kind) ?? now;
    this.last.set(kind, now);
    return Math.max(before, now);
  }

  /** The best WebGPU copy bandwidth probed in this suite, if any. */
  gpuCopy(): number | null {
    const s = this.samples.get('gpu-copy');
    return s?.length ? Math.max(...s) : null;
  }
}
