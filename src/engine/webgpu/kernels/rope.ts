// RoPE and its backward, rotate-half (NeoX/Qwen) convention: one thread per (t, h, i < D/2) rotates the
// pair (i, i + D/2) by the angle of ROPE_ANGLE (src/engine/webgpu/wgsl.ts), whose frequency table is made
// once per (theta, D).
import { assertShape } from '../../errors';
import { type GpuContext, grid1d } from '../context';
import { type GpuTensor, assertF32 } from '../tensor';
import { INDEX, ROPE_ANGLE, WG, ropeFreqs } from '../wgsl';

const rotation = (sign: '' | '-') => /* wgsl */ `
struct P { t: u32, h: u32, d: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> pos: array<i32>;
@group(0) @binding(3) var<storage, read> freq: array<vec2f>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
${INDEX}
${ROPE_ANGLE}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) w: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) l: u32) {
  let half = p.d / 2u;
  let idx = index(w, nw, l);
  if (idx >= p.t * p.h * half) { return; }
  let i = idx % half;
  let th = idx / half;
  let t = th / p.h;
  let r = rope_angle(f32(pos[t]), freq[i]);
  let c = cos(r);
  let s = ${sign}sin(r);
  let base = th * p.d;
  let a = x[base + i];
  let b = x[base + i + half];
  y[base + i] = a * c - b * s;
  y[base + i + half] = b * c + a * s;
}`;

// (a, b) -> (a c - b s, b c + a s)
const ROPE = { code: rotation('') };
// Backward of `y[base + i] = a * c - b * s; y[base + i + half] = b * c + a * s`: the transpose of the
// rotation, (ga, gb) -> (ga c + gb s, gb c - ga s), which is the same rotation with s negated (exact).
const ROPE_BWD = { code: rotation('-') };

function rotate(ctx: GpuContext, k: { code: string }, x: GpuTensor, pos: GpuTensor, theta: number, what: string): GpuTensor {
  assertF32(x, what);
  assertShape(x.shape.length === 3, `${what}: x must be (T,H,D), got (${x.shape})`);
  const [t, h, d] = x.shape;
  assertShape(pos.dtype === 'i32' && pos.size === t && d % 2 === 0, `${what}: x (${x.shape}), pos ${pos.dtype} (${pos.shape})`);
  const y = ctx.empty(x.shape, 'f32');
  const freq = ctx.constant(`rope/${theta}/${d}`, () => ropeFreqs(theta, d));
  ctx.dispatch(k, [x.buf, pos.buf, freq, y.buf], [t, h, d], grid1d((t * h * d) / 2, WG));
  return y;
}

// x (T,H,D), pos (T) i32 -> (T,H,D)
export const rope = (ctx: GpuContext, x: GpuTensor, pos: GpuTensor, theta: number) => rotate(ctx, ROPE, x, pos, theta, 'rope');
// dy (T,H,D), pos (T) i32 -> dx (T,H,D)
export const ropeBackward = (ctx: GpuContext, dy: GpuTensor, pos: GpuTensor, theta: number) => rotate(ctx, ROPE_BWD, dy, pos, theta, 'ropeBackward');
