// Write tools: success paths (state changes as upstream's, with the release's quirks)
// and every error condition, each checked to leave the database unchanged.

import { describe, expect, it } from 'vitest';
import type { Order, User } from '../../src/env/retail/types';
import { expectError, expectOk, findOrder, fresh, productOf, userOf as userOfOrder } from './helpers';

const ADDR = { address1: '1 Main St', address2: 'Apt 2', city: 'Austin', state: 'TX', country: 'USA', zip: '73301' };
const user = (env: ReturnType<typeof fresh>, id: string) => expectOk<User>(env, 'get_user_details', { user_id: id });
const order = (env: ReturnType<typeof fresh>, id: string) => expectOk<Order>(env, 'get_order_details', { order_id: id });
const balance = (u: User, pm: string) => (u.payment_methods[pm] as { balance: number }).balance;

const delivered = findOrder((o) => o.status === 'delivered');
const processed = findOrder((o) => o.status === 'processed');
const creditPending = findOrder((o, u) => o.status === 'pending' && o.payment_history[0].payment_method_id.startsWith('credit_card') && Object.keys(u.payment_methods).some((k) => k.startsWith('gift_card')));

describe('cancel_pending_order', () => {
  it('cancels and refunds a gift card at once (task 30)', () => {
    const env = fresh();
    const o = expectOk<Order>(env, 'cancel_pending_order', { order_id: '#W9373487', reason: 'no longer needed' });
    expect(o.status).toBe('cancelled');
    expect(o.cancel_reason).toBe('no longer needed');
    expect(o.payment_history).toEqual([
      { transaction_type: 'payment', amount: 109.27, payment_method_id: 'gift_card_7711863' },
      { transaction_type: 'refund', amount: 109.27, payment_method_id: 'gift_card_7711863' },
    ]);
    expect(balance(user(env, 'olivia_lopez_3865'), 'gift_card_7711863')).toBe(153.27);
  });
  it('refunds every history entry after a payment change (release quirk)', () => {
    const env = fresh();
    expectOk(env, 'modify_pending_order_payment', { order_id: '#W6779827', payment_method_id: 'credit_card_9789590' });
    const o = expectOk<Order>(env, 'cancel_pending_order', { order_id: '#W6779827', reason: 'ordered by mistake' });
    expect(o.payment_history.map((p) => p.transaction_type)).toEqual(['payment', 'payment', 'refund', 'refund', 'refund', 'refund']);
    // 49 + 4079.45 (refund on change) + 4079.45 (payment refunded) + 4079.45 (refund refunded)
    expect(balance(user(env, 'ethan_lopez_6291'), 'gift_card_7219486')).toBeCloseTo(49 + 3 * 4079.45, 9);
  });
  it('errors: not found, non-pending, invalid reason, item-modified', () => {
    const env = fresh();
    expectError(env, 'cancel_pending_order', { order_id: 'W9373487', reason: 'no longer needed' }, 'Order not found');
    expectError(env, 'cancel_pending_order', { order_id: delivered.order_id, reason: 'no longer needed' }, 'Non-pending order cannot be cancelled');
    expectError(env, 'cancel_pending_order', { order_id: processed.order_id, reason: 'no longer needed' }, 'Non-pending order cannot be cancelled');
    expectError(env, 'cancel_pending_order', { order_id: '#W9373487', reason: 'No longer needed' }, 'Invalid reason');
    expectError(env, 'cancel_pending_order', { order_id: '#W9373487', reason: 'found it cheaper' }, 'Invalid reason');
    expectOk(env, 'modify_pending_order_items', { order_id: '#W9300146', item_ids: ['9190635437'], new_item_ids: ['5320792178'], payment_method_id: 'gift_card_7245904' });
    expectError(env, 'cancel_pending_order', { order_id: '#W9300146', reason: 'ordered by mistake' }, 'Non-pending order cannot be cancelled');
  });
});

describe('modify_pending_order_address', () => {
  it('replaces the address exactly, also after an item modification; user untouched', () => {
    const env = fresh();
    const before = user(env, 'aarav_anderson_8794').address;
    expectOk(env, 'modify_pending_order_items', { order_id: '#W9300146', item_ids: ['9190635437'], new_item_ids: ['5320792178'], payment_method_id: 'gift_card_7245904' });
    const o = expectOk<Order>(env, 'modify_pending_order_address', { order_id: '#W9300146', ...ADDR, address2: '' });
    expect(o.address).toEqual({ address1: '1 Main St', address2: '', city: 'Austin', country: 'USA', state: 'TX', zip: '73301' });
    expect(Object.keys(o.address)).toEqual(['address1', 'address2', 'city', 'country', 'state', 'zip']);
    expect(o.status).toBe('pending (item modified)');
    expect(user(env, 'aarav_anderson_8794').address).toEqual(before);
  });
  it('errors: not found, non-pending', () => {
    const env = fresh();
    expectError(env, 'modify_pending_order_address', { order_id: '#W0000000', ...ADDR }, 'Order not found');
    expectError(env, 'modify_pending_order_address', { order_id: delivered.order_id, ...ADDR }, 'Non-pending order cannot be modified');
  });
});

describe('modify_pending_order_items', () => {
  it('one item on a gift card: unrounded refund entry, rounded balance (task 44)', () => {
    const env = fresh();
    const o = expectOk<Order>(env, 'modify_pending_order_items', { order_id: '#W9300146', item_ids: ['9190635437'], new_item_ids: ['5320792178'], payment_method_id: 'gift_card_7245904' });
    expect(o.payment_history[1]).toEqual({ transaction_type: 'refund', amount: 17.98999999999998, payment_method_id: 'gift_card_7245904' });
    expect(o.items[0]).toMatchObject({ item_id: '5320792178', price: 135.24, options: { color: 'black', brightness: 'medium', 'power source': 'AC adapter' } });
    expect(o.status).toBe('pending (item modified)');
    expect(balance(user(env, 'aarav_anderson_8794'), 'gift_card_7245904')).toBe(34.99);
  });
  it('several products: every changed item gets the last variant price and options (task 37)', () => {
    const env = fresh();
    const o = expectOk<Order>(env, 'modify_pending_order_items', {
      order_id: '#W9348897',
      item_ids: ['6117189161', '7453605304', '3799046073'],
      new_item_ids: ['6700049080', '5320792178', '3234800602'],
      payment_method_id: 'credit_card_8853416',
    });
    expect(o.payment_history[1]).toEqual({ transaction_type: 'refund', amount: 36.12999999999999, payment_method_id: 'credit_card_8853416' });
    const changed = o.items.filter((i) => ['6700049080', '5320792178', '3234800602'].includes(i.item_id));
    expect(changed.map((i) => i.name)).toEqual(['Action Camera', 'Desk Lamp', 'T-Shirt']);
    for (const i of changed) expect(i).toMatchObject({ price: 46.66, options: { color: 'red', size: 'L', material: 'cotton', style: 'v-neck' } });
  });
  it('errors in check order', () => {
    const env = fresh();
    const base = { order_id: '#W9300146', item_ids: ['9190635437'], new_item_ids: ['5320792178'], payment_method_id: 'gift_card_7245904' };
    const lamp = productOf('6817146515');
    const unavailable = Object.values(lamp.variants).find((v) => !v.available)!.item_id;
    const otherProductItem = Object.keys(productOf('1656367028').variants)[0];
    expectError(env, 'modify_pending_order_items', { ...base, order_id: '#W930014' }, 'Order not found');
    expectError(env, 'modify_pending_order_items', { ...base, order_id: delivered.order_id }, 'Non-pending order cannot be modified');
    expectError(env, 'modify_pending_order_items', { ...base, item_ids: ['1111111111'] }, '1111111111 not found');
    expectError(env, 'modify_pending_order_items', { ...base, item_ids: ['9190635437', '9190635437'], new_item_ids: ['5320792178', '5320792178'] }, '9190635437 not found');
    expectError(env, 'modify_pending_order_items', { ...base, new_item_ids: [] }, 'The number of items to be exchanged should match');
    expectError(env, 'modify_pending_order_items', { ...base, new_item_ids: ['9190635437'] }, 'The new item id should be different from the old item id');
    expectError(env, 'modify_pending_order_items', { ...base, new_item_ids: [otherProductItem] }, 'Variant not found');
    expectError(env, 'modify_pending_order_items', { ...base, new_item_ids: [unavailable] }, `New item ${unavailable} not found or available`);
    expectError(env, 'modify_pending_order_items', { ...base, payment_method_id: 'credit_card_9513926' }, 'Payment method not found');
    // A pending order whose owner's gift card cannot pay for a dearer variant of one of its items.
    let poor: { order_id: string; item: string; dear: string; gc: string } | undefined;
    findOrder((x, u) => {
      if (x.status !== 'pending') return false;
      const gc = Object.values(u.payment_methods).find((p) => p.source === 'gift_card');
      if (!gc || gc.source !== 'gift_card') return false;
      for (const it of x.items) {
        const v = Object.values(productOf(it.product_id).variants).find((w) => w.available && w.item_id !== it.item_id && w.price - it.price > gc.balance);
        if (v) poor = { order_id: x.order_id, item: it.item_id, dear: v.item_id, gc: gc.id };
        if (v) return true;
      }
      return false;
    });
    expectError(env, 'modify_pending_order_items', { order_id: poor!.order_id, item_ids: [poor!.item], new_item_ids: [poor!.dear], payment_method_id: poor!.gc }, 'Insufficient gift card balance to pay for the new item');
    expectOk(env, 'modify_pending_order_items', base);
    expectError(env, 'modify_pending_order_items', { ...base, item_ids: ['5320792178'], new_item_ids: ['9190635437'] }, 'Non-pending order cannot be modified');
  });
});

describe('modify_pending_order_payment', () => {
  it('gift card -> credit card: payment + refund, old card credited (#W6779827)', () => {
    const env = fresh();
    const o = expectOk<Order>(env, 'modify_pending_order_payment', { order_id: '#W6779827', payment_method_id: 'credit_card_9789590' });
    expect(o.payment_history.slice(1)).toEqual([
      { transaction_type: 'payment', amount: 4079.45, payment_method_id: 'credit_card_9789590' },
      { transaction_type: 'refund', amount: 4079.45, payment_method_id: 'gift_card_7219486' },
    ]);
    expect(o.status).toBe('pending');
    expect(balance(user(env, 'ethan_lopez_6291'), 'gift_card_7219486')).toBe(4128.45);
  });
  it('credit card -> gift card debits the card when the balance covers the order', () => {
    const o = findOrder((x, u) => x.status === 'pending' && x.payment_history[0].payment_method_id.startsWith('credit') && Object.values(u.payment_methods).some((p) => p.source === 'gift_card' && p.balance >= x.payment_history[0].amount));
    const env = fresh();
    const u0 = user(env, o.user_id);
    const gc = Object.values(u0.payment_methods).find((p) => p.source === 'gift_card')!.id;
    expectOk(env, 'modify_pending_order_payment', { order_id: o.order_id, payment_method_id: gc });
    expect(balance(user(env, o.user_id), gc)).toBeCloseTo(balance(u0, gc) - o.payment_history[0].amount, 9);
  });
  it('errors in check order', () => {
    const env = fresh();
    // A pending order paid otherwise whose owner's gift card cannot cover it.
    const poor = findOrder((x, u) => x.status === 'pending' && Object.values(u.payment_methods).some((p) => p.source === 'gift_card' && p.id !== x.payment_history[0].payment_method_id && p.balance < x.payment_history[0].amount));
    const poorCard = Object.values(userOfOrder(poor).payment_methods).find((p) => p.source === 'gift_card')!.id;
    expectError(env, 'modify_pending_order_payment', { order_id: '#W677982', payment_method_id: 'credit_card_9789590' }, 'Order not found');
    expectError(env, 'modify_pending_order_payment', { order_id: delivered.order_id, payment_method_id: delivered.payment_history[0].payment_method_id }, 'Non-pending order cannot be modified');
    expectError(env, 'modify_pending_order_payment', { order_id: '#W6779827', payment_method_id: 'paypal_0000000' }, 'Payment method not found');
    expectError(env, 'modify_pending_order_payment', { order_id: '#W6779827', payment_method_id: 'gift_card_7219486' }, 'The new payment method should be different from the current one');
    expectError(env, 'modify_pending_order_payment', { order_id: poor.order_id, payment_method_id: poorCard }, 'Insufficient gift card balance to pay for the order');
    expectOk(env, 'modify_pending_order_payment', { order_id: '#W6779827', payment_method_id: 'credit_card_9789590' });
    expectError(env, 'modify_pending_order_payment', { order_id: '#W6779827', payment_method_id: 'gift_card_7219486' }, 'There should be exactly one payment for a pending order');
  });
});

describe('modify_user_address', () => {
  it('replaces the default address only', () => {
    const env = fresh();
    const u = expectOk<User>(env, 'modify_user_address', { user_id: 'yusuf_rossi_9620', ...ADDR });
    expect(u.address).toEqual({ address1: '1 Main St', address2: 'Apt 2', city: 'Austin', country: 'USA', state: 'TX', zip: '73301' });
    expect(order(env, '#W2378156').address.city).toBe('Philadelphia');
  });
  it('errors: user not found', () => expectError(fresh(), 'modify_user_address', { user_id: 'nobody_1', ...ADDR }, 'User not found'));
});

describe('return_delivered_order_items', () => {
  it('sets status, sorted items, method; nothing else changes', () => {
    const env = fresh();
    const o = expectOk<Order>(env, 'return_delivered_order_items', { order_id: '#W2378156', item_ids: ['9408160950', '1151293680'], payment_method_id: 'credit_card_9513926' });
    expect(o).toMatchObject({ status: 'return requested', return_items: ['1151293680', '9408160950'], return_payment_method_id: 'credit_card_9513926' });
    expect(o.payment_history.length).toBe(1);
    expect(o.items.length).toBe(5);
  });
  it('accepts any own gift card and an empty list', () => {
    const o = findOrder((x, u) => x.status === 'delivered' && !x.payment_history[0].payment_method_id.startsWith('gift') && Object.keys(u.payment_methods).some((k) => k.startsWith('gift_card')));
    const env = fresh();
    const gc = Object.keys(user(env, o.user_id).payment_methods).find((k) => k.startsWith('gift_card'))!;
    expect(expectOk<Order>(env, 'return_delivered_order_items', { order_id: o.order_id, item_ids: [], payment_method_id: gc }).return_items).toEqual([]);
  });
  it('errors in check order', () => {
    const env = fresh();
    const a = { order_id: '#W2378156', item_ids: ['1151293680'], payment_method_id: 'credit_card_9513926' };
    // A delivered order paid by card whose owner also has PayPal (neither original nor a gift card).
    const other = findOrder((x, u) => x.status === 'delivered' && x.payment_history[0].payment_method_id.startsWith('credit') && Object.keys(u.payment_methods).some((k) => k.startsWith('paypal')));
    expectError(env, 'return_delivered_order_items', { ...a, order_id: 'W2378156' }, 'Order not found');
    expectError(env, 'return_delivered_order_items', { ...a, order_id: creditPending.order_id, payment_method_id: creditPending.payment_history[0].payment_method_id }, 'Non-delivered order cannot be returned');
    expectError(env, 'return_delivered_order_items', { ...a, payment_method_id: 'paypal_1234567' }, 'Payment method not found');
    const paypal = Object.keys(userPMs(other.user_id)).find((k) => k.startsWith('paypal'))!;
    expectError(env, 'return_delivered_order_items', { order_id: other.order_id, item_ids: [], payment_method_id: paypal }, 'Payment method should be the original payment method');
    expectError(env, 'return_delivered_order_items', { ...a, item_ids: ['1151293680', '1151293680'] }, 'Some item not found');
    expectOk(env, 'return_delivered_order_items', a);
    expectError(env, 'return_delivered_order_items', a, 'Non-delivered order cannot be returned');
    expectError(env, 'exchange_delivered_order_items', { ...a, new_item_ids: ['7706410293'] }, 'Non-delivered order cannot be exchanged');
  });
});

function userPMs(id: string): Record<string, unknown> {
  return user(fresh(), id).payment_methods;
}

describe('exchange_delivered_order_items', () => {
  it('records the exchange with a rounded difference, sorted lists (task 0)', () => {
    const env = fresh();
    const o = expectOk<Order>(env, 'exchange_delivered_order_items', {
      order_id: '#W2378156',
      item_ids: ['4983901480', '1151293680'],
      new_item_ids: ['7747408585', '7706410293'],
      payment_method_id: 'credit_card_9513926',
    });
    expect(o).toMatchObject({
      status: 'exchange requested',
      exchange_items: ['1151293680', '4983901480'],
      exchange_new_items: ['7706410293', '7747408585'],
      exchange_payment_method_id: 'credit_card_9513926',
      exchange_price_difference: -16.63,
    });
    expect(o.payment_history.length).toBe(1);
    expect(o.items.find((i) => i.item_id === '1151293680')).toBeDefined();
  });
  it('allows the identical variant when available (difference 0)', () => {
    const env = fresh();
    const o = expectOk<Order>(env, 'exchange_delivered_order_items', { order_id: '#W2378156', item_ids: ['1151293680'], new_item_ids: ['1151293680'], payment_method_id: 'credit_card_9513926' });
    expect(o.exchange_price_difference).toBe(0);
  });
  it('errors in check order', () => {
    const env = fresh();
    const a = { order_id: '#W2378156', item_ids: ['1151293680'], new_item_ids: ['7706410293'], payment_method_id: 'credit_card_9513926' };
    const unavailable = Object.values(productOf('1656367028').variants).find((v) => !v.available)!.item_id;
    expectError(env, 'exchange_delivered_order_items', { ...a, order_id: '#W237815' }, 'Order not found');
    expectError(env, 'exchange_delivered_order_items', { ...a, order_id: processed.order_id }, 'Non-delivered order cannot be exchanged');
    expectError(env, 'exchange_delivered_order_items', { ...a, item_ids: ['7706410293'] }, 'Number of 7706410293 not found.');
    expectError(env, 'exchange_delivered_order_items', { ...a, new_item_ids: [] }, 'The number of items to be exchanged should match.');
    expectError(env, 'exchange_delivered_order_items', { ...a, new_item_ids: ['7747408585'] }, 'Variant not found');
    expectError(env, 'exchange_delivered_order_items', { ...a, new_item_ids: [unavailable] }, `New item ${unavailable} not found or available`);
    expectError(env, 'exchange_delivered_order_items', { ...a, payment_method_id: 'gift_card_0000000' }, 'Payment method not found');
    // A delivered order with an item that has a dearer available variant beyond the owner's gift card balance.
    let dear: { order_id: string; item: string; to: string; gc: string } | undefined;
    findOrder((x, u) => {
      const gc = Object.values(u.payment_methods).find((p) => p.source === 'gift_card');
      if (x.status !== 'delivered' || !gc || gc.source !== 'gift_card') return false;
      for (const it of x.items) {
        const v = Object.values(productOf(it.product_id).variants).find((w) => w.available && w.price - it.price > gc.balance);
        if (v) dear = { order_id: x.order_id, item: it.item_id, to: v.item_id, gc: gc.id };
        if (v) return true;
      }
      return false;
    });
    expectError(env, 'exchange_delivered_order_items', { order_id: dear!.order_id, item_ids: [dear!.item], new_item_ids: [dear!.to], payment_method_id: dear!.gc }, 'Insufficient gift card balance to pay for the price difference');
  });
});
