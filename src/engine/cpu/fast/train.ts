// Training ops of the CPU fast path: the reference TrainOps with the matmul gradients, the attention
// backward, the vocabulary-wide softmax of the loss heads, the rmsnorm/swiglu backward and AdamW (what a
// training step's profile shows) on the wasm kernels of ./ops, and rope's backward with per-token tables.
// Made by CpuFastBackend (its `train`) on the backend's wasm runtime.
import type { Backend, Tensor, TokenLayout } from '../../backend';
import { assertShape } from '../../errors';
import type { AdamWStep, GrpoInputs, GrpoOptions, LossHeadResult } from '../../train';
import { headInputs, rowLoss } from '../ops/loss';
import { asCpu, CpuTensor } from '../tensor';
import { CpuRefTrainOps } from '../train-ops';
import { attentionBackward } from './ops/attention';
import { adamw, swigluBackward } from './ops/elementwise';
import { matmulBackwardInput, matmulBackwardWeight } from './ops/matmul';
import { rmsnormBackward, softmaxRows } from './ops/norm';
import { ropeBackward } from './ops/rope';
import type { WasmRuntime } from './runtime';

export class CpuFastTrainOps extends CpuRefTrainOps {
  constructor(
    backend: Backend,
    private readonly rt: WasmRuntime,
  ) {
    super(backend);
  }

  override matmulBackwardInput(dy: Tensor, w: Tensor): Tensor {
    return matmulBackwardInput(this.rt, dy, w);
  }
  override matmulBackwardWeight(dy: Tensor, x: Tensor, dw: Tensor): void {
    matmulBackwardWeight(this.rt, dy, x, dw);
  }
  override attentionBackward(dOut: Tensor, q: Tensor, kCache: Tensor, vCache: Tensor, layout: TokenLayout) {
    return attentionBackward(this.rt, dOut, q, kCache, vCache, layout);
  }
  override rmsnormBackward(dy: Tensor, x: Tensor, w: Tensor, eps: number, dw: Tensor | null): Tensor {
    return rmsnormBackward(this.rt, dy, x, w, eps, dw);
  }
  override ropeBackward(dy: Tensor, pos: Tensor, theta: number): Tensor {
    return ropeBackward(this.rt, dy, pos, theta);
  }
  override swigluBackward(dy: Tensor, gate: Tensor, up: Tensor) {
    return swigluBackward(this.rt, dy, gate, up);
  }
  override adamw(param: Tensor, grad: Tensor, m: Tensor, v: Tensor, hp: AdamWStep): void {
    adamw(this.rt, param, grad, m, v, hp);
  }
  // The reference's sum, with an indexed loop (its for-of iterator costs ~3x on millions of values).
  override sumSquares(ts: readonly Tensor[]): Tensor {
    let s = 0;
    for (const t of ts) {
      const a = asCpu(t).f32;
      for (let i = 0; i < a.length; i++) s += a[i] * a[i];
    }
    return new CpuTensor([1], 'f32', Float32Array.of(s));
  }

  // The reference's loss-head rules (src/engine/cpu/ops/loss.ts; crossEntropy/grpo call this), row by
  // row, on the softmax the kernel computed: dLogits[r] = w * dl * (onehot(target) - p), metrics [loss, clip
  // frac, kl, entropy].
  protected override head(logits: Tensor, targets: Tensor, weight: Tensor, g: GrpoInputs | null, o: GrpoOptions | null): LossHeadResult {
    const h = headInputs(logits, targets, weight, g);
    const { xs, tg, ws, R, V } = h;
    for (let r = 0; r < R; r++) if (ws[r] !== 0) assertShape(tg[r] >= 0 && tg[r] < V, `loss head: target ${tg[r]} outside [0,${V}) at row ${r}`);
    const { p, stats } = softmaxRows(this.rt, logits, weight);
    const dx = p.f32; // overwritten in place with the gradient
    let loss = 0;
    let clipped = 0;
    let kl = 0;
    let ent = 0;
    let rows = 0;
    for (let r = 0; r < R; r++) {
      const w = ws[r];
      if (w === 0) continue;
      const lse = stats[2 * r];
      ent += lse - stats[2 * r + 1];
      rows++;
      const logp = xs[r * V + tg[r]] - lse;
      const { l, dl, clipped: c1, kl: k3 } = rowLoss(h, r, logp, o);
      clipped += c1;
      kl += k3;
      loss += w * l;
      const c = -w * dl;
      const o0 = r * V;
      for (let i = 0; i < V; i++) dx[o0 + i] *= c;
      dx[o0 + tg[r]] += w * dl;
    }
    const n = Math.max(rows, 1);
    const metrics = new CpuTensor([4], 'f32', Float32Array.of(loss, clipped / n, kl / n, ent / n));
    return { dLogits: p, metrics };
  }
}
