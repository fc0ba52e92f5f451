// RoPE and its backward with per-token cos/sin tables: the reference's rule and f64 angles
// (src/engine/cpu/ops/rope.ts), so bit-identical to it.
import type { Tensor } from '../../../backend';
import { assertShape } from '../../../errors';
import { asCpu, CpuTensor } from '../../tensor';
import type { WasmRuntime } from '../runtime';

// x (T,H,D), pos (T) -> (T,H,D). The reference's rule and f64 angles, but each token's cos/sin are
// computed once for all heads (the transcendentals are what this op costs): bit-identical.
export function rope(rt: WasmRuntime, x: Tensor, pos: Tensor, theta: number): Tensor {
  return rotate(rt, x, pos, theta, 1, 'rope');
}

// Backward of `o[base + i] = a * cos[i] - b * sin[i]; o[base + i + half] = b * cos[i] + a * sin[i]`: the
// transpose of the rotation, which is the rotation with sin negated (exact). dy (T,H,D), pos (T) -> dx (T,H,D).
export function ropeBackward(rt: WasmRuntime, dy: Tensor, pos: Tensor, theta: number): CpuTensor {
  return rotate(rt, dy, pos, theta, -1, 'ropeBackward');
}

/**
 * cos and sin of every (token, frequency) angle, (T, D/2) each, in f64 as the reference computes them. A training
 * step rotates q and k of every layer, forward and backward, at the same positions: the last table is kept and
 * reused while positions, theta and D are the same (compared value by value), so the transcendentals, which are
 * what this op costs, are computed once a step instead of 4 times a layer.
 */
let last: { pos: Int32Array; theta: number; D: number; cos: Float64Array; sin: Float64Array } | null = null;

function tables(ps: Int32Array, theta: number, D: number): { cos: Float64Array; sin: Float64Array } {
  if (last && last.theta === theta && last.D === D && last.pos.length === ps.length && last.pos.every((p, t) => p === ps[t])) return last;
  const half = D / 2;
  const inv = Float64Array.from({ length: half }, (_, i) => Math.pow(theta, (-2 * i) / D));
  const cos = new Float64Array(ps.length * half);
  const sin = new Float64Array(ps.length * half);
  for (let t = 0; t < ps.length; t++)
    for (let i = 0; i < half; i++) {
      const ang = ps[t] * inv[i];
      cos[t * half + i] = Math.cos(ang);
      sin[t * half + i] = Math.sin(ang);
    }
  last = { pos: ps.slice(), theta, D, cos, sin };
  return last;
}

function rotate(rt: WasmRuntime, x: Tensor, pos: Tensor, theta: number, dir: 1 | -1, op: string): CpuTensor {
  const xs = asCpu(x).f32;
  const ps = asCpu(pos).i32;
  assertShape(x.shape.length === 3, `${op}: x (${x.shape}) is not (T,H,D)`);
  const [T, H, D] = x.shape;
  assertShape(ps.length === T && D % 2 === 0, `${op}: x (${x.shape}), pos (${ps.length})`);
  const half = D / 2;
  const { cos, sin } = tables(ps, theta, D);
  const out = rt.shared ? rt.residentTensor([T, H, D], 'f32') : new CpuTensor([T, H, D], 'f32', new Float32Array(xs.length));
  const o = out.f32;
  for (let t = 0; t < T; t++) {
    const tb = t * half;
    for (let h = 0; h < H; h++) {
      const base = (t * H + h) * D;
      for (let i = 0; i < half; i++) {
        const a = xs[base + i];
        const b = xs[base + i + half];
        const c = cos[tb + i];
        const s = dir * sin[tb + i]; // negating is exact: the backward's a*c + b*s, b*c - a*s
        o[base + i] = a * c - b * s;
        o[base + i + half] = b * c + a * s;
      }
    }
  }
  return out;
}
