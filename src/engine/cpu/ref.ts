// The CPU reference backend: plain, readable TypeScript with f64 accumulation. It is the oracle every
// other backend is tested against, so clarity beats speed here.
import type { Backend, DType, SampleParams, Tensor, TokenLayout } from '../backend';
import { assertShape } from '../errors';
import { dequantAt, type QuantizedWeight } from '../quant';
import { sampleRow } from '../sampling';

export class CpuTensor implements Tensor {
  readonly backend = 'cpu-ref' as const;
  constructor(
    readonly shape: readonly number[],
    readonly dtype: DType,
    readonly data: Float32Array | Int32Array | null,
    readonly quant: QuantizedWeight | null = null,
  ) {}
  get size(): number {
    return this.shape.reduce((a, b) => a * b, 1);
  }
  get f32(): Float32Array {
    assertShape(this.data instanceof Float32Array, `expected an f32 tensor, got ${this.dtype}`);
    return this.data;
  }
  get i32(): Int32Array {
    assertShape(this.data instanceof Int32Array, `expected an i32 tensor, got ${this.dtype}`);
    return this.data;
  }
}

const numel = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);

export function asCpu(t: Tensor): CpuTensor {
  assertShape(t instanceof CpuTensor, `tensor of backend ${t.backend} passed to a CPU backend`);
  return t;
}

/** W[n,k] of an f32 or quantized (N,K) weight. */
function weightAt(w: CpuTensor, n: number, k: number): number {
  return w.quant ? dequantAt(w.quant, n, k) : w.f32[n * w.shape[1] + k];
}

export class CpuRefBackend implements Backend {
  readonly name: 'cpu-ref' | 'cpu-fast' = 'cpu-ref';

  tensor(data: Float32Array | Int32Array, shape: readonly number[]): Tensor {
    assertShape(data.length === numel(shape), `tensor: ${data.length} values for shape (${shape})`);
    const copy = data instanceof Float32Array ? Float32Array.from(data) : Int32Array.from(data);
    return new CpuTensor([...shape], data instanceof Float32Array ? 'f32' : 'i32', copy);
  }
  zeros(shape: readonly number[], dtype: 'f32' | 'i32' = 'f32'): Tensor {
    const n = numel(shape);
    return new CpuTensor([...shape], dtype, dtype === 'f32' ? new Float32Array(n) : new Int32Array(n));
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

  // table (V,C), ids (T) -> (T,C)
  embedding(table: Tensor, ids: Tensor): Tensor {
    const w = asCpu(table);
    const id = asCpu(ids).i32;
    const [V, C] = w.shape;
    const out = new Float32Array(id.length * C);
    for (let t = 0; t < id.length; t++) {
      assertShape(id[t] >= 0 && id[t] < V, `embedding: token id ${id[t]} outside [0,${V})`);
      for (let c = 0; c < C; c++) out[t * C + c] = weightAt(w, id[t], c);
    }
    return new CpuTensor([id.length, C], 'f32', out);
  }

  // x (R,C), w (C) -> (R,C)
  rmsnorm(x: Tensor, w: Tensor, eps: number): Tensor {
    const xs = asCpu(x).f32;
    const ws = asCpu(w).f32;
    const C = ws.length;
    assertShape(xs.length % C === 0, `rmsnorm: x (${x.shape}) vs w (${C})`);
    const R = xs.length / C;
    const out = new Float32Array(xs.length);
    for (let r = 0; r < R; r++) {
      let ss = 0;
      for (let c = 0; c < C; c++) ss += xs[r * C + c] * xs[r * C + c];
      const inv = 1 / Math.sqrt(ss / C + eps);
      for (let c = 0; c < C; c++) out[r * C + c] = xs[r * C + c] * inv * ws[c];
    }
    return new CpuTensor([...x.shape], 'f32', out);
  }

  // x (T,H,D), pos (T) -> (T,H,D); pairs (i, i + D/2) rotate by pos * theta^(-2i/D)
  rope(x: Tensor, pos: Tensor, theta: number): Tensor {
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
          const ang = ps[t] * Math.pow(theta, (-2 * i) / D);
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

  // x (M,K), w (N,K) -> (M,N)
  matmul(x: Tensor, w: Tensor): Tensor {
    const xs = asCpu(x).f32;
    const wc = asCpu(w);
    const [N, K] = wc.shape;
    assertShape(xs.length % K === 0 && x.shape[x.shape.length - 1] === K, `matmul: x (${x.shape}) vs W (${N},${K})`);
    const M = xs.length / K;
    const dense = wc.quant ? null : wc.f32;
    const out = new Float32Array(M * N);
    for (let n = 0; n < N; n++) {
      const row = new Float64Array(K);
      for (let k = 0; k < K; k++) row[k] = dense ? dense[n * K + k] : weightAt(wc, n, k);
      for (let m = 0; m < M; m++) {
        let acc = 0;
        for (let k = 0; k < K; k++) acc += xs[m * K + k] * row[k];
        out[m * N + n] = acc;
      }
    }
    return new CpuTensor([M, N], 'f32', out);
  }

  add(a: Tensor, b: Tensor): Tensor {
    const as = asCpu(a).f32;
    const bs = asCpu(b).f32;
    assertShape(as.length === bs.length, `add: (${a.shape}) vs (${b.shape})`);
    const out = new Float32Array(as.length);
    for (let i = 0; i < as.length; i++) out[i] = as[i] + bs[i];
    return new CpuTensor([...a.shape], 'f32', out);
  }

  scale(a: Tensor, s: number): Tensor {
    const as = asCpu(a).f32;
    const out = new Float32Array(as.length);
    for (let i = 0; i < as.length; i++) out[i] = as[i] * s;
    return new CpuTensor([...a.shape], 'f32', out);
  }

  // gate, up (T,F) -> silu(gate) * up
  swiglu(gate: Tensor, up: Tensor): Tensor {
    const g = asCpu(gate).f32;
    const u = asCpu(up).f32;
    assertShape(g.length === u.length, `swiglu: (${gate.shape}) vs (${up.shape})`);
    const out = new Float32Array(g.length);
    for (let i = 0; i < g.length; i++) out[i] = (g[i] / (1 + Math.exp(-g[i]))) * u[i];
    return new CpuTensor([...gate.shape], 'f32', out);
  }

  // k, v (T,Hkv,D) -> cache (S,maxT,Hkv,D)
  kvWrite(kCache: Tensor, vCache: Tensor, k: Tensor, v: Tensor, layout: TokenLayout): void {
    const [S, maxT, Hkv, D] = kCache.shape;
    const slot = asCpu(layout.slot).i32;
    const pos = asCpu(layout.pos).i32;
    const row = Hkv * D;
    for (const [cache, src] of [
      [asCpu(kCache).f32, asCpu(k).f32],
      [asCpu(vCache).f32, asCpu(v).f32],
    ] as const) {
      assertShape(src.length === slot.length * row, `kvWrite: k/v (${k.shape}) vs cache (${kCache.shape})`);
      for (let t = 0; t < slot.length; t++) {
        assertShape(slot[t] >= 0 && slot[t] < S && pos[t] >= 0 && pos[t] < maxT, `kvWrite: slot ${slot[t]} pos ${pos[t]} outside cache (${S},${maxT})`);
        cache.set(src.subarray(t * row, (t + 1) * row), (slot[t] * maxT + pos[t]) * row);
      }
    }
  }

  // q (T,Hq,D), caches (S,maxT,Hkv,D) -> (T,Hq,D)
  attention(q: Tensor, kCache: Tensor, vCache: Tensor, layout: TokenLayout): Tensor {
    const qs = asCpu(q).f32;
    const ks = asCpu(kCache).f32;
    const vs = asCpu(vCache).f32;
    const slot = asCpu(layout.slot).i32;
    const pos = asCpu(layout.pos).i32;
    const [T, Hq, D] = q.shape;
    const [, maxT, Hkv] = kCache.shape;
    assertShape(Hq % Hkv === 0 && kCache.shape[3] === D, `attention: q (${q.shape}) vs cache (${kCache.shape})`);
    const group = Hq / Hkv;
    const scale = 1 / Math.sqrt(D);
    const out = new Float32Array(qs.length);
    for (let t = 0; t < T; t++)
      for (let h = 0; h < Hq; h++) {
        const kvh = Math.floor(h / group);
        const n = pos[t] + 1;
        const scores = new Float64Array(n);
        let max = -Infinity;
        for (let j = 0; j < n; j++) {
          const kb = ((slot[t] * maxT + j) * Hkv + kvh) * D;
          let dot = 0;
          for (let d = 0; d < D; d++) dot += qs[(t * Hq + h) * D + d] * ks[kb + d];
          scores[j] = dot * scale;
          max = Math.max(max, scores[j]);
        }
        let sum = 0;
        for (let j = 0; j < n; j++) sum += (scores[j] = Math.exp(scores[j] - max));
        for (let d = 0; d < D; d++) {
          let acc = 0;
          for (let j = 0; j < n; j++) acc += scores[j] * vs[((slot[t] * maxT + j) * Hkv + kvh) * D + d];
          out[(t * Hq + h) * D + d] = acc / sum;
        }
      }
    return new CpuTensor([T, Hq, D], 'f32', out);
  }

  // x (R,V) -> (R,V)
  logSoftmax(x: Tensor): Tensor {
    const xs = asCpu(x).f32;
    const V = x.shape[x.shape.length - 1];
    const out = new Float32Array(xs.length);
    for (let r = 0; r < xs.length / V; r++) {
      let max = -Infinity;
      for (let i = 0; i < V; i++) max = Math.max(max, xs[r * V + i]);
      let sum = 0;
      for (let i = 0; i < V; i++) sum += Math.exp(xs[r * V + i] - max);
      const lz = max + Math.log(sum);
      for (let i = 0; i < V; i++) out[r * V + i] = xs[r * V + i] - lz;
    }
    return new CpuTensor([...x.shape], 'f32', out);
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

  // x (R,C), rows (n) -> (n,C)
  gatherRows(x: Tensor, rows: Tensor): Tensor {
    const xs = asCpu(x).f32;
    const idx = asCpu(rows).i32;
    const [R, C] = x.shape;
    const out = new Float32Array(idx.length * C);
    for (let i = 0; i < idx.length; i++) {
      assertShape(idx[i] >= 0 && idx[i] < R, `gatherRows: row ${idx[i]} outside [0,${R})`);
      out.set(xs.subarray(idx[i] * C, (idx[i] + 1) * C), i * C);
    }
    return new CpuTensor([idx.length, C], 'f32', out);
  }
}
