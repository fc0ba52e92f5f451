// One Role-Wise GRPO update from a batch of rollouts:
//   rows -> advantages (role-wise / pooled / standard; row-weighted / rollout-mean baseline)
//        -> sequences (prompt ⊕ response, loss mask on generated tokens, old log-probs, advantage)
//        -> micro-batches under a token budget -> one optimizer step per trained parameter set.
// Which rows train which adapter, and the grouping a mode forces, are the mode table's (src/method/modes.ts
// routes and groups): e.g. EnvACE trains one shared adapter on both roles' rows, the frozen simulator's rows
// get no advantage.
// The loss itself (clipped surrogate, dual clip, optional k3 KL) is the training engine's GRPO head; the
// reference policy for the KL is the base model with the adapter switched off.
import { logprobs } from '../model/score';
import type { RolloutBatch } from '../rollout/rollout';
import { commonPrefix, packBatch, packShared, sortForSharing, type Aggregation, type TrainBatch, type TrainSequence } from '../train/batch';
import type { StepReport, Trainer } from '../train/trainer';
import { computeAdvantages, type Advantages, type Baseline, type GroupMode } from '../method/advantage';
import { DEFAULT_AGGREGATION, DEFAULT_BASELINE, type ObservationWeighting } from '../method/run-config';
import { effectiveGroups, hasRehearseAdapter, MODES, type RolloutMode, type UpdateTarget } from '../method/modes';
import { lossTokens, type TrainingRow } from '../rollout/rows';

export interface GrpoUpdateOptions {
  /** Default 'role-wise'; a mode that forces a grouping (MODES[mode].groups) uses that instead. */
  groups?: GroupMode;
  /** Default DEFAULT_BASELINE (src/method/run-config.ts: the reference code's). */
  baseline?: Baseline;
  /** How token losses sum to the step's loss (src/train/batch.ts AGGREGATIONS); default the run settings' (src/method/run-config.ts). */
  aggregation?: Aggregation;
  /** Token budget of one micro-batch (default 4096); a longer row gets a micro-batch of its own. */
  maxBatchTokens?: number;
  /** Compute reference log-probs (adapter off) for the KL term: set when the trainer's klCoef > 0. */
  withReference?: boolean;
  /** Feed the tokens rows share once (packShared; default true). Off: every row whole (packBatch). */
  sharePrefixes?: boolean;
  /**
   * Optimizer steps on the same rollouts (PPO's epochs; default 1). From the second on, the policy has moved
   * off the one that sampled, so the clipped ratio to the sampling log-probs bounds how far each goes.
   */
  epochs?: number;
  /**
   * Rows outside GRPO's groups with a fixed advantage (src/rollout/observation-rows.ts: Rehearse rows whose
   * target is a real observation, a cross-entropy term with coefficient `advantage`). They train the
   * parameter set that plays Rehearse in the mode, or, where no route trains Rehearse (real mode), the Act
   * adapter, which is also the one that rehearses at test time.
   */
  supervised?: { rows: readonly TrainingRow[]; advantage: number; weighting?: ObservationWeighting };
  /**
   * Leave rows whose advantage is exactly 0 (a group whose rollouts all scored alike) out of the forward and
   * backward passes (default true). Their loss and gradient are exactly 0 without a KL term, and the step's loss is
   * still normalised over every row, so the gradient is the same up to rounding (the sums are grouped differently);
   * clipFrac, kl and entropy are then means over the rows that carry a gradient. A row with reference log-probs
   * (the KL term) is always kept.
   */
  skipZeroAdvantage?: boolean;
}

export interface GrpoUpdateReport {
  mode: RolloutMode;
  groups: GroupMode;
  baseline: Baseline;
  advantages: Advantages;
  /** One report per trained parameter set that had rows ('shared' in rehearse mode): its last epoch's. */
  steps: { target: UpdateTarget; rows: number; microBatches: number; report: StepReport; epochs: StepReport[] }[];
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

/** KV-cache positions (slots x longest sequence) a micro-batch may hold per token of its budget. */
export const CACHE_PER_TOKEN = 2;

/**
 * Packs sequences into micro-batches of at most maxTokens fed tokens and CACHE_PER_TOKEN x maxTokens KV-cache
 * positions each. Each batch's weights are scaled by its share of the whole step (its loss tokens for
 * token-mean, its loss-carrying sequences for the sequence means), so the summed micro-batch losses equal the
 * loss of one batch of everything.
 * With `share` (the default) sequences are sorted so that shared prefixes sit together and each micro-batch
 * feeds its trie of tokens once (packShared): the rows of one task share the system prompt, the request and
 * the turns before they differ, several times fewer tokens. Without it, sequences go in order, whole.
 * `normaliseOver` (default `seqs`) are the sequences the step's loss is a mean over, when some of them (rows whose
 * loss is exactly 0) are not packed at all.
 */
export function microBatches(seqs: readonly TrainSequence[], maxTokens: number, aggregation: Aggregation, share = true, normaliseOver: readonly TrainSequence[] = seqs): TrainBatch[] {
  if (!(maxTokens >= 1)) throw new GrpoError(`maxBatchTokens must be >= 1, got ${maxTokens}`);
  // Every sequence keeps a KV slot of the batch's longest length, fed or shared: bound the cache too.
  const maxCache = CACHE_PER_TOKEN * maxTokens;
  const groups: TrainSequence[][] = [];
  let cur: TrainSequence[] = [];
  let used = 0;
  let longest = 0;
  for (const s of share ? sortForSharing(seqs) : seqs) {
    // Tokens this sequence adds to the micro-batch: what it does not share with the one before it.
    const fed = s.tokens.length - (share && cur.length > 0 ? commonPrefix(cur[cur.length - 1].tokens, s.tokens) : 0);
    const cache = (cur.length + 1) * Math.max(longest, s.tokens.length);
    if (cur.length > 0 && (used + fed > maxTokens || cache > maxCache)) {
      groups.push(cur);
      cur = [];
      used = 0;
      longest = 0;
    }
    used += cur.length > 0 ? fed : s.tokens.length;
    longest = Math.max(longest, s.tokens.length);
    cur.push(s);
  }
  if (cur.length > 0) groups.push(cur);
  // Loss-carrying tokens of a sequence: mask entries 1..n-1 (token 0 is never a target).
  const lossTok = (q: TrainSequence) => {
    let n = 0;
    for (let i = 1; i < q.mask.length; i++) if (q.mask[i]) n++;
    return n;
  };
  const shareOf = (g: TrainSequence[]) =>
    aggregation === 'token-mean' ? g.reduce((n, q) => n + lossTok(q), 0) : g.filter((q) => lossTok(q) > 0).length;
  const total = shareOf([...normaliseOver]);
  const pack = share ? packShared : packBatch;
  return groups.map((g) => pack(g, aggregation, total > 0 ? shareOf(g) / total : 1 / groups.length));
}

/**
 * The sequences whose loss can have a gradient: all of them, or (`skip`) all but those with advantage exactly 0 and
 * no KL term. When none is left, the shortest is kept: the optimizer step still runs on the zero gradient (AdamW's
 * moments and weight decay move the weights as they did with every row).
 */
function gradientCarrying(seqs: readonly TrainSequence[], skip: boolean): readonly TrainSequence[] {
  if (!skip) return seqs;
  const kept = seqs.filter((s) => s.advantage !== 0 || s.refLogp !== undefined);
  if (kept.length > 0 || seqs.length === 0) return kept;
  return [seqs.reduce((a, s) => (s.tokens.length < a.tokens.length ? s : a))];
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
  const baseline = opts.baseline ?? DEFAULT_BASELINE;
  const aggregation = opts.aggregation ?? DEFAULT_AGGREGATION;
  const epochs = opts.epochs ?? 1;
  if (!(Number.isInteger(epochs) && epochs >= 1)) throw new GrpoError(`epochs must be a positive integer, got ${epochs}`);
  const rows = batch.rows;
  const advantages = computeAdvantages(rows, groups, baseline);
  rows.forEach((r, i) => (r.advantage = advantages.advantage[i]));

  const sup = opts.supervised;
  if (sup && !(Number.isFinite(sup.advantage) && sup.advantage > 0)) throw new GrpoError(`a supervised coefficient must be > 0, got ${sup.advantage}`);
  const routes = MODES[mode].routes;
  const supTarget = routes.find((r) => r.roles.includes('rehearse'))?.target ?? routes.find((r) => r.target !== 'rehearse')?.target;
  const steps: GrpoUpdateReport['steps'] = [];
  for (const { target, roles } of routes) {
    const trainer = target === 'rehearse' ? trainers.rehearse! : trainers.act;
    const chosen = rows.filter((r) => roles.includes(r.role) && r.advantage !== null && lossTokens(r) > 0);
    if (sup && target === supTarget) chosen.push(...supervisedRows(sup.rows, sup.advantage, sup.weighting ?? 'token', aggregation));
    if (chosen.length === 0) continue;
    let refs: number[][] | null = null;
    if (opts.withReference) {
      // log p_ref of each response token (tokens P.. of prompt ⊕ response), adapter off.
      refs = await logprobs(
        trainer.model,
        chosen.map((r) => ({ tokens: [...r.promptTokens, ...r.responseTokens], start: r.promptTokens.length })),
        { adapter: null, scale: trainer.logitScale },
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
    const micro = microBatches(gradientCarrying(seqs, opts.skipZeroAdvantage ?? true), opts.maxBatchTokens ?? 4096, aggregation, opts.sharePrefixes ?? true, seqs);
    const reports: StepReport[] = [];
    for (let e = 0; e < epochs; e++) reports.push(await trainer.trainStep(micro));
    steps.push({ target, rows: chosen.length, microBatches: micro.length, report: reports[epochs - 1], epochs: reports });
  }
  return { mode, groups, baseline, advantages, steps };
}

/**
 * The supervised rows with the advantage each needs so that, under the step's aggregation, their tokens weigh as
 * `weighting` says: 'token', every target token alike (cross-entropy's usual mean); 'row', every row alike. The
 * aggregation already weighs a row's tokens by 1/length (seq-mean-token-mean) or not at all (the others); each row's
 * factor corrects that, normalised so the rows' mean advantage stays `advantage`.
 */
export function supervisedRows(rows: readonly TrainingRow[], advantage: number, weighting: ObservationWeighting, aggregation: Aggregation): TrainingRow[] {
  const kept = rows.filter((r) => lossTokens(r) > 0);
  const perRow = aggregation === 'seq-mean-token-mean';
  // The factor that turns the aggregation's per-token weight into the wanted one, up to a constant.
  const factor = (r: TrainingRow) => (weighting === 'token' ? (perRow ? lossTokens(r) : 1) : perRow ? 1 : 1 / lossTokens(r));
  const mean = kept.reduce((s, r) => s + factor(r), 0) / Math.max(1, kept.length);
  return kept.map((r) => ({ ...r, advantage: (advantage * factor(r)) / mean }));
}
