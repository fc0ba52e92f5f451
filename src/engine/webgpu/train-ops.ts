// TrainOps of the WebGPU backend (the contract of src/engine/train.ts): the backward kernels beside their
// forward ones in ./kernels, the loss heads and AdamW. Each WebGpuBackend makes one, as its `train`.
import type { Backend, Tensor, TokenLayout } from '../backend';
import { assertShape } from '../errors';
import type { AdamWStep, GrpoInputs, GrpoOptions, LossHeadResult, TrainOps } from '../train';
import type { GpuContext } from './context';
import { attentionBackward } from './kernels/attention';
import { accumulate, fill, swigluBackward } from './kernels/elementwise';
import { embeddingBackward, kvWriteBackward, scatterAddRows } from './kernels/gather';
import { lossHead } from './kernels/loss';
import { matmulBackwardInput, matmulBackwardWeight } from './kernels/matmul';
import { logSoftmaxBackward, rmsnormBackward } from './kernels/norm';
import { adamw, sumSquares } from './kernels/optim';
import { ropeBackward } from './kernels/rope';
import { asGpu, type GpuTensor } from './tensor';

export class WebGpuTrainOps implements TrainOps {
  constructor(
    readonly backend: Backend,
    private readonly ctx: GpuContext,
  ) {}

  private g(t: Tensor, what: string): GpuTensor {
    const x = asGpu(t, what);
    assertShape(x.ctx === this.ctx, `${what}: tensor belongs to another WebGPU backend`);
    return x;
  }

  embeddingBackward(dy: Tensor, ids: Int32Array, dTable: Tensor): void {
    embeddingBackward(this.ctx, this.g(dy, 'embeddingBackward'), ids, this.g(dTable, 'embeddingBackward'));
  }
  rmsnormBackward(dy: Tensor, x: Tensor, w: Tensor, eps: number, dw: Tensor | null): Tensor {
    const what = 'rmsnormBackward';
    return rmsnormBackward(this.ctx, this.g(dy, what), this.g(x, what), this.g(w, what), eps, dw ? this.g(dw, what) : null);
  }
  ropeBackward(dy: Tensor, pos: Tensor, theta: number): Tensor {
    return ropeBackward(this.ctx, this.g(dy, 'ropeBackward'), this.g(pos, 'ropeBackward'), theta);
  }
  matmulBackwardInput(dy: Tensor, w: Tensor): Tensor {
    return matmulBackwardInput(this.ctx, this.g(dy, 'matmulBackwardInput'), this.g(w, 'matmulBackwardInput'));
  }
  matmulBackwardWeight(dy: Tensor, x: Tensor, dw: Tensor): void {
    const what = 'matmulBackwardWeight';
    matmulBackwardWeight(this.ctx, this.g(dy, what), this.g(x, what), this.g(dw, what));
  }
  swigluBackward(dy: Tensor, gate: Tensor, up: Tensor) {
    return swigluBackward(this.ctx, this.g(dy, 'swigluBackward'), this.g(gate, 'swigluBackward'), this.g(up, 'swigluBackward'));
  }
  attentionBackward(dOut: Tensor, q: Tensor, kCache: Tensor, vCache: Tensor, layout: TokenLayout) {
    const what = 'attentionBackward';
    return attentionBackward(this.ctx, this.g(dOut, what), this.g(q, what), this.g(kCache, what), this.g(vCache, what), this.g(layout.slot, what), this.g(layout.pos, what));
  }
  kvWriteBackward(dkCache: Tensor, dvCache: Tensor, layout: TokenLayout) {
    const what = 'kvWriteBackward';
    return kvWriteBackward(this.ctx, this.g(dkCache, what), this.g(dvCache, what), this.g(layout.slot, what), this.g(layout.pos, what));
  }
  logSoftmaxBackward(dy: Tensor, y: Tensor): Tensor {
    return logSoftmaxBackward(this.ctx, this.g(dy, 'logSoftmaxBackward'), this.g(y, 'logSoftmaxBackward'));
  }
  crossEntropy(logits: Tensor, targets: Tensor, weight: Tensor): LossHeadResult {
    const what = 'crossEntropy';
    return lossHead(this.ctx, this.g(logits, what), this.g(targets, what), this.g(weight, what), null, null);
  }
  grpo(logits: Tensor, targets: Tensor, weight: Tensor, inputs: GrpoInputs, opts: GrpoOptions): LossHeadResult {
    const what = 'grpo';
    const gi = {
      advantage: this.g(inputs.advantage, what),
      oldLogp: this.g(inputs.oldLogp, what),
      refLogp: inputs.refLogp ? this.g(inputs.refLogp, what) : null,
    };
    return lossHead(this.ctx, this.g(logits, what), this.g(targets, what), this.g(weight, what), gi, opts);
  }
  scatterAddRows(dst: Tensor, src: Tensor, rows: Tensor): void {
    scatterAddRows(this.ctx, this.g(dst, 'scatterAddRows'), this.g(src, 'scatterAddRows'), this.g(rows, 'scatterAddRows'));
  }
  flush(): void {
    this.ctx.flush();
  }
  accumulate(dst: Tensor, src: Tensor, s = 1): void {
    accumulate(this.ctx, this.g(dst, 'accumulate'), this.g(src, 'accumulate'), s);
  }
  fill(t: Tensor, value: number): void {
    fill(this.ctx, this.g(t, 'fill'), value);
  }
  sumSquares(ts: readonly Tensor[]): Tensor {
    return sumSquares(this.ctx, ts.map((t) => this.g(t, 'sumSquares')));
  }
  adamw(param: Tensor, grad: Tensor, m: Tensor, v: Tensor, hp: AdamWStep): void {
    const what = 'adamw';
    adamw(this.ctx, this.g(param, what), this.g(grad, what), this.g(m, what), this.g(v, what), hp);
  }
}
