// Training ops of the CPU fast path: the reference TrainOps with the two matmul gradients and the
// attention backward (the bulk of a backward pass's flops) on the wasm kernels. Registered for
// 'cpu-fast' when the backend is created.
import type { Tensor, TokenLayout } from '../../backend';
import { registerTrainOps } from '../../train';
import { CpuRefTrainOps } from '../ref-train';
import type { CpuFastBackend } from './backend';

export class CpuFastTrainOps extends CpuRefTrainOps {
  // dy (M,N), w (N,K) -> dx (M,K) = dy W
  override matmulBackwardInput(dy: Tensor, w: Tensor): Tensor {
    return (this.backend as CpuFastBackend).matmulTransposed(dy, w);
  }
  // dy (M,N), x (M,K), dw (N,K): dw += dy^T x
  override matmulBackwardWeight(dy: Tensor, x: Tensor, dw: Tensor): void {
    (this.backend as CpuFastBackend).matmulWeightGradInto(dy, x, dw);
  }
  override attentionBackward(dOut: Tensor, q: Tensor, kCache: Tensor, vCache: Tensor, layout: TokenLayout) {
    return (this.backend as CpuFastBackend).attentionBackward(dOut, q, kCache, vCache, layout);
  }
}

registerTrainOps('cpu-fast', (b) => new CpuFastTrainOps(b));
