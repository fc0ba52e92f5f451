// The onnxruntime-web (wasm EP) baseline of the matmul suite: one single-node ONNX graph per case, built
// with our OnnxGraph writer. f32: MatMul with W^T (K,N) as an initializer (ORT pre-packs it, as we keep
// W in wasm memory). q4: com.microsoft MatMulNBits, bits 4, block 32, no zero-point input (= 8), whose
// blob is exactly our q4 words (lowest nibble first). q8: MatMulNBits bits 8, block 32, zero point 128,
// our per-row scale repeated for each block: the same numbers as our q8, if the wasm build has it.
//
// ort-web reads env.wasm.numThreads once, when it first initializes, so each thread count runs in its
// own child process (this file, forked with an IPC channel).
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { OnnxGraph } from '../../src/model/onnx/graph';
import { Q4_GROUP } from '../../src/engine/quant';
import { caseData, secondsPerCall, type MatmulCase } from './cpu';

/** Per case: seconds per product, or the reason ORT could not run it. */
export type OrtResult = { seconds: number; head: number[] } | { skipped: string };

function graphFor(c: MatmulCase): Uint8Array {
  const { w, q } = caseData(c);
  const g = new OnnxGraph(17, 'matmul');
  g.addInput('x', 'float32', [c.M, c.K]);
  g.addOutput('y', 'float32', [c.M, c.N]);
  if (c.kind === 'f32') {
    const wt = new Float32Array(c.K * c.N); // (K,N) = W^T
    for (let n = 0; n < c.N; n++) for (let k = 0; k < c.K; k++) wt[k * c.N + n] = w[n * c.K + k];
    g.addInitializer('w', wt, [c.K, c.N]);
    g.addNode('MatMul', ['x', 'w'], ['y']);
    return g.toBytes();
  }
  const blocks = q!.stride / Q4_GROUP;
  let blob: Uint8Array;
  let scales: Float32Array;
  if (c.kind === 'q4') {
    blob = new Uint8Array(q!.data.buffer, q!.data.byteOffset, q!.data.byteLength); // (N, blocks, 16)
    scales = q!.scales;
  } else {
    // q8 rows are padded to 4, MatMulNBits to 32: re-pad to 32 with zeros (stored as 128).
    const kpad = blocks * Q4_GROUP;
    blob = new Uint8Array(c.N * kpad).fill(128);
    const bytes = new Int8Array(q!.data.buffer, q!.data.byteOffset, q!.data.byteLength);
    for (let n = 0; n < c.N; n++) for (let k = 0; k < c.K; k++) blob[n * kpad + k] = bytes[n * q!.stride + k] + 128;
    scales = new Float32Array(c.N * blocks);
    for (let n = 0; n < c.N; n++) scales.fill(q!.scales[n], n * blocks, (n + 1) * blocks);
  }
  const bits = c.kind === 'q4' ? 4 : 8;
  g.addInitializer('w.q', blob, [c.N, blocks, (Q4_GROUP * bits) / 8]);
  g.addInitializer('w.scales', scales, [c.N * blocks]);
  g.addNode('MatMulNBits', ['x', 'w.q', 'w.scales'], ['y'], { K: c.K, N: c.N, bits, block_size: Q4_GROUP, accuracy_level: 0 }, 'com.microsoft');
  return g.toBytes();
}

/** One case in the child: seconds per product and the first outputs (to check the graph's meaning). */
async function runCase(ort: typeof import('onnxruntime-web'), c: MatmulCase, samples: number): Promise<OrtResult> {
  try {
    const session = await ort.InferenceSession.create(graphFor(c), { executionProviders: ['wasm'] });
    const x = new ort.Tensor('float32', caseData(c).x, [c.M, c.K]);
    const first = await session.run({ x });
    const head = Array.from((first.y.data as Float32Array).subarray(0, 8));
    const seconds = await secondsPerCall(async () => {
      const r = await session.run({ x });
      r.y.dispose();
    }, samples);
    await session.release();
    return { seconds, head };
  } catch (e) {
    return { skipped: (e as Error).message.split('\n')[0].slice(0, 200) };
  }
}

/** onnxruntime-web with a fixed thread count, in its own process; cases are timed one message at a time
 *  so the suite can interleave them with ours (the machine's load drifts; interleaving keeps it fair). */
export interface OrtProcess {
  time(c: MatmulCase, samples: number): Promise<OrtResult>;
  close(): void;
}

export async function startOrt(threads: number): Promise<OrtProcess> {
  const child = fork(fileURLToPath(import.meta.url), [String(threads)], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  let pending: ((r: OrtResult) => void) | null = null;
  let failed: Error | null = null;
  child.on('message', (m) => {
    const p = pending;
    pending = null;
    p?.(m as OrtResult);
  });
  child.on('exit', (code) => {
    failed = new Error(`ort child exited (${code})`);
    pending?.({ skipped: failed.message });
    pending = null;
  });
  return {
    time(c, samples) {
      if (failed) return Promise.resolve({ skipped: failed.message });
      return new Promise((resolve) => {
        pending = resolve;
        child.send({ c, samples });
      });
    },
    close() {
      if (child.connected) child.disconnect();
    },
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.send) {
  const threads = Number(process.argv[2]);
  const ort = await import('onnxruntime-web');
  ort.env.wasm.numThreads = threads;
  ort.env.logLevel = 'error';
  process.on('message', (m: { c: MatmulCase; samples: number }) => {
    void runCase(ort, m.c, m.samples).then((r) => process.send!(r));
  });
  process.on('disconnect', () => process.exit(0)); // ort's worker threads would keep the process alive
}
