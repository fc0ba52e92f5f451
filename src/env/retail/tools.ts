// The 15 tools of the τ²-bench retail domain (June 2025 release), behaviour as upstream's: same names,
// arguments, check order, error texts and state changes, including the release's defects (item
// modification prices, cancel refunds every history entry), because the reward compares database states
// with what upstream computes. Every check runs before any put(), and the store discards a failed
// transaction anyway.

import type { ToolSpec } from '../domain';
import { ToolError } from '../domain';
import { cloneJson, pyJson, pyRound2 } from '../json';
import type { StoreTx } from '../store';
import { calculate } from './calculate';
import { RETAIL_SCHEMAS } from './schemas';
import type { Address, Order, PaymentMethod, Product, User, Variant } from './types';

const getOrder = (tx: StoreTx, id: string) => tx.get('orders', id) as Order | undefined;
const getUser = (tx: StoreTx, id: string) => tx.get('users', id) as User | undefined;
/** The reasons cancel_pending_order accepts, as τ²-bench spells them. */
export const CANCEL_REASONS = ['no longer needed', 'ordered by mistake'] as const;

const getProduct = (tx: StoreTx, id: string) => tx.get('products', id) as Product | undefined;

function mustOrder(tx: StoreTx, id: string): Order {
  const o = getOrder(tx, id);
  if (!o) throw new ToolError('Order not found');
  return o;
}

function mustUser(tx: StoreTx, id: string): User {
  const u = getUser(tx, id);
  if (!u) throw new ToolError('User not found');
  return u;
}

/** The owner's payment method with that id (own keys only: ids come from the model). */
function ownerMethod(user: User, id: string): PaymentMethod {
  if (!Object.hasOwn(user.payment_methods, id)) throw new ToolError('Payment method not found');
  return user.payment_methods[id];
}

function variantOf(p: Product | undefined, id: string): Variant | undefined {
  return p && Object.hasOwn(p.variants, id) ? p.variants[id] : undefined;
}

const count = (xs: readonly string[], x: string) => xs.reduce((n, y) => n + (y === x ? 1 : 0), 0);

/** Python's sorted() on strings: code-point order (equal to UTF-16 order for these ids). */
const pySorted = (xs: readonly string[]) => [...xs].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));

function addressFrom(a: Record<string, unknown>): Address {
  return {
    address1: a.address1 as string,
    address2: a.address2 as string,
    city: a.city as string,
    country: a.country as string,
    state: a.state as string,
    zip: a.zip as string,
  };
}

/** Adds `delta` to a gift card's balance and rounds as upstream does; returns the updated user. */
function creditGiftCard(user: User, methodId: string, delta: number): void {
  const pm = user.payment_methods[methodId];
  if (pm.source === 'gift_card') pm.balance = pyRound2(pm.balance + delta);
}

type Run = ToolSpec['run'];

const run: Record<string, Run> = {
  find_user_id_by_email(tx, a) {
    const email = (a.email as string).toLowerCase();
    for (const id of tx.ids('users')) {
      const u = getUser(tx, id)!;
      if (u.email.toLowerCase() === email) return u.user_id;
    }
    throw new ToolError('User not found');
  },

  find_user_id_by_name_zip(tx, a) {
    const first = (a.first_name as string).toLowerCase();
    const last = (a.last_name as string).toLowerCase();
    for (const id of tx.ids('users')) {
      const u = getUser(tx, id)!;
      if (u.name.first_name.toLowerCase() === first && u.name.last_name.toLowerCase() === last && u.address.zip === a.zip) {
        return u.user_id;
      }
    }
    throw new ToolError('User not found');
  },

  get_user_details: (tx, a) => mustUser(tx, a.user_id as string),

  get_order_details: (tx, a) => mustOrder(tx, a.order_id as string),

  get_product_details(tx, a) {
    const p = getProduct(tx, a.product_id as string);
    if (!p) throw new ToolError('Product not found');
    return p;
  },

  list_all_product_types(tx) {
    // Upstream: json.dumps({name: product_id, …}, sort_keys=True); a later duplicate name would win.
    const byName = new Map<string, string>();
    for (const id of tx.ids('products')) {
      const p = getProduct(tx, id)!;
      byName.set(p.name, p.product_id);
    }
    const names = [...byName.keys()].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));
    return '{' + names.map((n) => `${pyJson(n)}: ${pyJson(byName.get(n))}`).join(', ') + '}';
  },

  calculate: (_tx, a) => calculate(a.expression as string),

  transfer_to_human_agents: () => 'Transfer successful',

  cancel_pending_order(tx, a) {
    const order = mustOrder(tx, a.order_id as string);
    if (order.status !== 'pending') throw new ToolError('Non-pending order cannot be cancelled');
    const reason = a.reason as string;
    if (!(CANCEL_REASONS as readonly string[]).includes(reason)) throw new ToolError('Invalid reason');
    const user = cloneJson(mustUser(tx, order.user_id));
    const o = cloneJson(order);
    // Every existing entry is refunded, whatever its type (a release quirk kept on purpose).
    const refunds = o.payment_history.map((p) => ({
      transaction_type: 'refund' as const,
      amount: p.amount,
      payment_method_id: p.payment_method_id,
    }));
    let userChanged = false;
    for (const r of refunds) {
      if (Object.hasOwn(user.payment_methods, r.payment_method_id) && user.payment_methods[r.payment_method_id].source === 'gift_card') {
        creditGiftCard(user, r.payment_method_id, r.amount);
        userChanged = true;
      }
    }
    o.status = 'cancelled';
    o.cancel_reason = reason;
    o.payment_history.push(...refunds);
    tx.put('orders', o.order_id, o);
    if (userChanged) tx.put('users', user.user_id, user);
    return o;
  },

  modify_pending_order_address(tx, a) {
    const order = mustOrder(tx, a.order_id as string);
    if (!order.status.includes('pending')) throw new ToolError('Non-pending order cannot be modified');
    const o = cloneJson(order);
    o.address = addressFrom(a);
    tx.put('orders', o.order_id, o);
    return o;
  },

  modify_pending_order_items(tx, a) {
    const order = mustOrder(tx, a.order_id as string);
    if (order.status !== 'pending') throw new ToolError('Non-pending order cannot be modified');
    const itemIds = a.item_ids as string[];
    const newIds = a.new_item_ids as string[];
    const have = order.items.map((i) => i.item_id);
    for (const id of itemIds) if (count(itemIds, id) > count(have, id)) throw new ToolError(`${id} not found`);
    if (itemIds.length !== newIds.length) throw new ToolError('The number of items to be exchanged should match');
    let diff = 0; // accumulated left to right, not rounded (upstream keeps the float noise)
    let last: Variant | undefined;
    for (let i = 0; i < itemIds.length; i++) {
      if (itemIds[i] === newIds[i]) throw new ToolError('The new item id should be different from the old item id');
      const item = order.items.find((x) => x.item_id === itemIds[i])!;
      const product = getProduct(tx, item.product_id);
      if (!product) throw new ToolError('Product not found');
      const v = variantOf(product, newIds[i]);
      if (!v) throw new ToolError('Variant not found');
      if (!v.available) throw new ToolError(`New item ${newIds[i]} not found or available`);
      diff += v.price - item.price;
      last = v;
    }
    const user = cloneJson(mustUser(tx, order.user_id));
    const pm = ownerMethod(user, a.payment_method_id as string);
    if (pm.source === 'gift_card' && pm.balance < diff) {
      throw new ToolError('Insufficient gift card balance to pay for the new item');
    }
    const o = cloneJson(order);
    o.payment_history.push({
      transaction_type: diff > 0 ? 'payment' : 'refund',
      amount: Math.abs(diff),
      payment_method_id: pm.id,
    });
    if (pm.source === 'gift_card') {
      creditGiftCard(user, pm.id, -diff);
      tx.put('users', user.user_id, user);
    }
    for (let i = 0; i < itemIds.length; i++) {
      const item = o.items.find((x) => x.item_id === itemIds[i])!;
      item.item_id = newIds[i];
      // Release defect: price and options come from the last position's variant, for every item.
      item.price = last!.price;
      item.options = cloneJson(last!.options);
    }
    o.status = 'pending (item modified)';
    tx.put('orders', o.order_id, o);
    return o;
  },

  modify_pending_order_payment(tx, a) {
    const order = mustOrder(tx, a.order_id as string);
    if (!order.status.includes('pending')) throw new ToolError('Non-pending order cannot be modified');
    const user = cloneJson(mustUser(tx, order.user_id));
    const pm = ownerMethod(user, a.payment_method_id as string);
    const h = order.payment_history;
    if (h.length !== 1 || h[0].transaction_type !== 'payment') {
      throw new ToolError('There should be exactly one payment for a pending order');
    }
    const old = h[0];
    if (old.payment_method_id === pm.id) {
      throw new ToolError('The new payment method should be different from the current one');
    }
    const amount = old.amount;
    if (pm.source === 'gift_card' && pm.balance < amount) {
      throw new ToolError('Insufficient gift card balance to pay for the order');
    }
    const o = cloneJson(order);
    o.payment_history.push(
      { transaction_type: 'payment', amount, payment_method_id: pm.id },
      { transaction_type: 'refund', amount, payment_method_id: old.payment_method_id },
    );
    let userChanged = false;
    if (pm.source === 'gift_card') {
      creditGiftCard(user, pm.id, -amount);
      userChanged = true;
    }
    const oldPm = Object.hasOwn(user.payment_methods, old.payment_method_id) ? user.payment_methods[old.payment_method_id] : undefined;
    if (oldPm?.source === 'gift_card') {
      creditGiftCard(user, oldPm.id, amount);
      userChanged = true;
    }
    tx.put('orders', o.order_id, o);
    if (userChanged) tx.put('users', user.user_id, user);
    return o;
  },

  modify_user_address(tx, a) {
    const u = cloneJson(mustUser(tx, a.user_id as string));
    u.address = addressFrom(a);
    tx.put('users', u.user_id, u);
    return u;
  },

  return_delivered_order_items(tx, a) {
    const order = mustOrder(tx, a.order_id as string);
    if (order.status !== 'delivered') throw new ToolError('Non-delivered order cannot be returned');
    const user = mustUser(tx, order.user_id);
    const pm = ownerMethod(user, a.payment_method_id as string);
    if (pm.source !== 'gift_card' && pm.id !== order.payment_history[0]?.payment_method_id) {
      throw new ToolError('Payment method should be the original payment method');
    }
    const itemIds = a.item_ids as string[];
    const have = order.items.map((i) => i.item_id);
    for (const id of itemIds) if (count(itemIds, id) > count(have, id)) throw new ToolError('Some item not found');
    const o = cloneJson(order);
    o.status = 'return requested';
    o.return_items = pySorted(itemIds);
    o.return_payment_method_id = pm.id;
    tx.put('orders', o.order_id, o);
    return o;
  },

  exchange_delivered_order_items(tx, a) {
    const order = mustOrder(tx, a.order_id as string);
    if (order.status !== 'delivered') throw new ToolError('Non-delivered order cannot be exchanged');
    const itemIds = a.item_ids as string[];
    const newIds = a.new_item_ids as string[];
    const have = order.items.map((i) => i.item_id);
    for (const id of itemIds) if (count(itemIds, id) > count(have, id)) throw new ToolError(`Number of ${id} not found.`);
    if (itemIds.length !== newIds.length) throw new ToolError('The number of items to be exchanged should match.');
    let diff = 0;
    for (let i = 0; i < itemIds.length; i++) {
      const item = order.items.find((x) => x.item_id === itemIds[i])!;
      const product = getProduct(tx, item.product_id);
      if (!product) throw new ToolError('Product not found');
      const v = variantOf(product, newIds[i]);
      if (!v) throw new ToolError('Variant not found');
      if (!v.available) throw new ToolError(`New item ${newIds[i]} not found or available`);
      diff += v.price - item.price;
    }
    diff = pyRound2(diff);
    const user = mustUser(tx, order.user_id);
    const pm = ownerMethod(user, a.payment_method_id as string);
    if (pm.source === 'gift_card' && pm.balance < diff) {
      throw new ToolError('Insufficient gift card balance to pay for the price difference');
    }
    const o = cloneJson(order);
    o.status = 'exchange requested';
    o.exchange_items = pySorted(itemIds);
    o.exchange_new_items = pySorted(newIds);
    o.exchange_payment_method_id = pm.id;
    o.exchange_price_difference = diff;
    tx.put('orders', o.order_id, o);
    return o;
  },
};

export const RETAIL_TOOLS: readonly ToolSpec[] = RETAIL_SCHEMAS.map((s) => {
  const r = run[s.name];
  if (!r) throw new Error(`retail: no implementation for tool ${s.name}`);
  return { ...s, run: r };
});

export const RETAIL_WRITE_TOOLS: ReadonlySet<string> = new Set(RETAIL_TOOLS.filter((t) => t.kind === 'write').map((t) => t.name));
