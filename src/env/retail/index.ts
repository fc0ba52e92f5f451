// The retail domain (τ²-bench retail, June 2025 release), assembled from its parts into the generic
// Domain contract of src/env/domain.ts.

import type { Domain } from '../domain';
import { toolDefinitions } from '../domain';
import { Environment } from '../env';
import { judge } from '../judge';
import { realReward } from '../reward';
import type { BaseData } from '../store';
import { CANCEL_REASONS, RETAIL_WRITE_TOOLS } from './tools';
import { runRetailExpert } from './expert';
import { runRetailExpertConversation } from './expert-conversation';
import { retailUser } from './user';
import { retailUserInstructions } from './instructions';
import { retailConfirmationOptions } from './confirm-details';
import { RetailTaskGenerator } from './generator';
import { WORLDS, worldBase, type WorldName } from './worlds';
import type { RetailTask } from './intent';
import { RETAIL_TOOLS } from './tools';
import { RETAIL_FLOAT_KEYS, type Product } from './types';

export { RETAIL_TOOLS, RETAIL_WRITE_TOOLS } from './tools';
export { RETAIL_FLOAT_KEYS, retailBase } from './types';
export type { RetailTask, RetailIntent, Request, Family } from './intent';
export { intentSplit, userSplit, type HeldOut } from './generator';
export { CONVERSATION_POLICY, isWorldName, WORLD_NAMES, WORLDS, worldBase, worldSummary, worldUserIds, type WorldName, type WorldSpec } from './worlds';
export { FAMILY_TIER, familyTier, TIERS, type Tier } from './tiers';
export { retailUser, ScriptedRetailUser, type RetailUserMeaning } from './user';
export { runRetailExpertConversation, type ConversationOptions, type ConversationResult } from './expert-conversation';
export { renderInstructions, retailUserInstructions, tau2TaskJson, type Tau2Instructions } from './instructions';
export { retailConfirmationDetails, retailConfirmationOptions } from './confirm-details';
export { PROFILE_RATES, userProfile, type UserProfile } from './user-profile';

/** A factory of fresh retail environments over one shared base. */
export function retailEnvFactory(base: BaseData): () => Environment {
  return () => new Environment(base, RETAIL_TOOLS);
}

/** The agent policy, condensed for a small model's system prompt. */
export const RETAIL_POLICY = [
  'You are a retail customer-service agent. Use the tools; never invent information.',
  'First authenticate the user: find their user id by email, or by first name, last name and zip.',
  'Help only that user, with their own orders and profile. Check an order\'s status before acting on it.',
  'Order ids start with "#W". Cancel only pending orders, and only for "no longer needed" or "ordered by mistake".',
  'Modify (address, payment, items) only pending orders; items only once, to available variants of the same product.',
  'Return or exchange only delivered orders; refunds go to the original payment method or a gift card.',
  'A gift card must cover what it pays. Refuse requests the rules forbid and say why.',
  'Each turn is one tool call or one reply; the reply ends the conversation and must state the outcome.',
].join('\n');

/**
 * Argument canonicalisation for the judge: return and exchange store their id lists sorted, so the order a
 * call lists them in does not change the outcome; item modification keeps its order (it matters there).
 */
export function retailNormaliseArgs(name: string, args: Record<string, unknown>): Record<string, unknown> {
  const sortList = (v: unknown) => (Array.isArray(v) ? [...v].map(String).sort() : v);
  if (name === 'return_delivered_order_items') return { ...args, item_ids: sortList(args.item_ids) };
  if (name === 'exchange_delivered_order_items') {
    return { ...args, item_ids: sortList(args.item_ids), new_item_ids: sortList(args.new_item_ids) };
  }
  return args;
}

/**
 * The retail domain over a database. `world` names it and sets what the test split holds out (users in the
 * full world, tasks in a compact one); the database passed in is used as it is (see worldDomain for the
 * world's own subset).
 */
export function retailDomain(base: BaseData, world: WorldName = 'retail'): Domain<RetailTask> {
  const heldOut = WORLDS[world].heldOut;
  const gens = { train: new RetailTaskGenerator(base, 'train', heldOut), test: new RetailTaskGenerator(base, 'test', heldOut) };
  const fresh = retailEnvFactory(base);
  const isWrite = (n: string) => RETAIL_WRITE_TOOLS.has(n);
  return {
    name: world,
    policy: RETAIL_POLICY,
    tools: RETAIL_TOOLS,
    definitions: () => toolDefinitions(RETAIL_TOOLS),
    createEnv: fresh,
    tasks: { generate: ({ split, count, seed = 0 }) => gens[split].generate(seed, count) },
    expert: (task, env, opts) => runRetailExpert(task, env, opts),
    expertConversation: (task, env, opts) => runRetailExpertConversation(task, env, opts),
    user: (task, opts) => retailUser(task, opts),
    userInstructions: (task, opts) => retailUserInstructions(task, opts?.seed ?? 0),
    confirmation: retailConfirmationOptions(base),
    normaliseArgs: retailNormaliseArgs,
    statedValues: () => retailStatedValues(base),
    floatKeys: RETAIL_FLOAT_KEYS,
    realReward: (task, steps, opts) => realReward(fresh, task, steps, opts).reward,
    judge: (task, steps) => judge(task.checklist, steps, { isWrite, normaliseArgs: retailNormaliseArgs }).reward,
  };
}

/**
 * What a user names in words and a call or a record must match: the cancellation reasons, and every
 * product name and option value of the world's catalogue (sorted, without duplicates).
 */
export function retailStatedValues(base: BaseData): string[] {
  const out = new Set<string>(CANCEL_REASONS);
  for (const p of base.tables.get('products')!.values() as Iterable<unknown>) {
    const product = p as Product;
    out.add(product.name);
    for (const v of Object.values(product.variants)) for (const o of Object.values(v.options)) out.add(o);
  }
  return [...out].sort();
}

/** The domain of a named world, built from the full retail database (the compact world is its subset). */
export function worldDomain(world: WorldName, full: BaseData): Domain<RetailTask> {
  return retailDomain(worldBase(full, WORLDS[world]), world);
}
