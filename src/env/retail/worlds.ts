// The retail worlds: the full τ²-retail database ('retail') and a compact, seeded subset of it ('mini'),
// served by the same tools, schemas, policy, expert, judge and reward (one implementation: a world is a
// database plus a rule for what the test split holds out).
//
// Why a compact world: a policy small enough to train in a browser learns what it sees often. In the full
// database each user, order and item appears a handful of times in any training set; in 'mini' every user
// and order recurs hundreds of times, so the Act role can learn to use them and the Rehearse role can learn
// the database itself (what world rehearsal claims a policy internalises). Its test split holds out
// *tasks* (intents never trained on), not users: see HeldOut in generator.ts.

import { canonicalJson, hash64 } from '../json';
import { BaseData } from '../store';
import type { HeldOut } from './generator';
import type { Order } from './types';

export type WorldName = 'mini' | 'retail';
export const WORLD_NAMES: readonly WorldName[] = ['mini', 'retail'];

export interface WorldSpec {
  name: WorldName;
  /** One line for pickers and logs. */
  description: string;
  /** How many users the world keeps ('all': the whole database). */
  users: number | 'all';
  /** Seed of the user draw (a fixed constant: the world is part of the bundled policy's definition). */
  seed: number;
  /** Users with fewer orders are not drawn (a user without orders can only ask about products). */
  minOrders: number;
  heldOut: HeldOut;
  /** The folder under models/ of the bundled policy trained on this world (its model card says how). */
  bundledModel: string;
  /**
   * Other policies bundled for this world's lessons, opt-in starting points (name -> folder under models/): the lab
   * loads one by name (?model=NAME), a CLI by its folder.
   */
  lessonPolicies?: Readonly<Record<string, string>>;
}

/**
 * The lesson policy trained to hold conversations with the scripted τ² user (issue 47): the lab plays its world with
 * that user when it is loaded, and its card is a conversation card (research/pretrain/card-conversation.ts).
 */
export const CONVERSATION_POLICY = 'conversation';

export const WORLDS: Readonly<Record<WorldName, WorldSpec>> = {
  mini: {
    name: 'mini',
    description: 'compact retail: 16 real users, their 35 orders and the 20 products those orders touch; held-out tasks',
    users: 16,
    seed: 0,
    minOrders: 2,
    heldOut: 'tasks',
    bundledModel: 'default',
    // The policy made careless on purpose (it leaves out what a lookup found): the real-environment lesson, GRPO
    // unlearning a habit it can find in its own samples (docs/lesson.md). Bundled as the default until 2026-12-05.
    // The conversation policy: the mini line trained on conversations with the scripted τ² user (issue 47; its card
    // models/conversation/README.md). Loading it steps rollouts with that user.
    lessonPolicies: { careless: 'careless', [CONVERSATION_POLICY]: 'conversation' },
  },
  retail: {
    name: 'retail',
    description: 'full τ²-bench retail: 500 users, 1,000 orders, 50 products; held-out users',
    users: 'all',
    seed: 0,
    minOrders: 0,
    heldOut: 'users',
    bundledModel: 'retail',
    // The retail line trained on conversations with the scripted τ² user, grown to 8 layers (issue 47; its card
    // models/conversation-retail/README.md). Loading it steps rollouts with that user.
    lessonPolicies: { [CONVERSATION_POLICY]: 'conversation-retail' },
  },
};

/** The folder under models/ of a world's bundled policy, or of one of its lesson policies by name. */
export function bundledFolder(world: WorldName, policy?: string): string {
  if (policy === undefined) return WORLDS[world].bundledModel;
  const f = WORLDS[world].lessonPolicies?.[policy];
  if (f === undefined) throw new Error(`the ${world} world bundles no policy named ${JSON.stringify(policy)} (it has: ${Object.keys(WORLDS[world].lessonPolicies ?? {}).join(', ') || 'none'})`);
  return f;
}

export function isWorldName(x: unknown): x is WorldName {
  return typeof x === 'string' && (WORLD_NAMES as readonly string[]).includes(x);
}

/**
 * The user ids a world keeps, in draw order. Candidates (users with enough orders) are ranked by a seeded
 * hash of their id; the first one starts the world, and each next user is the candidate whose orders add
 * the fewest products not yet in the world (ties: the better rank). A small catalogue is what makes the
 * world learnable: a product's record is the longest observation (~1,800 characters), and every product an
 * order touches comes with it.
 */
export function worldUserIds(full: BaseData, spec: WorldSpec): string[] {
  const users = full.tables.get('users')!;
  const orders = full.tables.get('orders')!;
  const ordersOf = (id: string) => (users.get(id) as { orders?: string[] }).orders ?? [];
  const ids = full.order.get('users')!.filter((id) => ordersOf(id).length >= spec.minOrders);
  if (spec.users === 'all') return ids;
  const ranked = ids
    .map((id) => ({ id, r: hash64(`${spec.seed}\u0000${id}`) }))
    .sort((a, b) => (a.r < b.r ? -1 : a.r > b.r ? 1 : 0))
    .map((x) => x.id);
  const productsOf = new Map<string, string[]>();
  for (const id of ranked) {
    const ps = ordersOf(id).flatMap((o) => ((orders.get(o) as unknown as Order | undefined)?.items ?? []).map((it) => it.product_id));
    productsOf.set(id, [...new Set(ps)]);
  }
  const chosen: string[] = [];
  const left = new Set(ranked);
  const have = new Set<string>();
  while (chosen.length < spec.users && left.size > 0) {
    let best = '';
    let bestNew = Infinity;
    for (const id of ranked) {
      if (!left.has(id)) continue;
      const n = productsOf.get(id)!.filter((p) => !have.has(p)).length;
      if (n < bestNew) [best, bestNew] = [id, n];
    }
    chosen.push(best);
    left.delete(best);
    for (const p of productsOf.get(best)!) have.add(p);
  }
  return chosen;
}

/**
 * The world's database: the drawn users, every order of theirs, and every product those orders contain
 * (all of its variants, so exchanges and modifications have their real choices). Records are the full base's
 * own frozen objects, in the full base's order, so observations are byte-identical to the full world's.
 */
export function worldBase(full: BaseData, spec: WorldSpec): BaseData {
  if (spec.users === 'all') return full;
  const keepUsers = new Set(worldUserIds(full, spec));
  if (keepUsers.size < spec.users) throw new Error(`world ${spec.name}: only ${keepUsers.size} users with >= ${spec.minOrders} orders`);
  const users = full.tables.get('users')!;
  const orders = full.tables.get('orders')!;
  const keepOrders = new Set<string>();
  for (const id of keepUsers) for (const o of (users.get(id) as { orders: string[] }).orders) if (orders.has(o)) keepOrders.add(o);
  const keepProducts = new Set<string>();
  for (const id of keepOrders) for (const it of (orders.get(id) as unknown as Order).items) keepProducts.add(it.product_id);
  const pick = (table: string, keep: Set<string>) => {
    const out: Record<string, Record<string, unknown>> = {};
    for (const id of full.order.get(table)!) if (keep.has(id)) out[id] = full.tables.get(table)!.get(id) as Record<string, unknown>;
    return out;
  };
  return new BaseData({ products: pick('products', keepProducts), users: pick('users', keepUsers), orders: pick('orders', keepOrders) });
}

/** Sizes and a fingerprint of a world's database, for cards and logs. */
export function worldSummary(base: BaseData): { users: number; orders: number; products: number; items: number; fingerprint: string } {
  const products = [...base.tables.get('products')!.values()] as { variants: Record<string, unknown> }[];
  return {
    users: base.tables.get('users')!.size,
    orders: base.tables.get('orders')!.size,
    products: products.length,
    items: products.reduce((a, p) => a + Object.keys(p.variants).length, 0),
    fingerprint: hash64(canonicalJson(base.tableNames.map((t) => [t, base.order.get(t)]))).slice(0, 12),
  };
}
