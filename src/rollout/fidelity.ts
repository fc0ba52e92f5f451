// Rehearsal fidelity (the measurement the paper does not make): how well a rehearsed
// observation ô_t agrees with the real o_t for the same call on the same state.
// - exact: canonical JSON equality (src/method/observation-fields.ts: keys sorted, null-valued keys dropped).
// - f1: field-level F1 over the flattened leaves, each leaf a "path=value" string (multiset), so a
//   record right in 9 of 10 fields scores 0.9, not 0. The flattening lives in the method layer, where the
//   page's observation view reads the same fields.
// - errorAgree: both are errors or both are not.
import type { Observation } from '../env/domain';
import { canonical, flattenLeaves, leafF1, type JsonValue } from '../method/observation-fields';

export { canonical, flattenLeaves, leafF1, type JsonValue };

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
