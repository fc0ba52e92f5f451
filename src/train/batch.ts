// A training micro-batch: sequences packed into one flat token batch (each sequence in its own KV
// slot), with next-token targets and per-row loss weights. Row i of a sequence predicts token i+1;
// it carries loss only when token i+1 is a response token (mask 1).
import { EngineError } from '../engine/errors';

export type Aggregation = 'token-mean' | 'seq-mean-token-mean' | 'seq-mean-token-sum';

/**
 * Per-token loss weights from the response mask (R) and the sequence index of each row (R).
 * token-mean: 1 / (all masked tokens); seq-mean-token-mean: 1 / (S * tokens of the row's sequence);
 * seq-mean-token-sum: 1 / S; S = number of sequences with at least one masked token.
 * `scale` multiplies every weight (e.g. 1 / micro-batches for gradient accumulation).
 */
export function tokenWeights(mask: ArrayLike<number>, seq: ArrayLike<number>, mode: Aggregation, scale = 1): Float32Array {
  if (mask.length !== seq.length) throw new EngineError('shape', `tokenWeights: mask (${mask.length}) vs seq (${seq.length})`);
  // A mask entry is the token's relative weight: 1 (or 0) for policy rows; pretraining gives sampled
  // prompt tokens a fraction. Sums run over those weights, so 0/1 masks count tokens.
  const perSeq = new Map<number, number>();
  let total = 0;
  for (let i = 0; i < mask.length; i++)
    if (mask[i] !== 0) {
      perSeq.set(seq[i], (perSeq.get(seq[i]) ?? 0) + mask[i]);
      total += mask[i];
    }
  const S = perSeq.size;
  const w = new Float32Array(mask.length);
  for (let i = 0; i < mask.length; i++) {
    if (mask[i] === 0) continue;
    if (mode === 'token-mean') w[i] = (scale * mask[i]) / total;
    else if (mode === 'seq-mean-token-mean') w[i] = (scale * mask[i]) / (S * perSeq.get(seq[i])!);
    else if (mode === 'seq-mean-token-sum') w[i] = (scale * mask[i]) / S;
    else throw new EngineError('shape', `tokenWeights: unknown aggregation ${String(mode)}`);
  }
  return w;
}

export interface TrainBatch {
  ids: Int32Array; // (T)
  slot: Int32Array; // (T)
  pos: Int32Array; // (T)
  /** KV-cache shape for this batch. */
  slots: number;
  maxT: number;
  /** (T) next token of each row, -1 for the last token of a sequence. */
  targets: Int32Array;
  /** (T) loss weight of each row (mask x aggregation x micro-batch scale). */
  weight: Float32Array;
  /** GRPO inputs per row, aligned with targets (the values of the predicted token). */
  grpo?: { advantage: Float32Array; oldLogp: Float32Array; refLogp?: Float32Array };
}

export interface TrainSequence {
  tokens: ArrayLike<number>;
  /** (n) loss weight of each token as a target: 1 for a response token, 0 for none, a fraction to count it less. */
  mask: ArrayLike<number>;
  /** GRPO: the sequence's advantage. */
  advantage?: number;
  /** GRPO: (n) log-prob of each token under the sampling policy (entries of prompt tokens unused). */
  oldLogp?: ArrayLike<number>;
  /** GRPO with KL: (n) log-prob of each token under the reference policy. */
  refLogp?: ArrayLike<number>;
}

/** Pack sequences (one KV slot each). `scale` multiplies every weight (1/micro-batches). */
export function packBatch(seqs: readonly TrainSequence[], mode: Aggregation = 'token-mean', scale = 1): TrainBatch {
  if (seqs.length === 0) throw new EngineError('shape', 'packBatch: no sequences');
  const T = seqs.reduce((a, s) => a + s.tokens.length, 0);
  const ids = new Int32Array(T);
  const slot = new Int32Array(T);
  const pos = new Int32Array(T);
  const targets = new Int32Array(T).fill(-1);
  const mask = new Float32Array(T);
  const seqOf = new Int32Array(T);
  const grpo = seqs.some((s) => s.advantage !== undefined);
  const hasRef = grpo && seqs.every((s) => s.refLogp);
  const adv = new Float32Array(T);
  const old = new Float32Array(T);
  const ref = new Float32Array(T);
  let t = 0;
  let maxT = 1;
  seqs.forEach((s, si) => {
    const n = s.tokens.length;
    if (n === 0 || s.mask.length !== n) throw new EngineError('shape', `packBatch: sequence ${si} has ${n} tokens and ${s.mask.length} mask entries`);
    if (grpo && (s.advantage === undefined || !s.oldLogp || s.oldLogp.length !== n))
      throw new EngineError('shape', `packBatch: sequence ${si} lacks advantage/oldLogp (GRPO batches need them on every sequence)`);
    maxT = Math.max(maxT, n);
    for (let i = 0; i < n; i++, t++) {
      ids[t] = s.tokens[i];
      slot[t] = si;
      pos[t] = i;
      seqOf[t] = si;
      if (i + 1 < n) {
        targets[t] = s.tokens[i + 1];
        mask[t] = Number(s.mask[i + 1]);
        if (grpo) {
          adv[t] = s.advantage!;
          old[t] = s.oldLogp![i + 1];
          if (hasRef) ref[t] = s.refLogp![i + 1];
        }
      }
    }
  });
  const weight = tokenWeights(mask, seqOf, mode, scale);
  return {
    ids, slot, pos, slots: seqs.length, maxT, targets, weight,
    grpo: grpo ? { advantage: adv, oldLogp: old, refLogp: hasRef ? ref : undefined } : undefined,
  };
}
