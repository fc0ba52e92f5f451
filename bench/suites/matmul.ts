// matmul suite: GFLOP/s of y = x W^T (K = N = 1024; M = 1, 16, 256, 1024; f32, q8 and q4 weights) on
// onnxruntime-web's wasm EP (the baseline), cpu-fast, cpu-ref and WebGPU, side by side in one run with
// the same thread counts (1 and 2), printed with ratios to ORT.
//
// WebGPU cases come from bench/matmul-cases/webgpu.ts (its `webgpuMatmulRunner`, kernel 'auto') when that
// module loads and finds an adapter; otherwise they are skipped with a logged note.
import { median, type BenchContext, type BenchSuite, type Bound } from '../lib';
import { caseFlops, caseName, caseShape, cpuFastRunner, cpuRefRunner, type MatmulCase, type MatmulRunner, type WeightKind } from '../matmul-cases/cpu';
import { caseData } from '../matmul-cases/cpu';
import { startOrt } from '../matmul-cases/ort';
import { createCpuFastBackend, relaxedSimdAvailable, type CpuFastBackend } from '../../src/engine/cpu/fast/backend';
import type { Tensor } from '../../src/engine/backend';
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


/**
 * cpu-fast's kernel versions side by side: matmul v1 (kernels/gemm.ts, gemv.ts), v2 (gemm2.ts, gemv2.ts) packing
 * the weight on every call, and v2 reading it packed once (`packed`: the f32 weight frozen, as inference and LoRA
 * hold it; quantized ones always), each in the strict build and, where the engine has relaxed SIMD, the relaxed
 * one (kernels/simd.ts), alternating call by call (the order rotating) on the same inputs, so all see the same
 * load. Records: GFLOP/s of each (case `matmul-KIND kernel vV[ packed] SIMD`, bounded as the main rows) and the
 * median per-round ratios v2 / v1 (strict), relaxed v2 / strict v1 and relaxed v2 packed / relaxed v2.
 */
async function kernelVersions(ctx: BenchContext, threads: number, bound: (c: MatmulCase, s: number, best?: number) => Bound | undefined): Promise<void> {
  const builds: CpuFastBackend[] = [await createCpuFastBackend({ threads, simd: 'strict' })];
  if (await relaxedSimdAvailable()) builds.push(await createCpuFastBackend({ threads, simd: 'relaxed' }));
  else ctx.log('relaxed SIMD not available here: strict build only');
  const variants = builds.flatMap((b) => [
    { b, v: 1 as const, packed: false, name: `v1 ${b.simd}` },
    { b, v: 2 as const, packed: false, name: `v2 ${b.simd}` },
    { b, v: 2 as const, packed: true, name: `v2 packed ${b.simd}` },
  ]);
  const at = (name: string) => variants.findIndex((x) => x.name === name);
  try {
    for (const M of MS)
      for (const kind of KINDS) {
        const c: MatmulCase = { M, K, N, kind };
        const { x, w, q } = caseData(c);
        const ts = new Map(builds.map((b) => [b, { x: b.tensor(x, [M, K]), w: (q ? b.uploadQuantized(q) : b.tensor(w, [N, K])) as Tensor }]));
        for (const [b, t] of ts) if (!q) b.freeze(t.w);
        const calls = Math.max(1, Math.ceil(0.02 / (caseFlops(c) / 20e9)));
        const sample = (i: number) => {
          const { b, v, packed } = variants[i];
          b.matmulKernel = v;
          b.packWeights = packed;
          const t = ts.get(b)!;
          const t0 = performance.now();
          for (let j = 0; j < calls; j++) b.free(b.matmul(t.x, t.w));
          return (performance.now() - t0) / 1000 / calls;
        };
        variants.forEach((_, i) => sample(i));
        const times: number[][] = variants.map(() => []);
        // Each round ends with a probe of the case's limit, so each sample is set against the machine of its round.
        const limitKind = bound(c, 1)!.kind as 'fma' | 'read';
        const probes: number[] = [];
        const reps = ctx.quick ? 2 : 31;
        for (let r = 0; r < reps; r++) {
          for (let j = 0; j < variants.length; j++) {
            const i = (j + r) % variants.length;
            times[i].push(sample(i));
          }
          probes.push(ctx.probe(limitKind));
        }
        variants.forEach(({ name }, i) => {
          const b = bound(c, median(times[i]), Math.min(...times[i]))!;
          const paired = { use: times[i].map((t) => bound(c, t)!.use), limit: probes };
          ctx.record({ case: `${caseName(c)} kernel ${name}`, backend: 'cpu-fast', metric: 'gflops', value: caseFlops(c) / median(times[i]) / 1e9, unit: 'GFLOP/s', threads, shape: caseShape(c), bound: { ...b, paired } });
        });
        const ratio = (a: number, b: number) => median(times[a].map((t, r) => t / times[b][r]));
        // How much faster variant a runs than b (the median per-round time of b over a's), named `label`.
        const speedup = (a: string, b: string, label = `${a} / ${b}`) => ctx.record({ case: `${caseName(c)} kernel ${label}`, backend: 'cpu-fast', metric: 'speedup', value: ratio(at(b), at(a)), unit: 'x', threads, shape: caseShape(c) });
        speedup('v2 strict', 'v1 strict', 'v2 / v1 strict');
        if (builds.length === 2) {
          speedup('v2 relaxed', 'v1 strict');
          speedup('v2 packed relaxed', 'v2 relaxed');
        } else speedup('v2 packed strict', 'v2 strict');
        ctx.log(`${threads}t ${caseName(c)} ${caseShape(c)}: ${variants.map(({ name }, i) => `${name} ${(caseFlops(c) / median(times[i]) / 1e9).toFixed(1)}`).join(', ')} GFLOP/s`);
        for (const [b, t] of ts) {
          b.free(t.x);
          b.free(t.w);
        }
      }
  } finally {
    for (const b of builds) {
      b.matmulKernel = 2;
      b.packWeights = true;
      b.dispose();
    }
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
    const bound = (c: MatmulCase, backend: string, s: number, best?: number): Bound | undefined => {
      if (c.M === 1) return { kind: backend === 'webgpu' ? 'gpu-copy' : 'read', use: weightBytes(c) / s / 1e9, best: best && weightBytes(c) / best / 1e9 };
      return backend === 'webgpu' ? undefined : { kind: 'fma', use: gflops(c, s), best: best && gflops(c, best) };
    };
    const put = (c: MatmulCase, backend: 'ort-wasm' | 'cpu-fast' | 'cpu-ref' | 'webgpu', threads: number, s: number) =>
      ctx.record({ case: caseName(c), backend, metric: 'gflops', value: gflops(c, s), unit: 'GFLOP/s', threads, shape: caseShape(c), bound: bound(c, backend, s) });
    const worst: string[] = [];

    for (const threads of THREADS) {
      ctx.log(`cpu-fast kernel versions, ${threads} thread(s), interleaved call by call`);
      await kernelVersions(ctx, threads, (c, s, best) => bound(c, 'cpu-fast', s, best));
    }
    if (process.env.BENCH_MATMUL_VERSIONS_ONLY === '1') return;

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
