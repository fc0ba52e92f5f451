// RoPE and its backward, rotate-half (NeoX/Qwen) convention: pairs (i, i + D/2) rotate by pos * theta^(-2i/D).
import type { Tensor } from '../../backend';
import { assertShape } from '../../errors';
import { asCpu, CpuTensor, f32 } from '../tensor';

/** The angle of pair i at position p; forward and backward share it, so they agree exactly. */
const ropeAngle = (p: number, i: number, D: number, theta: number) => p * Math.pow(theta, (-2 * i) / D);

// x (T,H,D), pos (T) -> (T,H,D); pairs (i, i + D/2) rotate by pos * theta^(-2i/D)
export function rope(x: Tensor, pos: Tensor, theta: number): Tensor {
  const xs = asCpu(x).f32;
  const ps = asCpu(pos).i32;
  const [T, H, D] = x.shape;
  assertShape(ps.length === T && D % 2 === 0, `rope: x (${x.shape}), pos (${ps.length})`);
  const half = D / 2;
  const out = new Float32Array(xs.length);
  for (let t = 0; t < T; t++)
    for (let h = 0; h < H; h++) {
      const base = (t * H + h) * D;
      for (let i = 0; i < half; i++) {
        const ang = ropeAngle(ps[t], i, D, theta);
        const c = Math.cos(ang);
        const s = Math.sin(ang);
        const a = xs[base + i];
        const b = xs[base + i + half];
        out[base + i] = a * c - b * s;
        out[base + i + half] = b * c + a * s;
      }
    }
  return new CpuTensor([T, H, D], 'f32', out);
}

// Backward of `out[base + i] = a * c - b * s; out[base + i + half] = b * c + a * s`: the transpose of the
// rotation, (ga, gb) -> (ga c + gb s, gb c - ga s).
export function ropeBackward(dy: Tensor, pos: Tensor, theta: number): Tensor {
  const g = asCpu(dy).f32;
  const ps = asCpu(pos).i32;
  const [T, H, D] = dy.shape;
  assertShape(ps.length === T && D % 2 === 0, `ropeBackward: dy (${dy.shape}), pos (${ps.length})`);
  const half = D / 2;
  const dx = new Float32Array(g.length);
  for (let t = 0; t < T; t++)
    for (let h = 0; h < H; h++) {
      const base = (t * H + h) * D;
      for (let i = 0; i < half; i++) {
        const ang = ropeAngle(ps[t], i, D, theta);
        const c = Math.cos(ang);
        const s = Math.sin(ang);
        const ga = g[base + i];
        const gb = g[base + i + half];
        dx[base + i] = ga * c + gb * s;
        dx[base + i + half] = gb * c - ga * s;
      }
    }
  return f32(dy.shape, dx);
}
