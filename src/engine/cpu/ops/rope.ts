// RoPE and its backward, rotate-half (NeoX/Qwen) convention: pairs (i, i + D/2) rotate by pos * theta^(-2i/D).
import type { Tensor } from '../../backend';
import { assertShape } from '../../errors';
import { asCpu, CpuTensor } from '../tensor';

// x (T,H,D), pos (T) -> (T,H,D)
export function rope(x: Tensor, pos: Tensor, theta: number): Tensor {
  return rotate(x, pos, theta, 1, 'rope');
}

// Backward of `out[base + i] = a * c - b * s; out[base + i + half] = b * c + a * s`: the transpose of the
// rotation, (ga, gb) -> (ga c + gb s, gb c - ga s), which is the same rotation with s negated (exact).
// dy (T,H,D), pos (T) -> dx (T,H,D)
export function ropeBackward(dy: Tensor, pos: Tensor, theta: number): Tensor {
  return rotate(dy, pos, theta, -1, 'ropeBackward');
}

function rotate(x: Tensor, pos: Tensor, theta: number, dir: 1 | -1, op: string): Tensor {
  const xs = asCpu(x).f32;
  const ps = asCpu(pos).i32;
  const [T, H, D] = x.shape;
  assertShape(ps.length === T && D % 2 === 0, `${op}: x (${x.shape}), pos (${ps.length})`);
  const half = D / 2;
  const out = new Float32Array(xs.length);
  for (let t = 0; t < T; t++)
    for (let h = 0; h < H; h++) {
      const base = (t * H + h) * D;
      for (let i = 0; i < half; i++) {
        const ang = ps[t] * Math.pow(theta, (-2 * i) / D);
        const c = Math.cos(ang);
        const s = dir * Math.sin(ang);
        const a = xs[base + i];
        const b = xs[base + i + half];
        out[base + i] = a * c - b * s;
        out[base + i + half] = b * c + a * s;
      }
    }
  return new CpuTensor([T, H, D], 'f32', out);
}
