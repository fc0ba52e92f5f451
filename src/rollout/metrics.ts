// Summary figures of a batch of rollouts, for progress lines, metrics JSONL and evaluation tables:
// reward (mean, sd, success rate), how episodes ended, turns, tool precision/recall against the task's
// reference actions, and rehearsal fidelity.
import type { Step, ToolCall } from '../env/domain';
import { callKey } from '../env/toolcall';
import { summarizeFidelity, type FidelitySummary } from './fidelity';
import type { EndReason } from './episode';
import type { RolloutBatch } from './rollout';

export interface ToolMatch {
  /** Calls made (parse errors excluded) and how many of them match a reference action. */
  calls: number;
  matched: number;
  references: number;
  /** matched / calls (NaN with no calls); recall: matched reference actions / references (NaN with none). */
  precision: number;
  recall: number;
}


/**
 * Multiset match of the calls in `steps` against reference actions by tool name and canonical arguments
 * (a reference action is consumed by the first call that matches it, so repeating a call does not count twice).
 */
export function matchToolCalls(steps: readonly Step[], references: readonly ToolCall[]): ToolMatch {
  const left = new Map<string, number>();
  for (const r of references) left.set(callKey(r), (left.get(callKey(r)) ?? 0) + 1);
  let calls = 0;
  let matched = 0;
  for (const s of steps) {
    if (s.kind !== 'call' || s.call.name === '') continue;
    calls++;
    const n = left.get(callKey(s.call)) ?? 0;
    if (n > 0) {
      matched++;
      left.set(callKey(s.call), n - 1);
    }
  }
  return { calls, matched, references: references.length, precision: calls ? matched / calls : NaN, recall: references.length ? matched / references.length : NaN };
}

export interface RolloutSummary {
  rollouts: number;
  meanReward: number;
  sdReward: number;
  /** Fraction of rollouts with reward 1 (full success). */
  success: number;
  ends: Partial<Record<EndReason, number>>;
  meanTurns: number;
  /** Micro-averaged over all rollouts' calls and reference actions. */
  toolPrecision: number;
  toolRecall: number;
  fidelity: FidelitySummary;
  /** Calls answered by recall from the reference trajectory instead of a rehearsal (src/rollout/recall.ts). */
  recalled: number;
  rows: { act: number; rehearse: number };
  tokens: { generated: number; prompt: number };
}

export function summarizeRollouts(batch: RolloutBatch, references: (taskId: string) => readonly ToolCall[]): RolloutSummary {
  const rs = batch.rollouts;
  const n = rs.length;
  const mean = n ? rs.reduce((s, r) => s + r.reward, 0) / n : NaN;
  const sd = n > 1 ? Math.sqrt(rs.reduce((s, r) => s + (r.reward - mean) ** 2, 0) / (n - 1)) : 0;
  const ends: Partial<Record<EndReason, number>> = {};
  for (const r of rs) ends[r.end] = (ends[r.end] ?? 0) + 1;
  let calls = 0;
  let matched = 0;
  let refs = 0;
  let refsMatched = 0;
  for (const r of rs) {
    const m = matchToolCalls(r.steps, references(r.taskId));
    calls += m.calls;
    matched += m.matched;
    refs += m.references;
    refsMatched += m.matched;
  }
  return {
    rollouts: n,
    meanReward: mean,
    sdReward: sd,
    success: n ? rs.filter((r) => r.reward === 1).length / n : NaN,
    ends,
    meanTurns: n ? rs.reduce((s, r) => s + r.turns, 0) / n : NaN,
    toolPrecision: calls ? matched / calls : NaN,
    toolRecall: refs ? refsMatched / refs : NaN,
    fidelity: summarizeFidelity(rs.flatMap((r) => r.fidelity)),
    recalled: batch.stats.recalledObservations ?? 0,
    rows: { act: batch.rows.filter((r) => r.role === 'act').length, rehearse: batch.rows.filter((r) => r.role === 'rehearse').length },
    tokens: { generated: batch.stats.generatedTokens, prompt: batch.stats.promptTokens },
  };
}

/** Success over a subset of the tasks (a tier or a family). */
export interface GroupSuccess {
  tasks: number;
  success: number;
}

/** Success (reward 1) per group of results, groups sorted by name; a result whose key is null is left out. */
export function groupSuccess<T extends { reward: number }>(results: readonly T[], key: (t: T) => string | null): Record<string, GroupSuccess> {
  const out: Record<string, GroupSuccess> = {};
  for (const t of results) {
    const k = key(t);
    if (k === null) continue;
    const g = (out[k] ??= { tasks: 0, success: 0 });
    g.success = (g.success * g.tasks + (t.reward === 1 ? 1 : 0)) / (g.tasks + 1);
    g.tasks++;
  }
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}
