// Replay of a task's reference actions into a trace line, in the format of
// shared/data/tau2-retail/gold-train.jsonl: {"id", "actions": [{"name", "ok": true, "output"} |
// {"name", "ok": false, "error"}], "changed": {table: {id: record}}}. `output` is the tool's return value
// (a record, or a raw string); `error` is the bare message; `changed` holds, in full and in database
// order, every record whose final content differs from the initial database.

import type { Observation, Task } from './domain';
import type { Environment } from './env';
import { pyJson } from './json';

export type TraceAction = { name: string; ok: true; output: unknown } | { name: string; ok: false; error: string };

export interface TraceLine {
  id: string;
  actions: TraceAction[];
  changed: Record<string, Record<string, unknown>>;
}

export interface ReplayResult {
  trace: TraceLine;
  observations: Observation[];
  hash: string;
}

/** Runs the reference actions in `env` (expected fresh); failing actions are recorded and skipped. */
export function replayTask(env: Environment, task: Pick<Task, 'id' | 'referenceActions'>): ReplayResult {
  const observations = task.referenceActions.map((a) => env.execute(a));
  const actions: TraceAction[] = observations.map((o) =>
    o.ok ? { name: o.name, ok: true, output: o.result } : { name: o.name, ok: false, error: o.error },
  );
  return { trace: { id: task.id, actions, changed: env.changed() }, observations, hash: env.hash() };
}

/** One JSONL line as upstream's Python writes it (see pyJson for float fields). */
export function traceLineText(t: TraceLine, floatKeys: ReadonlySet<string>): string {
  return pyJson({ id: t.id, actions: t.actions, changed: t.changed }, floatKeys);
}

/**
 * Deep equality of parsed JSON with numbers equal to `rel` relative tolerance; returns the path of the
 * first difference, or null.
 */
export function jsonDiff(a: unknown, b: unknown, rel = 1e-9, path = '$'): string | null {
  if (typeof a === 'number' && typeof b === 'number') {
    if (a === b) return null;
    return Math.abs(a - b) <= rel * Math.max(Math.abs(a), Math.abs(b)) ? null : `${path}: ${a} != ${b}`;
  }
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') {
    return a === b ? null : `${path}: ${JSON.stringify(a)?.slice(0, 80)} != ${JSON.stringify(b)?.slice(0, 80)}`;
  }
  if (Array.isArray(a) !== Array.isArray(b)) return `${path}: array vs object`;
  if (Array.isArray(a) && Array.isArray(b)) {
    if (a.length !== b.length) return `${path}: length ${a.length} != ${b.length}`;
    for (let i = 0; i < a.length; i++) {
      const d = jsonDiff(a[i], b[i], rel, `${path}[${i}]`);
      if (d) return d;
    }
    return null;
  }
  const ao = a as Record<string, unknown>;
  const bo = b as Record<string, unknown>;
  const ak = Object.keys(ao).sort();
  const bk = Object.keys(bo).sort();
  if (ak.join('\u0000') !== bk.join('\u0000')) return `${path}: keys ${ak.join(',')} != ${bk.join(',')}`;
  for (const k of ak) {
    const d = jsonDiff(ao[k], bo[k], rel, `${path}.${k}`);
    if (d) return d;
  }
  return null;
}
