// Matmul backward: dX = dY W through the (dequantized, possibly row-sharded) weight, and dW += dY^T X
// for trainable f32 weights. 16x16 output tiles, 16-deep slices staged in workgroup memory.
import type { DType } from '../../backend';
import { assertShape } from '../../errors';
import type { GpuContext } from '../context';
import { weightBuffers, weightStride, weightWgsl } from '../kernels/weights';
import { type GpuTensor, assertF32 } from '../tensor';

const TS = 16;

const dxKernels = new Map<DType, { code: string }>();
// dx (M,K) (+)= dy[:, row0:row0+rows] (M,rows) . Wshard (rows,K)
function dxKernel(dtype: DType) {
  let k = dxKernels.get(dtype);
  if (!k) {
    k = {
      code: /* wgsl */ `
struct P { m: u32, n: u32, k: u32, row0: u32, rows: u32, stride: u32, acc: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read_write> dx: array<f32>;
${weightWgsl(dtype, 3)}
var<workgroup> ta: array<f32, ${TS * TS}>;
var<workgroup> tb: array<f32, ${TS * TS}>;
@compute @workgroup_size(${TS}, ${TS})
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) lid: vec3u) {
  let col = wg.x * ${TS}u + lid.x; // k
  let row = wg.y * ${TS}u + lid.y; // m
  var s = 0.0;
  for (var n0 = 0u; n0 < p.rows; n0 += ${TS}u) {
    let na = n0 + lid.x;
    var a = 0.0;
    if (row < p.m && na < p.rows) { a = dy[row * p.n + p.row0 + na]; }
    ta[lid.y * ${TS}u + lid.x] = a;
    let nb = n0 + lid.y;
    var b = 0.0;
    if (nb < p.rows && col < p.k) { b = wload(nb, col, p.stride); }
    tb[lid.y * ${TS}u + lid.x] = b;
    workgroupBarrier();
    for (var i = 0u; i < ${TS}u; i++) { s += ta[lid.y * ${TS}u + i] * tb[i * ${TS}u + lid.x]; }
    workgroupBarrier();
  }
  if (row < p.m && col < p.k) {
    let o = row * p.k + col;
    if (p.acc == 1u) { dx[o] += s; } else { dx[o] = s; }
  }
}`,
    };
    dxKernels.set(dtype, k);
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
  const grid: [number, number, number] = [Math.ceil(K / TS), Math.ceil(M / TS), 1];
  w.parts.forEach((part, i) => {
    ctx.dispatch(dxKernel(w.dtype), [dy.buf, dx.buf, ...weightBuffers(part)], [M, N, K, part.row0, part.rows, weightStride(w), i === 0 ? 0 : 1], grid);
  });
  return dx;
}

// dw (N,K) += dy^T (N,M) . x (M,K)
const DW = {
  code: /* wgsl */ `
struct P { m: u32, n: u32, k: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> dw: array<f32>;
var<workgroup> ta: array<f32, ${TS * TS}>;
var<workgroup> tb: array<f32, ${TS * TS}>;
@compute @workgroup_size(${TS}, ${TS})
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) lid: vec3u) {
  let col = wg.x * ${TS}u + lid.x; // k
  let row = wg.y * ${TS}u + lid.y; // n
  var s = 0.0;
  for (var m0 = 0u; m0 < p.m; m0 += ${TS}u) {
    let ma = m0 + lid.x;
    var a = 0.0;
    if (row < p.n && ma < p.m) { a = dy[ma * p.n + row]; }
    ta[lid.y * ${TS}u + lid.x] = a;
    let mb = m0 + lid.y;
    var b = 0.0;
    if (mb < p.m && col < p.k) { b = x[mb * p.k + col]; }
    tb[lid.y * ${TS}u + lid.x] = b;
    workgroupBarrier();
    for (var i = 0u; i < ${TS}u; i++) { s += ta[lid.y * ${TS}u + i] * tb[i * ${TS}u + lid.x]; }
    workgroupBarrier();
  }
  if (row < p.n && col < p.k) { dw[row * p.k + col] += s; }
}`,
};

/** dy (M,N), x (M,K), dw (N,K) f32: dw += dy^T x */
export function matmulBackwardWeight(ctx: GpuContext, dy: GpuTensor, x: GpuTensor, dw: GpuTensor): void {
  for (const t of [dy, x, dw]) assertF32(t, 'matmulBackwardWeight');
  const [N, K] = dw.shape;
  const M = dy.size / N;
  assertShape(Number.isInteger(M) && x.size === M * K, `matmulBackwardWeight: dy (${dy.shape}), x (${x.shape}), dW (${N},${K})`);
  ctx.dispatch(DW, [dy.buf, x.buf, dw.buf], [M, N, K], [Math.ceil(K / TS), Math.ceil(N / TS), 1]);
}
