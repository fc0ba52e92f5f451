// Batched generation: many sequences decode together, one forward per step over every live sequence.
// Prompts of different lengths are prefilled in the same forward as other sequences' decode tokens
// (a flat TokenLayout batch), a sequence that finishes frees its KV-cache slot for a waiting request,
// and every sequence has its own sampling settings and seeded random stream, so a sequence generates
// the same tokens whether it runs alone or in a batch.
import type { SampleParams } from '../engine/backend';
import { EngineError } from '../engine/errors';
import { tokenLogprob } from '../engine/sampling';
import { NON_FINITE_TOKEN } from '../engine/webgpu/kernels/sample';
import type { LoraAdapter } from './lora';
import { forward, KvCache, slotsThatFit, type Qwen3Model } from './qwen3';
import { DecodeStream, type Tokenizer } from './tokenizer';
import { applyConstraints, greedyChoice, type TokenConstraint } from './token-constraint';

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
  /**
   * Tokens greedy decoding is expected to write (e.g. the real observation a rehearsal is compared with): fed with
   * the prompt in prefill forwards and kept while greedy decoding chooses them token by token; at the first it would
   * not have chosen, its own choice is taken and decoding goes on from there. The result is what decoding without a
   * draft gives, fewer forwards when the draft is right (a prefill and a decode step may round differently, as two
   * batch shapes may). Greedy requests only.
   */
  draft?: readonly number[];
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
  /** Sequences decoded at once (KV-cache slots). Default: all requests, or as many as fit kvBudget. */
  maxConcurrent?: number;
  /** Bytes the KV cache may take when maxConcurrent is not given; default KV_BUDGET_BYTES (src/model/qwen3.ts). */
  kvBudget?: number;
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
  /** The tokens to feed before decoding: the prompt, followed by the draft while it is being checked. */
  prompt: number[];
  /** The prompt's own length. */
  promptLen: number;
  /** The draft being checked (null: none, or checked); its token i is checked against generated token i. */
  draft: number[] | null;
  /** Tokens of `prompt` already in the cache. */
  fed: number;
  out: GenerateResult;
  stopTokens: Set<number>;
  sampling: Sampling;
  /** Text length already searched for stop strings (minus the longest stop). */
  searched: number;
  /** out.tokens' text, decoded as they come (out.text is its value, cut at a stop). */
  text: DecodeStream;
}

/**
 * Slot scheduling: moves waiting requests (from `next`) into free slots while both last. With a prefix
 * cache a request takes the free slot sharing the longest prefix with its prompt, keeping at least one
 * prompt token to feed so that the last one yields logits. Returns the next waiting request.
 */
function admit(requests: readonly GenerateRequest[], prompts: readonly number[][], next: number, free: number[], live: Live[], tok: Tokenizer, pc: PrefixCache | undefined, maxT: number): number {
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
    // A draft is cut to what can be kept: the token after it is decoded, within maxNewTokens and the context.
    const prompt = prompts[next];
    const d = r.draft?.slice(0, Math.max(0, Math.min(r.maxNewTokens - 1, maxT - prompt.length - 1))) ?? [];
    live.push({
      req: next,
      slot: chosen,
      prompt: d.length ? [...prompt, ...d] : prompt,
      promptLen: prompt.length,
      draft: d.length ? d : null,
      fed: reuse,
      out: { promptTokens: prompts[next], tokens: [], logprobs: [], text: '', finishReason: 'length' },
      stopTokens: new Set(r.stopTokens ?? tok.stopIds),
      sampling: r.sampling ?? GREEDY,
      searched: 0,
      text: new DecodeStream(tok),
    });
    next++;
  }
  return next;
}

/**
 * Batch assembly: one flat batch of one token per decoding sequence, then prompt chunks while the token
 * budget lasts. `sampled` are the sequences whose next token this forward draws, with their logit row; a sequence
 * whose draft is being checked has a row for every fed position from its prompt's last on (`check`).
 */
function assembleBatch(live: readonly Live[], budget: number, pc: PrefixCache | undefined): { ids: number[]; slot: number[]; pos: number[]; sampled: Sampled[] } {
  const ids: number[] = [];
  const slot: number[] = [];
  const pos: number[] = [];
  const sampled: Sampled[] = [];
  let room = budget;
  for (const s of live)
    if (s.fed === s.prompt.length) {
      const last = s.out.tokens[s.out.tokens.length - 1];
      if (pc) pc.tokens[s.slot].push(last);
      ids.push(last);
      slot.push(s.slot);
      pos.push(s.prompt.length + s.out.tokens.length - 1);
      sampled.push({ s, row: ids.length - 1, check: false });
      room--;
    }
  for (const s of live) {
    if (s.fed === s.prompt.length || room <= 0) continue;
    const n = Math.min(room, s.prompt.length - s.fed);
    for (let i = 0; i < n; i++) {
      ids.push(s.prompt[s.fed + i]), slot.push(s.slot), pos.push(s.fed + i);
      if (s.draft && s.fed + i >= s.promptLen - 1) sampled.push({ s, row: ids.length - 1, check: true });
    }
    if (pc) {
      for (let i = 0; i < n; i++) pc.tokens[s.slot].push(s.prompt[s.fed + i]);
      pc.fed += n;
    }
    s.fed += n;
    room -= n;
    if (!s.draft && s.fed === s.prompt.length) sampled.push({ s, row: ids.length - 1, check: false });
  }
  return { ids, slot, pos, sampled };
}

interface Sampled {
  s: Live;
  row: number;
  check: boolean;
}

/**
 * Ends a draft's check after `kept` of its tokens were chosen: the sequence decodes on from there (its cache holds the
 * prompt and those tokens; what was fed after them is overwritten).
 */
function endDraft(s: Live, kept: number, pc: PrefixCache | undefined): void {
  s.prompt = s.prompt.slice(0, s.promptLen);
  s.fed = s.promptLen;
  s.draft = null;
  if (pc) pc.tokens[s.slot].length = s.promptLen + kept;
}

/**
 * Stop detection: appends a sampled token and says whether the sequence has finished, and why (null: it
 * goes on). Stop strings are searched only in text not searched before (less the longest stop's length).
 */
function appendToken(s: Live, token: number, logprob: number, req: GenerateRequest, maxT: number): FinishReason | null {
  s.out.tokens.push(token);
  s.out.logprobs.push(logprob);
  if (s.stopTokens.has(token)) {
    s.out.text = s.text.text;
    return 'eos';
  }
  s.out.text = s.text.push(token);
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
  return s.out.tokens.length >= req.maxNewTokens || s.promptLen + s.out.tokens.length >= maxT ? 'length' : null;
}

/** The first id that is not an integer in [0, vocab), or null. */
function outsideVocab(ids: readonly number[], vocab: number): number | null {
  for (const id of ids) if (!(Number.isInteger(id) && id >= 0 && id < vocab)) return id;
  return null;
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
    const bad = outsideVocab(p, model.config.vocabSize);
    if (bad !== null) throw new EngineError('shape', `generate: request ${i} has token id ${bad} outside the vocabulary`);
    const d = requests[i].draft;
    if (d?.length) {
      if ((requests[i].sampling ?? GREEDY).temperature > 0) throw new EngineError('validation', `generate: request ${i} has a draft but samples (a draft is checked against greedy decoding)`);
      const badDraft = outsideVocab(d, model.config.vocabSize);
      if (badDraft !== null) throw new EngineError('shape', `generate: request ${i}'s draft has token id ${badDraft} outside the vocabulary`);
    }
  });
  const slots = pc ? pc.kv.slots : Math.max(1, Math.min(opts.maxConcurrent ?? slotsThatFit(model.config, maxT, opts.kvBudget), requests.length));
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
      next = admit(requests, prompts, next, free, live, tok, pc, maxT);
      for (const s of [...live]) if (requests[s.req].maxNewTokens <= 0) finish(s, 'length');
      if (live.length === 0) continue;

      const { ids, slot, pos, sampled } = assembleBatch(live, budget, pc);
      const plain = sampled.filter((x) => !x.check);
      const checked = sampled.filter((x) => x.check);
      const { logits } = forward(model, cache, { ids: Int32Array.from(ids), slot: Int32Array.from(slot), pos: Int32Array.from(pos) }, {
        adapter: opts.adapter ?? null,
        logitRows: Int32Array.from([...plain, ...checked].map((x) => x.row)),
      });
      if (sampled.length === 0) {
        b.free(logits);
        continue;
      }
      const V = logits.shape[1];
      // A draft's rows are read back and chosen here, in order: each choice moves the sequence's constraint.
      const allRaw = checked.length ? ((await b.read(logits)) as Float32Array) : null;
      const checkedRaw = allRaw?.subarray(plain.length * V) ?? null;
      if (plain.length) {
        const rowsT = checked.length ? b.tensor(Int32Array.from(plain, (_, i) => i), [plain.length]) : null;
        const plainLogits = rowsT ? b.gatherRows(logits, rowsT) : logits;
        const params: SampleParams[] = plain.map(({ s }) => ({ ...s.sampling, step: s.out.tokens.length }));
        const masks = plain.map(({ s }) => requests[s.req].constraint?.allowed() ?? null);
        const masked = applyConstraints(b, plainLogits, masks);
        const pick = b.sample(masked, params);
        // The plain rows' logits before the mask: already read when draft rows made the whole tensor come back.
        const [toks, lps, raw] = await Promise.all([b.read(pick.tokens), b.read(pick.logprobs), masked === plainLogits ? null : allRaw ?? b.read(plainLogits)]);
        for (const t of new Set([plainLogits, masked, pick.tokens, pick.logprobs, ...(rowsT ? [rowsT] : [])])) if (t !== logits) b.free(t);
        // A constrained token's logprob is the model's own, before the mask (as it is before top-p): what the
        // trainer computes for the same weights, so a fresh policy ratio starts at 1.
        if (raw)
          masks.forEach((m, i) => {
            if (m) lps[i] = tokenLogprob(raw.subarray(i * V, (i + 1) * V), toks[i], params[i].temperature);
          });
        plain.forEach(({ s }, i) => {
          if (toks[i] === NON_FINITE_TOKEN)
            throw new EngineError('validation', `generate: request ${s.req} has non-finite logits (NaN or +Inf, or all -Inf) at new token ${s.out.tokens.length}: no token can be drawn`);
          requests[s.req].constraint?.push(toks[i]);
          const reason = appendToken(s, toks[i], lps[i], requests[s.req], maxT);
          if (reason) finish(s, reason);
        });
      }
      b.free(logits);
      if (checkedRaw) {
        const ended = new Set<Live>();
        checked.forEach(({ s }, i) => {
          if (ended.has(s)) return;
          const req = requests[s.req];
          const raw = checkedRaw.subarray(i * V, (i + 1) * V);
          const token = greedyChoice(raw, req.constraint?.allowed() ?? null);
          req.constraint?.push(token);
          const j = s.out.tokens.length;
          const reason = appendToken(s, token, tokenLogprob(raw, token, 0), req, maxT);
          if (reason || j === s.draft!.length || token !== s.draft![j]) {
            endDraft(s, j, pc);
            ended.add(s);
            if (reason) finish(s, reason);
          }
        });
      }
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
