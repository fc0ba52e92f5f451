// The CPU reference backend: plain, readable TypeScript with f64 accumulation. It is the oracle every
// other backend is tested against, so clarity beats speed here. Each op's forward and backward stand
// side by side in ./ops; this class and CpuRefTrainOps (./train-ops.ts) only route the contract to them.
import type { Backend, SampleParams, Tensor, TokenLayout } from '../backend';
import { assertShape } from '../errors';
import type { QuantizedWeight } from '../quant';
import { sampleRow } from '../sampling';
import type { TrainOps } from '../train';
import { attention } from './ops/attention';
import { add, scale, swiglu } from './ops/elementwise';
import { embedding, gatherRows, kvWrite } from './ops/gather';
import { matmul } from './ops/matmul';
import { logSoftmax, rmsnorm } from './ops/norm';
import { rope } from './ops/rope';
import { asCpu, CpuTensor, numel } from './tensor';
import { CpuRefTrainOps } from './train-ops';

export class CpuRefBackend implements Backend {
  readonly name: 'cpu-ref' | 'cpu-fast' = 'cpu-ref';
  private trainOps: TrainOps | null = null;

  /** Made on first use, so that a subclass's own training ops see its fields initialised. */
  get train(): TrainOps {
    return (this.trainOps ??= this.makeTrainOps());
  }
  protected makeTrainOps(): TrainOps {
    return new CpuRefTrainOps(this);
  }

  tensor(data: Float32Array | Int32Array, shape: readonly number[]): Tensor {
    assertShape(data.length === numel(shape), `tensor: ${data.length} values for shape (${shape})`);
    const copy = data instanceof Float32Array ? Float32Array.from(data) : Int32Array.from(data);
    return new CpuTensor([...shape], data instanceof Float32Array ? 'f32' : 'i32', copy);
  }
  zeros(shape: readonly number[], dtype: 'f32' | 'i32' = 'f32'): Tensor {
    const n = numel(shape);
    return new CpuTensor([...shape], dtype, dtype === 'f32' ? new Float32Array(n) : new Int32Array(n));
  }
  empty(shape: readonly number[], dtype: 'f32' | 'i32' = 'f32'): Tensor {
    return this.zeros(shape, dtype);
  }
  uploadQuantized(q: QuantizedWeight): Tensor {
    return new CpuTensor([q.rows, q.cols], q.kind, null, q);
  }
  async read(t: Tensor): Promise<Float32Array | Int32Array> {
    const c = asCpu(t);
    assertShape(c.data !== null, 'read: quantized tensors are not readable; keep the host copy');
    return c.data instanceof Float32Array ? Float32Array.from(c.data) : Int32Array.from(c.data);
  }
  write(t: Tensor, data: Float32Array | Int32Array): void {
    const c = asCpu(t);
    assertShape(c.data !== null && c.data.length === data.length, 'write: element count differs');
    c.data!.set(data);
  }
  free(_t: Tensor): void {}
  reshape(t: Tensor, shape: readonly number[]): Tensor {
    const c = asCpu(t);
    assertShape(c.data !== null && numel(shape) === c.size, `reshape: (${t.shape}) -> (${shape})`);
    return new CpuTensor([...shape], c.dtype, c.data);
  }
  async sync(): Promise<void> {}
  dispose(): void {}

  embedding(table: Tensor, ids: Tensor): Tensor {
    return embedding(table, ids);
  }
  rmsnorm(x: Tensor, w: Tensor, eps: number): Tensor {
    return rmsnorm(x, w, eps);
  }
  rope(x: Tensor, pos: Tensor, theta: number): Tensor {
    return rope(x, pos, theta);
  }
  matmul(x: Tensor, w: Tensor): Tensor {
    return matmul(x, w);
  }
  add(a: Tensor, b: Tensor): Tensor {
    return add(a, b);
  }
  scale(a: Tensor, s: number): Tensor {
    return scale(a, s);
  }
  swiglu(gate: Tensor, up: Tensor): Tensor {
    return swiglu(gate, up);
  }
  kvWrite(kCache: Tensor, vCache: Tensor, k: Tensor, v: Tensor, layout: TokenLayout): void {
    kvWrite(kCache, vCache, k, v, layout);
  }
  attention(q: Tensor, kCache: Tensor, vCache: Tensor, layout: TokenLayout): Tensor {
    return attention(q, kCache, vCache, layout);
  }
  logSoftmax(x: Tensor): Tensor {
    return logSoftmax(x);
  }
  gatherRows(x: Tensor, rows: Tensor): Tensor {
    return gatherRows(x, rows);
  }

  sample(logits: Tensor, params: readonly SampleParams[]): { tokens: Tensor; logprobs: Tensor } {
    const xs = asCpu(logits).f32;
    const [R, V] = logits.shape;
    assertShape(params.length === R, `sample: ${params.length} params for ${R} rows`);
    const tokens = new Int32Array(R);
    const logprobs = new Float32Array(R);
    for (let r = 0; r < R; r++) {
      const s = sampleRow(xs.subarray(r * V, (r + 1) * V), params[r]);
      tokens[r] = s.token;
      logprobs[r] = s.logprob;
    }
    return { tokens: new CpuTensor([R], 'i32', tokens), logprobs: new CpuTensor([R], 'f32', logprobs) };
  }

}
