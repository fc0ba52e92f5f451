// The CPU fast path's threads: N-1 workers plus the calling thread run the same wasm export on the same
// shared memory; the kernels share out the work in chunks claimed from a counter (kernels/sched.ts),
// so the job is done when the caller has run out of chunks and the workers that joined have finished.
//
// The backend API is synchronous, so a job is handed over through a control block in the shared memory
// (Atomics.notify wakes the workers; they spin briefly before sleeping, since ops come in quick
// succession) rather than postMessage, which would need the event loop. The caller waits with
// Atomics.wait, or spins where blocking is forbidden (a browser's main thread).
// Workers are plain JS (WORKER_SOURCE below) started from a string, so the same code runs under Node's
// worker_threads, a browser's Web Workers, vitest and a Vite build without any bundler configuration.
import { EngineError } from '../../errors';
import type { WasmHeap } from './heap';

/** Kernel ids, in the order both sides list the exports. */
export const KERNELS = ['gemm', 'gemv', 'attention1', 'rmsnorm', 'swiglu', 'axpb', 'attentionBackward1', 'softmaxRows', 'swigluBackward', 'adamw', 'rmsnormBackward', 'attention2', 'attentionBackward2', 'gemm2', 'gemv2', 'attention3', 'attentionBackward3', 'packPanels'] as const;
export type KernelName = (typeof KERNELS)[number];
type KernelFn = (args: number, tid: number, nth: number) => void;

// Control block (i32 slots).
const GEN = 0; // job generation: bumped to start a job (never 0)
const KERNEL = 1;
const ARGS = 2;
const ACTIVE = 3; // workers inside the current job
const QUIT = 4;
const ERROR = 5;
const READY = 6;
const NTH = 7;
const OPEN = 8; // generation of the job workers may still join; 0 once the caller has closed it
const JOINED = 9; // jobs joined by a worker, all workers together (a statistic for tests)
const CTRL_BYTES = 64;

/** A job that takes longer than this is taken as a dead worker rather than waited on forever. */
const JOB_TIMEOUT_MS = 600_000;

// Runs inside each worker. Receives { module, memory, ctrl, tid, kernels } once, then serves jobs.
// Joining is a handshake with the caller (see run()): count yourself in ACTIVE, then check that the job
// is still OPEN. A worker that wakes late finds the job closed and touches nothing; the kernels share
// work through a chunk counter, so the threads that did join have done all of it.
const WORKER_SOURCE = `
const start = async ({ module, memory, ctrl: ctrlPtr, tid, kernels }) => {
  const inst = await WebAssembly.instantiate(module, { env: { memory } });
  const fns = kernels.map((k) => inst.exports[k]);
  const ctrl = new Int32Array(memory.buffer, ctrlPtr, 16);
  let gen = Atomics.load(ctrl, ${GEN});
  Atomics.add(ctrl, ${READY}, 1);
  Atomics.notify(ctrl, ${READY});
  for (;;) {
    for (let i = 0; i < 20000 && Atomics.load(ctrl, ${GEN}) === gen; i++);
    while (Atomics.load(ctrl, ${GEN}) === gen) Atomics.wait(ctrl, ${GEN}, gen);
    gen = Atomics.load(ctrl, ${GEN});
    if (Atomics.load(ctrl, ${QUIT})) return;
    Atomics.add(ctrl, ${ACTIVE}, 1);
    if (Atomics.load(ctrl, ${OPEN}) === gen) {
      Atomics.add(ctrl, ${JOINED}, 1);
      try {
        fns[Atomics.load(ctrl, ${KERNEL})](Atomics.load(ctrl, ${ARGS}), tid, Atomics.load(ctrl, ${NTH}));
      } catch (e) {
        Atomics.store(ctrl, ${ERROR}, 1);
      }
    }
    Atomics.sub(ctrl, ${ACTIVE}, 1);
    Atomics.notify(ctrl, ${ACTIVE});
  }
};
if (typeof self !== 'undefined' && typeof self.postMessage === 'function' && typeof require === 'undefined') {
  self.onmessage = (e) => start(e.data).then(() => self.close());
} else {
  const { parentPort } = require('node:worker_threads');
  parentPort.once('message', (m) => start(m).then(() => process.exit(0)));
}
`;

interface AnyWorker {
  postMessage(m: unknown): void;
  terminate(): unknown;
}

function canBlock(): boolean {
  try {
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 1, 0);
    return true;
  } catch {
    return false;
  }
}

export class ThreadPool {
  private readonly ctrl: Int32Array;
  private readonly fns: KernelFn[];
  private readonly blocking: boolean;
  private disposed = false;

  private constructor(
    private readonly heap: WasmHeap,
    private readonly instance: WebAssembly.Instance,
    private readonly workers: AnyWorker[],
    private readonly ctrlPtr: number,
  ) {
    this.fns = KERNELS.map((k) => instance.exports[k] as KernelFn);
    this.ctrl = heap.shared ? new Int32Array(heap.buffer, ctrlPtr, 16) : new Int32Array(16);
    this.blocking = heap.shared && canBlock();
  }

  /** The value of an exported i32 constant of the module (e.g. a scratch size). */
  global(name: string): number {
    const g = this.instance.exports[name];
    if (!(g instanceof WebAssembly.Global)) throw new EngineError('unsupported', `cpu-fast: the wasm module exports no ${name}`);
    return g.value as number;
  }

  /** How many times a worker joined a job (0 would mean the caller always worked alone). */
  get workerJoins(): number {
    return Atomics.load(this.ctrl, JOINED);
  }

  /** Threads that run a job (workers + the caller). */
  get size(): number {
    return this.workers.length + 1;
  }

  /**
   * Instantiates the module on this thread and starts `threads - 1` workers (none without shared memory).
   * Resolves when every worker has instantiated the module.
   */
  static async create(heap: WasmHeap, module: WebAssembly.Module, threads: number): Promise<ThreadPool> {
    const instance = await WebAssembly.instantiate(module, { env: { memory: heap.memory } });
    const n = heap.shared ? Math.max(0, Math.floor(threads) - 1) : 0;
    const ctrlPtr = heap.alloc(CTRL_BYTES);
    if (heap.shared) new Int32Array(heap.buffer, ctrlPtr, 16).fill(0);
    const workers: AnyWorker[] = [];
    const pool = new ThreadPool(heap, instance, workers, ctrlPtr);
    try {
      for (let tid = 1; tid <= n; tid++) {
        const w = await spawn();
        workers.push(w);
        w.postMessage({ module, memory: heap.memory, ctrl: ctrlPtr, tid, kernels: [...KERNELS] });
      }
      await pool.waitReady(n);
    } catch (e) {
      pool.dispose();
      throw e instanceof EngineError ? e : new EngineError('unsupported', `cpu-fast: cannot start worker threads (${(e as Error).message})`);
    }
    return pool;
  }

  private async waitReady(n: number): Promise<void> {
    const deadline = Date.now() + 30_000;
    while (Atomics.load(this.ctrl, READY) < n) {
      if (Date.now() > deadline) throw new EngineError('unsupported', `cpu-fast: ${n} workers did not start within 30 s`);
      // Workers start asynchronously: yield to the event loop rather than blocking it.
      await new Promise((r) => setTimeout(r, 2));
    }
  }

  /** Runs kernel(args) on `threads` threads: all of the pool, or 1 (this thread only) for small jobs. */
  run(kernel: KernelName, args: number, parallel: boolean): void {
    if (this.disposed) throw new EngineError('unsupported', 'cpu-fast: the backend was disposed');
    const id = KERNELS.indexOf(kernel);
    const nth = parallel ? this.size : 1;
    if (nth === 1) {
      this.call(id, args, 0, 1);
      return;
    }
    const c = this.ctrl;
    Atomics.store(c, KERNEL, id);
    Atomics.store(c, ARGS, args);
    Atomics.store(c, NTH, nth);
    Atomics.store(c, ERROR, 0);
    let gen = (Atomics.load(c, GEN) + 1) | 0;
    if (gen === 0) gen = 1;
    Atomics.store(c, OPEN, gen);
    Atomics.store(c, GEN, gen);
    Atomics.notify(c, GEN);
    let mine: unknown = null;
    try {
      // Returns once every chunk is claimed (kernels/sched.ts); workers may still be finishing theirs.
      this.call(id, args, 0, nth);
    } catch (e) {
      mine = e;
    }
    // Close the job, then wait for the workers inside it. A worker counts itself in ACTIVE before it
    // checks OPEN, and we close before we read ACTIVE, so (sequentially consistent atomics) either we
    // see it and wait, or it sees the job closed and leaves without touching the arguments.
    Atomics.store(c, OPEN, 0);
    this.waitIdle();
    if (mine) throw mine;
    if (Atomics.load(c, ERROR)) throw new EngineError('unsupported', `cpu-fast: kernel ${kernel} failed in a worker thread`);
  }

  private call(id: number, args: number, tid: number, nth: number): void {
    try {
      this.fns[id](args, tid, nth);
    } catch (e) {
      throw new EngineError('unsupported', `cpu-fast: kernel ${KERNELS[id]} trapped (${(e as Error).message})`);
    }
  }

  private waitIdle(): void {
    const c = this.ctrl;
    const t0 = Date.now();
    for (let spin = 0; ; spin++) {
      const active = Atomics.load(c, ACTIVE);
      if (active === 0) return;
      if (spin > 2000) {
        if (this.blocking) Atomics.wait(c, ACTIVE, active, 50);
        if (Date.now() - t0 > JOB_TIMEOUT_MS) throw new EngineError('device-lost', 'cpu-fast: a worker thread stopped answering');
      }
    }
  }

  /** Stops the workers (they leave their wait loop and exit) so the process can end. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    if (this.workers.length) {
      Atomics.store(this.ctrl, QUIT, 1);
      Atomics.store(this.ctrl, GEN, (Atomics.load(this.ctrl, GEN) + 1) | 0 || 1);
      Atomics.notify(this.ctrl, GEN);
      for (const w of this.workers) void w.terminate();
    }
    this.heap.release(this.ctrlPtr);
  }
}

async function spawn(): Promise<AnyWorker> {
  const g = globalThis as { Worker?: new (url: string, opts?: object) => AnyWorker; process?: { versions?: { node?: string } } };
  if (g.process?.versions?.node) {
    const name = 'node:worker_threads';
    const wt = (await import(/* @vite-ignore */ name)) as typeof import('node:worker_threads');
    const w = new wt.Worker(WORKER_SOURCE, { eval: true });
    // Without a listener a worker's error would crash the process; the pool notices a dead worker
    // by its missing READY/DONE instead.
    w.on('error', (e) => console.error(`[cpu-fast] worker thread error: ${e.message}`));
    w.unref(); // a forgotten dispose() must not keep the process alive
    return w;
  }
  if (!g.Worker) throw new EngineError('unsupported', 'cpu-fast: no Worker constructor on this platform');
  const url = URL.createObjectURL(new Blob([WORKER_SOURCE], { type: 'text/javascript' }));
  try {
    return new g.Worker(url);
  } finally {
    // The worker has fetched its script by the time it runs; revoking later would leak the blob.
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  }
}
