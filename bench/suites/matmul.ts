// matmul suite: GFLOP/s of y = x W^T (K = N = 1024; M = 1, 16, 256, 1024; f32, q8 and q4 weights) on
// onnxruntime-web's wasm EP (the baseline), cpu-fast, cpu-ref and WebGPU, side by side in one run with
// the same thread counts (1 and 2), printed with ratios to ORT.
//
// WebGPU cases come from bench/matmul-cases/webgpu.ts (its `webgpuMatmulRunner`, kernel 'auto') when that
// module loads and finds an adapter; otherwise they are skipped with a logged note.
import type { BenchContext, BenchSuite, Bound } from '../lib';
import { caseFlops, caseName, caseShape, cpuFastRunner, cpuRefRunner, type MatmulCase, type MatmulRunner, type WeightKind } from '../matmul-cases/cpu';
import { caseData } from '../matmul-cases/cpu';
import { startOrt } from '../matmul-cases/ort';
import { dequantAt } from '../../src/engine/quant';

/** Largest relative error of ORT's first outputs y[0, 0..7] against the f64 product of the same weights. */
function headError(c: MatmulCase, head: number[]): number {
  const { x, w, q } = caseData(c);
  let worst = 0;
  head.forEach((got, n) => {
    let acc = 0;
    let mag = 0;
    for (let k = 0; k < c.K; k++) {
      const p = x[k] * (q ? dequantAt(q, n, k) : w[n * c.K + k]);
      acc += p;
      mag += Math.abs(p);
    }
    worst = Math.max(worst, Math.abs(got - acc) / mag);
  });
  return worst;
}

/** Bytes of the weights a product reads: f32, q8 (a byte a value, an f32 scale a row), q4 (a nibble a value, an f32 scale per 32). */
const weightBytes = (c: MatmulCase) => (c.kind === 'f32' ? 4 * c.N * c.K : c.kind === 'q8' ? c.N * c.K + 4 * c.N : (c.N * c.K) / 2 + 4 * c.N * Math.ceil(c.K / 32));

const K = 1024;
const N = 1024;
const MS = [1, 16, 256, 1024];
const KINDS: WeightKind[] = ['f32', 'q8', 'q4'];
const THREADS = [1, 2];
/** cpu-ref runs at ~0.7 GFLOP/s: only the shapes that take well under a second. */
const REF_MAX_M = 16;

async function webgpuRunner(ctx: BenchContext): Promise<MatmulRunner | null> {
  if (process.env.BENCH_WEBGPU === '0') {
    ctx.log('webgpu skipped: BENCH_WEBGPU=0');
    return null;
  }
  const path = '../matmul-cases/webgpu';
  let mod: { webgpuMatmulRunner?: (version: string, log: (m: string) => void) => Promise<MatmulRunner & { adapter: string | null }> };
  try {
    mod = await import(/* @vite-ignore */ path);
  } catch (e) {
    ctx.log(`webgpu skipped: bench/matmul-cases/webgpu.ts not available (${(e as Error).message.split('\n')[0]})`);
    return null;
  }
  if (typeof mod.webgpuMatmulRunner !== 'function') {
    ctx.log('webgpu skipped: bench/matmul-cases/webgpu.ts exports no webgpuMatmulRunner()');
    return null;
  }
  try {
    const r = await mod.webgpuMatmulRunner('auto', ctx.log);
    if (r.adapter === null) return null;
    ctx.log(`webgpu adapter: ${r.adapter}`);
    return r;
  } catch (e) {
    ctx.log(`webgpu skipped: ${(e as Error).message.split('\n')[0]}`);
    return null;
  }
}

const suite: BenchSuite = {
  name: 'matmul',
  async run(ctx) {
    const samples = ctx.quick ? 2 : 7;
    const cases: MatmulCase[] = MS.flatMap((M) => KINDS.map((kind) => ({ M, K, N, kind })));
    const gflops = (c: MatmulCase, s: number) => caseFlops(c) / s / 1e9;
    // Limits (bench/limits.ts): M = 1 streams the weights once, so its bound is the read bandwidth of a 4 MiB
    // buffer (the f32 weights' size; q8/q4 are smaller) per thread, or the adapter's copy bandwidth for WebGPU;
    // M >= 16 is bound by the wasm-simd mul+add peak per thread (WebGPU: no compute peak measured).
    const bound = (c: MatmulCase, backend: string, s: number): Bound | undefined => {
      if (c.M === 1) return { kind: backend === 'webgpu' ? 'gpu-copy' : 'read', use: weightBytes(c) / s / 1e9 };
      return backend === 'webgpu' ? undefined : { kind: 'fma', use: gflops(c, s) };
    };
    const put = (c: MatmulCase, backend: 'ort-wasm' | 'cpu-fast' | 'cpu-ref' | 'webgpu', threads: number, s: number) =>
      ctx.record({ case: caseName(c), backend, metric: 'gflops', value: gflops(c, s), unit: 'GFLOP/s', threads, shape: caseShape(c), bound: bound(c, backend, s) });
    const worst: string[] = [];

    for (const threads of THREADS) {
      ctx.log(`ort-wasm and cpu-fast, ${threads} thread(s), interleaved case by case`);
      const ort = await startOrt(threads);
      const fast = await cpuFastRunner(threads);
      let minRatio = Infinity;
      let minAt = '';
      try {
        for (const c of cases) {
          const o = await ort.time(c, samples);
          if ('seconds' in o) {
            put(c, 'ort-wasm', threads, o.seconds);
            const err = headError(c, o.head);
            if (err > 1e-3) ctx.log(`WARNING: ort-wasm ${caseName(c)} ${caseShape(c)} disagrees with the reference by ${err.toExponential(2)}`);
          } else ctx.log(`ort-wasm skipped ${caseName(c)} ${caseShape(c)}: ${o.skipped}`);
          const s = (await fast.time(c, samples))!;
          put(c, 'cpu-fast', threads, s);
          if ('seconds' in o && o.seconds / s < minRatio) {
            minRatio = o.seconds / s;
            minAt = `${caseName(c)} ${caseShape(c)}`;
          }
        }
      } finally {
        fast.dispose();
        ort.close();
      }
      worst.push(`${threads} thread(s): lowest cpu-fast / ort-wasm = ${minRatio.toFixed(2)}x (${minAt})`);
    }

    ctx.log('cpu-ref (1 thread, small M only)');
    const ref = cpuRefRunner();
    for (const c of cases.filter((c) => c.M <= REF_MAX_M)) put(c, 'cpu-ref', 1, (await ref.time(c, ctx.quick ? 1 : 3))!);

    const gpu = await webgpuRunner(ctx);
    if (gpu) {
      try {
        for (const c of cases) {
          const s = await gpu.time(c, samples);
          if (s !== null) put(c, 'webgpu', 1, s);
        }
      } finally {
        gpu.dispose();
      }
    }
    for (const w of worst) ctx.log(w);
  },
};

export default suite;
