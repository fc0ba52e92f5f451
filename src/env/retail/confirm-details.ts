// What a retail agent must have stated before a write for the user's "yes" to count (rule C2 of
// src/env/confirmation.ts): the details a customer can check, in the words a customer would recognise.
// Ids a customer never sees (item ids, payment method ids) are translated through the initial database
// into product names, option values and payment descriptions; the order id is a detail as it stands.
//
// The initial database is enough: product names and variant options never change in an episode, and a
// user's payment methods only change balance. A call whose arguments are not what the schema allows (model
// output) gets the raw value as its only spelling, so a proposal can still have stated it.

import type { ToolCall } from '../domain';
import type { ConfirmationDetail, ConfirmationOptions } from '../confirmation';
import type { BaseData } from '../store';
import { RETAIL_WRITE_TOOLS } from './tools';
import type { Order, PaymentMethod, Product, User, Variant } from './types';

const str = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v) ?? '');

/** How a customer names a payment method: "gift card", "PayPal", or the card's last four digits. */
export function paymentSpellings(pm: PaymentMethod | undefined, id: string): string[] {
  if (!pm) return [id];
  if (pm.source === 'gift_card') return ['gift card', id];
  if (pm.source === 'paypal') return ['paypal', id];
  return [pm.last_four, id];
}

/** The detail function of the retail domain over its initial database. */
export function retailConfirmationDetails(base: BaseData): (call: ToolCall) => ConfirmationDetail[] {
  const orders = base.tables.get('orders')!;
  const users = base.tables.get('users')!;
  const variants = new Map<string, { product: Product; variant: Variant }>();
  for (const p of base.tables.get('products')!.values() as Iterable<unknown>) {
    const product = p as Product;
    for (const v of Object.values(product.variants)) variants.set(v.item_id, { product, variant: v });
  }
  return (call) => {
    const a = call.arguments ?? {};
    const out: ConfirmationDetail[] = [];
    const orderId = typeof a.order_id === 'string' ? a.order_id : null;
    const order = orderId ? (orders.get(orderId) as unknown as Order | undefined) : undefined;
    if ('order_id' in a) out.push({ label: 'order id', anyOf: [str(a.order_id)] });
    if (call.name === 'cancel_pending_order') out.push({ label: 'reason', anyOf: [str(a.reason)] });
    if (call.name === 'modify_pending_order_address' || call.name === 'modify_user_address') {
      for (const k of ['address1', 'city', 'zip']) out.push({ label: k, anyOf: [str(a[k])] });
    }
    if (Array.isArray(a.item_ids)) {
      for (const id of a.item_ids) {
        const item = order?.items.find((i) => i.item_id === id);
        out.push({ label: `item ${str(id)}`, anyOf: item ? [item.name, str(id)] : [str(id)] });
      }
    }
    if (Array.isArray(a.new_item_ids)) {
      for (const id of a.new_item_ids) {
        const v = variants.get(str(id));
        if (!v) out.push({ label: `new item ${str(id)}`, anyOf: [str(id)] });
        else for (const [k, val] of Object.entries(v.variant.options)) out.push({ label: `new ${k} of ${v.product.name}`, anyOf: [val, str(id)] });
      }
    }
    if ('payment_method_id' in a) {
      const id = str(a.payment_method_id);
      const owner = order?.user_id ?? (typeof a.user_id === 'string' ? a.user_id : undefined);
      const user = owner ? (users.get(owner) as unknown as User | undefined) : undefined;
      const isOriginal = order?.payment_history[0]?.payment_method_id === id;
      const spell = paymentSpellings(user?.payment_methods[id], id);
      out.push({ label: 'payment method', anyOf: isOriginal ? [...spell, 'original payment method'] : spell });
    }
    return out;
  };
}

/** Options for src/env/confirmation.ts in the retail domain. */
export function retailConfirmationOptions(base: BaseData): ConfirmationOptions {
  return { isWrite: (n) => RETAIL_WRITE_TOOLS.has(n), details: retailConfirmationDetails(base) };
}
