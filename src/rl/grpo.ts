// One Role-Wise GRPO update from a batch of rollouts:
//   rows -> advantages (role-wise / pooled / standard; row-weighted / rollout-mean baseline)
//        -> sequences (prompt ⊕ response, loss mask on generated tokens, old log-probs, advantage)
//        -> micro-batches under a token budget -> one optimizer step per trained parameter set.
// Which rows train which adapter, and the grouping a mode forces, are the mode table's (src/method/modes.ts
// routes and groups): e.g. EnvACE trains one shared adapter on both roles' rows, the frozen simulator's rows
// get no advantage.
// The loss itself (clipped surrogate, dual clip, optional k3 KL) is the training engine's GRPO head; the
// reference policy for the KL is the base model with the adapter switched off.
import type { Aggregation } from '../train/batch';
import { logprobs } from '../model/generate';
import type { RolloutBatch } from '../rollout/rollout';
import { packBatch, type TrainBatch, type TrainSequence } from '../train/batch';
import type { StepReport, Trainer } from '../train/trainer';
import { computeAdvantages, type Advantages, type Baseline, type GroupMode } from '../method/advantage';
import { effectiveGroups, hasRehearseAdapter, MODES, type RolloutMode, type UpdateTarget } from '../method/modes';
import { lossTokens, type TrainingRow } from '../rollout/rows';

export interface GrpoUpdateOptions {
  /** Default 'role-wise'; a mode that forces a grouping (MODES[mode].groups) uses that instead. */
  groups?: GroupMode;
  /** Default 'row-weighted' (the reference code). */
  baseline?: Baseline;
  /** Default 'seq-mean-token-mean' (token mean per sequence, then mean over sequences). */
  aggregation?: Aggregation;
  /** Token budget of one micro-batch (default 4096); a longer row gets a micro-batch of its own. */
  maxBatchTokens?: number;
  /** Compute reference log-probs (adapter off) for the KL term: set when the trainer's klCoef > 0. */
  withReference?: boolean;
}

export interface GrpoUpdateReport {
  mode: RolloutMode;
  groups: GroupMode;
  baseline: Baseline;
  advantages: Advantages;
  /** One report per trained parameter set that had rows ('shared' in rehearse mode). */
  steps: { target: UpdateTarget; rows: number; microBatches: number; report: StepReport }[];
}

export class GrpoError extends Error {
  override readonly name = 'GrpoError';
}

/** A training row as a packBatch sequence: mask and old log-probs indexed by token position. */
export function rowToSequence(row: TrainingRow, advantage: number, refLogp?: ArrayLike<number>): TrainSequence {
  const P = row.promptTokens.length;
  const n = P + row.responseTokens.length;
  const tokens = new Int32Array(n);
  tokens.set(row.promptTokens, 0);
  tokens.set(row.responseTokens, P);
  const mask = new Uint8Array(n);
  const oldLogp = new Float32Array(n);
  for (let j = 0; j < row.responseTokens.length; j++) {
    if (row.responseMask[j] !== 1) continue;
    mask[P + j] = 1;
    oldLogp[P + j] = row.oldLogprobs[j];
  }
  const seq: TrainSequence = { tokens, mask, advantage, oldLogp };
  if (refLogp) seq.refLogp = refLogp;
  return seq;
}

/**
 * Packs sequences in order into micro-batches of at most maxTokens tokens each. Each batch's weights are
 * scaled by its share of the whole step (its loss tokens for token-mean, its loss-carrying sequences for
 * the sequence means), so the summed micro-batch losses equal the loss of one batch of everything.
 */
export function microBatches(seqs: readonly TrainSequence[], maxTokens: number, aggregation: Aggregation): TrainBatch[] {
  if (!(maxTokens >= 1)) throw new GrpoError(`maxBatchTokens must be >= 1, got ${maxTokens}`);
  const groups: TrainSequence[][] = [];
  let cur: TrainSequence[] = [];
  let used = 0;
  for (const s of seqs) {
    if (cur.length > 0 && used + s.tokens.length > maxTokens) {
      groups.push(cur);
      cur = [];
      used = 0;
    }
    cur.push(s);
    used += s.tokens.length;
  }
  if (cur.length > 0) groups.push(cur);
  // Loss-carrying tokens of a sequence: mask entries 1..n-1 (token 0 is never a target).
  const lossTok = (q: TrainSequence) => {
    let n = 0;
    for (let i = 1; i < q.mask.length; i++) if (q.mask[i]) n++;
    return n;
  };
  const share = (g: TrainSequence[]) =>
    aggregation === 'token-mean' ? g.reduce((n, q) => n + lossTok(q), 0) : g.filter((q) => lossTok(q) > 0).length;
  const total = groups.reduce((n, g) => n + share(g), 0);
  return groups.map((g) => packBatch(g, aggregation, total > 0 ? share(g) / total : 1 / groups.length));
}

/**
 * One update. `trainers.act` trains the shared adapter or the Act adapter (the 'shared' or 'act' route);
 * `trainers.rehearse` the Rehearse adapter, required exactly where the mode has one. Each trainer's adapter must be the one that
 * sampled its rows (the old log-probs are that policy's).
 */
export async function grpoUpdate(
  trainers: { act: Trainer; rehearse?: Trainer },
  batch: RolloutBatch,
  mode: RolloutMode,
  opts: GrpoUpdateOptions = {},
): Promise<GrpoUpdateReport> {
  if (hasRehearseAdapter(mode) && !trainers.rehearse) throw new GrpoError(`${mode} mode needs trainers.rehearse`);
  const groups = effectiveGroups(mode, opts.groups ?? 'role-wise');
  const baseline = opts.baseline ?? 'row-weighted';
  const aggregation = opts.aggregation ?? 'seq-mean-token-mean';
  const rows = batch.rows;
  const advantages = computeAdvantages(rows, groups, baseline);
  rows.forEach((r, i) => (r.advantage = advantages.advantage[i]));

  const steps: GrpoUpdateReport['steps'] = [];
  for (const { target, roles } of MODES[mode].routes) {
    const trainer = target === 'rehearse' ? trainers.rehearse! : trainers.act;
    const chosen = rows.filter((r) => roles.includes(r.role) && r.advantage !== null && lossTokens(r) > 0);
    if (chosen.length === 0) continue;
    let refs: number[][] | null = null;
    if (opts.withReference) {
      // log p_ref of each response token (tokens P.. of prompt ⊕ response), adapter off.
      refs = await logprobs(
        trainer.model,
        chosen.map((r) => ({ tokens: [...r.promptTokens, ...r.responseTokens], start: r.promptTokens.length })),
        { adapter: null },
      );
    }
    const seqs = chosen.map((r, i) => {
      let ref: Float32Array | undefined;
      if (refs) {
        ref = new Float32Array(r.promptTokens.length + r.responseTokens.length);
        ref.set(refs[i], r.promptTokens.length);
      }
      return rowToSequence(r, r.advantage!, ref);
    });
    const micro = microBatches(seqs, opts.maxBatchTokens ?? 4096, aggregation);
    const report = await trainer.trainStep(micro);
    steps.push({ target, rows: chosen.length, microBatches: micro.length, report });
  }
  return { mode, groups, baseline, advantages, steps };
}
