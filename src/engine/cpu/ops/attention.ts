// Grouped-query causal attention over the KV cache and its backward (which recomputes the probabilities:
// the forward saves nothing).
import type { Tensor, TokenLayout } from '../../backend';
import { openAttention } from '../attention-args';
import { CpuTensor, f32 } from '../tensor';

// q (T,Hq,D), caches (S,maxT,Hkv,D) -> (T,Hq,D)
export function attention(q: Tensor, kCache: Tensor, vCache: Tensor, layout: TokenLayout): Tensor {
  const { qs, ks, vs, slot, pos, T, Hq, D, maxT, Hkv } = openAttention('attention', q, kCache, vCache, layout);
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

// Backward of `out = sum_j scores[j] * v_j / sum` with scores = softmax(scale q.k_j). Per (t,h):
// p = softmax(scale q.k_j), dp_j = dOut.v_j, ds_j = p_j (dp_j - sum_i p_i dp_i);
// dq = scale sum_j ds_j k_j; dk_j += scale ds_j q; dv_j += p_j dOut.
export function attentionBackward(dOut: Tensor, q: Tensor, kCache: Tensor, vCache: Tensor, layout: TokenLayout) {
  const a = openAttention('attentionBackward', q, kCache, vCache, layout, dOut);
  const { qs, ks, vs, slot, pos, T, Hq, D, maxT, Hkv } = a;
  const go = a.go!;
  const group = Hq / Hkv;
  const scale = 1 / Math.sqrt(D);
  const dq = new Float64Array(qs.length);
  const dk = new Float64Array(ks.length);
  const dv = new Float64Array(vs.length);
  for (let t = 0; t < T; t++) {
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
