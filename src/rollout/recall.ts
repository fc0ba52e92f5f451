// Rehearsal with recall: where the task's reference trajectory already holds the real answer to a rehearsed
// call, the simulator recalls it instead of imagining it (a Dyna model that is part table, part policy).
//
// The reference actions and their real observations are data a training task comes with (the checklist judge
// scores against them and every Rehearse prompt is grounded in them): recalling one spends no real interaction.
// The 1.3 M-parameter policy cannot copy a 300-token order from its grounding (issue 46: a reference call's
// own example in the prompt leaves exact fidelity at 61 %), so the copy is made here, and only where it is
// exact: the same tool, the same arguments, and the world in the state the reference was in when it made
// that call — the same writes attempted before it, as a multiset. Any other call is rehearsed by the policy.
import type { GroundingExample, Observation, ToolCall } from '../env/domain';
import { callKey, deserializeObservation } from '../env/toolcall';

import { REHEARSAL_RECALLS } from '../method/run-config';

export { REHEARSAL_RECALLS };
export type RehearsalRecall = (typeof REHEARSAL_RECALLS)[number];

const writesKey = (calls: readonly ToolCall[], isWrite: (name: string) => boolean) =>
  calls.filter((c) => isWrite(c.name)).map(callKey).sort().join('\u0001');

/**
 * The real observation of `call` from the reference trajectory, or null when the reference holds none that
 * is certain to be the real answer. `grounding` is the reference actions replayed in order on a fresh
 * database (rollout.ts referenceGrounding); `before` is every call the episode made before this one, in order
 * (malformed ones excluded).
 */
export function recallObservation(
  grounding: readonly GroundingExample[],
  before: readonly ToolCall[],
  call: ToolCall,
  isWrite: (name: string) => boolean,
): Observation | null {
  const key = callKey(call);
  const made = writesKey(before, isWrite);
  for (let j = 0; j < grounding.length; j++) {
    const g = grounding[j];
    if (callKey(g) !== key) continue;
    if (writesKey(grounding.slice(0, j), isWrite) !== made) continue;
    return deserializeObservation(g.result, g.name);
  }
  return null;
}
