// A ladder of task tiers over the generator's families, so that evaluation can say *how far* a policy gets:
//   tier 1: read-only: identify the user, one or two lookups, and a reply that states a fact or a refusal;
//   tier 2: one write after identifying the user and reading the order (or profile);
//   tier 3: multi-step: item ids matched by options (exchange, modify items) and two-intent requests.
import type { Family } from './intent';

export type Tier = 1 | 2 | 3;
export const TIERS: readonly Tier[] = [1, 2, 3];

export const FAMILY_TIER: Readonly<Record<Family, Tier>> = {
  status: 1,
  product_price: 1,
  order_total: 1,
  transfer: 1,
  unknown_order: 1,
  refuse_other_user: 1,
  refuse_cancel_status: 1,
  refuse_cancel_reason: 1,
  refuse_return_status: 1,
  cancel: 2,
  return: 2,
  order_address: 2,
  order_payment: 2,
  user_address: 2,
  exchange: 3,
  modify_items: 3,
  multi: 3,
};

/** The tier of a task's family; tasks without a known family (e.g. imported τ² tasks) have none. */
export function familyTier(family: string | undefined): Tier | null {
  return family !== undefined && Object.hasOwn(FAMILY_TIER, family) ? FAMILY_TIER[family as Family] : null;
}
