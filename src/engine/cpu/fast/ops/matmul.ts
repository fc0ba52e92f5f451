// Matmul y = x W^T in every weight format and its backward (the transposed products), on the gemm/gemv
// wasm kernels. Pack modes of the gemm kernel: src/engine/cpu/fast/kernels/gemm.ts.
import type { Tensor } from '../../../backend';
import { assertShape } from '../../../errors';
import { asCpu, CpuTensor } from '../../tensor';
import { type Temps, type WasmRuntime } from '../runtime';

const FWD = { f32: 0, q8: 1, q4: 2 } as const;
/** Pack mode of a weight given as packed panels (kernels/gemm2.ts FWD_PANELS; version 2 only). */
const FWD_PANELS = 6;
/** The blocked product's kernel of the runtime's version (kernels/gemm.ts, gemm2.ts: same arguments and bits). */
const gemmOf = (rt: WasmRuntime) => (rt.matmulKernel === 2 ? 'gemm2' : 'gemm');
const scratchOf = (rt: WasmRuntime) => (rt.matmulKernel === 2 ? rt.gemm2Scratch : rt.gemmScratch);
const ROWS = { f32: 3, q8: 4, q4: 5 } as const;
/** Rows of A a product of version 2 takes per block (kernels/gemm2.ts MC): B's panels are packed again for each. */
const MC = 128;

/**
 * B packed into all its panels once for this call (kernels/gemm2.ts packPanels), where version 2 would pack each
 * panel again for every MC rows of A (a training product of 2,048 rows: 16 times); 0 where it would not (fewer rows,
 * version 1). Allocated before the caller's outputs (it may grow memory) and freed with its temps.
 */
function callPanels(rt: WasmRuntime, mode: number, B: number, scales: number, stride: number, Nout: number, inner: number, rows: number, temps: Temps): number {
  if (rt.matmulKernel !== 2 || rows <= MC) return 0;
  const ptr = rt.packPanels(mode, B, scales, stride, Nout, inner, temps);
  temps.push(ptr);
  return ptr;
}

// x (M,K), w (N,K) f32|q8|q4 -> (M,N)
export function matmul(rt: WasmRuntime, x: Tensor, w: Tensor): Tensor {
  const xs = asCpu(x).f32;
  const wc = asCpu(w);
  const [N, K] = wc.shape;
  assertShape(xs.length % K === 0 && x.shape[x.shape.length - 1] === K, `matmul: x (${x.shape}) vs W (${N},${K})`);
  const M = xs.length / K;
  const temps: Temps = [];
  try {
    const W = rt.weight(wc, temps);
    const small = M <= 3;
    // A quantized or frozen weight's panels, packed once, else for this call where that saves packing (before the
    // allocations below: packing may grow memory).
    const panels = small ? 0 : rt.matmulKernel === 2 ? rt.panelsOf(wc, W, FWD[W.kind], temps) || callPanels(rt, FWD[W.kind], W.ptr, W.scales, W.stride, N, K, M, temps) : 0;
    const X = rt.place(xs, temps);
    const y = rt.output([M, N], temps);
    const scratch = small ? 64 + W.stride * 4 : scratchOf(rt);
    const slots = panels ? [FWD_PANELS, X, 4, K * 4, M, K, N, panels, 0, 0, y.ptr, N, 0] : [FWD[W.kind], X, 4, K * 4, M, K, N, W.ptr, W.scales, W.stride, y.ptr, N, 0];
    rt.launch(small ? (rt.matmulKernel === 2 ? 'gemv2' : 'gemv') : gemmOf(rt), slots, scratch, 2 * M * K * N, temps);
    return y.finish();
  } finally {
    rt.release(temps);
  }
}

/** Backward of `y = x W^T` with respect to x: dy (M,N), w (N,K) f32|q8|q4 -> dx (M,K) = dy W. */
export function matmulBackwardInput(rt: WasmRuntime, dy: Tensor, w: Tensor): Tensor {
  const g = asCpu(dy).f32;
  const wc = asCpu(w);
  const [N, K] = wc.shape;
  assertShape(dy.shape[dy.shape.length - 1] === N && g.length % N === 0, `matmulBackwardInput: dy (${dy.shape}) vs W (${N},${K})`);
  const M = g.length / N;
  const temps: Temps = [];
  try {
    const W = rt.weight(wc, temps);
    const panels = callPanels(rt, ROWS[W.kind], W.ptr, W.scales, W.stride, K, N, M, temps);
    const G = rt.place(g, temps);
    const dx = rt.output([M, K], temps);
    const slots = panels ? [FWD_PANELS, G, 4, N * 4, M, N, K, panels, 0, 0, dx.ptr, K, 0] : [ROWS[W.kind], G, 4, N * 4, M, N, K, W.ptr, W.scales, W.stride, dx.ptr, K, 0];
    rt.launch(gemmOf(rt), slots, scratchOf(rt), 2 * M * K * N, temps);
    return dx.finish();
  } finally {
    rt.release(temps);
  }
}

/** ... and with respect to W: dy (M,N), x (M,K), dw (N,K) f32: dw += dy^T x, in place. */
export function matmulBackwardWeight(rt: WasmRuntime, dy: Tensor, x: Tensor, dw: Tensor): void {
  const g = asCpu(dy).f32;
  const xs = asCpu(x).f32;
  const d = asCpu(dw).f32;
  assertShape(dw.shape.length === 2, `matmulBackwardWeight: dW (${dw.shape}) is not a matrix`);
  const [N, K] = dw.shape;
  const M = g.length / N;
  assertShape(Number.isInteger(M) && xs.length === M * K, `matmulBackwardWeight: dy (${dy.shape}), x (${x.shape}), dW (${N},${K})`);
  const temps: Temps = [];
  try {
    const G = rt.place(g, temps);
    const X = rt.place(xs, temps);
    const panels = callPanels(rt, ROWS.f32, X, 0, K, K, M, N, temps);
    const resident = rt.isResident(d);
    const D = rt.place(d, temps);
    // C = dW (N,K) += A (N,M) . B (M,K) with A = dy^T read in place: step N floats along m, 1 between rows.
    const slots = panels ? [FWD_PANELS, G, N * 4, 4, N, M, K, panels, 0, 0, D, K, 1] : [ROWS.f32, G, N * 4, 4, N, M, K, X, 0, K, D, K, 1];
    rt.launch(gemmOf(rt), slots, scratchOf(rt), 2 * M * K * N, temps);
    if (!resident) d.set(rt.heap.f32(D, d.length));
  } finally {
    rt.release(temps);
  }
}
