// v7 'gemv-lane': the decode GEMV written for adapters that run shaders on CPU cores (lavapipe, SwiftShader),
// beside v5 'gemv2' (./matmul.ts) and v6 'gemv-fused' (./fused.ts), which split a row's K across the lanes of a
// subgroup (the layout a real GPU wants: neighbouring lanes read neighbouring words of one row).
//
// A CPU adapter runs a subgroup as one SIMD register (lavapipe: 8 lanes of 32 bits, LLVM-vectorised across
// invocations). There a load whose address is the same in every lane is one scalar load and a broadcast, while a
// load whose address differs per lane is a gather. v5 gives every lane its own part of K: each 16-byte weight word
// is a gather, and so is every vec4f of x (8 of them per q4 word). v7 gives every lane its own output row and walks
// K in the same order in all lanes: x is read at an address every lane shares (broadcast, no gather), a weight word
// is one gather, and no reduction across lanes is needed (no subgroupAdd, no workgroup memory, no barrier). Each lane
// owns RN rows (register blocking: each x broadcast serves RN rows), a workgroup WG * RN rows.
//
// q4: a 16-byte word is a group of 32 weights and its scale; the -8 offset of the codes is taken out once per group
// as 8 * sum(x of the group) (sum_k x_k (q_k - 8) = sum_k x_k q_k - 8 sum_k x_k), so a weight costs a shift, a mask,
// a convert and a multiply-add. q8: the row scale once after the sum. f32: vec4f words.
//
// Measured (npm run bench -- gpu, 0.6B shape q4, steady decode steps side by side on the loaded 2-core machine): v7
// against v5 with subgroups 1.66-1.82x on lavapipe, 1.23-1.88x on SwiftShader; as the tile for every M on lavapipe
// (0.6B gate projection, CPU time) 2.7x the 64x64 tiled kernel at M = 128 and 25x at M = 4. Tried and dropped, no faster
// there: lanes splitting one word's bits (the word a broadcast load, x a gather), weights decoded by masks with x
// pre-scaled by powers of two, vec4 multiply-add accumulators instead of dot products, one 32-bit component of the
// rows' words at a time (fewer live values: SwiGLU 0.9x the time, the q8 LM head 1.2x). With the weight row made the
// same in every lane (wrong results, no gathers and 1/32 of the memory traffic) q4 took 0.8x the time, q8 0.85x: the
// kernel is bound by its instructions more than by gathers or memory here.
//
// The same kernel writes the fused epilogues of v6 (concat of 2 or 3 weights, silu(gate) * up, + residual). In a
// concatenation a workgroup runs the weight (or, where its rows straddle a boundary, the two weights) its rows come
// from: branches every lane takes alike, lanes whose row belongs to the other weight compute a clamped duplicate.
import type { DType } from '../../backend';
import type { Binding, GpuContext } from '../context';
import { weightBindings } from './weights';

export type GemvLaneKind = 'plain' | 'concat2' | 'concat3' | 'swiglu' | 'residual';

/**
 * Lanes per workgroup and rows per lane: a workgroup owns GEMV_LANE_WG * GEMV_LANE_RN output rows. Measured on
 * lavapipe (0.6B shape, CPU time per dispatch, variants interleaved on the loaded 2-core machine): 4 rows per lane
 * against 1 / 2 / 8, the q8 LM head 88 against 151 / 112 / 106 ms (M = 1); gate/up + SwiGLU at M = 8 18 against
 * 51 / 28 ms (32 lanes); 32 or 64 lanes alike.
 */
export const GEMV_LANE_WG = 32;
export const GEMV_LANE_RN = 4;
export const GEMV_LANE_ROWS = GEMV_LANE_WG * GEMV_LANE_RN;
/** Rows of x per workgroup when M > 1: each decoded weight word serves this many rows (the tile's other edge). */
export const GEMV_LANE_M = 8;
/** Elements of K one 16-byte word holds, by dtype. */
const WORD: Record<string, number> = { f32: 4, q8: 16, q4: 32 };

/** Whether v7 takes weights of this dtype and K (K a multiple of the 16-byte word, as v5). */
export function gemvLaneFits(dtype: DType, k: number): boolean {
  return dtype !== 'i32' && k % WORD[dtype] === 0;
}

/**
 * The WGSL of v7 for `r` rows of x (unrolled, rows past M skipped by a branch every lane takes alike) and `rn` output
 * rows per lane. Uniforms as v5/v6: m, k, ns (rows written), n (row length of y), n0 (first column written), stride
 * (padded K of the weights), m0 (first row of x), n1, n2 (concat: where the second and third weights' rows begin).
 */
export function gemvLaneSource(dtype: DType, r: number, kind: GemvLaneKind, rn = GEMV_LANE_RN, wg = GEMV_LANE_WG): string {
  const perWord = WORD[dtype];
  const xv = perWord / 4; // vec4f of x per word
  const rowsX = Array.from({ length: r }, (_, i) => i);
  const lanesRows = Array.from({ length: rn }, (_, j) => j);
  const sets = kind === 'concat2' ? ['0', '1'] : kind === 'concat3' ? ['0', '1', '2'] : kind === 'swiglu' ? ['g', 'u'] : [''];
  const { decls, resBinding } = weightBindings(sets, dtype);
  const wordsPerRow = `(p.stride / ${perWord}u)`;
  // the weights a row reads: `use` names the sets of one alternative (swiglu reads two at once)
  const accumulate = (use: string[]) => {
    const accs = use.flatMap((_, q) => lanesRows.flatMap((j) => rowsX.map((i) => `var a${q}_${j}_${i} = 0.0;`))).join(' ');
    const rowBase = use.flatMap((s, q) => lanesRows.map((j) => `let rb${q}_${j} = nl${j} * ${wordsPerRow};`)).join('\n    ');
    const loads = use
      .flatMap((s, q) =>
        lanesRows.map((j) => {
          if (dtype === 'f32') return `let w${q}_${j}_0 = wd${s}[rb${q}_${j} + g];`;
          if (dtype === 'q8')
            return `let wq${q}_${j} = wd${s}[rb${q}_${j} + g];
      ${[0, 1, 2, 3].map((c) => `let w${q}_${j}_${c} = vec4f(bitcast<vec4i>(vec4u(wq${q}_${j}[${c}]) << vec4u(24u, 16u, 8u, 0u)) >> vec4u(24u));`).join('\n      ')}`;
          return `let wq${q}_${j} = wd${s}[rb${q}_${j} + g];
      let sc${q}_${j} = ws${s}[rb${q}_${j} + g];
      ${[0, 1, 2, 3].map((c) => `let w${q}_${j}_${2 * c} = vec4f((vec4u(wq${q}_${j}[${c}]) >> vec4u(0u, 4u, 8u, 12u)) & vec4u(15u));
      let w${q}_${j}_${2 * c + 1} = vec4f((vec4u(wq${q}_${j}[${c}]) >> vec4u(16u, 20u, 24u, 28u)) & vec4u(15u));`).join('\n      ')}`;
        }),
      )
      .join('\n      ');
    // x of this word for each row of x: the same address in every lane
    const xs = (i: number) => {
      const xl = Array.from({ length: xv }, (_, c) => `let x${i}_${c} = x[xr${i} + g * ${xv}u + ${c}u];`).join(' ');
      return dtype === 'q4' ? `${xl} let xs${i} = 8.0 * dot(${Array.from({ length: xv }, (_, c) => `x${i}_${c}`).join(' + ')}, vec4f(1.0));` : xl;
    };
    const dots = (i: number) =>
      use
        .flatMap((_, q) =>
          lanesRows.map((j) => {
            const d = Array.from({ length: xv }, (_, c) => `dot(w${q}_${j}_${c}, x${i}_${c})`).join(' + ');
            return dtype === 'q4' ? `a${q}_${j}_${i} += sc${q}_${j} * (${d} - xs${i});` : `a${q}_${j}_${i} += ${d};`;
          }),
        )
        .join('\n        ');
    return `${accs}
    ${rowBase}
    for (var g = 0u; g < groups; g++) {
      ${loads}
      ${rowsX.map((i) => `${r === 1 ? '' : `if (${i}u < mc) `}{\n        ${xs(i)}\n        ${dots(i)}\n      }`).join('\n      ')}
    }`;
  };
  const rowScale = (s: string, j: number) => (dtype === 'q8' ? ` * ws${s}[nl${j}]` : '');
  // rows [lo, hi) of the output come from this alternative: lane rows outside it compute a clamped duplicate, never stored
  const stores = (use: string[], lo: string, hi: string) =>
    lanesRows
      .flatMap((j) =>
        rowsX.map((i) => {
          const o = `(m0 + ${i}u) * p.n + p.n0 + n${j}`;
          let v: string;
          if (kind === 'swiglu') v = `let gv = a0_${j}_${i}${rowScale(use[0], j)}; let uv = a1_${j}_${i}${rowScale(use[1], j)}; y[o] = gv / (1.0 + exp(-gv)) * uv;`;
          else if (kind === 'residual') v = `y[o] = rr[o] + a0_${j}_${i}${rowScale(use[0], j)};`;
          else v = `y[o] = a0_${j}_${i}${rowScale(use[0], j)};`;
          const inRange = lo === '0u' ? `n${j} < ${hi}` : `n${j} >= ${lo} && n${j} < ${hi}`;
          return `if (${i}u < mc && ${inRange}) { let o = ${o}; ${v} }`;
        }),
      )
      .join('\n    ');
  const alt = (use: string[], lo: string, hi: string) => `${lanesRows.map((j) => `let nl${j} = clamp(n${j}, ${lo}, ${hi} - 1u) - ${lo};`).join(' ')}
    ${accumulate(use)}
    ${stores(use, lo, hi)}`;
  // a workgroup runs each alternative whose rows it overlaps (one, or two where it straddles a boundary): the
  // conditions are the same in every lane
  const end = `base + ${wg * rn}u`;
  let body: string;
  if (kind === 'concat2') body = `if (base < p.n1) { ${alt(['0'], '0u', 'p.n1')} }\n  if (${end} > p.n1) { ${alt(['1'], 'p.n1', 'p.ns')} }`;
  else if (kind === 'concat3')
    body = `if (base < p.n1) { ${alt(['0'], '0u', 'p.n1')} }\n  if (base < p.n2 && ${end} > p.n1) { ${alt(['1'], 'p.n1', 'p.n2')} }\n  if (${end} > p.n2) { ${alt(['2'], 'p.n2', 'p.ns')} }`;
  else if (kind === 'swiglu') body = `{ ${alt(['g', 'u'], '0u', 'p.ns')} }`;
  else body = `{ ${alt([''], '0u', 'p.ns')} }`;
  return /* wgsl */ `
struct P { m: u32, k: u32, ns: u32, n: u32, n0: u32, stride: u32, m0: u32, n1: u32, n2: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<vec4f>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
${decls}
${kind === 'residual' ? `@group(0) @binding(${resBinding}) var<storage, read> rr: array<f32>;` : ''}
const R = ${r}u;
@compute @workgroup_size(${wg})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  let groups = p.k / ${perWord}u;
  let m0 = p.m0 + wid.z * R; // this workgroup's block of R rows of x (z of the grid)
  let mc = min(R, p.m - m0);
  ${rowsX.map((i) => `let xr${i} = (m0 + min(${i}u, mc - 1u)) * (p.k / 4u);`).join('\n  ')}
  let base = (wid.y * nw.x + wid.x) * ${wg * rn}u; // the workgroup's first row: the same in every lane
  // lane l owns rows base + l + ${wg} j; rows past the end compute a duplicate of the last, never stored
  ${lanesRows.map((j) => `let n${j} = base + l + ${wg * j}u;`).join('\n  ')}
  ${body}
}`;
}

const kernels = new Map<string, { code: string }>();
function laneKernel(dtype: DType, r: number, kind: GemvLaneKind): { code: string } {
  const key = `${dtype}/${r}/${kind}`;
  let k = kernels.get(key);
  if (!k) kernels.set(key, (k = { code: gemvLaneSource(dtype, r, kind) }));
  return k;
}

/**
 * Dispatch v7 over rows [0, ns) of the weights' buffers (one shard each, in binding order) for every row of x (M =
 * `m`, K = `k`), writing columns [col0, col0 + ns) of y (row length `n`); `extra` are the residual's buffer.
 */
export function dispatchGemvLane(
  ctx: GpuContext,
  kind: GemvLaneKind,
  dtype: DType,
  bufs: Binding[],
  o: { m: number; k: number; ns: number; n: number; col0: number; stride: number; n1?: number; n2?: number },
): void {
  const groups = Math.ceil(o.ns / GEMV_LANE_ROWS);
  const gy = Math.ceil(groups / 65535);
  const r = o.m === 1 ? 1 : GEMV_LANE_M; // one row of x (decode) or blocks of 8, one block per z of the grid
  const blocks = Math.ceil(o.m / r);
  for (let z0 = 0; z0 < blocks; z0 += 65535)
    ctx.dispatch(laneKernel(dtype, r, kind), bufs, [o.m, o.k, o.ns, o.n, o.col0, o.stride, z0 * r, o.n1 ?? 0, o.n2 ?? 0], [Math.ceil(groups / gy), gy, Math.min(65535, blocks - z0)]);
}
