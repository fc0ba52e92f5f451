// From-scratch training of a small Qwen3 on encoded (prompt, response) sequences: seeded init,
// micro-batches of whole sequences (each in its own KV slot), cross-entropy on response tokens only
// (logits are computed for those rows alone), global grad-norm clip, AdamW with warmup + cosine.
// Deterministic: the same seed, data and backend give the same weights bit for bit.
import type { Backend, Tensor } from '../engine/backend';
import { Rng } from '../engine/rng';
import { clipFactor, lrAt, tokenWeights, trainOps, type LrSchedule } from '../engine/train';
import type { Qwen3Config } from '../model/config';
import { forward, KvCache, type Qwen3Model } from '../model/qwen3';
import { buildQwen3, weightSpecs, type HostWeights, type WeightSpec } from '../model/weights';
import { backward, freeSaved, paramPairs, zeroGrads, type Grads } from './backward';
import { targetsAndMask, type Encoded } from './data';

/**
 * Init: matrices N(0, 0.02), the residual-branch outputs (o_proj, down_proj) scaled by 1/sqrt(2L) so the
 * residual stream does not grow with depth; norms 1 (the identity, as Hugging Face initialises Qwen3).
 */
export function initWeights(c: Qwen3Config, seed: number): (spec: WeightSpec) => { kind: 'f32'; shape: number[]; data: Float32Array } {
  const rng = new Rng(seed);
  return (spec) => {
    const n = spec.shape.reduce((a: number, b: number) => a * b, 1);
    const data = new Float32Array(n);
    if (spec.shape.length === 1) data.fill(1);
    else {
      const resid = /o_proj|down_proj/.test(spec.name);
      const std = 0.02 / (resid ? Math.sqrt(2 * c.numLayers) : 1);
      for (let i = 0; i < n; i++) data[i] = std * rng.normal();
    }
    return { kind: 'f32', shape: [...spec.shape], data };
  };
}

export interface TrainHyper {
  schedule: LrSchedule;
  weightDecay: number;
  beta1: number;
  beta2: number;
  eps: number;
  maxGradNorm: number;
  /**
   * Weight of an auxiliary next-token loss on prompt tokens, relative to response tokens (0 = responses
   * only). From scratch the model must first learn the domain's text, and prompts hold ~80% of the tokens
   * (past calls, observations, user requests) that a step pays for anyway. Every third prompt position
   * gets this loss.
   */
  promptLossWeight?: number;
}

export const DEFAULT_HYPER: TrainHyper = {
  schedule: { kind: 'warmup-cosine', lr: 3e-3, warmupSteps: 30, totalSteps: 1000, minLr: 3e-4 },
  weightDecay: 0.05,
  beta1: 0.9,
  beta2: 0.98,
  eps: 1e-8,
  maxGradNorm: 1,
};

export interface StepStats {
  step: number;
  loss: number;
  lr: number;
  gradNorm: number;
  tokens: number;
  responseTokens: number;
  ms: number;
}

/**
 * Fixed batch shapes. The CPU fast path recycles memory through exact-size free lists, so batches whose
 * shapes change every step would grow its heap until the 4 GiB wasm limit; with these, every step
 * allocates the same few sizes. Tokens are padded to `tokens` (a pad slot, no loss), the KV cache is
 * (slots, maxLen) and reused, and the loss rows are rounded up to a multiple of `rowQuantum`.
 */
export interface FixedShapes {
  tokens: number;
  slots: number;
  maxLen: number;
  rowQuantum: number;
}

export class Pretrainer {
  readonly grads: Grads;
  private cache: KvCache | null = null;
  private readonly m: Tensor[] = [];
  private readonly v: Tensor[] = [];
  readonly pairs: { name: string; w: Tensor; g: Tensor }[];
  step = 0;

  private constructor(
    readonly model: Qwen3Model,
    readonly hyper: TrainHyper,
    readonly shapes: FixedShapes | null,
  ) {
    this.grads = zeroGrads(model);
    this.pairs = paramPairs(model, this.grads);
    for (const p of this.pairs) {
      this.m.push(model.backend.zeros([...p.w.shape]));
      this.v.push(model.backend.zeros([...p.w.shape]));
    }
  }

  static async create(b: Backend, c: Qwen3Config, seed: number, hyper: TrainHyper, shapes: FixedShapes | null = null): Promise<Pretrainer> {
    const { model } = await buildQwen3(b, c, initWeights(c, seed), { format: 'f32' });
    return new Pretrainer(model, hyper, shapes);
  }

  /** Continues from an already loaded f32 model (a second stage; the optimizer starts fresh). */
  static fromModel(model: Qwen3Model, hyper: TrainHyper, shapes: FixedShapes | null = null): Pretrainer {
    if (model.format !== 'f32') throw new Error(`pretraining needs f32 weights, got ${model.format}`);
    return new Pretrainer(model, hyper, shapes);
  }

  /** One optimizer step on a micro-batch of whole sequences (loss: mean over its response tokens). */
  async trainStep(seqs: readonly Encoded[]): Promise<StepStats> {
    const t0 = performance.now();
    const { loss, tokens, responseTokens } = await this.accumulateGrads(seqs);
    const { lr, gradNorm } = await this.applyGrads();
    return { step: this.step, loss, lr, gradNorm, tokens, responseTokens, ms: performance.now() - t0 };
  }

  /** Forward + backward: adds d loss / d weights into this.grads; returns the loss (before the update). */
  async accumulateGrads(seqs: readonly Encoded[]): Promise<{ loss: number; tokens: number; responseTokens: number }> {
    const b = this.model.backend;
    const ops = trainOps(b);
    const parts = seqs.map(targetsAndMask);
    const natural = parts.reduce((a, p) => a + p.inputs.length, 0);
    const sh = this.shapes;
    if (sh && (natural > sh.tokens || seqs.length >= sh.slots || parts.some((p) => p.inputs.length > sh.maxLen)))
      throw new Error(`batch of ${seqs.length} sequences / ${natural} tokens does not fit the fixed shapes ${JSON.stringify(sh)}`);
    const T = sh ? sh.tokens : natural;
    const maxT = sh ? sh.maxLen : Math.max(...parts.map((p) => p.inputs.length));
    const ids = new Int32Array(T);
    const slot = new Int32Array(T);
    const pos = new Int32Array(T);
    const rows: number[] = [];
    const targets: number[] = [];
    const seqOf: number[] = [];
    const isResp: boolean[] = [];
    const pw = this.hyper.promptLossWeight ?? 0;
    let o = 0;
    parts.forEach((p, s) => {
      ids.set(p.inputs, o);
      for (let t = 0; t < p.inputs.length; t++) {
        slot[o + t] = s;
        pos[o + t] = t;
        // Prompt tokens: every third position only (the LM head is the costly part of a loss row).
        if (p.mask[t] !== 0 || (pw > 0 && t % 3 === 0)) {
          rows.push(o + t);
          targets.push(p.targets[t]);
          seqOf.push(s);
          isResp.push(p.mask[t] !== 0);
        }
      }
      o += p.inputs.length;
    });
    // Padding: token 0 in the last slot, positions cycling over 64 so its attention stays cheap; it has no
    // loss, so it gets no gradient and touches no real sequence (other slot).
    for (let t = o; t < T; t++) {
      slot[t] = sh!.slots - 1;
      pos[t] = (t - o) % 64;
    }
    const real = rows.length;
    const R = sh ? Math.ceil(real / sh.rowQuantum) * sh.rowQuantum : real;
    for (let i = real; i < R; i++) {
      rows.push(0);
      targets.push(0);
    }
    const headRows = Int32Array.from(rows);
    const weights = new Float32Array(R);
    if (pw > 0) {
      // Every token a loss row: response tokens weight 1, prompt tokens pw, normalised to sum 1.
      const sum = isResp.reduce((a, r) => a + (r ? 1 : pw), 0);
      isResp.forEach((r, i) => (weights[i] = (r ? 1 : pw) / sum));
    } else weights.set(tokenWeights(new Float32Array(real).fill(1), seqOf, 'token-mean'));
    if (sh && !this.cache) this.cache = new KvCache(this.model, sh.slots, sh.maxLen);
    const cache = sh ? this.cache! : new KvCache(this.model, seqs.length, maxT);
    const { logits, saved } = forward(this.model, cache, { ids, slot, pos }, { save: true, logitRows: headRows });
    const tTargets = b.tensor(Int32Array.from(targets), [targets.length]);
    const tWeights = b.tensor(weights, [R]);
    const { dLogits, metrics } = ops.crossEntropy(logits, tTargets, tWeights);
    const loss = (await b.read(metrics))[0];
    b.free(logits);
    backward(this.model, cache, saved!, ids, headRows, dLogits, this.grads);
    for (const t of [dLogits, metrics, tTargets, tWeights]) b.free(t);
    freeSaved(b, saved!);
    if (!sh) cache.free();
    return { loss, tokens: natural, responseTokens: isResp.filter((r) => r).length };
  }

  /** Clip, AdamW, zero the gradients. */
  async applyGrads(): Promise<{ lr: number; gradNorm: number }> {
    const b = this.model.backend;
    const ops = trainOps(b);
    const ssT = ops.sumSquares(this.pairs.map((p) => p.g));
    const ss = (await b.read(ssT))[0];
    b.free(ssT);
    this.step++;
    const lr = lrAt(this.hyper.schedule, this.step);
    const gradScale = clipFactor(ss, this.hyper.maxGradNorm);
    this.pairs.forEach((p, i) => {
      // No decay on norm gains (decaying them toward 0 would fight the normalisation).
      const wd = p.w.shape.length === 2 ? this.hyper.weightDecay : 0;
      ops.adamw(p.w, p.g, this.m[i], this.v[i], { lr, beta1: this.hyper.beta1, beta2: this.hyper.beta2, eps: this.hyper.eps, weightDecay: wd, step: this.step, gradScale });
      ops.fill(p.g, 0);
    });
    return { lr, gradNorm: Math.sqrt(ss) };
  }

  /** The current weights as host f32 arrays under their Hugging Face names. */
  async hostWeights(): Promise<HostWeights> {
    const b = this.model.backend;
    const c = this.model.config;
    const w = this.model.weights;
    const out: HostWeights = new Map();
    const byName = new Map<string, Tensor>([['model.embed_tokens.weight', w.embed], ['model.norm.weight', w.finalNorm]]);
    if (!c.tieWordEmbeddings) byName.set('lm_head.weight', w.lmHead);
    const keys: [string, keyof (typeof w.layers)[number]][] = [
      ['input_layernorm', 'inputNorm'],
      ['self_attn.q_proj', 'q'],
      ['self_attn.k_proj', 'k'],
      ['self_attn.v_proj', 'v'],
      ['self_attn.o_proj', 'o'],
      ['self_attn.q_norm', 'qNorm'],
      ['self_attn.k_norm', 'kNorm'],
      ['post_attention_layernorm', 'postNorm'],
      ['mlp.gate_proj', 'gate'],
      ['mlp.up_proj', 'up'],
      ['mlp.down_proj', 'down'],
    ];
    w.layers.forEach((l, i) => keys.forEach(([hf, k]) => byName.set(`model.layers.${i}.${hf}.weight`, l[k])));
    for (const spec of weightSpecs(c)) {
      const t = byName.get(spec.name)!;
      out.set(spec.name, { kind: 'f32', shape: [...spec.shape], data: Float32Array.from((await b.read(t)) as Float32Array) });
    }
    return out;
  }
}
