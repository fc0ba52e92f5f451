// What belongs to the world the lab serves. Switching worlds must not leave the other world's results on the page
// (a rollout, a group, a private rehearsal, token budgets measured on its data, the previous model's output), nor
// show a budget measured in one world while the lab serves another. Pure, so the unit tests and the page share it.
import type { BudgetInfo, WorldName } from '../worker-protocol';

/** The lab state's fields that hold one world's results. */
export const WORLD_OWNED = ['rollout', 'group', 'tts', 'budget', 'tried'] as const;
export type WorldOwned = (typeof WORLD_OWNED)[number];

/** Empties every world-owned field of the lab's state (the training run stays: it says which world it trains in). */
export function clearWorldOwned(state: { [K in WorldOwned]: unknown }): void {
  for (const k of WORLD_OWNED) state[k] = null;
}

/** The budgets to show: only those measured in the world served now (a reload measures them again). */
export function budgetOf(b: BudgetInfo | null, world: WorldName | undefined): BudgetInfo | null {
  return b && world && b.world === world ? b : null;
}
