// One optimizer step = forward + loss + backward over one or more micro-batches (gradients accumulate),
// then a guard, grad-norm clipping and AdamW, all through the backend's TrainOps.
//
// The loss head only sees rows that carry loss (weight != 0), in chunks of `headChunk` rows, so the
// (rows,V) logits of a big vocabulary never exist for the whole batch at once.
// Guard: if the loss or any gradient is NaN/Inf the step is refused: weights, moments and the step
// counter are left untouched, gradients are cleared, and the report says what was not finite.
import type { Tensor } from '../engine/backend';
import { EngineError } from '../engine/errors';
import type { GrpoOptions } from '../engine/train';
import type { LoraAdapter } from '../model/lora';
import type { Qwen3Model } from '../model/qwen3';
import { writeSafetensors, parseSafetensors, type TensorToWrite } from '../model/safetensors';
import { checkTrainBatch, type TrainBatch } from './batch';
import { freeActivations, modelBackward, trainForward } from './model-grad';
import { fullParams, loraParams, type ParamSet } from './params';

export type LrSchedule =
  | { kind: 'constant'; lr: number }
  | { kind: 'warmup-cosine'; lr: number; warmupSteps: number; totalSteps: number; minLr?: number };

/** Learning rate at 1-based step `step`: linear warmup to lr, then cosine decay to minLr at totalSteps. */
export function lrAt(s: LrSchedule, step: number): number {
  if (s.kind === 'constant') return s.lr;
  const min = s.minLr ?? 0;
  if (step <= s.warmupSteps) return (s.lr * step) / Math.max(1, s.warmupSteps);
  const span = Math.max(1, s.totalSteps - s.warmupSteps);
  const p = Math.min(1, (step - s.warmupSteps) / span);
  return min + 0.5 * (s.lr - min) * (1 + Math.cos(Math.PI * p));
}

/**
 * The factor on the logits that scores a sampling temperature's policy: 1/T, and 1 at T = 1 and for greedy rollouts
 * (T = 0, whose log-probs src/engine/sampling.ts reports at temperature 1).
 */
export function scoringScale(temperature: number | undefined): number {
  if (temperature === undefined || temperature === 0 || temperature === 1) return 1;
  if (!(Number.isFinite(temperature) && temperature > 0)) throw new RangeError(`a sampling temperature must be a finite number >= 0, got ${temperature}`);
  return 1 / temperature;
}

/** Factor that scales gradients so their global norm is at most maxNorm (1 when already below). */
export function clipFactor(sumSquares: number, maxNorm: number): number {
  const norm = Math.sqrt(sumSquares);
  return maxNorm > 0 && norm > maxNorm ? maxNorm / (norm + 1e-6) : 1;
}

/**
 * The loss head. GRPO's `temperature` (default 1) is the sampling temperature of the rollouts whose old log-probs
 * the batch carries (log softmax(logits / T), src/engine/sampling.ts): the head scores the same tempered policy, so
 * the first epoch's importance ratio is exactly 1 at any temperature (verl divides the logits by it in both places).
 */
export type LossSpec = { kind: 'ce' } | ({ kind: 'grpo'; temperature?: number } & GrpoOptions);

export interface TrainerOptions {
  /** 'lora': train `adapter` (base frozen, any format); 'full': every weight of an f32 model. */
  mode: 'lora' | 'full';
  adapter?: LoraAdapter;
  schedule: LrSchedule;
  beta1?: number;
  beta2?: number;
  eps?: number;
  /** Decoupled weight decay of matrices (norm gains are never decayed: it would fight the normalisation). */
  weightDecay?: number;
  /** Global grad-norm clip (0 = off). Default 1. */
  maxGradNorm?: number;
  /** Recompute each block's activations in the backward (checkpoint per block). */
  recompute?: boolean;
  /** Rows of logits per loss-head chunk. Default 256. */
  headChunk?: number;
  loss: LossSpec;
}

export interface StepReport {
  applied: boolean;
  /** Why a step was refused (NaN/Inf loss or gradient). */
  refused?: string;
  /** 1-based optimizer step this report is for (unchanged when refused). */
  step: number;
  lr: number;
  loss: number;
  clipFrac: number;
  kl: number;
  entropy: number;
  /** Global gradient norm before clipping. */
  gradNorm: number;
  /** Tokens with loss in this step. */
  tokens: number;
}

/**
 * Loss rows in chunks of at most `size` whose tokens are distinct (the backward scatter-adds into the
 * tokens' hidden states); a packShared token that carries several rows spreads them over chunks.
 */
export function headChunks(rows: readonly number[], at: Int32Array | undefined, size: number): number[][] {
  const out: number[][] = [];
  let pending = rows;
  while (pending.length > 0) {
    const later: number[] = [];
    let cur: number[] = [];
    let seen = new Set<number>();
    for (const r of pending) {
      const t = at ? at[r] : r;
      if (seen.has(t)) {
        later.push(r);
        continue;
      }
      cur.push(r);
      seen.add(t);
      if (cur.length === size) {
        out.push(cur);
        cur = [];
        seen = new Set();
      }
    }
    if (cur.length > 0) out.push(cur);
    pending = later;
  }
  return out;
}

export class Trainer {
  readonly params: ParamSet;
  /** Completed optimizer steps. */
  step = 0;
  private readonly o: Required<Omit<TrainerOptions, 'adapter'>> & { adapter: LoraAdapter | null };
  /**
   * The factor on the logits the loss head scores (scoringScale of GRPO's sampling temperature; 1 for cross-entropy):
   * the reference log-probs of the KL term must be taken at the same scale (src/rl/grpo.ts).
   */
  readonly logitScale: number;

  constructor(
    readonly model: Qwen3Model,
    opts: TrainerOptions,
  ) {
    if (opts.mode === 'lora' && !opts.adapter) throw new EngineError('shape', "Trainer: mode 'lora' needs an adapter");
    this.logitScale = opts.loss.kind === 'grpo' ? scoringScale(opts.loss.temperature) : 1; // a bad temperature fails here, not mid-step
    this.o = {
      beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0, maxGradNorm: 1, recompute: false, headChunk: 256,
      ...opts,
      adapter: opts.mode === 'lora' ? opts.adapter! : null,
    };
    this.params = opts.mode === 'lora' ? loraParams(model.backend, opts.adapter!) : fullParams(model);
  }

  get adapter(): LoraAdapter | null {
    return this.o.adapter;
  }

  /**
   * Forward + loss + backward of one micro-batch; adds into the gradients. Returns two (4) tensors:
   * the sum of the chunks' metrics (its [0] is the loss) and their row-weighted sum (for the means).
   */
  lossAndGrad(batch: TrainBatch): { sum: Tensor; weighted: Tensor } | null {
    const m = this.model;
    const b = m.backend;
    const ops = b.train;
    const T = batch.ids.length;
    checkTrainBatch(batch, m.config.vocabSize, this.o.loss.kind === 'grpo' ? { klCoef: this.o.loss.klCoef } : null);
    const at = batch.share?.at;
    const R = batch.targets.length;
    const cp = batch.share?.copies;
    const rows: number[] = [];
    for (let r = 0; r < R; r++) if (batch.weight[r] !== 0) rows.push(r);
    if (rows.length === 0) return null;

    const act = trainForward(m, batch.ids, batch.slot, batch.pos, batch.slots, batch.maxT, this.o.adapter, this.o.recompute, cp);
    const d = m.config.hiddenSize;
    const dNormed = b.zeros([T, d]);
    const lmGrad = this.params.grad(m.weights.lmHead);
    const sum = b.zeros([4]);
    const weighted = b.zeros([4]);
    for (const chunk of headChunks(rows, at, this.o.headChunk)) {
      const idx = Int32Array.from(chunk);
      const n = idx.length;
      const pick = <A extends Float32Array | Int32Array>(a: A) => {
        const out = new (a.constructor as { new (n: number): A })(n);
        for (let i = 0; i < n; i++) out[i] = a[idx[i]];
        return b.tensor(out, [n]);
      };
      const rowT = b.tensor(at ? idx.map((r) => at[r]) : idx, [n]); // the tokens these rows read
      const h = b.gatherRows(act.normed, rowT); // (n,d)
      const raw = b.matmul(h, m.weights.lmHead); // (n,V)
      // GRPO at a sampling temperature T scores logits / T; d loss / d raw = (1/T) d loss / d (logits / T).
      const invT = this.logitScale;
      const logits = invT === 1 ? raw : b.scale(raw, invT);
      const tg = pick(batch.targets);
      const wt = pick(batch.weight);
      const side: Tensor[] = [];
      let res;
      if (this.o.loss.kind === 'ce') res = ops.crossEntropy(logits, tg, wt);
      else {
        const g = batch.grpo!;
        const adv = pick(g.advantage);
        const old = pick(g.oldLogp);
        const ref = g.refLogp ? pick(g.refLogp) : null;
        side.push(adv, old, ...(ref ? [ref] : []));
        res = ops.grpo(logits, tg, wt, { advantage: adv, oldLogp: old, refLogp: ref }, this.o.loss);
      }
      const dRaw = invT === 1 ? res.dLogits : b.scale(res.dLogits, invT);
      const dh = ops.matmulBackwardInput(dRaw, m.weights.lmHead); // (n,d)
      if (lmGrad) ops.matmulBackwardWeight(dRaw, h, lmGrad);
      ops.scatterAddRows(dNormed, dh, rowT);
      ops.accumulate(sum, res.metrics);
      ops.accumulate(weighted, res.metrics, n);
      for (const t of new Set([rowT, h, raw, logits, tg, wt, res.dLogits, dRaw, res.metrics, dh, ...side])) b.free(t);
      ops.flush();
    }
    modelBackward(m, this.params, act, dNormed, batch.ids, this.o.adapter);
    b.free(dNormed);
    freeActivations(b, act);
    return { sum, weighted };
  }

  /**
   * One optimizer step over micro-batches. Their weights must already include the 1/micro-batches
   * scale (packBatch's `scale`), so the loss is the sum of the micro-batch losses.
   */
  async trainStep(micro: readonly TrainBatch[]): Promise<StepReport> {
    const b = this.model.backend;
    const ops = b.train;
    for (const p of this.params.params) ops.fill(p.grad, 0);
    let loss = 0;
    let clip = 0;
    let kl = 0;
    let ent = 0;
    let tokens = 0;
    for (const batch of micro) {
      const met = this.lossAndGrad(batch);
      if (!met) continue;
      loss += ((await b.read(met.sum)) as Float32Array)[0];
      const [, c, k, e] = (await b.read(met.weighted)) as Float32Array;
      b.free(met.sum);
      b.free(met.weighted);
      clip += c;
      kl += k;
      ent += e;
      tokens += batch.weight.reduce((a, w) => a + (w !== 0 ? 1 : 0), 0);
    }
    const nextStep = this.step + 1;
    const lr = lrAt(this.o.schedule, nextStep);
    const ssT = ops.sumSquares(this.params.params.map((p) => p.grad));
    const ss = ((await b.read(ssT)) as Float32Array)[0];
    b.free(ssT);
    const report: StepReport = {
      applied: false, step: nextStep, lr, loss, gradNorm: Math.sqrt(ss), tokens,
      clipFrac: clip / Math.max(tokens, 1), kl: kl / Math.max(tokens, 1), entropy: ent / Math.max(tokens, 1),
    };
    if (tokens === 0) {
      report.refused = 'no token carries loss in this step';
      report.step = this.step;
      return report;
    }
    if (!Number.isFinite(loss) || !Number.isFinite(ss)) {
      report.refused = Number.isFinite(loss) ? `gradient is not finite (${await this.firstBadGrad()})` : `loss is ${loss}`;
      report.step = this.step;
      for (const p of this.params.params) ops.fill(p.grad, 0);
      return report;
    }
    const gradScale = clipFactor(ss, this.o.maxGradNorm);
    const hp = { lr, beta1: this.o.beta1, beta2: this.o.beta2, eps: this.o.eps, weightDecay: this.o.weightDecay, step: nextStep, gradScale };
    for (const p of this.params.params) ops.adamw(p.param, p.grad, p.m, p.v, p.param.shape.length === 2 ? hp : { ...hp, weightDecay: 0 });
    await b.sync();
    this.step = nextStep;
    report.applied = true;
    return report;
  }

  private async firstBadGrad(): Promise<string> {
    const ops = this.model.backend.train;
    for (const p of this.params.params) {
      const t = ops.sumSquares([p.grad]);
      const v = ((await this.model.backend.read(t)) as Float32Array)[0];
      this.model.backend.free(t);
      if (!Number.isFinite(v)) return `first in ${p.name}`;
    }
    return 'overflow of the global norm';
  }

  /** AdamW state (step and both moments of every parameter) as a safetensors file. */
  async saveOptimizerState(): Promise<Uint8Array> {
    const b = this.model.backend;
    const tensors: Record<string, TensorToWrite> = {};
    for (const p of this.params.params) {
      tensors[`${p.name}.exp_avg`] = { dtype: 'F32', shape: p.param.shape, data: (await b.read(p.m)) as Float32Array };
      tensors[`${p.name}.exp_avg_sq`] = { dtype: 'F32', shape: p.param.shape, data: (await b.read(p.v)) as Float32Array };
    }
    return writeSafetensors(tensors, { step: String(this.step), format: 'envace-adamw' });
  }

  /** Restore a state written by saveOptimizerState for the same parameters. */
  loadOptimizerState(bytes: Uint8Array, file = 'optimizer.safetensors'): void {
    const st = parseSafetensors(bytes, file);
    const step = Number(st.metadata.step);
    if (!Number.isInteger(step) || step < 0) throw new EngineError('shape', `${file}: missing or bad step in metadata`);
    for (const p of this.params.params) {
      const m = st.float32(`${p.name}.exp_avg`);
      const v = st.float32(`${p.name}.exp_avg_sq`);
      const n = p.param.shape.reduce((a, x) => a * x, 1);
      if (m.length !== n || v.length !== n) throw new EngineError('shape', `${file}: moments of ${p.name} have ${m.length} values, expected ${n}`);
      this.model.backend.write(p.m, m);
      this.model.backend.write(p.v, v);
    }
    this.step = step;
  }

  free(): void {
    this.params.free();
  }
}
