// A training micro-batch: sequences packed into one flat token batch (each sequence in its own KV
// slot), with next-token targets and per-row loss weights. Row i of a sequence predicts token i+1;
// it carries loss only when token i+1 is a response token (mask 1).
import { EngineError } from '../engine/errors';

/**
 * How a step's token losses are summed into one loss (verl's loss_agg_mode names): token-mean weighs every
 * response token alike, so a long row counts more (DAPO; verl's default); seq-mean-token-mean weighs every row
 * alike, its tokens averaged (the GRPO paper; this lab's default); seq-mean-token-sum sums each row's tokens and
 * averages over rows, so a row weighs by its length without the step's token count as divisor (Dr. GRPO's
 * unbiased loss, up to a constant).
 */
export const AGGREGATIONS = ['seq-mean-token-mean', 'token-mean', 'seq-mean-token-sum'] as const;
export type Aggregation = (typeof AGGREGATIONS)[number];

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
  /**
   * Prefix sharing (packShared): the tokens several sequences share are fed once. targets, weight and grpo
   * are then (R) loss rows, not (T), and `at` (R) names the token whose hidden state each row reads (a
   * shared token can carry several rows: one per sequence through it). `copies` are the extra KV-cache
   * writes that let every sequence through a shared token attend to it.
   */
  share?: { at: Int32Array; copies: KvCopyPlan };
}

/**
 * Extra KV-cache writes: token src[i]'s key and value also go to cache[slot[i], pos[i]]. Copies are ordered
 * in rounds (round r is [roundStart[r], roundStart[r+1])) whose src are distinct, because the backward adds
 * each copy's gradient back into its token with a scatter-add that needs distinct rows.
 */
export interface KvCopyPlan {
  src: Int32Array;
  slot: Int32Array;
  pos: Int32Array;
  /** (rounds + 1) offsets into the copies. */
  roundStart: Int32Array;
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

/**
 * Refuses a batch the trainer cannot run, before any work: shapes, token ids and cache positions, GRPO
 * inputs (`grpo`: the loss is GRPO, with its KL coefficient), and a shared batch's loss rows and KV copies.
 */
export function checkTrainBatch(batch: TrainBatch, vocabSize: number, grpo: { klCoef: number } | null): void {
  const T = batch.ids.length;
  const bad = (m: string) => new EngineError('shape', `train batch: ${m}`);
  if (batch.slot.length !== T || batch.pos.length !== T) throw bad(`${T} ids, ${batch.slot.length} slots, ${batch.pos.length} positions`);
  // Loss rows: one per token, or packShared's (R) rows each reading token at[r].
  const at = batch.share?.at;
  const R = at ? at.length : T;
  if (batch.targets.length !== R || batch.weight.length !== R) throw bad(`${R} loss rows, ${batch.targets.length} targets, ${batch.weight.length} weights`);
  if (grpo) {
    const g = batch.grpo;
    if (!g) throw bad('a GRPO loss needs batch.grpo');
    if (g.advantage.length !== R || g.oldLogp.length !== R || (g.refLogp && g.refLogp.length !== R)) throw bad(`GRPO advantage/oldLogp/refLogp must have ${R} rows`);
    if (grpo.klCoef > 0 && !g.refLogp) throw bad('klCoef > 0 needs refLogp (see src/train/reference.ts)');
  }
  for (let t = 0; t < T; t++) {
    if (batch.ids[t] < 0 || batch.ids[t] >= vocabSize) throw bad(`token id ${batch.ids[t]} outside the vocabulary`);
    if (batch.slot[t] < 0 || batch.slot[t] >= batch.slots || batch.pos[t] < 0 || batch.pos[t] >= batch.maxT)
      throw bad(`slot ${batch.slot[t]} pos ${batch.pos[t]} outside (${batch.slots},${batch.maxT})`);
  }
  if (at) for (let r = 0; r < R; r++) if (!(at[r] >= 0 && at[r] < T)) throw bad(`loss row ${r} reads token ${at[r]}, outside [0,${T})`);
  const cp = batch.share?.copies;
  if (!cp) return;
  const C = cp.src.length;
  if (cp.slot.length !== C || cp.pos.length !== C || cp.roundStart[0] !== 0 || cp.roundStart[cp.roundStart.length - 1] !== C)
    throw bad(`${C} KV copies with ${cp.slot.length} slots, ${cp.pos.length} positions, rounds ending at ${cp.roundStart[cp.roundStart.length - 1]}`);
  for (let i = 0; i < C; i++)
    if (cp.src[i] < 0 || cp.src[i] >= T || cp.slot[i] < 0 || cp.slot[i] >= batch.slots || cp.pos[i] !== batch.pos[cp.src[i]])
      throw bad(`KV copy ${i} of token ${cp.src[i]} to slot ${cp.slot[i]} pos ${cp.pos[i]} is not that token's position`);
  for (let r = 0; r + 1 < cp.roundStart.length; r++) {
    const seen = new Set<number>();
    for (let i = cp.roundStart[r]; i < cp.roundStart[r + 1]; i++) {
      if (seen.has(cp.src[i])) throw bad(`token ${cp.src[i]} copied twice in round ${r}`);
      seen.add(cp.src[i]);
    }
  }
}

/** A sequence a batch can hold: tokens, a mask entry per token, and GRPO inputs when the batch is GRPO's. */
function checkSequence(s: TrainSequence, si: number, grpo: boolean, who: string): void {
  const n = s.tokens.length;
  if (n === 0 || s.mask.length !== n) throw new EngineError('shape', `${who}: sequence ${si} has ${n} tokens and ${s.mask.length} mask entries`);
  if (grpo && (s.advantage === undefined || !s.oldLogp || s.oldLogp.length !== n))
    throw new EngineError('shape', `${who}: sequence ${si} lacks advantage/oldLogp (GRPO batches need them on every sequence)`);
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
    checkSequence(s, si, grpo, 'packBatch');
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

/** Length of the common prefix of two token sequences. */
export function commonPrefix(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/** Sequences in lexicographic token order (ties keep their order), so shared prefixes sit together. */
export function sortForSharing<S extends TrainSequence>(seqs: readonly S[]): S[] {
  const cmp = (a: ArrayLike<number>, b: ArrayLike<number>) => {
    const i = commonPrefix(a, b);
    if (i < a.length && i < b.length) return a[i] - b[i];
    return a.length - b.length;
  };
  return seqs.map((s, i) => ({ s, i })).sort((x, y) => cmp(x.s.tokens, y.s.tokens) || x.i - y.i).map((x) => x.s);
}

/**
 * Pack sequences with prefix sharing: the sequences form a trie of tokens, and each trie node (a token at
 * a position after the same prefix) is fed once. A causal transformer gives a token the same hidden state
 * in every sequence that shares its prefix, so the loss and its gradients equal packBatch's on the same
 * sequences (up to float summation order) for fewer tokens: GRPO rows of one task share the system prompt,
 * the request and every turn before they branch.
 *
 * Layout: sequence i owns KV slot i; a node is fed in the slot of the first sequence through it and its
 * key/value are copied into the slots of the others (batch.share.copies). Loss rows are one per
 * (sequence, position) with a non-zero mask, weighted exactly as packBatch weights them.
 */
export function packShared(seqs: readonly TrainSequence[], mode: Aggregation = 'token-mean', scale = 1): TrainBatch {
  if (seqs.length === 0) throw new EngineError('shape', 'packShared: no sequences');
  const grpo = seqs.some((s) => s.advantage !== undefined);
  const hasRef = grpo && seqs.every((s) => s.refLogp);
  // Trie: children keyed by token id; node index = position in the flat batch.
  const ids: number[] = [];
  const slot: number[] = [];
  const pos: number[] = [];
  const children: Map<number, number>[] = [];
  const roots = new Map<number, number>();
  const copies: { src: number; slot: number; pos: number; round: number }[] = [];
  const copiesOf: number[] = []; // copies made so far of each node (its next copy's round)
  const rowAt: number[] = [];
  const rowSeq: number[] = [];
  const rowTarget: number[] = [];
  const rowMask: number[] = [];
  const rowAdv: number[] = [];
  const rowOld: number[] = [];
  const rowRef: number[] = [];
  let maxT = 1;
  seqs.forEach((s, si) => {
    const n = s.tokens.length;
    checkSequence(s, si, grpo, 'packShared');
    maxT = Math.max(maxT, n);
    let level = roots;
    for (let i = 0; i < n; i++) {
      const tok = s.tokens[i];
      let node = level.get(tok);
      if (node === undefined) {
        node = ids.length;
        ids.push(tok);
        slot.push(si);
        pos.push(i);
        children.push(new Map());
        copiesOf.push(0);
        level.set(tok, node);
      } else {
        copies.push({ src: node, slot: si, pos: i, round: copiesOf[node]++ });
      }
      level = children[node];
      if (i + 1 < n && Number(s.mask[i + 1]) !== 0) {
        rowAt.push(node);
        rowSeq.push(si);
        rowTarget.push(s.tokens[i + 1]);
        rowMask.push(Number(s.mask[i + 1]));
        if (grpo) {
          rowAdv.push(s.advantage!);
          rowOld.push(s.oldLogp![i + 1]);
          if (hasRef) rowRef.push(s.refLogp![i + 1]);
        }
      }
    }
  });
  copies.sort((a, b) => a.round - b.round || a.slot - b.slot || a.pos - b.pos);
  const rounds = copies.length ? copies[copies.length - 1].round + 1 : 0;
  const roundStart = new Int32Array(rounds + 1);
  for (const c of copies) roundStart[c.round + 1]++;
  for (let r = 0; r < rounds; r++) roundStart[r + 1] += roundStart[r];
  const weight = tokenWeights(rowMask, rowSeq, mode, scale);
  return {
    ids: Int32Array.from(ids), slot: Int32Array.from(slot), pos: Int32Array.from(pos), slots: seqs.length, maxT,
    targets: Int32Array.from(rowTarget), weight,
    grpo: grpo ? { advantage: Float32Array.from(rowAdv), oldLogp: Float32Array.from(rowOld), refLogp: hasRef ? Float32Array.from(rowRef) : undefined } : undefined,
    share: {
      at: Int32Array.from(rowAt),
      copies: { src: Int32Array.from(copies, (c) => c.src), slot: Int32Array.from(copies, (c) => c.slot), pos: Int32Array.from(copies, (c) => c.pos), roundStart },
    },
  };
}
