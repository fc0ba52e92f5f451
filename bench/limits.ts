// This machine's limits, measured in the benchmark's own process beside the figures they bound (issue 51: a
// figure without the machine's own limit measured in the same run misleads; on a shared machine the limit moves
// with the load). The probes are the CPU fast path's own wasm exports (src/engine/cpu/fast/kernels/probe.ts) on
// one thread, and, where a suite uses WebGPU, a copyBufferToBuffer on Dawn's adapter:
//
//   fma         f32x4 multiply-add peak of one thread (12 independent chains), GFLOP/s: the machine's best that
//               the kernels can issue, i.e. the better of mul and add apart (the strict build) and
//               f32x4.relaxed_madd (the relaxed build, fused by V8 where the machine has FMA; Node 20 compiles
//               it once --experimental-wasm-relaxed-simd is on, which relaxedSimdAvailable() turns on). A
//               figure of the strict kernels is thus bounded by a peak they cannot reach where FMA exists.
//   read        read bandwidth of one thread over a 4 MiB buffer (a 1024 x 1024 f32 matrix: in L3 here), GB/s
//   read-large  the same over 128 MiB (main memory), GB/s
//   copy        memory.copy of 32 MiB, bytes read + written, GB/s
//   gpu-copy    WebGPU copyBufferToBuffer of 4 MiB, bytes read + written, GB/s (in a child process: see measureGpu)
//
// Each probe lasts ~10-50 ms and keeps the median of a few repeats (what the machine delivered at that moment).
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { WasmHeap } from '../src/engine/cpu/fast/heap';
import { relaxedSimdAvailable } from '../src/engine/cpu/fast/backend';
import { WASM_PLAIN, WASM_PLAIN_RELAXED } from '../src/engine/cpu/fast/wasm.gen';

export type LimitKind = 'fma' | 'read' | 'read-large' | 'copy' | 'gpu-copy';

export const LIMITS: Record<LimitKind, { unit: string; what: string }> = {
  fma: { unit: 'GFLOP/s', what: 'wasm-simd multiply-add peak (best of mul+add and relaxed_madd)' },
  read: { unit: 'GB/s', what: 'read bandwidth, 4 MiB' },
  'read-large': { unit: 'GB/s', what: 'read bandwidth, 128 MiB' },
  copy: { unit: 'GB/s', what: 'memory.copy bandwidth, 32 MiB, read+write' },
  'gpu-copy': { unit: 'GB/s', what: 'WebGPU copyBufferToBuffer bandwidth, 4 MiB, read+write' },
};

interface ProbeExports {
  probeMulAdd(iters: number): number;
  probeMadd(iters: number): number;
  maddLane(a: number, b: number, c: number): number;
  probeRead(ptr: number, bytes: number, reps: number): number;
  probeCopy(dst: number, src: number, bytes: number, reps: number): void;
}

const MiB = 1 << 20;

export class LimitProbe {
  private sink = 0;

  private constructor(
    private readonly x: ProbeExports,
    private readonly heap: WasmHeap,
    private readonly small: number,
    private readonly large: number,
    private readonly copyDst: number,
    /** The relaxed build's exports on the same memory, where the engine compiles relaxed SIMD. */
    private readonly relaxed: ProbeExports | null,
  ) {}

  /** Whether the relaxed build runs here and fuses its multiply-add (one rounding), or null without it. */
  get fused(): boolean | null {
    if (!this.relaxed) return null;
    const a = 1 + 2 ** -12;
    return this.relaxed.maddLane(a, a, -(1 + 2 ** -11)) !== 0;
  }

  static async create(): Promise<LimitProbe> {
    const heap = new WasmHeap(false);
    const bytes = (b64: string) => Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const module = await WebAssembly.compile(bytes(WASM_PLAIN));
    const inst = await WebAssembly.instantiate(module, { env: { memory: heap.memory } });
    const relaxed = (await relaxedSimdAvailable())
      ? ((await WebAssembly.instantiate(await WebAssembly.compile(bytes(WASM_PLAIN_RELAXED)), { env: { memory: heap.memory } })).exports as unknown as ProbeExports)
      : null;
    const small = heap.alloc(4 * MiB);
    const large = heap.alloc(128 * MiB);
    const copyDst = heap.alloc(32 * MiB);
    // touch every page (and give the sums finite values)
    new Float32Array(heap.buffer, small, MiB).fill(1);
    new Float32Array(heap.buffer, large, 32 * MiB).fill(1);
    new Float32Array(heap.buffer, copyDst, 8 * MiB).fill(0);
    return new LimitProbe(inst.exports as unknown as ProbeExports, heap, small, large, copyDst, relaxed);
  }

  /**
   * Median rate (units per second) over `tries` runs of fn, which returns the units it did. The median, as for the
   * figures themselves: on a shared machine the best of a few short runs catches quiet moments that a figure's
   * longer calls do not, and would make the figure look further from its limit than the code is.
   */
  private best(tries: number, fn: () => number): number {
    const rates: number[] = [];
    for (let i = 0; i < tries; i++) {
      const t0 = performance.now();
      const units = fn();
      const s = (performance.now() - t0) / 1000;
      rates.push(units / s);
    }
    rates.sort((a, b) => a - b);
    return rates[rates.length >> 1];
  }

  /** A CPU limit now, in LIMITS[kind].unit (one thread). */
  measure(kind: Exclude<LimitKind, 'gpu-copy'>): number {
    const x = this.x;
    switch (kind) {
      case 'fma': {
        const iters = 200_000; // x 96 flops: ~1 ms at 20 GFLOP/s
        x.probeMulAdd(iters);
        const strict = this.best(5, () => ((this.sink += x.probeMulAdd(iters * 10)), iters * 10 * 96)) / 1e9;
        const r = this.relaxed;
        if (!r) return strict;
        r.probeMadd(iters);
        return Math.max(strict, this.best(5, () => ((this.sink += r.probeMadd(iters * 10)), iters * 10 * 96)) / 1e9);
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

  /**
   * Dawn's adapter's copy bandwidth now (GB/s), measured in a child process (null, with the reason logged,
   * without an adapter or when the child fails): here Dawn on lavapipe aborts the process now and then on
   * buffer copies (pthread mutex assertion / std::system_error, more often the larger the copy), which must not
   * take the benchmark down.
   */
  measureGpu(log: (m: string) => void = () => {}): number | null {
    const r = spawnSync(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '--gpu-copy-child'], { encoding: 'utf8', timeout: 60_000 });
    const line = (r.stdout ?? '').split('\n').find((l) => l.startsWith('{'));
    if (!line) {
      log(`gpu-copy probe failed (status ${r.status}, signal ${r.signal}): ${(r.stderr ?? '').split('\n').filter((l) => l && !l.startsWith('Warning')).slice(-2).join(' | ')}`);
      return null;
    }
    const v = (JSON.parse(line) as { gbs: number | null }).gbs;
    if (v === null) log('gpu-copy probe: no WebGPU adapter');
    return v;
  }

  /** The child's side: one copy-bandwidth measurement on this process's adapter. */
  static async gpuCopyChild(): Promise<number | null> {
    const { nodeAdapter } = await import('./gpu');
    const adapter = await nodeAdapter();
    if (!adapter) return null;
    const device = await adapter.requestDevice();
    // 4 MiB buffers: copies of 16 MiB and more abort more often here.
    const { copyBandwidth } = await import('./gpu/common');
    return copyBandwidth(device, 4 * MiB, 16, 3);
  }

  dispose(): void {
    void this.heap;
  }
}

/**
 * The limits of one suite's run. CPU limits are probed at the start and again right after every record that
 * names one, so each figure's limit is measured beside it (the mean of the probes just before and just after
 * it); the WebGPU copy bandwidth at the start and the end of the suite, the better of the two.
 */
export class LimitTracker {
  private readonly last = new Map<LimitKind, number>();
  readonly samples = new Map<LimitKind, number[]>();

  constructor(
    private readonly prober: LimitProbe,
    private readonly log: (m: string) => void = () => {},
  ) {}

  private keep(kind: LimitKind, v: number): number {
    this.samples.set(kind, [...(this.samples.get(kind) ?? []), v]);
    return v;
  }

  /** Probes every CPU limit (and, with gpu, the WebGPU one) once. */
  async start(gpu: boolean): Promise<void> {
    for (const k of ['fma', 'read', 'read-large', 'copy'] as const) this.last.set(k, this.keep(k, this.prober.measure(k)));
    if (gpu) this.gpu();
  }

  /** Probes the WebGPU copy bandwidth (start and end of a suite that uses WebGPU). */
  gpu(): void {
    const v = this.prober.measureGpu(this.log);
    if (v !== null) this.keep('gpu-copy', v);
  }

  /** A CPU limit beside a figure just measured: the mean of the probe before it and a probe now. */
  beside(kind: Exclude<LimitKind, 'gpu-copy'>): number {
    const now = this.probe(kind);
    const before = this.last.get(kind) ?? now;
    this.last.set(kind, now);
    return (before + now) / 2;
  }

  /** A CPU limit probed now (one thread), kept with the suite's probes. */
  probe(kind: Exclude<LimitKind, 'gpu-copy'>): number {
    return this.keep(kind, this.prober.measure(kind));
  }

  /** The best WebGPU copy bandwidth probed in this suite, if any. */
  gpuCopy(): number | null {
    const s = this.samples.get('gpu-copy');
    return s?.length ? Math.max(...s) : null;
  }
}

if (process.argv.includes('--gpu-copy-child'))
  void LimitProbe.gpuCopyChild().then(
    (gbs) => {
      console.log(JSON.stringify({ gbs }));
      process.exit(0);
    },
    (e) => {
      console.error((e as Error).message);
      process.exit(1);
    },
  );
