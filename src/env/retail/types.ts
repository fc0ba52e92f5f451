// Record types of the τ²-bench retail database (field order = upstream model order, which the
// byte-parity trace relies on), plus loading/normalisation of db.json.

import { registerKeyOrder } from '../json';
import { BaseData } from '../store';

export interface Address {
  address1: string;
  address2: string;
  city: string;
  country: string;
  state: string;
  zip: string;
}

export interface Variant {
  item_id: string;
  options: Record<string, string>;
  available: boolean;
  price: number;
}

export interface Product {
  name: string;
  product_id: string;
  variants: Record<string, Variant>;
}

export type PaymentMethod =
  | { source: 'credit_card'; id: string; brand: string; last_four: string }
  | { source: 'paypal'; id: string }
  | { source: 'gift_card'; id: string; balance: number };

export interface User {
  user_id: string;
  name: { first_name: string; last_name: string };
  address: Address;
  email: string;
  payment_methods: Record<string, PaymentMethod>;
  orders: string[];
}

export interface OrderItem {
  name: string;
  product_id: string;
  item_id: string;
  price: number;
  options: Record<string, string>;
}

export interface Payment {
  transaction_type: 'payment' | 'refund';
  amount: number;
  payment_method_id: string;
}

export interface Order {
  order_id: string;
  user_id: string;
  address: Address;
  items: OrderItem[];
  status: string;
  fulfillments: { tracking_id: string[]; item_ids: string[] }[];
  payment_history: Payment[];
  cancel_reason: string | null;
  exchange_items: string[] | null;
  exchange_new_items: string[] | null;
  exchange_payment_method_id: string | null;
  exchange_price_difference: number | null;
  return_items: string[] | null;
  return_payment_method_id: string | null;
}

/** Optional order fields, in upstream model order; absent in db.json, null in every upstream result. */
export const ORDER_OPTIONAL_FIELDS = [
  'cancel_reason',
  'exchange_items',
  'exchange_new_items',
  'exchange_payment_method_id',
  'exchange_price_difference',
  'return_items',
  'return_payment_method_id',
] as const;

/** Fields upstream types as float (written 51.0 in traces). */
export const RETAIL_FLOAT_KEYS: ReadonlySet<string> = new Set([
  'price',
  'amount',
  'balance',
  'exchange_price_difference',
]);

export class RetailDataError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RetailDataError';
  }
}

/**
 * Checks the top-level layout of a parsed db.json and fills absent optional order fields with null (the
 * state upstream compares), then builds the frozen shared base.
 */
export function retailBase(json: unknown, sourceText?: string): BaseData {
  if (json === null || typeof json !== 'object') throw new RetailDataError('retail db: not a JSON object');
  const j = json as Record<string, unknown>;
  for (const k of ['products', 'users', 'orders']) {
    if (j[k] === null || typeof j[k] !== 'object' || Array.isArray(j[k])) {
      throw new RetailDataError(`retail db: missing or invalid "${k}" map`);
    }
  }
  const orders: Record<string, Record<string, unknown>> = {};
  for (const [id, o] of Object.entries(j.orders as Record<string, Record<string, unknown>>)) {
    if (o === null || typeof o !== 'object' || typeof o.status !== 'string' || !Array.isArray(o.items)) {
      throw new RetailDataError(`retail db: order ${id} is malformed`);
    }
    const full: Record<string, unknown> = { ...o };
    for (const f of ORDER_OPTIONAL_FIELDS) if (full[f] === undefined) full[f] = null;
    orders[id] = full;
  }
  if (sourceText) registerVariantOrder(j.products as Record<string, Product>, sourceText);
  return new BaseData({
    products: j.products as Record<string, Record<string, unknown>>,
    users: j.users as Record<string, Record<string, unknown>>,
    orders,
  });
}

/**
 * Recovers the source order of each product's variants (integer-like keys, which JS objects reorder)
 * from the file text: within the products section, a product's `"product_id"` is followed by its
 * variants, each written as `"<id>": {"item_id": "<id>"`. Products whose recovered list does not match
 * their keys exactly keep the JS order.
 */
function registerVariantOrder(products: Record<string, Product>, text: string): void {
  const end = text.search(/"users"\s*:\s*\{/);
  const section = end > 0 ? text.slice(0, end) : text;
  const re = /"product_id"\s*:\s*"([^"]+)"|"([^"]+)"\s*:\s*\{\s*"item_id"\s*:\s*"([^"]+)"/g;
  let current: string | null = null;
  const found = new Map<string, string[]>();
  for (const m of section.matchAll(re)) {
    if (m[1] !== undefined) {
      current = m[1];
      if (!found.has(current)) found.set(current, []);
    } else if (current !== null && m[2] === m[3]) {
      found.get(current)!.push(m[2]);
    }
  }
  for (const [pid, order] of found) {
    const p = Object.hasOwn(products, pid) ? products[pid] : undefined;
    if (!p || !p.variants) continue;
    const keys = Object.keys(p.variants);
    if (order.length === keys.length && order.every((k) => Object.hasOwn(p.variants, k))) registerKeyOrder(p.variants, order);
  }
}
