// Pretraining data: the scripted expert's episodes on train-split tasks, turned into (prompt, response)
// pairs exactly as the rollouts will prompt the policy (buildActPrompt / buildRehearsePrompt), then into
// token ids with a response mask (loss only on what the policy itself would write), and packed into
// micro-batches under a token budget. Everything is a pure function of the seed.
import { Rng } from '../../src/util/rng';
import type { Domain, ExpertOptions, Row, Task } from '../../src/env/domain';
import { buildActPrompt } from '../../src/rollout/act-prompt';
import type { ChatMessage, ToolDefinition } from '../../src/rollout/chat';
import { buildRehearsePrompt, type RehearsePromptOptions } from '../../src/rollout/rehearse-prompt';
import { referenceGrounding } from '../../src/rollout/rollout';

/** A training pair: `prompt` is conditioning only, `response` carries the loss (it ends with <|im_end|>). */
export interface Example {
  /** review: the self-evaluation of an attempt (research/pretrain/review-rows.ts); copy: a drill (augment.ts); user: the user role (user-rows.ts). */
  role: 'act' | 'rehearse' | 'review' | 'copy' | 'user';
  taskId: string;
  prompt: string;
  response: string;
}

export const END = '<|im_end|>';

/** Which tasks, and how the expert behaves on them (ExpertOptions; the seed is per task, derived below). */
export interface ExpertDataOptions extends Omit<ExpertOptions, 'seed'> {
  split: 'train' | 'test';
  tasks: number;
  seed: number;
  /** The expert's deliberate-mistake rate (its recoveries teach the environment's error dynamics). */
  mistakeRate: number;
}

/** The expert's rows for `count` generated tasks of a split, and the tasks themselves. */
export function expertRows<T extends Task>(domain: Domain<T>, o: ExpertDataOptions): { tasks: T[]; rows: Row[] } {
  const { split, tasks: count, seed, ...behaviour } = o;
  const tasks = domain.tasks.generate({ split, count, seed });
  const rows: Row[] = [];
  tasks.forEach((t, i) => rows.push(...domain.expert(t, domain.createEnv(), { ...behaviour, seed: seed * 7919 + i }).rows));
  return { tasks, rows };
}

/**
 * The expert's Rehearse rows of a split's tasks with the grounding a rollout gives them: the task's whole
 * reference trajectory (the prompt builder keeps what fits its budget), so a reference call's own real
 * result is among the examples. Expert rows proper never show the call being simulated (src/env/rows.ts);
 * without these a rehearser never learns to reproduce a matching example. A deliberate mistake of the
 * expert matches no example, so these rows also keep teaching the environment's own answers.
 */
export function rolloutGroundedRehearseRows(domain: Domain, o: ExpertDataOptions): Row[] {
  const { tasks, rows } = expertRows(domain, o);
  const grounding = new Map(tasks.map((t) => [t.id, referenceGrounding(domain, t)]));
  return rows.flatMap((r) => (r.role === 'rehearse' ? [{ ...r, grounding: grounding.get(r.taskId)! }] : []));
}

/** A row rendered with the rollout prompts (the same bytes the policy will see at RL time). */
export function rowToExample(row: Row, policy: string, tools: readonly ToolDefinition[], rehearsePrompt: RehearsePromptOptions = {}): Example {
  const history = row.messages as ChatMessage[];
  if (row.role === 'act') return { role: 'act', taskId: row.taskId, prompt: buildActPrompt(policy, tools, history), response: row.target + END };
  const { text } = buildRehearsePrompt({ tools, grounding: row.grounding, history, call: row.call }, rehearsePrompt);
  return { role: 'rehearse', taskId: row.taskId, prompt: text, response: row.target + END };
}

export interface Encoded {
  role: Example['role'];
  /** (T) token ids of prompt + response. */
  ids: Int32Array;
  /** Number of prompt tokens: tokens [promptLen, T) are the response and carry the loss. */
  promptLen: number;
  /** (T) 1 where a response token spells a stated value (a lexicon entry), for a loss weight on them; absent = none. */
  valueMask?: Uint8Array;
}

export interface Encoder {
  encode(text: string): number[];
  /** With it, encodeExample can mark the response tokens that spell stated values. */
  encodeMarkingValues?(text: string): { ids: number[]; value: Uint8Array };
}

/** Prompt and response encoded separately (the boundary is a token boundary, as at generation time). */
export function encodeExample(tok: Encoder, ex: Example, o: { markValues?: boolean } = {}): Encoded {
  const p = tok.encode(ex.prompt);
  const marked = o.markValues && tok.encodeMarkingValues ? tok.encodeMarkingValues(ex.response) : null;
  const r = marked?.ids ?? tok.encode(ex.response);
  const ids = new Int32Array(p.length + r.length);
  ids.set(p);
  ids.set(r, p.length);
  if (!marked?.value.some((v) => v === 1)) return { role: ex.role, ids, promptLen: p.length };
  const valueMask = new Uint8Array(ids.length);
  valueMask.set(marked.value, p.length);
  return { role: ex.role, ids, promptLen: p.length, valueMask };
}

/** Sequence indices grouped into micro-batches of at most maxTokens tokens, in a seeded order. */
export function packBatches(lengths: readonly number[], maxTokens: number, seed: number, maxSeqs = Infinity): number[][] {
  const order = lengths.map((_, i) => i);
  const rng = new Rng(seed);
  for (let i = order.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [order[i], order[j]] = [order[j], order[i]];
  }
  const out: number[][] = [];
  let cur: number[] = [];
  let used = 0;
  for (const i of order) {
    if (lengths[i] > maxTokens) continue; // callers drop over-long sequences first; never split one
    if ((used + lengths[i] > maxTokens || cur.length >= maxSeqs) && cur.length > 0) {
      out.push(cur);
      cur = [];
      used = 0;
    }
    cur.push(i);
    used += lengths[i];
  }
  if (cur.length > 0) out.push(cur);
  return out;
}

/** Quantiles of a list of lengths (for the card and the progress log). */
export function lengthStats(xs: readonly number[]): { n: number; min: number; p50: number; p90: number; p99: number; max: number; mean: number } {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p: number) => (s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))] : 0);
  return { n: s.length, min: s[0] ?? 0, p50: q(0.5), p90: q(0.9), p99: q(0.99), max: s[s.length - 1] ?? 0, mean: s.length ? Math.round(s.reduce((a, b) => a + b, 0) / s.length) : 0 };
}
