// The verifiable reward for real executions, τ²-bench's DB × COMMUNICATE rule:
//
//  1. Early termination (step limit) scores 0.
//  2. DB: replay the reference actions on a fresh database (failing ones are ignored) -> gold hash;
//     replay the agent's calls, in order, on another fresh database -> predicted hash. 1 if equal.
//     Reads, calculations, transfers and failing calls therefore never matter; every successful write does.
//  3. COMMUNICATE: every fact must occur in some assistant reply, case-insensitively, after removing
//     commas from the reply (so "1,093.34" states "1093.34"). Tool calls and results do not count.
//  4. reward = DB × COMMUNICATE, so 0 or 1.
// The agent's calls are replayed rather than trusted from the trajectory, so a rehearsed (imagined)
// trajectory can also be scored by what it would really have done.

import type { Step, Task, ToolCall } from './domain';
import type { Environment } from './env';

export interface RealReward {
  reward: 0 | 1;
  db: 0 | 1;
  communicate: 0 | 1;
  missingFacts: string[];
  goldHash: string;
  predictedHash: string;
}

/** Hash of a fresh database after applying the calls in order (errors ignored, as upstream). */
export function replayHash(fresh: () => Environment, calls: readonly ToolCall[]): string {
  const env = fresh();
  for (const c of calls) env.execute(c);
  return env.hash();
}

export function factStated(fact: string, replies: readonly string[]): boolean {
  const f = fact.toLowerCase();
  return replies.some((r) => r.replaceAll(',', '').toLowerCase().includes(f));
}

export function missingFacts(facts: readonly string[], replies: readonly string[]): string[] {
  return facts.filter((f) => !factStated(f, replies));
}

export function repliesOf(steps: readonly Step[]): string[] {
  return steps.flatMap((s) => (s.kind === 'reply' ? [s.text] : []));
}

export function callsOf(steps: readonly Step[]): ToolCall[] {
  return steps.flatMap((s) => (s.kind === 'call' ? [s.call] : []));
}

/** Memo of gold hashes: the reference replay of a task is the same every time. */
const goldCache = new WeakMap<Task, string>();

export function realReward(
  fresh: () => Environment,
  task: Task,
  steps: readonly Step[],
  opts: { terminated?: boolean } = {},
): RealReward {
  let goldHash = goldCache.get(task);
  if (goldHash === undefined) {
    goldHash = replayHash(fresh, task.referenceActions);
    goldCache.set(task, goldHash);
  }
  const predictedHash = replayHash(fresh, callsOf(steps));
  const missing = missingFacts(task.facts, repliesOf(steps));
  const db = goldHash === predictedHash ? 1 : 0;
  const communicate = missing.length === 0 ? 1 : 0;
  const reward = opts.terminated ? 0 : ((db * communicate) as 0 | 1);
  return { reward, db, communicate, missingFacts: missing, goldHash, predictedHash };
}
