// Teacher-forced scoring: log p(token | the tokens before it) for many given sequences at once, packed into
// forwards of bounded size, one KV slot per sequence (GRPO's reference log-probs, the observation rows' old
// log-probs, probes). Decoding is generate.ts.
import { EngineError } from '../engine/errors';
import type { LoraAdapter } from './lora';
import { forward, KvCache, type Qwen3Model } from './qwen3';

export interface ScoredSequence {
  tokens: readonly number[];
  /** Score tokens[start..]: the first scored token is tokens[start] given tokens[..start). start >= 1. */
  start: number;
}

/**
 * log p(tokens[i] | tokens[<i]) for i >= start, for many sequences (teacher forcing, temperature 1).
 * Sequences are packed into forwards of at most maxBatchTokens tokens (one slot each).
 */
export async function logprobs(model: Qwen3Model, seqs: readonly ScoredSequence[], opts: { adapter?: LoraAdapter | null; maxBatchTokens?: number; scale?: number } = {}): Promise<number[][]> {
  const b = model.backend;
  const V = model.config.vocabSize;
  const budget = opts.maxBatchTokens ?? 512;
  const out: number[][] = [];
  let i = 0;
  while (i < seqs.length) {
    // Pack whole sequences (all but their last token are inputs) until the budget is reached.
    // Also bound the scored rows, whose (rows,V) log-softmax is read back: ~64 MB at most, unless a
    // single sequence needs more.
    const rowCap = Math.max(1, Math.floor(2 ** 24 / V));
    const group: ScoredSequence[] = [];
    let total = 0;
    let scoredRows = 0;
    const scoredOf = (s: ScoredSequence) => s.tokens.length - s.start;
    while (i < seqs.length && (group.length === 0 || (total + seqs[i].tokens.length - 1 <= budget && scoredRows + scoredOf(seqs[i]) <= rowCap))) {
      const s = seqs[i++];
      if (s.start < 1 || s.start > s.tokens.length) throw new EngineError('shape', `logprobs: start ${s.start} outside [1, ${s.tokens.length}]`);
      group.push(s);
      total += s.tokens.length - 1;
      scoredRows += scoredOf(s);
    }
    const maxT = Math.max(1, ...group.map((s) => s.tokens.length - 1));
    const cache = new KvCache(model, group.length, maxT, { cleared: false });
    const ids: number[] = [];
    const slot: number[] = [];
    const pos: number[] = [];
    const rows: number[] = [];
    group.forEach((s, g) => {
      for (let t = 0; t < s.tokens.length - 1; t++) {
        if (t >= s.start - 1) rows.push(ids.length);
        ids.push(s.tokens[t]), slot.push(g), pos.push(t);
      }
    });
    if (ids.length === 0) {
      for (const _ of group) out.push([]);
      cache.free();
      continue;
    }
    const { logits } = forward(model, cache, { ids: Int32Array.from(ids), slot: Int32Array.from(slot), pos: Int32Array.from(pos) }, { adapter: opts.adapter ?? null, logitRows: Int32Array.from(rows) });
    // `scale` multiplies the logits first (1/T: a sampling temperature's policy, the trainer's scoringScale).
    const scaled = opts.scale !== undefined && opts.scale !== 1 ? b.scale(logits, opts.scale) : logits;
    const lsm = b.logSoftmax(scaled);
    const all = (await b.read(lsm)) as Float32Array;
    for (const t of new Set([logits, scaled, lsm])) b.free(t);
    cache.free();
    let r = 0;
    for (const s of group) {
      const lp: number[] = [];
      for (let t = s.start; t < s.tokens.length; t++) lp.push(all[r++ * V + s.tokens[t]]);
      out.push(lp);
    }
  }
  return out;
}
