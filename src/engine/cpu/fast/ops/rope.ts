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

function rotate(rt: WasmRuntime, x: Tensor, pos: Tensor, theta: number, dir: 1 | -1, op: string): CpuTensor {
  const xs = asCpu(x).f32;
  const ps = asCpu(pos).i32;
  assertShape(x.shape.length === 3, `${op}: x (${x.shape}) is not (T,H,D)`);
  const [T, H, D] = x.shape;
  assertShape(ps.length === T && D % 2 === 0, `${op}: x (${x.shape}), pos (${ps.length})`);
  const half = D / 2;
  const inv = Float64Array.from({ length: half }, (_, i) => Math.pow(theta, (-2 * i) / D));
  const cos = new Float64Array(half);
  const sin = new Float64Array(half);
  const out = rt.shared ? rt.residentTensor([T, H, D], 'f32') : new CpuTensor([T, H, D], 'f32', new Float32Array(xs.length));
  const o = out.f32;
  for (let t = 0; t < T; t++) {
    for (let i = 0; i < half; i++) {
      const ang = ps[t] * inv[i];
      cos[i] = Math.cos(ang);
      sin[i] = dir * Math.sin(ang); // negating is exact: the backward's a*c + b*s, b*c - a*s
    }
    for (let h = 0; h < H; h++) {
      const base = (t * H + h) * D;
      for (let i = 0; i < half; i++) {
        const a = xs[base + i];
        const b = xs[base + i + half];
        o[base + i] = a * cos[i] - b * sin[i];
        o[base + i + half] = b * cos[i] + a * sin[i];
      }
    }
  }
  return out;
}
