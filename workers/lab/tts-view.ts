// An imagined attempt of private rehearsal as the page compares it: each call's rehearsed observation beside
// what the attempt's hidden shadow environment answered for the same call (the fidelity record the rollout
// already keeps), so the private-rehearsal panel shows the same field-by-field view as the stepper.
import type { Step } from '../../src/env/domain';
import { serializeObservation } from '../../src/env/toolcall';
import type { FidelityRecord } from '../../src/rollout/episode';
import type { RehearsedCallView } from '../../src/worker-protocol';

export const callText = (c: { name: string; arguments: unknown }) => `${c.name}(${JSON.stringify(c.arguments)})`;

/** Per step, its call beside the real answer (null: a reply, or a call without a rehearsal record). */
export function rehearsedCalls(r: { steps: readonly Step[]; fidelity: readonly FidelityRecord[] }): (RehearsedCallView | null)[] {
  // The records come in step order; a step's own call object is its record's (episode.ts keeps one object per call).
  let k = 0;
  return r.steps.map((s) => {
    if (s.kind !== 'call') return null;
    const i = r.fidelity.findIndex((f, j) => j >= k && f.call === s.call);
    if (i < 0) return null;
    k = i + 1;
    const f = r.fidelity[i];
    return { call: callText(s.call), rehearsed: serializeObservation(f.rehearsed), real: serializeObservation(f.real) };
  });
}
