// Training ops of the CPU reference backend: plain TypeScript, f64 accumulation. The oracle the WGSL
// training kernels are tested against, so every function mirrors the math written in its comment.
import type { Backend, Tensor, TokenLayout } from '../backend';
import { assertShape } from '../errors';
import { dequantAt } from '../quant';
import { ceTokenLoss, checkGrpoOptions, grpoTokenLoss, type AdamWStep, type GrpoInputs, type GrpoOptions, type LossHeadResult, type TrainOps } from '../train';
import { asCpu, CpuTensor } from './ref';

const f32 = (shape: readonly number[], data: Float32Array | Float64Array) =>
  new CpuTensor([...shape], 'f32', data instanceof Float32Array ? data : Float32Array.from(data));

/** Row n of an (N,K) f32 or quantized weight, as f64. */
function weightRow(w: CpuTensor, n: number, out: Float64Array): void {
  const K = w.shape[1];
  if (w.quant) for (let k = 0; k < K; k++) out[k] = dequantAt(w.quant, n, k);
  else for (let k = 0; k < K; k++) out[k] = w.f32[n * K + k];
}

/** Same angle rule as the forward rope in ./ref.ts. */
const ropeAngle = (p: number, i: number, D: number, theta: number) => p * Math.pow(theta, (-2 * i) / D);

export class CpuRefTrainOps implements TrainOps {
  constructor(readonly backend: Backend) {}

  // dy (T,C), ids (T), dTable (V,C): dTable[ids[t]] += dy[t]
  embeddingBackward(dy: Tensor, ids: Int32Array, dTable: Tensor): void {
    const g = asCpu(dy).f32;
    const table = asCpu(dTable).f32;
    const [V, C] = dTable.shape;
    assertShape(g.length === ids.length * C, `embeddingBackward: dy (${dy.shape}) vs ${ids.length} ids, C=${C}`);
    for (let t = 0; t < ids.length; t++) {
      assertShape(ids[t] >= 0 && ids[t] < V, `embeddingBackward: token id ${ids[t]} outside [0,${V})`);
      for (let c = 0; c < C; c++) table[ids[t] * C + c] += g[t * C + c];
    }
  }

  // y = x * inv * w, inv = 1/sqrt(mean(x^2)+eps):
  // dx = inv * (w*dy) - x * inv^3 / C * sum_c(w*dy*x);  dw += sum_r dy * x * inv
  rmsnormBackward(dy: Tensor, x: Tensor, w: Tensor, eps: number, dw: Tensor | null): Tensor {
    const g = asCpu(dy).f32;
    const xs = asCpu(x).f32;
    const ws = asCpu(w).f32;
    const C = ws.length;
    assertShape(xs.length % C === 0 && g.length === xs.length, `rmsnormBackward: dy (${dy.shape}), x (${x.shape}), w (${C})`);
    const R = xs.length / C;
    const dx = new Float32Array(xs.length);
    const dwAcc = new Float64Array(C);
    for (let r = 0; r < R; r++) {
      const o = r * C;
      let ss = 0;
      for (let c = 0; c < C; c++) ss += xs[o + c] * xs[o + c];
      const inv = 1 / Math.sqrt(ss / C + eps);
      let dot = 0;
      for (let c = 0; c < C; c++) dot += ws[c] * g[o + c] * xs[o + c];
      const k = (inv * inv * inv * dot) / C;
      for (let c = 0; c < C; c++) {
        dx[o + c] = inv * ws[c] * g[o + c] - k * xs[o + c];
        dwAcc[c] += g[o + c] * xs[o + c] * inv;
      }
    }
    if (dw) {
      const d = asCpu(dw).f32;
      assertShape(d.length === C, `rmsnormBackward: dw (${dw.shape}) vs C=${C}`);
      for (let c = 0; c < C; c++) d[c] += dwAcc[c];
    }
    return f32(x.shape, dx);
  }

  // forward: (a, b) -> (a c - b s, b c + a s); backward is the transpose: (ga c + gb s, gb c - ga s)
  ropeBackward(dy: Tensor, pos: Tensor, theta: number): Tensor {
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

  // dy (M,N), w (N,K) -> dx (M,K) = dy W
  matmulBackwardInput(dy: Tensor, w: Tensor): Tensor {
    const g = asCpu(dy).f32;
    const wc = asCpu(w);
    const [N, K] = wc.shape;
    assertShape(dy.shape[dy.shape.length - 1] === N && g.length % N === 0, `matmulBackwardInput: dy (${dy.shape}) vs W (${N},${K})`);
    const M = g.length / N;
    const acc = new Float64Array(M * K);
    const row = new Float64Array(K);
    for (let n = 0; n < N; n++) {
      weightRow(wc, n, row);
      for (let m = 0; m < M; m++) {
        const gm = g[m * N + n];
        if (gm === 0) continue;
        const o = m * K;
        for (let k = 0; k < K; k++) acc[o + k] += gm * row[k];
      }
    }
    return f32([M, K], acc);
  }

  // dy (M,N), x (M,K), dw (N,K): dw += dy^T x
  matmulBackwardWeight(dy: Tensor, x: Tensor, dw: Tensor): void {
    const g = asCpu(dy).f32;
    const xs = asCpu(x).f32;
    const d = asCpu(dw).f32;
    const [N, K] = dw.shape;
    const M = g.length / N;
    assertShape(Number.isInteger(M) && xs.length === M * K, `matmulBackwardWeight: dy (${dy.shape}), x (${x.shape}), dW (${N},${K})`);
    for (let n = 0; n < N; n++)
      for (let k = 0; k < K; k++) {
        let acc = 0;
        for (let m = 0; m < M; m++) acc += g[m * N + n] * xs[m * K + k];
        d[n * K + k] += acc;
      }
  }

  // y = silu(g) * u; d silu / d g = sig(g) * (1 + g * (1 - sig(g)))
  swigluBackward(dy: Tensor, gate: Tensor, up: Tensor): { dGate: Tensor; dUp: Tensor } {
    const g = asCpu(dy).f32;
    const gs = asCpu(gate).f32;
    const us = asCpu(up).f32;
    assertShape(g.length === gs.length && gs.length === us.length, `swigluBackward: dy (${dy.shape}), gate (${gate.shape}), up (${up.shape})`);
    const dGate = new Float32Array(g.length);
    const dUp = new Float32Array(g.length);
    for (let i = 0; i < g.length; i++) {
      const sig = 1 / (1 + Math.exp(-gs[i]));
      dUp[i] = g[i] * gs[i] * sig;
      dGate[i] = g[i] * us[i] * sig * (1 + gs[i] * (1 - sig));
    }
    return { dGate: f32(gate.shape, dGate), dUp: f32(up.shape, dUp) };
  }

  // Per (t,h): p = softmax(scale q.k_j), dp_j = dOut.v_j, ds_j = p_j (dp_j - sum_i p_i dp_i);
  // dq = scale sum_j ds_j k_j; dk_j += scale ds_j q; dv_j += p_j dOut.
  attentionBackward(dOut: Tensor, q: Tensor, kCache: Tensor, vCache: Tensor, layout: TokenLayout) {
    const go = asCpu(dOut).f32;
    const qs = asCpu(q).f32;
    const ks = asCpu(kCache).f32;
    const vs = asCpu(vCache).f32;
    const slot = asCpu(layout.slot).i32;
    const pos = asCpu(layout.pos).i32;
    const [T, Hq, D] = q.shape;
    const [S, maxT, Hkv] = kCache.shape;
    assertShape(Hq % Hkv === 0 && kCache.shape[3] === D && go.length === qs.length, `attentionBackward: q (${q.shape}) vs cache (${kCache.shape})`);
    const group = Hq / Hkv;
    const scale = 1 / Math.sqrt(D);
    const dq = new Float64Array(qs.length);
    const dk = new Float64Array(ks.length);
    const dv = new Float64Array(vs.length);
    for (let t = 0; t < T; t++) {
      assertShape(slot[t] >= 0 && slot[t] < S && pos[t] >= 0 && pos[t] < maxT, `attentionBackward: slot ${slot[t]} pos ${pos[t]} outside cache`);
      for (let h = 0; h < Hq; h++) {
        const kvh = Math.floor(h / group);
        const n = pos[t] + 1;
        const qo = (t * Hq + h) * D;
        const kvAt = (j: number) => ((slot[t] * maxT + j) * Hkv + kvh) * D;
        const p = new Float64Array(n);
        let max = -Infinity;
        for (let j = 0; j < n; j++) {
          let dot = 0;
          for (let d = 0; d < D; d++) dot += qs[qo + d] * ks[kvAt(j) + d];
          p[j] = dot * scale;
          max = Math.max(max, p[j]);
        }
        let sum = 0;
        for (let j = 0; j < n; j++) sum += (p[j] = Math.exp(p[j] - max));
        const dp = new Float64Array(n);
        let pdp = 0;
        for (let j = 0; j < n; j++) {
          p[j] /= sum;
          let dot = 0;
          for (let d = 0; d < D; d++) dot += go[qo + d] * vs[kvAt(j) + d];
          dp[j] = dot;
          pdp += p[j] * dot;
        }
        for (let j = 0; j < n; j++) {
          const ds = p[j] * (dp[j] - pdp) * scale;
          const o = kvAt(j);
          for (let d = 0; d < D; d++) {
            dq[qo + d] += ds * ks[o + d];
            dk[o + d] += ds * qs[qo + d];
            dv[o + d] += p[j] * go[qo + d];
          }
        }
      }
    }
    return { dq: f32(q.shape, dq), dkCache: f32(kCache.shape, dk), dvCache: f32(vCache.shape, dv) };
  }

  // dk[t] = dkCache[slot[t], pos[t]] (the transpose of kvWrite's scatter)
  kvWriteBackward(dkCache: Tensor, dvCache: Tensor, layout: TokenLayout): { dk: Tensor; dv: Tensor } {
    const [S, maxT, Hkv, D] = dkCache.shape;
    const slot = asCpu(layout.slot).i32;
    const pos = asCpu(layout.pos).i32;
    const row = Hkv * D;
    const gather = (src: Float32Array) => {
      const out = new Float32Array(slot.length * row);
      for (let t = 0; t < slot.length; t++) {
        assertShape(slot[t] >= 0 && slot[t] < S && pos[t] >= 0 && pos[t] < maxT, `kvWriteBackward: slot ${slot[t]} pos ${pos[t]} outside cache`);
        const o = (slot[t] * maxT + pos[t]) * row;
        out.set(src.subarray(o, o + row), t * row);
      }
      return new CpuTensor([slot.length, Hkv, D], 'f32', out);
    };
    return { dk: gather(asCpu(dkCache).f32), dv: gather(asCpu(dvCache).f32) };
  }

  // y = x - lse(x): dx = dy - softmax(x) * sum(dy)
  logSoftmaxBackward(dy: Tensor, y: Tensor): Tensor {
    const g = asCpu(dy).f32;
    const ys = asCpu(y).f32;
    const V = y.shape[y.shape.length - 1];
    assertShape(g.length === ys.length, `logSoftmaxBackward: dy (${dy.shape}) vs y (${y.shape})`);
    const dx = new Float32Array(g.length);
    for (let r = 0; r < g.length / V; r++) {
      let s = 0;
      for (let i = 0; i < V; i++) s += g[r * V + i];
      for (let i = 0; i < V; i++) dx[r * V + i] = g[r * V + i] - Math.exp(ys[r * V + i]) * s;
    }
    return f32(y.shape, dx);
  }

  crossEntropy(logits: Tensor, targets: Tensor, weight: Tensor): LossHeadResult {
    return this.head(logits, targets, weight, null, null);
  }

  grpo(logits: Tensor, targets: Tensor, weight: Tensor, inputs: GrpoInputs, opts: GrpoOptions): LossHeadResult {
    checkGrpoOptions(opts, !!inputs.refLogp);
    return this.head(logits, targets, weight, inputs, opts);
  }

  /**
   * Shared row loop of both heads. Per row: logp = x[target] - lse(x), p = softmax(x).
   * CE: l = -logp, dl/dlogp = -1.
   * GRPO: ratio = exp(logp - old); pg1 = -A ratio; pg2 = -A clamp(ratio, 1-eps, 1+eps);
   *   pg = max(pg1, pg2), and for A < 0 pg = min(pg, -A c). The gradient flows only through pg1 when
   *   it is the selected branch (dl/dlogp = -A ratio). k3 KL with d = ref - logp: kl = e^d - d - 1,
   *   dkl/dlogp = 1 - e^d. l = pg + klCoef kl.
   * dlogits = weight * dl/dlogp * (onehot(target) - p).
   */
  protected head(logits: Tensor, targets: Tensor, weight: Tensor, g: GrpoInputs | null, o: GrpoOptions | null): LossHeadResult {
    const xs = asCpu(logits).f32;
    const tg = asCpu(targets).i32;
    const ws = asCpu(weight).f32;
    const [R, V] = logits.shape;
    assertShape(tg.length === R && ws.length === R, `loss head: logits (${logits.shape}), targets (${tg.length}), weight (${ws.length})`);
    const adv = g ? asCpu(g.advantage).f32 : null;
    const old = g ? asCpu(g.oldLogp).f32 : null;
    const ref = g?.refLogp ? asCpu(g.refLogp).f32 : null;
    if (g) assertShape(adv!.length === R && old!.length === R && (!ref || ref.length === R), 'grpo: advantage/oldLogp/refLogp must have R rows');
    const dx = new Float32Array(R * V);
    let loss = 0;
    let clipped = 0;
    let kl = 0;
    let ent = 0;
    let rows = 0;
    for (let r = 0; r < R; r++) {
      const w = ws[r];
      if (w === 0) continue;
      assertShape(tg[r] >= 0 && tg[r] < V, `loss head: target ${tg[r]} outside [0,${V}) at row ${r}`);
      const o0 = r * V;
      let max = -Infinity;
      for (let i = 0; i < V; i++) max = Math.max(max, xs[o0 + i]);
      let sum = 0;
      for (let i = 0; i < V; i++) sum += Math.exp(xs[o0 + i] - max);
      const lse = max + Math.log(sum);
      let px = 0;
      for (let i = 0; i < V; i++) px += Math.exp(xs[o0 + i] - lse) * xs[o0 + i];
      ent += lse - px;
      rows++;
      const logp = xs[o0 + tg[r]] - lse;
      const { l, dl, clipped: c1, kl: k3 } = g && o ? grpoTokenLoss(logp, adv![r], old![r], ref ? ref[r] : null, o) : ceTokenLoss(logp);
      clipped += c1;
      kl += k3;
      loss += w * l;
      for (let i = 0; i < V; i++) dx[o0 + i] = w * dl * ((i === tg[r] ? 1 : 0) - Math.exp(xs[o0 + i] - lse));
    }
    const n = Math.max(rows, 1);
    const metrics = Float32Array.of(loss, clipped / n, kl / n, ent / n);
    return { dLogits: f32([R, V], dx), metrics: f32([4], metrics) };
  }

  scatterAddRows(dst: Tensor, src: Tensor, rows: Tensor): void {
    const d = asCpu(dst).f32;
    const x = asCpu(src).f32;
    const idx = asCpu(rows).i32;
    const [R, C] = dst.shape;
    assertShape(x.length === idx.length * C, `scatterAddRows: src (${src.shape}) vs ${idx.length} rows of ${C}`);
    for (let i = 0; i < idx.length; i++) {
      assertShape(idx[i] >= 0 && idx[i] < R, `scatterAddRows: row ${idx[i]} outside [0,${R})`);
      for (let c = 0; c < C; c++) d[idx[i] * C + c] += x[i * C + c];
    }
  }

  flush(): void {}

  accumulate(dst: Tensor, src: Tensor, s = 1): void {
    const d = asCpu(dst).f32;
    const x = asCpu(src).f32;
    assertShape(d.length === x.length, `accumulate: (${dst.shape}) vs (${src.shape})`);
    for (let i = 0; i < d.length; i++) d[i] += s * x[i];
  }

  fill(t: Tensor, value: number): void {
    asCpu(t).f32.fill(value);
  }

  sumSquares(ts: readonly Tensor[]): Tensor {
    let s = 0;
    for (const t of ts) for (const v of asCpu(t).f32) s += v * v;
    return f32([1], Float32Array.of(s));
  }

  // PyTorch AdamW: p *= 1 - lr wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
  // p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
  adamw(param: Tensor, grad: Tensor, m: Tensor, v: Tensor, hp: AdamWStep): void {
    const p = asCpu(param).f32;
    const g = asCpu(grad).f32;
    const ms = asCpu(m).f32;
    const vs = asCpu(v).f32;
    assertShape(p.length === g.length && g.length === ms.length && ms.length === vs.length, `adamw: param (${param.shape}), grad (${grad.shape}), m, v differ`);
    const bc1 = 1 - Math.pow(hp.beta1, hp.step);
    const bc2 = 1 - Math.pow(hp.beta2, hp.step);
    const decay = 1 - hp.lr * hp.weightDecay;
    for (let i = 0; i < p.length; i++) {
      const gi = g[i] * hp.gradScale;
      ms[i] = hp.beta1 * ms[i] + (1 - hp.beta1) * gi;
      vs[i] = hp.beta2 * vs[i] + (1 - hp.beta2) * gi * gi;
      p[i] = p[i] * decay - (hp.lr * (ms[i] / bc1)) / (Math.sqrt(vs[i] / bc2) + hp.eps);
    }
  }
}
