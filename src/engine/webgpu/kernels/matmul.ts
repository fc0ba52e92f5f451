// Matmul y = x W^T with f32 / q8 / q4 weights, dequantization fused into the kernel. Four numbered
// versions, kept so the benchmark can time each one:
//   v1 'naive'  one thread per output, straight loop over K.
//   v2 'tiled'  64x64 output tile per workgroup, 16-deep K slices staged in workgroup memory (weights
//               dequantized while staging), 4x4 outputs per thread held in registers.
//   v3 'gemv'   for small M (decode): each weight word is read once for up to 8 rows of x; 32 lanes
//               split K per output and reduce in workgroup memory. q4 words decode 8 values at once.
//   v4 'block'  BR (1 or 4) rows x 4 columns per thread, no workgroup memory and no barrier.
//   v5 'gemv2'  v3 for decode, rewritten: 16-byte weight words dequantised in registers, vec4 x, one subgroup
//               per output row reduced with subgroupAdd (workgroup memory without subgroups). See gemv2 below.
//   v6 'gemv-fused' v5 over several weights per dispatch with an epilogue (q|k|v side by side, silu(gate)*up,
//               + residual): ./fused.ts, the Backend's optional fused ops; not a version `matmul` takes.
//   v7 'gemv-lane' the decode GEMV for adapters that run shaders on CPU cores: one output row per lane, K walked
//               in the same order by every lane (x broadcast, one gather per weight word), epilogues of v6 too:
//               ./gemv-lane.ts.
// 'auto' picks block for K <= 512, else a GEMV for M <= 16 (a 64-row tile would be mostly empty; measured
// on lavapipe at K = N = 1024, M = 16: gemv ~3x tiled) and tiled otherwise; the GEMV is the backend's `gemv`
// option (v5 'gemv2' on a GPU, v7 'gemv-lane' on a CPU adapter; 'gemv' runs v3) where K fits its words. v7 is a
// tile too (8 rows of x by 128 weight rows per workgroup, registers only): with it 'auto' takes v7 for every M
// (lavapipe, 0.6B gate projection q4, CPU time side by side: M = 4 8 against tiled's 206 ms, M = 32 55 against
// 259, M = 128 178 against 482). A sharded weight is one
// dispatch per shard, each writing its own columns [row0, row0 + rows) of y.
// Backward: dX = dY W through the (dequantized, possibly row-sharded) weight, and dW += dY^T X for
// trainable f32 weights. Both are C (R,C) = A (R,I) . B (I,C) with different loaders: 64x64 output tiles
// per workgroup of 16x16 threads, each thread a 4x4 register block (rows ty + 16i, cols tx + 16j), 16-deep
// slices of A and B staged in workgroup memory; or, for small K, the block product without barriers.
import type { DType } from '../../backend';
import { assertShape } from '../../errors';
import { type GpuContext, grid1d } from '../context';
import { type GpuTensor, assertF32 } from '../tensor';
import { dispatchGemvLane, gemvLaneFits } from './gemv-lane';
import { weightBuffers, weightStride, weightWgsl } from './weights';

export const MATMUL_VERSIONS = ['naive', 'tiled', 'gemv', 'block', 'gemv2', 'gemv-lane'] as const;
export type MatmulVersion = (typeof MATMUL_VERSIONS)[number] | 'auto';
export type GemvVersion = 'gemv' | 'gemv2' | 'gemv-lane';

// Uniforms shared by every version: y (M, N) receives columns n0 .. n0+ns from a shard of ns rows.
const HEAD = /* wgsl */ `
struct P { m: u32, k: u32, ns: u32, n: u32, n0: u32, stride: u32, m0: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
`;

function naive(dtype: DType): string {
  return /* wgsl */ `${HEAD}${weightWgsl(dtype, 3)}
@compute @workgroup_size(8, 8)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let n = g.x;
  let m = g.y;
  if (n >= p.ns || m >= p.m) { return; }
  var acc = 0.0;
  for (var k = 0u; k < p.k; k++) { acc += x[m * p.k + k] * wload(n, k, p.stride); }
  y[m * p.n + p.n0 + n] = acc;
}`;
}

function tiled(dtype: DType): string {
  return /* wgsl */ `${HEAD}${weightWgsl(dtype, 3)}
const BM = 64u;
const BN = 64u;
const BK = 16u;
var<workgroup> xs: array<f32, 1024>; // [BK][BM]
var<workgroup> ws_: array<f32, 1024>; // [BK][BN]
@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) lid: vec3u) {
  let l = lid.y * 16u + lid.x;
  let nb = wg.x * BN;
  let mb = wg.y * BM;
  var acc: array<f32, 16>;
  for (var k0 = 0u; k0 < p.k; k0 += BK) {
    // stage x[mb..mb+64, k0..k0+16] and W[nb..nb+64, k0..k0+16]; 4 values per thread each, zero-padded
    for (var j = 0u; j < 4u; j++) {
      let e = l * 4u + j;      // 0..1023
      let r = e / BK;          // row within the tile
      let kk = e % BK;         // k within the slice
      let k = k0 + kk;
      let m = mb + r;
      xs[kk * BM + r] = select(0.0, x[m * p.k + k], m < p.m && k < p.k);
      let n = nb + r;
      ws_[kk * BN + r] = select(0.0, wload(n, k, p.stride), n < p.ns && k < p.k);
    }
    workgroupBarrier();
    for (var kk = 0u; kk < BK; kk++) {
      var a: array<f32, 4>;
      var b: array<f32, 4>;
      for (var i = 0u; i < 4u; i++) {
        a[i] = xs[kk * BM + lid.y + 16u * i];
        b[i] = ws_[kk * BN + lid.x + 16u * i];
      }
      for (var i = 0u; i < 4u; i++) {
        for (var j = 0u; j < 4u; j++) { acc[i * 4u + j] += a[i] * b[j]; }
      }
    }
    workgroupBarrier();
  }
  for (var i = 0u; i < 4u; i++) {
    let m = mb + lid.y + 16u * i;
    for (var j = 0u; j < 4u; j++) {
      let n = nb + lid.x + 16u * j;
      if (m < p.m && n < p.ns) { y[m * p.n + p.n0 + n] = acc[i * 4u + j]; }
    }
  }
}`;
}

// Per dtype: how many storage words of a row one lane step covers, and the partial dot of that step with
// the R rows of x. R is a compile-time constant so that, unrolled, the accumulators are indexed by
// constants and stay in registers (a runtime-indexed private array is often spilled to memory); rows
// past M are skipped.
function gemvWord(dtype: DType): { words: string; dot: string } {
  const rows = (body: string) => `for (var m = 0u; m < R; m++) { if (m < mc) { let xr = (p.m0 + m) * p.k; ${body} } }`;
  if (dtype === 'f32') return { words: 'p.k', dot: `let w = wd[n * p.stride + kw];
      ${rows('acc[m] += x[xr + kw] * w;')}` };
  if (dtype === 'q8')
    return {
      words: '(p.k + 3u) / 4u',
      dot: `let word = wd[n * (p.stride / 4u) + kw];
      let s = ws[n];
      for (var j = 0u; j < 4u; j++) {
        let k = kw * 4u + j;
        if (k >= p.k) { break; }
        let w = f32(bitcast<i32>(((word >> (8u * j)) & 0xffu) << 24u) >> 24u) * s;
        ${rows('acc[m] += x[xr + k] * w;')}
      }`,
    };
  // q4: one lane per group of 32 values (4 words, one scale); each word's 8 weights are decoded once and
  // reused for every row of x, and the scale is applied once per group and row.
  return {
    words: '(p.k + 31u) / 32u',
    dot: `let wb = n * (p.stride / 8u) + kw * 4u;
      let s = ws[n * (p.stride / 32u) + kw];
      let k0 = kw * 32u;
      for (var j = 0u; j < 4u; j++) {
        let word = wd[wb + j];
        var wv: array<f32, 8>;
        for (var b = 0u; b < 8u; b++) { wv[b] = f32((word >> (4u * b)) & 0xfu) - 8.0; }
        let kj = k0 + j * 8u;
        let nb = min(8u, max(p.k, kj) - kj); // 8 except in a last, partial group
        ${rows('var d = 0.0; for (var b = 0u; b < nb; b++) { d += x[xr + kj + b] * wv[b]; } acc[m] += d * s;')}
      }`,
  };
}

const GEMV_M = 8; // most rows of x per dispatch
const AUTO_GEMV_MAX_M = 16;
// Short dot products (a small model's hidden and MLP widths): 'block' for every M. Measured on the
// bundled policy (K = 128, 384): decode forward 567 -> 39 ms on SwiftShader, 56 -> 19 ms on lavapipe;
// a 600-token prefill's matmuls 13.4 -> 2.1 s on SwiftShader. Its per-output sums do not depend on M, so
// a sequence decodes the same alone or in a batch.
const AUTO_BLOCK_MAX_K = 512;
/**
 * Rows per gemv dispatch for `left` remaining rows: 1 (decode of one sequence) or 8 (the unused rows of a
 * block are skipped). Two variants keep shader compilation, slow on software adapters, down.
 */
export const gemvRows = (left: number) => (left === 1 ? 1 : GEMV_M);
function gemv(dtype: DType, r: number): string {
  const w = gemvWord(dtype);
  return /* wgsl */ `${HEAD}${weightWgsl(dtype, 3)}
const R = ${r}u;
var<workgroup> red: array<f32, ${256 * r}>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  let row = l / 32u;        // 8 outputs per workgroup
  let lane = l % 32u;
  let n = (wg.y * nw.x + wg.x) * 8u + row;
  var acc: array<f32, ${r}>;
  let mc = min(R, p.m - p.m0);
  if (n < p.ns) {
    for (var kw = lane; kw < ${w.words}; kw += 32u) {
      ${w.dot}
    }
  }
  for (var m = 0u; m < R; m++) { red[m * 256u + l] = acc[m]; }
  workgroupBarrier(); // one barrier, then lane 0 of each output sums its 32 partials
  if (lane == 0u && n < p.ns) {
    for (var m = 0u; m < mc; m++) {
      var sum = 0.0;
      for (var i = 0u; i < 32u; i++) { sum += red[m * 256u + l + i]; }
      y[(p.m0 + m) * p.n + p.n0 + n] = sum;
    }
  }
}`;
}

// v4 'block': each thread computes a block of BR rows x 4 columns straight from storage (per k: 4 weight
// loads and BR x loads for 4*BR products), with no workgroup memory and no barrier. Every output is summed
// over k in plain order, whatever BR and the block it lands in, so a row's result does not depend on the
// other rows of the batch.
const BLOCK_ROWS = 4;
function block(dtype: DType, br: number): string {
  // unrolled in the source: accumulators are named vec4s (one per row), never a runtime-indexed array,
  // which software adapters keep in memory
  const rows = Array.from({ length: br }, (_, i) => i);
  return /* wgsl */ `${HEAD}${weightWgsl(dtype, 3)}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  let cols = (p.ns + 3u) / 4u;
  let idx = (wg.y * nw.x + wg.x) * 64u + l; // one thread per (block of ${br} rows, 4 columns)
  let m0 = (idx / cols) * ${br}u;
  let nb = (idx % cols) * 4u;
  if (m0 >= p.m) { return; }
  // clamped indices instead of branches: rows/columns past the end compute a duplicate, never stored
  let w0 = min(nb, p.ns - 1u);
  let w1 = min(nb + 1u, p.ns - 1u);
  let w2 = min(nb + 2u, p.ns - 1u);
  let w3 = min(nb + 3u, p.ns - 1u);
  ${rows.map((i) => `let x${i} = min(m0 + ${i}u, p.m - 1u) * p.k;\n  var a${i} = vec4f(0.0);`).join('\n  ')}
  for (var k = 0u; k < p.k; k++) {
    let w = vec4f(wload(w0, k, p.stride), wload(w1, k, p.stride), wload(w2, k, p.stride), wload(w3, k, p.stride));
    ${rows.map((i) => `a${i} += x[x${i} + k] * w;`).join('\n    ')}
  }
  let nc = min(4u, p.ns - nb);
  ${rows.map((i) => `if (m0 + ${i}u < p.m) { for (var j = 0u; j < nc; j++) { y[(m0 + ${i}u) * p.n + p.n0 + nb + j] = a${i}[j]; } }`).join('\n  ')}
}`;
}

// v5 'gemv2': the decode GEMV, reading weights as wide as storage allows and reducing with subgroups. A
// workgroup of 64 lanes owns 8 output rows; each subgroup (of any size up to 64) takes rows in turn, its lanes split
// the row's K in 16-byte words (a vec4<u32> is one q4 group of 32 weights with its one scale, or 16 q8 weights; f32
// reads vec4f), dequantise the word in registers once for the R rows of x (read as vec4f), accumulate in f32, and
// one subgroupAdd per row gives the sum. Without subgroups (or with them switched off) teams of 8 lanes reduce
// through workgroup memory after one barrier. Taken for K a multiple of the word (32 q4, 16 q8, 4 f32: every
// model width); other K run v3.
export const GEMV2_WG = 64;
export const GEMV2_ROWS = 8; // output rows per workgroup
/** Elements of K one 16-byte word holds, by dtype. */
export const GEMV2_WORD: Record<string, number> = { f32: 4, q8: 16, q4: 32 };
export function gemv2Fits(dtype: DType, k: number): boolean {
  return dtype !== 'i32' && k % GEMV2_WORD[dtype] === 0;
}
function gemv2(dtype: DType, r: number, subgroups: boolean): string {
  const rows = Array.from({ length: r }, (_, i) => i);
  const perWord = GEMV2_WORD[dtype];
  const xv = perWord / 4; // vec4f of x per word
  // w0..w{xv-1}: the word's weights as vec4f; the q8 scale (one per row) is applied once after the sum
  let decode: string;
  if (dtype === 'f32') decode = 'let w0 = wd[n * (p.stride / 4u) + g];';
  else if (dtype === 'q8')
    decode = `let wq = wd[n * (p.stride / 16u) + g];
        ${[0, 1, 2, 3].map((j) => `let w${j} = vec4f(bitcast<vec4i>(vec4u(wq[${j}]) << vec4u(24u, 16u, 8u, 0u)) >> vec4u(24u));`).join('\n        ')}`;
  else
    decode = `let wq = wd[n * (p.stride / 32u) + g];
        let s = ws[n * (p.stride / 32u) + g];
        ${[0, 1, 2, 3].map((j) => `let w${2 * j} = vec4f((vec4u(wq[${j}]) >> vec4u(0u, 4u, 8u, 12u)) & vec4u(15u)) - 8.0;
        let w${2 * j + 1} = vec4f((vec4u(wq[${j}]) >> vec4u(16u, 20u, 24u, 28u)) & vec4u(15u)) - 8.0;`).join('\n        ')}`;
  // q4: the group's scale once per group and row
  const dots = (i: number) =>
    `acc${i} += ${dtype === 'q4' ? 's * (' : ''}${Array.from({ length: xv }, (_, j) => `dot(w${j}, x[xr${i} + g * ${xv}u + ${j}u])`).join(' + ')}${dtype === 'q4' ? ')' : ''};`;
  const wType = dtype === 'f32' ? 'vec4f' : 'vec4u';
  const scales = dtype === 'f32' ? '' : `@group(0) @binding(4) var<storage, read> ws: array<f32>;`;
  const rowScale = dtype === 'q8' ? ' * ws[n]' : '';
  const body = /* wgsl */ `
      var g = lane;
      ${rows.map((i) => `var acc${i} = 0.0;`).join(' ')}
      for (; g < groups; g += lanes) {
        ${decode}
        ${rows.map((i) => (r === 1 ? dots(i) : `if (${i}u < mc) { ${dots(i)} }`)).join('\n        ')}
      }`;
  const store = (v: (i: number) => string) =>
    rows.map((i) => `if (${i}u < mc) { y[(p.m0 + ${i}u) * p.n + p.n0 + n] = ${v(i)}${rowScale}; }`).join('\n        ');
  const head = /* wgsl */ `${subgroups ? 'enable subgroups;\ndiagnostic(off, subgroup_uniformity);\n' : ''}
struct P { m: u32, k: u32, ns: u32, n: u32, n0: u32, stride: u32, m0: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<vec4f>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read> wd: array<${wType}>;
${scales}
const R = ${r}u;`;
  const prologue = `let groups = p.k / ${perWord}u;
  let mc = min(R, p.m - p.m0);
  // rows of x past M: skipped by a branch every lane takes alike; their index is clamped all the same
  ${rows.map((i) => `let xr${i} = (p.m0 + min(${i}u, mc - 1u)) * (p.k / 4u);`).join('\n  ')}
  let base = (wg.y * nw.x + wg.x) * ${GEMV2_ROWS}u;`;
  if (subgroups)
    return /* wgsl */ `${head}
@compute @workgroup_size(${GEMV2_WG})
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32,
        @builtin(subgroup_size) sg: u32, @builtin(subgroup_invocation_id) lane: u32) {
  ${prologue}
  let lanes = min(sg, ${GEMV2_WG}u);
  // subgroups are consecutive lanes of the workgroup: subgroup t takes rows t, t + teams, ... (every lane of a
  // subgroup the same row, so subgroupAdd sums one row)
  let teams = ${GEMV2_WG}u / lanes;
  for (var t = l / lanes; t < ${GEMV2_ROWS}u; t += teams) {
    let n = base + t;
    if (n < p.ns) {
      ${body}
      ${rows.map((i) => `let s${i} = subgroupAdd(acc${i});`).join('\n      ')}
      if (lane == 0u) {
        ${store((i) => `s${i}`)}
      }
    }
  }
}`;
  const TEAM = GEMV2_WG / GEMV2_ROWS; // 8 lanes per row
  return /* wgsl */ `${head}
var<workgroup> red: array<f32, ${GEMV2_WG * r}>;
@compute @workgroup_size(${GEMV2_WG})
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  ${prologue}
  let lanes = ${TEAM}u;
  let lane = l % ${TEAM}u;
  let n = base + l / ${TEAM}u;
  let nn = min(n, p.ns - 1u); // rows past the shard compute a duplicate, never stored (the barrier needs every lane)
  {
    let n = nn;
    ${body}
    ${rows.map((i) => `red[${i * GEMV2_WG}u + l] = acc${i};`).join('\n    ')}
  }
  workgroupBarrier();
  if (lane == 0u && n < p.ns) {
    ${rows.map((i) => `var s${i} = 0.0; for (var j = 0u; j < ${TEAM}u; j++) { s${i} += red[${i * GEMV2_WG}u + l + j]; }`).join('\n    ')}
    {
      let n = nn;
      ${store((i) => `s${i}`)}
    }
  }
}`;
}

const kernels = new Map<string, { code: string }>();
function gemv2Kernel(dtype: DType, rows: number, subgroups: boolean): { code: string } {
  const key = `gemv2/${dtype}/${rows}/${subgroups}`;
  let k = kernels.get(key);
  if (!k) kernels.set(key, (k = { code: gemv2(dtype, rows, subgroups) }));
  return k;
}
function kernel(version: Exclude<MatmulVersion, 'auto' | 'gemv2' | 'gemv-lane'>, dtype: DType, rows = GEMV_M): { code: string } {
  const key = `${version}/${dtype}/${version === 'gemv' || version === 'block' ? rows : ''}`;
  let k = kernels.get(key);
  if (!k) {
    k = { code: version === 'naive' ? naive(dtype) : version === 'tiled' ? tiled(dtype) : version === 'block' ? block(dtype, rows) : gemv(dtype, rows) };
    kernels.set(key, k);
  }
  return k;
}

// x (M,K), w (N,K) f32|q8|q4 -> (M,N); `gemv` is the GEMV version 'auto' takes for small M
export function matmul(ctx: GpuContext, x: GpuTensor, w: GpuTensor, version: MatmulVersion = 'auto', gemv: GemvVersion = 'gemv2'): GpuTensor {
  checkMatmul(x, w);
  const y = ctx.empty([x.size / w.shape[1], w.shape[0]], 'f32');
  matmulInto(ctx, x, w, y, 0, version, gemv);
  return y;
}

function checkMatmul(x: GpuTensor, w: GpuTensor): void {
  assertF32(x, 'matmul x');
  assertShape(w.shape.length === 2 && w.dtype !== 'i32', `matmul: W must be (N,K) f32|q8|q4, got ${w.dtype} (${w.shape})`);
  const [n, k] = w.shape;
  assertShape(k > 0 && x.shape.length >= 1 && x.shape[x.shape.length - 1] === k, `matmul: x (${x.shape}) vs W (${n},${k})`);
}

/** The kernel version `version` resolves to for M rows of x and weight w ('auto': by K and M). */
export function matmulKernelFor(w: GpuTensor, m: number, version: MatmulVersion, gemv: GemvVersion): Exclude<MatmulVersion, 'auto'> {
  const k = w.shape[1];
  // v7 tiles any M (blocks of 8 rows of x from its grid): on a CPU adapter it is the kernel for every M
  const v = version === 'auto' ? (k <= AUTO_BLOCK_MAX_K ? 'block' : gemv === 'gemv-lane' || m <= AUTO_GEMV_MAX_M ? gemv : 'tiled') : version;
  // (K not a multiple of v7's word: under 'auto', tiled past the GEMV's M, as on a GPU)
  if (v === 'gemv-lane') return gemvLaneFits(w.dtype, k) ? v : version === 'auto' && m > AUTO_GEMV_MAX_M ? 'tiled' : 'gemv';
  return v === 'gemv2' && !gemv2Fits(w.dtype, k) ? 'gemv' : v;
}

/**
 * x (M,K), w (N,K) -> columns [col0, col0 + N) of y (M, Y): what `matmul` does with y of its own, and what a fused
 * op's unfused fallback uses to write several products side by side into one output (src/engine/webgpu/kernels/fused.ts).
 */
export function matmulInto(ctx: GpuContext, x: GpuTensor, w: GpuTensor, y: GpuTensor, col0: number, version: MatmulVersion = 'auto', gemv: GemvVersion = 'gemv2'): void {
  checkMatmul(x, w);
  const k = w.shape[1];
  const m = x.size / k;
  const n = y.shape[y.shape.length - 1];
  assertShape(y.size === m * n && col0 + w.shape[0] <= n, `matmulInto: y (${y.shape}) vs ${m} rows, columns ${col0}..${col0 + w.shape[0]}`);
  const v = matmulKernelFor(w, m, version, gemv);
  const code = v === 'naive' || v === 'tiled' ? kernel(v, w.dtype) : null;
  const stride = weightStride(w);
  for (const part of w.parts) {
    const bufs = [x.buf, y.buf, ...weightBuffers(part)];
    const u = (m0: number) => [m, k, part.rows, n, col0 + part.row0, stride, m0];
    if (v === 'naive') ctx.dispatch(code!, bufs, u(0), [Math.ceil(part.rows / 8), Math.ceil(m / 8)]);
    else if (v === 'tiled') ctx.dispatch(code!, bufs, u(0), [Math.ceil(part.rows / 64), Math.ceil(m / 64)]);
    else if (v === 'block') {
      const br = m === 1 ? 1 : BLOCK_ROWS;
      ctx.dispatch(kernel('block', w.dtype, br), bufs, u(0), grid1d(Math.ceil(m / br) * Math.ceil(part.rows / 4), 64));
    }
    else if (v === 'gemv-lane')
      dispatchGemvLane(ctx, 'plain', w.dtype, bufs, { m, k, ns: part.rows, n, col0: col0 + part.row0, stride });
    else if (v === 'gemv2') {
      const groups = Math.ceil(part.rows / GEMV2_ROWS);
      const gy = Math.ceil(groups / 65535);
      for (let m0 = 0; m0 < m; ) {
        const r = gemvRows(m - m0);
        ctx.dispatch(gemv2Kernel(w.dtype, r, ctx.hasSubgroups), bufs, u(m0), [Math.ceil(groups / gy), gy]);
        m0 += r;
      }
    } else {
      const groups = Math.ceil(part.rows / 8);
      const gy = Math.ceil(groups / 65535);
      for (let m0 = 0; m0 < m; ) {
        const r = gemvRows(m - m0);
        ctx.dispatch(kernel('gemv', w.dtype, r), bufs, u(m0), [Math.ceil(groups / gy), gy]);
        m0 += r;
      }
    }
  }
}

const BT = 64; // output tile edge
const BK = 16; // inner slice

/** The tiled kernel body around `loadA(r, i)`, `loadB(i, c)` and `store(r, c, v)`. */
const tiledProduct = (decls: string) => /* wgsl */ `
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
const BLOCK_MAX_K = 512;
const blockedProduct = (decls: string) => /* wgsl */ `
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
// Backward of `y[m * p.n + p.n0 + n] = acc` (acc = sum_k x[m,k] W[n,k]) with respect to x:
// dx (M,K) (+)= dy[:, row0:row0+rows] (M,rows) . Wshard (rows,K): rows = M, inner = shard rows, cols = K
function dxKernel(dtype: DType, block: boolean) {
  let k = dxKernels.get(`${dtype}/${block}`);
  if (!k) {
    k = {
      code: (block ? blockedProduct : tiledProduct)(/* wgsl */ `
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

// ... and with respect to W (trainable f32 weights only):
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
const DW = { code: tiledProduct(dwDecls) };
const DW_BLOCK = { code: blockedProduct(dwDecls) };

/** dy (M,N), x (M,K), dw (N,K) f32: dw += dy^T x */
export function matmulBackwardWeight(ctx: GpuContext, dy: GpuTensor, x: GpuTensor, dw: GpuTensor): void {
  for (const t of [dy, x, dw]) assertF32(t, 'matmulBackwardWeight');
  const [N, K] = dw.shape;
  const M = dy.size / N;
  assertShape(Number.isInteger(M) && x.size === M * K, `matmulBackwardWeight: dy (${dy.shape}), x (${x.shape}), dW (${N},${K})`);
  if (K <= BLOCK_MAX_K) ctx.dispatch(DW_BLOCK, [dy.buf, x.buf, dw.buf], [N, M, K], blockGrid(N, K));
  else ctx.dispatch(DW, [dy.buf, x.buf, dw.buf], [N, M, K], [Math.ceil(K / BT), Math.ceil(N / BT), 1]);
}
