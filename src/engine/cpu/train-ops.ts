// TrainOps of the CPU reference (the contract of src/engine/train.ts): each backward stands beside its
// forward in ./ops. The oracle the WGSL and WebAssembly training kernels are tested against.
import type { Backend, Tensor, TokenLayout } from '../backend';
import { checkGrpoOptions, type AdamWStep, type GrpoInputs, type GrpoOptions, type LossHeadResult, type TrainOps } from '../train';
import { attentionBackward } from './ops/attention';
import { accumulate, fill, swigluBackward } from './ops/elementwise';
import { embeddingBackward, kvWriteBackward, scatterAddRows } from './ops/gather';
import { lossHead } from './ops/loss';
import { matmulBackwardInput, matmulBackwardWeight } from './ops/matmul';
import { logSoftmaxBackward, rmsnormBackward } from './ops/norm';
import { adamw, sumSquares } from './ops/optim';
import { ropeBackward } from './ops/rope';

export class CpuRefTrainOps implements TrainOps {
  constructor(readonly backend: Backend) {}

  embeddingBackward(dy: Tensor, ids: Int32Array, dTable: Tensor): void {
    embeddingBackward(dy, ids, dTable);
  }
  rmsnormBackward(dy: Tensor, x: Tensor, w: Tensor, eps: number, dw: Tensor | null): Tensor {
    return rmsnormBackward(dy, x, w, eps, dw);
  }
  ropeBackward(dy: Tensor, pos: Tensor, theta: number): Tensor {
    return ropeBackward(dy, pos, theta);
  }
  matmulBackwardInput(dy: Tensor, w: Tensor): Tensor {
    return matmulBackwardInput(dy, w);
  }
  matmulBackwardWeight(dy: Tensor, x: Tensor, dw: Tensor): void {
    matmulBackwardWeight(dy, x, dw);
  }
  swigluBackward(dy: Tensor, gate: Tensor, up: Tensor): { dGate: Tensor; dUp: Tensor } {
    return swigluBackward(dy, gate, up);
  }
  attentionBackward(dOut: Tensor, q: Tensor, kCache: Tensor, vCache: Tensor, layout: TokenLayout): { dq: Tensor; dkCache: Tensor; dvCache: Tensor } {
    return attentionBackward(dOut, q, kCache, vCache, layout);
  }
  kvWriteBackward(dkCache: Tensor, dvCache: Tensor, layout: TokenLayout): { dk: Tensor; dv: Tensor } {
    return kvWriteBackward(dkCache, dvCache, layout);
  }
  logSoftmaxBackward(dy: Tensor, y: Tensor): Tensor {
    return logSoftmaxBackward(dy, y);
  }

  crossEntropy(logits: Tensor, targets: Tensor, weight: Tensor): LossHeadResult {
    return this.head(logits, targets, weight, null, null);
  }
  grpo(logits: Tensor, targets: Tensor, weight: Tensor, inputs: GrpoInputs, opts: GrpoOptions): LossHeadResult {
    checkGrpoOptions(opts, !!inputs.refLogp);
    return this.head(logits, targets, weight, inputs, opts);
  }
  /** The row loop of both heads (./ops/loss.ts); the fast path computes the vocabulary-wide softmax in wasm. */
  protected head(logits: Tensor, targets: Tensor, weight: Tensor, g: GrpoInputs | null, o: GrpoOptions | null): LossHeadResult {
    return lossHead(logits, targets, weight, g, o);
  }

  scatterAddRows(dst: Tensor, src: Tensor, rows: Tensor): void {
    scatterAddRows(dst, src, rows);
  }
  flush(): void {}
  accumulate(dst: Tensor, src: Tensor, s = 1): void {
    accumulate(dst, src, s);
  }
  fill(t: Tensor, value: number): void {
    fill(t, value);
  }
  sumSquares(ts: readonly Tensor[]): Tensor {
    return sumSquares(ts);
  }
  adamw(param: Tensor, grad: Tensor, m: Tensor, v: Tensor, hp: AdamWStep): void {
    adamw(param, grad, m, v, hp);
  }
}
