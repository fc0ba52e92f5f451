// The WebGPU backend: the Backend contract (src/engine/backend.ts) on WGSL kernels. Host-side checks
// (shapes, dtypes) throw EngineError('shape') before anything is dispatched; GPU-side failures surface as
// EngineError 'device-lost' | 'out-of-memory' | 'validation' from the next read()/sync() (or at once,
// for a device already known to be lost).
import type { Backend, FusedOps, SampleParams, Tensor, TokenLayout } from '../backend';
import type { TrainOps } from '../train';
import { assertShape } from '../errors';
import type { QuantizedWeight } from '../quant';
import { GpuContext, type GpuContextOptions } from './context';
import { attention } from './kernels/attention';
import { add, scale, swiglu } from './kernels/elementwise';
import { embedding, gatherRows, kvWrite } from './kernels/gather';
import { matmulAdd, matmulConcat, matmulSwiglu, qkNormRope } from './kernels/fused';
import { type GemvVersion, type MatmulVersion, matmul } from './kernels/matmul';
import { logSoftmax, rmsnorm } from './kernels/norm';
import { rope } from './kernels/rope';
import { sample } from './kernels/sample';
import { readTensor, uploadDense, uploadQuantized, writeTensor, zerosTensor } from './memory';
import { type GpuTensor, asGpu } from './tensor';
import { WebGpuTrainOps } from './train-ops';

export interface WebGpuBackendOptions extends GpuContextOptions {
  /** Matmul kernel version ('auto' = block for K <= 512, else a GEMV for M <= 16, tiled otherwise). */
  matmul?: MatmulVersion;
  /** The GEMV 'auto' takes: 'gemv2' (v5; default on a GPU), 'gemv-lane' (v7; default on a CPU adapter) or the first one, 'gemv' (v3). */
  gemv?: GemvVersion;
  /** Offer the fused forward ops (kernels/fused.ts; default true): false runs the model's unfused composition. */
  fuse?: boolean;
}

export class WebGpuBackend implements Backend {
  readonly name = 'webgpu' as const;
  readonly train: TrainOps;
  matmulVersion: MatmulVersion;
  gemvVersion: GemvVersion;
  /** Whether `fused` is offered (switchable between steps, for the benchmark's side-by-side decode). */
  fuse: boolean;
  private readonly fusedOps: FusedOps;

  constructor(
    readonly ctx: GpuContext,
    opts: WebGpuBackendOptions = {},
  ) {
    this.matmulVersion = opts.matmul ?? 'auto';
    this.gemvVersion = opts.gemv ?? (ctx.cpuAdapter ? 'gemv-lane' : 'gemv2');
    this.fuse = opts.fuse ?? true;
    const choice = () => ({ version: this.matmulVersion, gemv: this.gemvVersion });
    this.fusedOps = {
      matmulConcat: (x, ws) => matmulConcat(ctx, this.g(x, 'matmulConcat'), ws.map((w) => this.g(w, 'matmulConcat')), choice()),
      matmulSwiglu: (x, wg, wu) => matmulSwiglu(ctx, this.g(x, 'matmulSwiglu'), this.g(wg, 'matmulSwiglu'), this.g(wu, 'matmulSwiglu'), choice()),
      matmulAdd: (x, w, r) => matmulAdd(ctx, this.g(x, 'matmulAdd'), this.g(w, 'matmulAdd'), this.g(r, 'matmulAdd'), choice()),
      qkNormRope: (qkv, qn, kn, pos, eps, theta, heads) => {
        const w = 'qkNormRope';
        return qkNormRope(ctx, this.g(qkv, w), this.g(qn, w), this.g(kn, w), this.g(pos, w), eps, theta, heads.q, heads.kv);
      },
    };
    this.train = new WebGpuTrainOps(this, ctx);
  }

  get fused(): FusedOps | undefined {
    return this.fuse ? this.fusedOps : undefined;
  }

  /** Resolves a tensor argument; also refuses work on a lost device before any host work. */
  private g(t: Tensor, what: string): GpuTensor {
    this.ctx.checkAlive();
    const x = asGpu(t, what);
    assertShape(x.ctx === this.ctx, `${what}: tensor belongs to another WebGPU backend`);
    return x;
  }

  tensor(data: Float32Array | Int32Array, shape: readonly number[]): Tensor {
    this.ctx.checkAlive();
    return uploadDense(this.ctx, data, shape);
  }
  zeros(shape: readonly number[], dtype: 'f32' | 'i32' = 'f32'): Tensor {
    this.ctx.checkAlive();
    return zerosTensor(this.ctx, shape, dtype);
  }
  /** WebGPU clears every new buffer itself: nothing to skip. */
  empty(shape: readonly number[], dtype: 'f32' | 'i32' = 'f32'): Tensor {
    return this.zeros(shape, dtype);
  }
  uploadQuantized(q: QuantizedWeight): Tensor {
    this.ctx.checkAlive();
    return uploadQuantized(this.ctx, q);
  }
  async read(t: Tensor): Promise<Float32Array | Int32Array> {
    return readTensor(this.g(t, 'read'));
  }
  write(t: Tensor, data: Float32Array | Int32Array): void {
    writeTensor(this.g(t, 'write'), data);
  }
  reshape(t: Tensor, shape: readonly number[]): Tensor {
    return this.g(t, 'reshape').view(shape);
  }
  free(t: Tensor): void {
    asGpu(t, 'free').free();
  }
  sync(): Promise<void> {
    return this.ctx.sync();
  }
  dispose(): void {
    this.ctx.dispose();
  }

  embedding(table: Tensor, ids: Tensor): Tensor {
    return embedding(this.ctx, this.g(table, 'embedding'), this.g(ids, 'embedding'));
  }
  rmsnorm(x: Tensor, w: Tensor, eps: number): Tensor {
    return rmsnorm(this.ctx, this.g(x, 'rmsnorm'), this.g(w, 'rmsnorm'), eps);
  }
  rope(x: Tensor, pos: Tensor, theta: number): Tensor {
    return rope(this.ctx, this.g(x, 'rope'), this.g(pos, 'rope'), theta);
  }
  matmul(x: Tensor, w: Tensor): Tensor {
    return matmul(this.ctx, this.g(x, 'matmul'), this.g(w, 'matmul'), this.matmulVersion, this.gemvVersion);
  }
  add(a: Tensor, b: Tensor): Tensor {
    return add(this.ctx, this.g(a, 'add'), this.g(b, 'add'));
  }
  scale(a: Tensor, s: number): Tensor {
    return scale(this.ctx, this.g(a, 'scale'), s);
  }
  swiglu(gate: Tensor, up: Tensor): Tensor {
    return swiglu(this.ctx, this.g(gate, 'swiglu'), this.g(up, 'swiglu'));
  }
  kvWrite(kCache: Tensor, vCache: Tensor, k: Tensor, v: Tensor, layout: TokenLayout): void {
    const w = 'kvWrite';
    kvWrite(this.ctx, this.g(kCache, w), this.g(vCache, w), this.g(k, w), this.g(v, w), this.g(layout.slot, w), this.g(layout.pos, w));
  }
  attention(q: Tensor, kCache: Tensor, vCache: Tensor, layout: TokenLayout): Tensor {
    const w = 'attention';
    return attention(this.ctx, this.g(q, w), this.g(kCache, w), this.g(vCache, w), this.g(layout.slot, w), this.g(layout.pos, w));
  }
  logSoftmax(x: Tensor): Tensor {
    return logSoftmax(this.ctx, this.g(x, 'logSoftmax'));
  }
  sample(logits: Tensor, params: readonly SampleParams[]): { tokens: Tensor; logprobs: Tensor } {
    return sample(this.ctx, this.g(logits, 'sample'), params);
  }
  gatherRows(x: Tensor, rows: Tensor): Tensor {
    return gatherRows(this.ctx, this.g(x, 'gatherRows'), this.g(rows, 'gatherRows'));
  }
}

/** The WebGPU backend on `opts.gpu` (navigator.gpu when omitted). Rejects with EngineError('no-adapter'). */
export async function createWebGpuBackend(opts: WebGpuBackendOptions = {}): Promise<WebGpuBackend> {
  return new WebGpuBackend(await GpuContext.create(opts), opts);
}
