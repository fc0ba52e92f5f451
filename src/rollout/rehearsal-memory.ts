// The rehearsal memory m_x of test-time private rehearsal: imagined attempts at one
// request and their evaluations, condensed into a short note that conditions the one real episode.
//
// How it is built (deterministic, no model call):
//   - one block per attempt, in attempt order:
//       Attempt k (imagined, ended: <reason>):
//       1. <tool>(<compact args>) -> <observation as the policy rehearsed it, clipped to maxResultChars>
//       2. reply: <reply text, clipped to maxReplyChars>
//       Self-evaluation: <the policy's own evaluation, clipped to maxEvalChars>      (evaluation 'self'|'both')
//       Checklist judge: <score>; unmet: <items>                                      (evaluation 'judge'|'both')
//     Calls past maxSteps per attempt are summarised as "… (j more steps)".
//   - a fixed header says that nothing was executed and that the results are the policy's own predictions.
// How it is bounded: a hard cap in tokens of the policy's own tokenizer, counted on the final note text
// (header + blocks joined by newlines) as it is encoded standalone. Blocks are taken newest first while the
// note fits, so the OLDEST attempts are dropped first; the kept blocks are then written in attempt order.
// If not even the newest block fits next to the header, that block is cut (character-wise, the longest
// prefix that fits, marked "…"). If the header alone does not fit, the memory is empty.
// Inside the Act system prompt the note follows the domain policy after "\n\n"; BPE merges across that
// seam can shift the in-context count by a token or so, which the caller's context check absorbs.
import type { Step } from '../env/domain';
import { canonicalJson } from '../env/json';
import { serializeObservation } from '../env/toolcall';
import type { EndReason } from './episode';

/** Which evaluation of each attempt enters the memory. */
export type MemoryEvaluation = 'self' | 'judge' | 'both' | 'none';
export const MEMORY_EVALUATIONS: readonly MemoryEvaluation[] = ['self', 'judge', 'both', 'none'];

/** The deterministic checklist judge's verdict on an imagined trajectory (src/env/judge.ts rules). */
export interface JudgeVerdict {
  /** Checklist reward in [0,1], or -0.1 for an empty response. */
  reward: number;
  /** Human-readable unmet items, e.g. `call cancel_pending_order {"order_id":"#W1"}`, `fact "42.50"`. */
  unmet: string[];
}

export interface MemoryAttempt {
  /** 0-based attempt index. */
  index: number;
  steps: readonly Step[];
  end: EndReason;
  /** The policy's own evaluation (null when none was generated). */
  selfEval: string | null;
  judge: JudgeVerdict | null;
}

export interface MemoryOptions {
  /** Hard cap on the note's tokens (policy tokenizer). */
  maxTokens: number;
  evaluation: MemoryEvaluation;
  /** Per-observation clip in characters (default 160). */
  maxResultChars?: number;
  /** Per-reply clip (default 200). */
  maxReplyChars?: number;
  /** Self-evaluation clip (default 300). */
  maxEvalChars?: number;
  /** Steps listed per attempt (default 8). */
  maxSteps?: number;
}

export interface RehearsalMemory {
  /** The note as it enters the Act system prompt ('' when empty). */
  text: string;
  /** Tokens of `text` under the policy tokenizer (0 when empty); always <= maxTokens. */
  tokens: number;
  maxTokens: number;
  /** Attempt indices whose block is in the note (in order), and those dropped for the bound. */
  included: number[];
  dropped: number[];
  /** The one kept block had to be cut to fit. */
  truncated: boolean;
}

export class MemoryConfigError extends Error {
  override readonly name = 'MemoryConfigError';
}

// Short on purpose: with a 1k-token context every header token is taken from the attempts.
export const MEMORY_HEADER = '# Rehearsal memory\nYour imagined attempts at this request (nothing was executed; results are your own predictions):';

const ELLIPSIS = '…';

export function clip(s: string, n: number): string {
  const one = s.replace(/\s+/g, ' ').trim();
  return one.length <= n ? one : one.slice(0, Math.max(0, n - 1)) + ELLIPSIS;
}

/** One line per step: the call with its (rehearsed) observation, or a reply. Shared with the self-evaluation prompt. */
export function describeSteps(steps: readonly Step[], o: { maxResultChars: number; maxReplyChars: number; maxSteps: number }): string[] {
  const lines = steps.slice(0, o.maxSteps).map((s, i) =>
    s.kind === 'call'
      ? `${i + 1}. ${s.call.name === '' ? '(malformed call)' : `${s.call.name}(${clip(canonicalJson(s.call.arguments), 200)})`} -> ${clip(serializeObservation(s.observation), o.maxResultChars)}`
      : `${i + 1}. reply: ${s.text.trim() === '' ? '(empty)' : clip(s.text, o.maxReplyChars)}`,
  );
  if (steps.length > o.maxSteps) lines.push(`${ELLIPSIS} (${steps.length - o.maxSteps} more steps)`);
  return lines;
}

export function formatJudge(v: JudgeVerdict): string {
  return `Checklist judge: ${v.reward.toFixed(2)}${v.unmet.length ? `; unmet: ${v.unmet.join('; ')}` : '; all items met'}`;
}

export function attemptBlock(a: MemoryAttempt, opts: MemoryOptions): string {
  const o = { maxResultChars: opts.maxResultChars ?? 160, maxReplyChars: opts.maxReplyChars ?? 200, maxSteps: opts.maxSteps ?? 8 };
  const lines = [`Attempt ${a.index + 1} (imagined, ended: ${a.end}):`, ...(a.steps.length ? describeSteps(a.steps, o) : ['(no steps)'])];
  const ev = opts.evaluation;
  if ((ev === 'self' || ev === 'both') && a.selfEval !== null) lines.push(`Self-evaluation: ${a.selfEval.trim() === '' ? '(empty)' : clip(a.selfEval, opts.maxEvalChars ?? 300)}`);
  if ((ev === 'judge' || ev === 'both') && a.judge !== null) lines.push(formatJudge(a.judge));
  return lines.join('\n');
}

export function buildRehearsalMemory(attempts: readonly MemoryAttempt[], countTokens: (text: string) => number, opts: MemoryOptions): RehearsalMemory {
  if (!(Number.isInteger(opts.maxTokens) && opts.maxTokens >= 0)) throw new MemoryConfigError(`maxTokens must be an integer >= 0, got ${opts.maxTokens}`);
  if (!MEMORY_EVALUATIONS.includes(opts.evaluation)) throw new MemoryConfigError(`evaluation must be one of ${MEMORY_EVALUATIONS.join(', ')}, got ${String(opts.evaluation)}`);
  const empty = (dropped: number[]): RehearsalMemory => ({ text: '', tokens: 0, maxTokens: opts.maxTokens, included: [], dropped, truncated: false });
  if (attempts.length === 0) return empty([]);
  const all = attempts.map((a) => a.index);
  const note = (blocks: string[]) => [MEMORY_HEADER, ...blocks].join('\n');
  if (countTokens(MEMORY_HEADER) > opts.maxTokens) return empty(all);

  const blocks = attempts.map((a) => attemptBlock(a, opts));
  // Newest first while the whole note still fits; one encode per candidate (a handful of attempts).
  const kept: number[] = [];
  for (let i = blocks.length - 1; i >= 0; i--) {
    const cand = [i, ...kept];
    if (countTokens(note(cand.map((j) => blocks[j]))) > opts.maxTokens) break;
    kept.unshift(i);
  }
  if (kept.length > 0) {
    const text = note(kept.map((j) => blocks[j]));
    return { text, tokens: countTokens(text), maxTokens: opts.maxTokens, included: kept.map((j) => attempts[j].index), dropped: all.filter((_, j) => !kept.includes(j)), truncated: false };
  }
  // Not even the newest block fits: keep its longest prefix that does (binary search on characters).
  const last = blocks[blocks.length - 1];
  let lo = 0;
  let hi = last.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (countTokens(note([last.slice(0, mid) + ELLIPSIS])) <= opts.maxTokens) lo = mid;
    else hi = mid - 1;
  }
  if (lo === 0) return empty(all);
  const text = note([last.slice(0, lo) + ELLIPSIS]);
  const idx = attempts[attempts.length - 1].index;
  return { text, tokens: countTokens(text), maxTokens: opts.maxTokens, included: [idx], dropped: all.filter((i) => i !== idx), truncated: true };
}

/** The Act system prompt conditioned on a memory: the domain policy, then the note (unchanged when empty). */
export function withMemory(policy: string, memory: RehearsalMemory): string {
  return memory.text === '' ? policy : `${policy}\n\n${memory.text}`;
}
