import { describe, expect, it } from 'vitest';
import { canonical, compareObservations, flattenLeaves, leafF1, summarizeFidelity } from '../../src/rollout/fidelity';
import type { Observation } from '../../src/env/domain';
import type { JsonValue } from '../../src/rollout/fidelity';

const ok = (result: JsonValue): Observation => ({ ok: true, name: 'get_order_details', result });
const fail = (error: string): Observation => ({ ok: false, name: 'get_order_details', error, code: 'tool' });

const order = {
  order_id: '#W1',
  status: 'pending',
  items: [
    { item_id: '1', price: 10.5 },
    { item_id: '2', price: 3 },
  ],
  cancel_reason: null,
};

describe('fidelity', () => {
  it('exact match is canonical: key order and null-valued keys do not matter', () => {
    const reordered = { items: [{ price: 10.5, item_id: '1' }, { price: 3, item_id: '2' }], status: 'pending', order_id: '#W1' };
    expect(canonical(order)).toBe(canonical(reordered));
    const s = compareObservations(ok(reordered), ok(order));
    expect(s).toEqual({ exact: true, f1: 1, errorAgree: true, rehearsedError: false, realError: false });
    // Array order does matter (items are positional).
    expect(compareObservations(ok({ ...order, items: [order.items[1], order.items[0]] }), ok(order)).exact).toBe(false);
  });

  it('field-level F1 on hand-worked records', () => {
    // Real leaves: order_id, status, items[0].item_id, items[0].price, items[1].item_id, items[1].price = 6.
    expect(flattenLeaves(order)).toHaveLength(6);
    // One wrong value (status) and one missing leaf (items[1].price): pred has 5 leaves, 4 right.
    const pred: JsonValue = { order_id: '#W1', status: 'cancelled', items: [{ item_id: '1', price: 10.5 }, { item_id: '2' }] };
    const p = 4 / 5;
    const r = 4 / 6;
    const s = compareObservations(ok(pred), ok(order));
    expect(s.exact).toBe(false);
    expect(s.f1).toBeCloseTo((2 * p * r) / (p + r), 12);
    // Strings and numbers: "3" is not 3.
    expect(leafF1(flattenLeaves({ a: '3' }), flattenLeaves({ a: 3 }))).toBe(0);
    // Multiset: a repeated leaf counts once per occurrence.
    expect(leafF1(['x', 'x'], ['x'])).toBeCloseTo((2 * 0.5 * 1) / 1.5, 12);
    expect(leafF1([], [])).toBe(1);
    // Empty containers are leaves.
    expect(leafF1(flattenLeaves({}), flattenLeaves({ a: 1 }))).toBe(0);
  });

  it('error/no-error agreement', () => {
    const same = compareObservations(fail('Order not found'), fail('Order not found'));
    expect(same).toEqual({ exact: true, f1: 1, errorAgree: true, rehearsedError: true, realError: true });
    const otherMsg = compareObservations(fail('User not found'), fail('Order not found'));
    expect([otherMsg.exact, otherMsg.f1, otherMsg.errorAgree]).toEqual([false, 0, true]);
    const missed = compareObservations(ok(order), fail('Order not found'));
    expect([missed.exact, missed.f1, missed.errorAgree, missed.realError]).toEqual([false, 0, false, true]);
    expect(compareObservations(ok('yusuf_rossi_9620'), ok('yusuf_rossi_9620')).exact).toBe(true);
  });

  it('aggregates per step and per run', () => {
    const steps = [
      compareObservations(ok(order), ok(order)), // exact
      compareObservations(fail('x'), ok(order)), // rehearsed error only
      compareObservations(ok({ a: 1, b: 2 }), ok({ a: 1, b: 3 })), // f1 0.5
      compareObservations(fail('Order not found'), fail('Order not found')), // both errors, exact
    ];
    const s = summarizeFidelity(steps);
    expect(s.steps).toBe(4);
    expect(s.exact).toBe(0.5);
    expect(s.f1).toBeCloseTo((1 + 0 + 0.5 + 1) / 4, 12);
    expect(s.errorAgree).toBe(0.75);
    expect(s.errors).toEqual({ both: 1, rehearsedOnly: 1, realOnly: 0, neither: 2 });
    expect(Number.isNaN(summarizeFidelity([]).exact)).toBe(true);
  });
});
