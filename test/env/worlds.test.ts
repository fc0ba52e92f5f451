// The compact world ('mini'): a seeded subset of the real database served by the same retail domain, whose
// test split holds out intents (not users); the full world is untouched by the option.

import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../../src/env/json';
import { familyTier, intentSplit, retailDomain, WORLDS, worldBase, worldDomain, worldSummary, worldUserIds } from '../../src/env/retail/index';
import { FAMILY_WEIGHTS } from '../../src/env/retail/generator';
import type { Family } from '../../src/env/retail/intent';
import { realReward } from '../../src/env/reward';
import { base } from './helpers';

const mini = worldDomain('mini', base);
const miniBase = worldBase(base, WORLDS.mini);
const train = mini.tasks.generate({ split: 'train', count: 600, seed: 3 });
const test = mini.tasks.generate({ split: 'test', count: 100, seed: 1 });
const key = (t: { family: string; intent: unknown }) => t.family + canonicalJson(t.intent);

describe('compact world', () => {
  it('is a fixed subset: the drawn users, all their orders, the products of those orders, as the same records', () => {
    const s = worldSummary(miniBase);
    expect(s.users).toBe(WORLDS.mini.users);
    expect(worldUserIds(base, WORLDS.mini)).toEqual(worldUserIds(base, WORLDS.mini));
    for (const [table, recs] of miniBase.tables) for (const [id, r] of recs) expect(r).toBe(base.tables.get(table)!.get(id));
    const orders = miniBase.tables.get('orders')!;
    for (const u of miniBase.tables.get('users')!.values()) for (const o of (u as { orders: string[] }).orders) expect(orders.has(o)).toBe(true);
    for (const o of orders.values()) for (const it of (o as { items: { product_id: string }[] }).items) expect(miniBase.tables.get('products')!.has(it.product_id)).toBe(true);
    // Small enough to learn: the greedy draw keeps the catalogue well below the full 50 products.
    expect(s.products).toBeLessThanOrEqual(25);
    expect(worldSummary(worldBase(base, WORLDS.retail))).toEqual(worldSummary(base));
  });

  it('holds out intents: no test task has the intent of a train task, and test tasks are distinct', () => {
    const trainKeys = new Set(train.map(key));
    expect(test.filter((t) => trainKeys.has(key(t)))).toEqual([]);
    expect(new Set(test.map(key)).size).toBe(test.length);
    for (const t of test) expect(intentSplit(t.family, t.intent)).toBe('test');
    for (const t of train) expect(intentSplit(t.family, t.intent)).toBe('train');
  });

  it('uses only its own users, in both splits', () => {
    const users = miniBase.tables.get('users')!;
    const orders = miniBase.tables.get('orders')!;
    for (const t of [...train, ...test]) {
      for (const a of t.referenceActions) {
        const args = a.arguments as Record<string, unknown>;
        if (typeof args.user_id === 'string') expect(users.has(args.user_id)).toBe(true);
        if (typeof args.order_id === 'string' && t.family !== 'unknown_order') expect(orders.has(args.order_id)).toBe(true);
      }
    }
  });

  it('the scripted expert solves every task of both splits in the world', () => {
    for (const t of [...train.slice(0, 200), ...test]) {
      const r = mini.expert(t, mini.createEnv(), { mistakeRate: 0.3, seed: 2 });
      expect(realReward(mini.createEnv, t, r.steps).reward, t.id).toBe(1);
    }
  });

  it('every family has a tier, and the held-out set covers all three tiers', () => {
    for (const f of Object.keys(FAMILY_WEIGHTS) as Family[]) expect(familyTier(f)).not.toBeNull();
    expect(new Set(test.map((t) => familyTier(t.family)))).toEqual(new Set([1, 2, 3]));
    expect(familyTier('not-a-family')).toBeNull();
  });

  it('the full world keeps held-out users and its domain name', () => {
    expect(retailDomain(base).name).toBe('retail');
    expect(mini.name).toBe('mini');
    expect(worldDomain('retail', base).tasks.generate({ split: 'test', count: 5, seed: 1 })).toEqual(retailDomain(base).tasks.generate({ split: 'test', count: 5, seed: 1 }));
  });
});
