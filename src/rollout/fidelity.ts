// Rehearsal fidelity (the measurement the paper does not make): how well a rehearsed
// observation ô_t agrees with the real o_t for the same call on the same state.
// - exact: canonical JSON equality (keys sorted; null-valued keys dropped, because the retail records
//   treat an absent optional field and a null one as the same thing).
// - f1: field-level F1 over the flattened leaves, each leaf a "path=value" string (multiset), so a
//   record right in 9 of 10 fields scores 0.9, not 0.
// - errorAgree: both are errors or both are not.
import type { Observation } from '../env/domain';

/** Parsed JSON (what tool results and rehearsed results are). */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [k: string]: JsonValue };

/** The JSON an observation stands for: {"result": …} or {"error": "…"} (src/env/toolcall.ts). */
export function observationJson(o: Observation): JsonValue {
  return o.ok ? { result: o.result as JsonValue } : { error: o.error };
}

export interface StepFidelity {
  exact: boolean;
  f1: number;
  errorAgree: boolean;
  rehearsedError: boolean;
  realError: boolean;
}

function dropNulls(v: JsonValue): JsonValue {
  if (Array.isArray(v)) return v.map(dropNulls);
  if (v !== null && typeof v === 'object') {
    const o: { [k: string]: JsonValue } = {};
    for (const [k, x] of Object.entries(v)) if (x !== null) o[k] = dropNulls(x);
    return o;
  }
  return v;
}

/** Canonical text of a JSON value for equality: sorted keys, no whitespace, null-valued keys dropped. */
export function canonical(v: JsonValue): string {
  const c = (x: JsonValue): string => {
    if (Array.isArray(x)) return '[' + x.map(c).join(',') + ']';
    if (x !== null && typeof x === 'object') {
      return '{' + Object.keys(x).sort().map((k) => JSON.stringify(k) + ':' + c(x[k])).join(',') + '}';
    }
    // -0 and 0 are the same amount.
    return typeof x === 'number' && x === 0 ? '0' : JSON.stringify(x);
  };
  return c(dropNulls(v));
}

/**
 * Leaves as "path=value": objects by key, arrays by index; an empty object/array is itself a leaf
 * (so {} vs {"a":1} is not a perfect match). Keys are JSON-quoted so paths cannot collide.
 */
export function flattenLeaves(v: JsonValue, path = '$', out: string[] = []): string[] {
  if (Array.isArray(v)) {
    if (v.length === 0) out.push(path + '=[]');
    v.forEach((x, i) => flattenLeaves(x, `${path}[${i}]`, out));
  } else if (v !== null && typeof v === 'object') {
    const keys = Object.keys(v).filter((k) => v[k] !== null);
    if (keys.length === 0) out.push(path + '={}');
    for (const k of keys) flattenLeaves(v[k], path + '.' + JSON.stringify(k), out);
  } else {
    out.push(path + '=' + canonical(v));
  }
  return out;
}

/** Multiset F1 between two leaf lists; two empty lists agree perfectly. */
export function leafF1(pred: readonly string[], real: readonly string[]): number {
  if (pred.length === 0 && real.length === 0) return 1;
  const counts = new Map<string, number>();
  for (const s of real) counts.set(s, (counts.get(s) ?? 0) + 1);
  let hit = 0;
  for (const s of pred) {
    const n = counts.get(s) ?? 0;
    if (n > 0) {
      hit++;
      counts.set(s, n - 1);
    }
  }
  if (hit === 0) return 0;
  const p = hit / pred.length;
  const r = hit / real.length;
  return (2 * p * r) / (p + r);
}

export function compareObservations(rehearsed: Observation, real: Observation): StepFidelity {
  const a = observationJson(rehearsed);
  const b = observationJson(real);
  return {
    exact: canonical(a) === canonical(b),
    f1: leafF1(flattenLeaves(a), flattenLeaves(b)),
    errorAgree: rehearsed.ok === real.ok,
    rehearsedError: !rehearsed.ok,
    realError: !real.ok,
  };
}

export interface FidelitySummary {
  steps: number;
  exact: number; // fraction of steps
  f1: number; // mean
  errorAgree: number; // fraction
  /** Confusion of error flags: [rehearsed error & real error, rehearsed error only, real error only, neither]. */
  errors: { both: number; rehearsedOnly: number; realOnly: number; neither: number };
}

/** Aggregates steps (of one rollout, one training step or a whole run): means over steps. */
export function summarizeFidelity(steps: readonly StepFidelity[]): FidelitySummary {
  const n = steps.length;
  const mean = (f: (s: StepFidelity) => number) => (n === 0 ? NaN : steps.reduce((t, s) => t + f(s), 0) / n);
  const count = (f: (s: StepFidelity) => boolean) => steps.filter(f).length;
  return {
    steps: n,
    exact: mean((s) => (s.exact ? 1 : 0)),
    f1: mean((s) => s.f1),
    errorAgree: mean((s) => (s.errorAgree ? 1 : 0)),
    errors: {
      both: count((s) => s.rehearsedError && s.realError),
      rehearsedOnly: count((s) => s.rehearsedError && !s.realError),
      realOnly: count((s) => !s.rehearsedError && s.realError),
      neither: count((s) => !s.rehearsedError && !s.realError),
    },
  };
}
