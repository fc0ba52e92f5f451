// Matmul backward: dX = dY W through the (dequantized, possibly row-sharded) weight, and dW += dY^T X
// for trainable f32 weights. Both are C (R,C) = A (R,I) . B (I,C) with different loaders: 64x64 output
// tiles per workgroup of 16x16 threads, each thread a 4x4 register block (rows ty + 16i, cols tx + 16j),
// 16-deep slices of A and B staged in workgroup memory.
import type { DType } from '../../backend';
import { assertShape } from '../../errors';
import { type GpuContext, grid1d } from '../context';
import { weightBuffers, weightStride, weightWgsl } from '../kernels/weights';
import { type GpuTensor, assertF32 } from '../tensor';

const BT = 64; // output tile edge
const BK = 16; // inner slice

/** The tiled kernel body around `loadA(r, i)`, `loadB(i, c)` and `store(r, c, v)`. */
const tiled = (decls: string) => /* wgsl */ `
${decls}
var<workgroup> As: array<f32, ${BK * BT}>; // [i][r]
var<workgroup> Bs: array<f32, ${BK * BT}>; // [i][c]
@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(local_invocation_index) li: u32) {
  let r0 = wg.y * ${BT}u;
  let c0 = wg.x * ${BT}u;
  var acc: array<f32, 16>;
  for (var i0 = 0u; i0 < p.inner; i0 += ${BK}u) {
    for (var e = 0u; e < 4u; e++) {
      let idx = li + e * 256u;
      let r = idx / ${BK}u;
      let ia = idx % ${BK}u;
      var a = 0.0;
      if (r0 + r < p.rows && i0 + ia < p.inner) { a = loadA(r0 + r, i0 + ia); }
      As[ia * ${BT}u + r] = a;
      let ib = idx / ${BT}u;
      let c = idx % ${BT}u;
      var b = 0.0;
      if (i0 + ib < p.inner && c0 + c < p.cols) { b = loadB(i0 + ib, c0 + c); }
      Bs[ib * ${BT}u + c] = b;
    }
    workgroupBarrier();
    for (var i = 0u; i < ${BK}u; i++) {
      var a: array<f32, 4>;
      var b: array<f32, 4>;
      for (var u = 0u; u < 4u; u++) {
        a[u] = As[i * ${BT}u + lid.y + 16u * u];
        b[u] = Bs[i * ${BT}u + lid.x + 16u * u];
      }
      for (var u = 0u; u < 4u; u++) {
        for (var v = 0u; v < 4u; v++) { acc[u * 4u + v] += a[u] * b[v]; }
      }
    }
    workgroupBarrier();
  }
  for (var u = 0u; u < 4u; u++) {
    for (var v = 0u; v < 4u; v++) {
      let r = r0 + lid.y + 16u * u;
      let c = c0 + lid.x + 16u * v;
      if (r < p.rows && c < p.cols) { store(r, c, acc[u * 4u + v]); }
    }
  }
}`;

/**
 * The same product without workgroup memory or barriers: one thread per 4x4 output block, A and B read
 * straight from storage, accumulators in named vec4s (a runtime-indexed array stays in memory on
 * software adapters). Taken for weights of K <= BLOCK_MAX_K (a small model), where the barriers of the
 * tiled kernel dominate on software adapters (a bundled-policy GRPO update on SwiftShader: 40 s in tiled
 * dX/dW, 4 s this way).
 */
export const BLOCK_MAX_K = 512;
const blocked = (decls: string) => /* wgsl */ `
${decls}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  let cb = (p.cols + 3u) / 4u;
  let idx = (wg.y * nw.x + wg.x) * 64u + l; // one thread per (4 rows, 4 columns)
  let r0 = (idx / cb) * 4u;
  let c0 = (idx % cb) * 4u;
  if (r0 >= p.rows) { return; }
  // clamped indices: rows/columns past the end compute a duplicate that is never stored
  let ra = array<u32, 4>(r0, min(r0 + 1u, p.rows - 1u), min(r0 + 2u, p.rows - 1u), min(r0 + 3u, p.rows - 1u));
  let ca = array<u32, 4>(c0, min(c0 + 1u, p.cols - 1u), min(c0 + 2u, p.cols - 1u), min(c0 + 3u, p.cols - 1u));
  let ra0 = ra[0]; let ra1 = ra[1]; let ra2 = ra[2]; let ra3 = ra[3];
  let ca0 = ca[0]; let ca1 = ca[1]; let ca2 = ca[2]; let ca3 = ca[3];
  var a0 = vec4f(0.0); var a1 = vec4f(0.0); var a2 = vec4f(0.0); var a3 = vec4f(0.0);
  for (var i = 0u; i < p.inner; i++) {
    let b = vec4f(loadB(i, ca0), loadB(i, ca1), loadB(i, ca2), loadB(i, ca3));
    a0 += loadA(ra0, i) * b;
    a1 += loadA(ra1, i) * b;
    a2 += loadA(ra2, i) * b;
    a3 += loadA(ra3, i) * b;
  }
  let acc = array<vec4f, 4>(a0, a1, a2, a3);
  for (var u = 0u; u < 4u; u++) {
    for (var v = 0u; v < 4u; v++) {
      if (r0 + u < p.rows && c0 + v < p.cols) { store(r0 + u, c0 + v, acc[u][v]); }
    }
  }
}`;
const blockGrid = (rows: number, cols: number) => grid1d(Math.ceil(rows / 4) * Math.ceil(cols / 4), 64);

const dxKernels = new Map<string, { code: string }>();
// dx (M,K) (+)= dy[:, row0:row0+rows] (M,rows) . Wshard (rows,K): rows = M, inner = shard rows, cols = K
function dxKernel(dtype: DType, block: boolean) {
  let k = dxKernels.get(`${dtype}/${block}`);
  if (!k) {
    k = {
      code: (block ? blocked : tiled)(/* wgsl */ `
struct P { rows: u32, inner: u32, cols: u32, n: u32, row0: u32, stride: u32, acc: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read_write> dx: array<f32>;
${weightWgsl(dtype, 3)}
fn loadA(m: u32, n: u32) -> f32 { return dy[m * p.n + p.row0 + n]; }
fn loadB(n: u32, k: u32) -> f32 { return wload(n, k, p.stride); }
fn store(m: u32, k: u32, v: f32) {
  let o = m * p.cols + k;
  if (p.acc == 1u) { dx[o] += v; } else { dx[o] = v; }
}`),
    };
    dxKernels.set(`${dtype}/${block}`, k);
  }
  return k;
}

/** dy (M,N), w (N,K) f32|q8|q4 -> dx (M,K) = dy W */
export function matmulBackwardInput(ctx: GpuContext, dy: GpuTensor, w: GpuTensor): GpuTensor {
  assertF32(dy, 'matmulBackwardInput');
  const [N, K] = w.shape;
  assertShape(dy.shape[dy.shape.length - 1] === N && dy.size % N === 0, `matmulBackwardInput: dy (${dy.shape}) vs W (${N},${K})`);
  const M = dy.size / N;
  const dx = ctx.empty([M, K], 'f32');
  const block = K <= BLOCK_MAX_K;
  const grid: [number, number, number] = block ? blockGrid(M, K) : [Math.ceil(K / BT), Math.ceil(M / BT), 1];
  w.parts.forEach((part, i) => {
    ctx.dispatch(dxKernel(w.dtype, block), [dy.buf, dx.buf, ...weightBuffers(part)], [M, part.rows, K, N, part.row0, weightStride(w), i === 0 ? 0 : 1], grid);
  });
  return dx;
}

// dw (N,K) += dy^T (N,M) . x (M,K): rows = N, inner = M, cols = K
const dwDecls = /* wgsl */ `
struct P { rows: u32, inner: u32, cols: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> dw: array<f32>;
fn loadA(n: u32, m: u32) -> f32 { return dy[m * p.rows + n]; }
fn loadB(m: u32, k: u32) -> f32 { return x[m * p.cols + k]; }
fn store(n: u32, k: u32, v: f32) { dw[n * p.cols + k] += v; }`;
const DW = { code: tiled(dwDecls) };
const DW_BLOCK = { code: blocked(dwDecls) };

/** dy (M,N), x (M,K), dw (N,K) f32: dw += dy^T x */
export function matmulBackwardWeight(ctx: GpuContext, dy: GpuTensor, x: GpuTensor, dw: GpuTensor): void {
  for (const t of [dy, x, dw]) assertF32(t, 'matmulBackwardWeight');
  const [N, K] = dw.shape;
  const M = dy.size / N;
  assertShape(Number.isInteger(M) && x.size === M * K, `matmulBackwardWeight: dy (${dy.shape}), x (${x.shape}), dW (${N},${K})`);
  if (K <= BLOCK_MAX_K) ctx.dispatch(DW_BLOCK, [dy.buf, x.buf, dw.buf], [N, M, K], blockGrid(N, K));
  else ctx.dispatch(DW, [dy.buf, x.buf, dw.buf], [N, M, K], [Math.ceil(K / BT), Math.ceil(N / BT), 1]);
}
