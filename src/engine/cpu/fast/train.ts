// Training ops of the CPU fast path: the reference TrainOps with the two matmul gradients (the bulk of a
// backward pass's flops) on the wasm kernels. Registered for 'cpu-fast' when the backend is created.
import type { Tensor } from '../../backend';
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
}

registerTrainOps('cpu-fast', (b) => new CpuFastTrainOps(b));
