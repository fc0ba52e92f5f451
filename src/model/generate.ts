// Batched generation: many sequences decode together, one forward per step over every live sequence.
// Prompts of different lengths are prefilled in the same forward as other sequences' decode tokens
// (a flat TokenLayout batch), a sequence that finishes frees its KV-cache slot for a waiting request,
// and every sequence has its own sampling settings and seeded random stream, so a sequence generates
// the same tokens whether it runs alone or in a batch.
import type { Backend, SampleParams, Tensor } from '../engine/backend';
import { EngineError } from '../engine/errors';
import { tokenLogprob } from '../engine/sampling';
import { NON_FINITE_TOKEN } from '../engine/webgpu/kernels/sample';
import type { LoraAdapter } from './lora';
import { forward, KvCache, type Qwen3Model } from './qwen3';
import type { Tokenizer } from './tokenizer';

export interface Sampling {
  /** 0 = greedy. */
  temperature: number;
  /** Nucleus mass in (0,1]; 1 = off. */
  topP: number;
  seed: number;
}

export const GREEDY: Sampling = { temperature: 0, topP: 1, seed: 0 };

export interface GenerateRequest {
  /** Token ids, or text encoded with the tokenizer (special tokens such as <|im_start|> are parsed). */
  prompt: readonly number[] | string;
  maxNewTokens: number;
  /** Generation ends when the text contains one of these; the text is cut before it. */
  stop?: readonly string[];
  /** Token ids that end the generation (default: the tokenizer's eos / <|im_end|>). */
  stopTokens?: readonly number[];
  sampling?: Sampling;
  /** Restricts which tokens may be drawn (structured output); stateful, one object per request. */
  constraint?: TokenConstraint;
}

/**
 * Which tokens a sequence may draw next. The masked tokens' logits become -Infinity before sampling, so
 * greedy picks the best allowed token and sampling draws from the distribution renormalised over the
 * allowed ones; the reported log-probabilities stay the model's own (before the mask).
 */
export interface TokenConstraint {
  /** mask[id] = 1 where token id may come next (ids past the mask's length may not); null = any token. */
  allowed(): Uint8Array | null;
  /** The token that was drawn. */
  push(token: number): void;
}

export type FinishReason = 'eos' | 'stop' | 'length';

export interface GenerateResult {
  promptTokens: number[];
  /** Generated tokens, including the eos token or the token that completed a stop string. */
  tokens: number[];
  /** log p(token) of each generated token under softmax(logits / t), before top-p and any constraint (see SampleParams). */
  logprobs: number[];
  /** Decoded generated text, without the eos token and cut before a stop string. */
  text: string;
  finishReason: FinishReason;
  /** Index of the stop string that matched (finishReason 'stop'). */
  stopIndex?: number;
}

export interface GenerateOptions {
  adapter?: LoraAdapter | null;
  /** Sequences decoded at once (KV-cache slots). Default: all requests. */
  maxConcurrent?: number;
  /** Tokens per forward (prefill is chunked to stay under it). Default 512. */
  maxBatchTokens?: number;
  /** KV-cache length per slot. Default: the longest prompt + maxNewTokens, capped by the model's context. */
  maxSeqLen?: number;
  /** Called after every step with the number of finished sequences (for progress and cancellation). */
  onStep?: (done: number, total: number) => void;
  signal?: AbortSignal;
  /**
   * Keep keys/values between calls: a request whose prompt starts with what a free slot already holds
   * (an earlier turn of the same conversation, a shared system prompt) only feeds the rest. Its slot
   * count and length replace maxConcurrent and maxSeqLen.
   */
  prefixCache?: PrefixCache;
}

/**
 * A KV cache that outlives one generate() call, with the tokens each slot holds. The cached keys and
 * values depend on the weights: it forgets everything when generate() is given another adapter, and
 * the caller must clear() it after changing weights in place (a training step).
 */
export class PrefixCache {
  readonly kv: KvCache;
  /** tokens[slot]: the tokens whose keys/values slot holds, at positions 0.. */
  readonly tokens: number[][];
  adapter: LoraAdapter | null | undefined = undefined;
  /** Prompt tokens served from the cache / fed through the model, over the cache's life. */
  reused = 0;
  fed = 0;
  constructor(model: Qwen3Model, slots: number, maxT: number) {
    this.kv = new KvCache(model, slots, maxT, { cleared: false });
    this.tokens = Array.from({ length: slots }, () => []);
  }
  clear(): void {
    for (const t of this.tokens) t.length = 0;
  }
  free(): void {
    this.kv.free();
  }
}

function commonPrefix(a: readonly number[], b: readonly number[]): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

interface Live {
  req: number;
  slot: number;
  prompt: number[];
  /** Prompt tokens already in the cache. */
  fed: number;
  out: GenerateResult;
  stopTokens: Set<number>;
  sampling: Sampling;
  /** Text length already searched for stop strings (minus the longest stop). */
  searched: number;
}

/**
 * Slot scheduling: moves waiting requests (from `next`) into free slots while both last. With a prefix
 * cache a request takes the free slot sharing the longest prefix with its prompt, keeping at least one
 * prompt token to feed so that the last one yields logits. Returns the next waiting request.
 */
function admit(requests: readonly GenerateRequest[], prompts: readonly number[][], next: number, free: number[], live: Live[], tok: Tokenizer, pc: PrefixCache | undefined): number {
  while (free.length && next < requests.length) {
    const r = requests[next];
    let pick = free.length - 1;
    let reuse = 0;
    if (pc)
      free.forEach((sl, i) => {
        const n = Math.min(commonPrefix(pc.tokens[sl], prompts[next]), prompts[next].length - 1);
        if (n > reuse) ((reuse = n), (pick = i));
      });
    const chosen = free.splice(pick, 1)[0];
    if (pc) {
      pc.tokens[chosen].length = reuse;
      pc.reused += reuse;
    }
    live.push({
      req: next,
      slot: chosen,
      prompt: prompts[next],
      fed: reuse,
      out: { promptTokens: prompts[next], tokens: [], logprobs: [], text: '', finishReason: 'length' },
      stopTokens: new Set(r.stopTokens ?? tok.stopIds),
      sampling: r.sampling ?? GREEDY,
      searched: 0,
    });
    next++;
  }
  return next;
}

/**
 * Batch assembly: one flat batch of one token per decoding sequence, then prompt chunks while the token
 * budget lasts. `sampled` are the sequences whose next token this forward draws, with their logit row.
 */
function assembleBatch(live: readonly Live[], budget: number, pc: PrefixCache | undefined): { ids: number[]; slot: number[]; pos: number[]; sampled: { s: Live; row: number }[] } {
  const ids: number[] = [];
  const slot: number[] = [];
  const pos: number[] = [];
  const sampled: { s: Live; row: number }[] = [];
  let room = budget;
  for (const s of live)
    if (s.fed === s.prompt.length) {
      const last = s.out.tokens[s.out.tokens.length - 1];
      if (pc) pc.tokens[s.slot].push(last);
      ids.push(last);
      slot.push(s.slot);
      pos.push(s.prompt.length + s.out.tokens.length - 1);
      sampled.push({ s, row: ids.length - 1 });
      room--;
    }
  for (const s of live) {
    if (s.fed === s.prompt.length || room <= 0) continue;
    const n = Math.min(room, s.prompt.length - s.fed);
    for (let i = 0; i < n; i++) (ids.push(s.prompt[s.fed + i]), slot.push(s.slot), pos.push(s.fed + i));
    if (pc) {
      for (let i = 0; i < n; i++) pc.tokens[s.slot].push(s.prompt[s.fed + i]);
      pc.fed += n;
    }
    s.fed += n;
    room -= n;
    if (s.fed === s.prompt.length) sampled.push({ s, row: ids.length - 1 });
  }
  return { ids, slot, pos, sampled };
}

/**
 * Stop detection: appends a sampled token and says whether the sequence has finished, and why (null: it
 * goes on). Stop strings are searched only in text not searched before (less the longest stop's length).
 */
function appendToken(s: Live, token: number, logprob: number, req: GenerateRequest, tok: Tokenizer, maxT: number): FinishReason | null {
  s.out.tokens.push(token);
  s.out.logprobs.push(logprob);
  if (s.stopTokens.has(token)) {
    s.out.text = tok.decode(s.out.tokens.slice(0, -1));
    return 'eos';
  }
  s.out.text = tok.decode(s.out.tokens);
  if (req.stop?.length) {
    const longest = Math.max(...req.stop.map((x) => x.length));
    let best = -1;
    let which = -1;
    req.stop.forEach((str, k) => {
      if (!str) return;
      const at = s.out.text.indexOf(str, Math.max(0, s.searched - longest));
      if (at >= 0 && (best < 0 || at < best)) ((best = at), (which = k));
    });
    s.searched = s.out.text.length;
    if (best >= 0) {
      s.out.text = s.out.text.slice(0, best);
      s.out.stopIndex = which;
      return 'stop';
    }
  }
  return s.out.tokens.length >= req.maxNewTokens || s.prompt.length + s.out.tokens.length >= maxT ? 'length' : null;
}

/** logits (R,V) -> logits with -Infinity where a row's mask forbids a token; the same tensor when no row has one. */
function applyConstraints(b: Backend, logits: Tensor, masks: readonly (Uint8Array | null)[]): Tensor {
  if (masks.every((m) => m === null)) return logits;
  const V = logits.shape[1];
  const bias = new Float32Array(masks.length * V);
  masks.forEach((m, r) => {
    if (m) for (let v = 0; v < V; v++) if (!(v < m.length && m[v])) bias[r * V + v] = -Infinity;
  });
  const t = b.tensor(bias, [masks.length, V]);
  const out = b.add(logits, t);
  b.free(t);
  return out;
}

export async function generate(model: Qwen3Model, tok: Tokenizer, requests: readonly GenerateRequest[], opts: GenerateOptions = {}): Promise<GenerateResult[]> {
  const prompts = requests.map((r) => (typeof r.prompt === 'string' ? tok.encode(r.prompt) : [...r.prompt]));
  const ctx = model.config.maxPositionEmbeddings;
  const need = Math.max(1, ...prompts.map((p, i) => p.length + Math.max(1, requests[i].maxNewTokens)));
  const pc = opts.prefixCache;
  const maxT = pc ? pc.kv.maxT : Math.min(opts.maxSeqLen ?? need, ctx);
  prompts.forEach((p, i) => {
    if (p.length === 0) throw new EngineError('shape', `generate: request ${i} has an empty prompt`);
    if (p.length >= maxT) throw new EngineError('shape', `generate: request ${i} prompt has ${p.length} tokens, the context holds ${maxT}`);
    for (const id of p) if (!(id >= 0 && id < model.config.vocabSize)) throw new EngineError('shape', `generate: request ${i} has token id ${id} outside the vocabulary`);
  });
  const slots = pc ? pc.kv.slots : Math.max(1, Math.min(opts.maxConcurrent ?? requests.length, requests.length));
  const budget = Math.max(slots, opts.maxBatchTokens ?? 512);
  const cache = pc ? pc.kv : new KvCache(model, slots, maxT, { cleared: false });
  if (pc && pc.adapter !== (opts.adapter ?? null)) {
    pc.clear();
    pc.adapter = opts.adapter ?? null;
  }
  const results: GenerateResult[] = new Array(requests.length);
  const free = Array.from({ length: slots }, (_, i) => slots - 1 - i);
  const live: Live[] = [];
  let next = 0;
  let done = 0;
  const b = model.backend;

  const finish = (s: Live, reason: FinishReason) => {
    s.out.finishReason = reason;
    results[s.req] = s.out;
    live.splice(live.indexOf(s), 1);
    free.push(s.slot);
    done++;
  };

  try {
    while (done < requests.length) {
      if (opts.signal?.aborted) throw new DOMException('generation cancelled', 'AbortError');
      next = admit(requests, prompts, next, free, live, tok, pc);
      for (const s of [...live]) if (requests[s.req].maxNewTokens <= 0) finish(s, 'length');
      if (live.length === 0) continue;

      const { ids, slot, pos, sampled } = assembleBatch(live, budget, pc);
      const { logits } = forward(model, cache, { ids: Int32Array.from(ids), slot: Int32Array.from(slot), pos: Int32Array.from(pos) }, {
        adapter: opts.adapter ?? null,
        logitRows: Int32Array.from(sampled.map((x) => x.row)),
      });
      if (sampled.length === 0) {
        b.free(logits);
        continue;
      }
      const params: SampleParams[] = sampled.map(({ s }) => ({ ...s.sampling, step: s.out.tokens.length }));
      const masks = sampled.map(({ s }) => requests[s.req].constraint?.allowed() ?? null);
      const masked = applyConstraints(b, logits, masks);
      const pick = b.sample(masked, params);
      const [toks, lps, raw] = await Promise.all([b.read(pick.tokens), b.read(pick.logprobs), masked === logits ? null : b.read(logits)]);
      for (const t of new Set([logits, masked, pick.tokens, pick.logprobs])) b.free(t);
      // A constrained token's logprob is the model's own, before the mask (as it is before top-p): what the
      // trainer computes for the same weights, so a fresh policy ratio starts at 1.
      if (raw) {
        const V = logits.shape[1];
        masks.forEach((m, i) => {
          if (m) lps[i] = tokenLogprob(raw.subarray(i * V, (i + 1) * V), toks[i], params[i].temperature);
        });
      }

      sampled.forEach(({ s }, i) => {
        if (toks[i] === NON_FINITE_TOKEN)
          throw new EngineError('validation', `generate: request ${s.req} has non-finite logits (NaN or +Inf, or all -Inf) at new token ${s.out.tokens.length}: no token can be drawn`);
        requests[s.req].constraint?.push(toks[i]);
        const reason = appendToken(s, toks[i], lps[i], requests[s.req], tok, maxT);
        if (reason) finish(s, reason);
      });
      opts.onStep?.(done, requests.length);
    }
  } catch (e) {
    pc?.clear(); // what the slots hold is unknown after a failed step
    throw e;
  } finally {
    if (!pc) cache.free();
  }
  return results;
}

export interface ScoredSequence {
  tokens: readonly number[];
  /** Score tokens[start..]: the first scored token is tokens[start] given tokens[..start). start >= 1. */
  start: number;
}

/**
 * log p(tokens[i] | tokens[<i]) for i >= start, for many sequences (teacher forcing, temperature 1).
 * Sequences are packed into forwards of at most maxBatchTokens tokens (one slot each).
 */
export async function logprobs(model: Qwen3Model, seqs: readonly ScoredSequence[], opts: { adapter?: LoraAdapter | null; maxBatchTokens?: number } = {}): Promise<number[][]> {
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
    const lsm = b.logSoftmax(logits);
    const all = (await b.read(lsm)) as Float32Array;
    for (const t of [logits, lsm]) b.free(t);
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
