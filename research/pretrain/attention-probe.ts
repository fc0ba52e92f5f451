// Where does the policy look when it copies? For fresh copy drills (research/pretrain/augment.ts), at every
// answer position whose next token is a value token that also stands in the request, each head's attention
// is measured against the *source*: the request position holding that token (the one after a copy of the
// token just written, when there is one: the induction pattern). Per layer and head:
//   - sourceMass: mean attention probability on the source position(s) (chance is about 1/position);
//   - top1: how often the head's single most attended position is a source;
//   - entropy: mean attention entropy in nats (a head that points at one position has ~0);
//   - maxLogit: mean of the largest pre-softmax score (q·k/√d), the sharpness attention can reach.
// A model with an induction (copy) head has one head with sourceMass near 1; a model that does not copy has
// every head near chance. The forward pass here is a plain, unbatched Qwen3 (rotate-half RoPE, q/k-norm,
// GQA, SwiGLU) over the host copy of the weights the engine's loader validated (loadQwen3 / buildQwen3 with
// keepHost), written only to expose attention probabilities; its log-probabilities are tested against the
// engine's (test/pretrain/attention-probe.test.ts).
import type { Qwen3Config } from '../../src/model/config';
import type { Tokenizer } from '../../src/model/tokenizer';
import { denseOf, layerWeightName, type HostWeights } from '../../src/model/weights';
import { Rng } from '../../src/util/rng';
import { copyDrills } from './augment';

export interface HeadStats {
  layer: number;
  head: number;
  sourceMass: number;
  top1: number;
  entropy: number;
  maxLogit: number;
}

export interface AttentionProbe {
  drills: number;
  /** Answer positions measured (next token is a value token found in the request). */
  positions: number;
  /** Mean over positions of 1 / (number of attended positions): the source mass of uniform attention. */
  chance: number;
  heads: HeadStats[];
}

/** attention-probe.json: the probe on the folder's policy and on the models it is compared with. */
export interface AttentionRecord {
  command: string;
  drills: number;
  seed: number;
  models: { label: string; dir: string; probe: AttentionProbe }[];
}

/** Per-position attention of one forward: probs[layer][head][t] = probabilities over keys 0..t. */
export interface ForwardTrace {
  /** (T, V) log-softmax of the logits, row t predicting token t+1. */
  logprobs: Float32Array[];
  probs: Float32Array[][][];
  maxLogit: Float32Array[][];
}

/** A plain forward over a model's host weights (dequantized once, if they were quantized). */
export class PlainQwen3 {
  private readonly w = new Map<string, Float32Array>();

  constructor(
    readonly config: Qwen3Config,
    host: HostWeights,
  ) {
    for (const [name, weight] of host) this.w.set(name, denseOf(weight));
  }

  private get(name: string): Float32Array {
    const t = this.w.get(name);
    if (!t) throw new Error(`attention probe: tensor '${name}' is missing`);
    return t;
  }

  /** ids (T) -> log-probs of every next token and every head's attention at every position. */
  forward(ids: readonly number[]): ForwardTrace {
    const c = this.config;
    const T = ids.length;
    const d = c.hiddenSize;
    const D = c.headDim;
    const H = c.numHeads;
    const G = H / c.numKvHeads;
    const emb = this.get('model.embed_tokens.weight');
    // x (T, d): the residual stream
    const x = ids.map((id) => emb.slice(id * d, (id + 1) * d));
    const probs: Float32Array[][][] = [];
    const maxLogit: Float32Array[][] = [];
    for (let l = 0; l < c.numLayers; l++) {
      const W = (k: Parameters<typeof layerWeightName>[1]) => this.get(layerWeightName(l, k));
      const h = x.map((r) => rmsnorm(r, W('inputNorm'), c.rmsNormEps));
      // q (T, H, D), k/v (T, Hkv, D); q/k-norm per head, then RoPE at position t
      const q = h.map((r, t) => rope(headNorm(matvec(W('q'), r), W('qNorm'), D, c.rmsNormEps), t, D, c.ropeTheta));
      const k = h.map((r, t) => rope(headNorm(matvec(W('k'), r), W('kNorm'), D, c.rmsNormEps), t, D, c.ropeTheta));
      const v = h.map((r) => matvec(W('v'), r));
      const lp: Float32Array[][] = [];
      const lm: Float32Array[] = [];
      const att = x.map(() => new Float32Array(H * D));
      for (let hd = 0; hd < H; hd++) {
        const kv = Math.floor(hd / G);
        const rows: Float32Array[] = [];
        const mx = new Float32Array(T);
        for (let t = 0; t < T; t++) {
          const s = new Float32Array(t + 1);
          let m = -Infinity;
          for (let j = 0; j <= t; j++) {
            let dot = 0;
            for (let i = 0; i < D; i++) dot += q[t][hd * D + i] * k[j][kv * D + i];
            s[j] = dot / Math.sqrt(D);
            if (s[j] > m) m = s[j];
          }
          mx[t] = m;
          let z = 0;
          for (let j = 0; j <= t; j++) z += s[j] = Math.exp(s[j] - m);
          for (let j = 0; j <= t; j++) {
            s[j] /= z;
            for (let i = 0; i < D; i++) att[t][hd * D + i] += s[j] * v[j][kv * D + i];
          }
          rows.push(s);
        }
        lp.push(rows);
        lm.push(mx);
      }
      probs.push(lp);
      maxLogit.push(lm);
      for (let t = 0; t < T; t++) add(x[t], matvec(W('o'), att[t]));
      for (let t = 0; t < T; t++) {
        const h2 = rmsnorm(x[t], W('postNorm'), c.rmsNormEps);
        const g = matvec(W('gate'), h2);
        const u = matvec(W('up'), h2);
        for (let i = 0; i < g.length; i++) g[i] = (g[i] / (1 + Math.exp(-g[i]))) * u[i];
        add(x[t], matvec(W('down'), g));
      }
    }
    const head = c.tieWordEmbeddings ? emb : this.get('lm_head.weight');
    const logprobs = x.map((r) => logSoftmax(matvec(head, rmsnorm(r, this.get('model.norm.weight'), c.rmsNormEps))));
    return { logprobs, probs, maxLogit };
  }
}

/** The probe on `drills` fresh copy drills (seeded), filler from `filler` (the domain's requests). */
export function attentionProbe(model: PlainQwen3, tok: Pick<Tokenizer, 'encode'>, o: { drills: number; seed: number; filler: readonly string[] }): AttentionProbe {
  const c = model.config;
  const acc = Array.from({ length: c.numLayers * c.numHeads }, () => ({ mass: 0, top1: 0, entropy: 0, maxLogit: 0 }));
  let positions = 0;
  let chance = 0;
  const examples = copyDrills(o.drills, new Rng(o.seed * 17 + 5), o.filler);
  for (const ex of examples) {
    const p = tok.encode(ex.prompt);
    const r = tok.encode(ex.response);
    const ids = [...p, ...r];
    const tr = model.forward(ids);
    // Query t (an answer position, or the last prompt token) predicts ids[t + 1], an answer token.
    for (let t = p.length - 1; t < ids.length - 2; t++) {
      const next = ids[t + 1];
      const all = [];
      for (let j = 0; j < p.length; j++) if (p[j] === next) all.push(j);
      if (all.length === 0) continue; // a separator the request does not hold at all
      const induction = all.filter((j) => j > 0 && p[j - 1] === ids[t]);
      const sources = induction.length > 0 ? induction : all;
      positions++;
      chance += sources.length / (t + 1);
      for (let l = 0; l < c.numLayers; l++)
        for (let h = 0; h < c.numHeads; h++) {
          const a = acc[l * c.numHeads + h];
          const pr = tr.probs[l][h][t];
          let best = 0;
          let ent = 0;
          for (let j = 0; j <= t; j++) {
            if (pr[j] > pr[best]) best = j;
            if (pr[j] > 0) ent -= pr[j] * Math.log(pr[j]);
          }
          a.mass += sources.reduce((s, j) => s + pr[j], 0);
          a.top1 += sources.includes(best) ? 1 : 0;
          a.entropy += ent;
          a.maxLogit += tr.maxLogit[l][h][t];
        }
    }
  }
  const n = Math.max(1, positions);
  return {
    drills: examples.length,
    positions,
    chance: chance / n,
    heads: acc.map((a, i) => ({ layer: Math.floor(i / c.numHeads), head: i % c.numHeads, sourceMass: a.mass / n, top1: a.top1 / n, entropy: a.entropy / n, maxLogit: a.maxLogit / n })),
  };
}

// w (out, in) row-major, x (in) -> (out)
function matvec(w: Float32Array, x: Float32Array): Float32Array {
  const n = x.length;
  const out = new Float32Array(w.length / n);
  for (let o = 0; o < out.length; o++) {
    let s = 0;
    for (let i = 0; i < n; i++) s += w[o * n + i] * x[i];
    out[o] = s;
  }
  return out;
}

function rmsnorm(x: Float32Array, g: Float32Array, eps: number): Float32Array {
  let ss = 0;
  for (const v of x) ss += v * v;
  const r = 1 / Math.sqrt(ss / x.length + eps);
  return x.map((v, i) => v * r * g[i]);
}

/** RMS norm of each D-wide head with the shared gain (Qwen3's q_norm / k_norm). */
function headNorm(x: Float32Array, g: Float32Array, D: number, eps: number): Float32Array {
  const out = new Float32Array(x.length);
  for (let h = 0; h < x.length / D; h++) out.set(rmsnorm(x.subarray(h * D, (h + 1) * D), g, eps), h * D);
  return out;
}

/** Rotate-half RoPE of every D-wide head at position t: pairs (i, i + D/2) by t·θ^(−2i/D). */
function rope(x: Float32Array, t: number, D: number, theta: number): Float32Array {
  const out = new Float32Array(x.length);
  const half = D / 2;
  for (let base = 0; base < x.length; base += D)
    for (let i = 0; i < half; i++) {
      const ang = t * Math.pow(theta, (-2 * i) / D);
      const [cs, sn] = [Math.cos(ang), Math.sin(ang)];
      const [a, b] = [x[base + i], x[base + i + half]];
      out[base + i] = a * cs - b * sn;
      out[base + i + half] = b * cs + a * sn;
    }
  return out;
}

function add(x: Float32Array, y: Float32Array): void {
  for (let i = 0; i < x.length; i++) x[i] += y[i];
}

function logSoftmax(z: Float32Array): Float32Array {
  let m = -Infinity;
  for (const v of z) if (v > m) m = v;
  let s = 0;
  for (const v of z) s += Math.exp(v - m);
  const lz = m + Math.log(s);
  return z.map((v) => v - lz);
}
