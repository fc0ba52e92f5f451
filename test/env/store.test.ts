// The store: canonical hashing (independent of key order, sensitive to any value), copy-on-write episodes
// (reset / snapshot / restore), changed-record reporting, and loading with the source order of variants.

import { describe, expect, it } from 'vitest';
import { retailDomain } from '../../src/env/retail/index';
import { retailBaseFromUrl } from '../../src/env/retail/browser';
import { retailBase } from '../../src/env/retail/types';
import { compactJson } from '../../src/env/json';
import { BaseData, Store } from '../../src/env/store';
import { base, expectOk, fresh } from './helpers';

function reversedKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(reversedKeys);
  if (v && typeof v === 'object') return Object.fromEntries(Object.keys(v).reverse().map((k) => [k, reversedKeys((v as Record<string, unknown>)[k])]));
  return v;
}

describe('store', () => {
  const data = { t: { a: { x: 1, y: [1, 2], z: { p: 'q' } }, b: { x: 2 } }, u: { c: { n: null } } };

  it('hashes canonically: key order does not matter, values do', () => {
    const s1 = new Store(new BaseData(structuredClone(data)));
    const s2 = new Store(new BaseData(reversedKeys(structuredClone(data)) as typeof data));
    expect(s1.hash()).toBe(s2.hash());
    const changed = structuredClone(data);
    changed.t.a.y = [2, 1];
    expect(new Store(new BaseData(changed)).hash()).not.toBe(s1.hash());
    const moved = { t: { a: data.t.a }, u: { ...data.u, b: data.t.b } };
    expect(new Store(new BaseData(structuredClone(moved) as never)).hash()).not.toBe(s1.hash());
  });

  it('commits transactions, reports changed records, and resets/restores in O(changes)', () => {
    const s = new Store(new BaseData(structuredClone(data)));
    const h0 = s.hash();
    s.transaction((tx) => tx.put('t', 'b', { x: 3 }));
    const h1 = s.hash();
    expect(h1).not.toBe(h0);
    expect(s.changed()).toEqual({ t: { b: { x: 3 } }, u: {} });
    const snap = s.snapshot();
    s.transaction((tx) => tx.put('t', 'b', { x: 2 })); // back to the base value: not "changed"
    expect(s.changed()).toEqual({ t: {}, u: {} });
    expect(s.hash()).toBe(h0);
    s.restore(snap);
    expect(s.hash()).toBe(h1);
    s.reset();
    expect(s.hash()).toBe(h0);
    expect(() => s.transaction((tx) => tx.put('t', 'nope', {}))).toThrow(/no record/);
    expect(() => s.transaction((tx) => { tx.put('t', 'a', { x: 9 }); throw new Error('x'); })).toThrow();
    expect(s.hash()).toBe(h0);
  });

  it('records are frozen: a caller cannot corrupt the database through a result', () => {
    const env = fresh();
    const h = env.hash();
    const o = expectOk<{ status: string; items: { price: number }[] }>(env, 'get_order_details', { order_id: '#W2378156' });
    expect(() => { o.status = 'cancelled'; }).toThrow();
    expect(() => { o.items[0].price = 0; }).toThrow();
    expect(env.hash()).toBe(h);
  });

  it('environments over one base are independent', () => {
    const a = fresh();
    const b = fresh();
    expectOk(a, 'cancel_pending_order', { order_id: '#W9373487', reason: 'no longer needed' });
    expect(a.hash()).not.toBe(b.hash());
    expect(expectOk<{ status: string }>(b, 'get_order_details', { order_id: '#W9373487' }).status).toBe('pending');
  });
});

describe('retail db loading', () => {
  const text = '{"products": {"9": {"name": "Pen", "product_id": "9", "variants": {"30": {"item_id": "30", "options": {}, "available": true, "price": 1.0}, "10": {"item_id": "10", "options": {}, "available": false, "price": 2.5}}}}, "users": {}, "orders": {}}';

  it('keeps the source order of integer-like variant keys (JS would put "10" first)', async () => {
    const b = await retailBaseFromUrl('data:application/json,' + encodeURIComponent(text));
    const p = b.tables.get('products')!.get('9')!;
    expect(compactJson(p)).toBe('{"name":"Pen","product_id":"9","variants":{"30":{"item_id":"30","options":{},"available":true,"price":1},"10":{"item_id":"10","options":{},"available":false,"price":2.5}}}');
    expect(compactJson(retailBase(JSON.parse(text)).tables.get('products')!.get('9'))).toMatch(/"variants":\{"10"/);
  });

  it('rejects malformed databases with a typed error', async () => {
    expect(() => retailBase(null)).toThrow(/not a JSON object/);
    expect(() => retailBase({ products: {}, users: [] })).toThrow(/"users"/);
    expect(() => retailBase({ products: {}, users: {}, orders: { '#W1': { status: 3 } } })).toThrow(/#W1 is malformed/);
    await expect(retailBaseFromUrl('data:application/json,{')).rejects.toThrow(/not valid JSON/);
  });

  it('the domain object wires tools, rewards and the judge', () => {
    const d = retailDomain(base);
    expect(d.definitions().map((t) => t.function.name)).toHaveLength(15);
    expect(d.definitions()[0]).toMatchObject({ type: 'function', function: { parameters: { type: 'object', additionalProperties: false } } });
    const [t] = d.tasks.generate({ split: 'train', count: 1, seed: 2 });
    const r = d.expert(t, d.createEnv());
    expect(d.realReward(t, r.steps)).toBe(1);
    expect(d.judge(t, r.steps)).toBe(1);
    expect(d.judge(t, r.steps.slice(0, -1))).toBeLessThan(1);
  });
});
