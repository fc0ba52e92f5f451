// What a generated retail task's user wants, as structured data. The generator writes it and verbalises it
// into the user message; the expert reads it (a scripted agent with perfect understanding of the message)
// and finds everything else (user id, item ids, variant ids, payment methods, amounts) through tool calls.
// The expert never sees the reference actions or the facts.

/** The message policy requires after a transfer to a human agent. */
export const TRANSFER_MESSAGE = 'YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON.';

import type { Task } from '../domain';
import type { Address } from './types';

export type Auth =
  | { kind: 'email'; email: string }
  | { kind: 'name_zip'; first: string; last: string; zip: string }
  /** A wrong email first (unknown to the system), then name + zip when that fails. */
  | { kind: 'email_then_name_zip'; email: string; first: string; last: string; zip: string };

/** How the user refers to a payment method: by kind (and card brand/last four when it is a card). */
export type PaymentRef =
  | { kind: 'original' }
  | { kind: 'gift_card' }
  | { kind: 'paypal' }
  | { kind: 'credit_card'; brand: string; lastFour: string };

/** An item of an order, by product name (unique within the order for generated tasks). */
export interface ItemRef {
  productName: string;
}

/** A wanted variant: the full option set, which identifies one variant of the item's product. */
export interface Change {
  item: ItemRef;
  options: Record<string, string>;
}

export type Request =
  | { kind: 'status'; orderRef: string }
  | { kind: 'cancel'; orderRef: string; reason: string }
  | { kind: 'return'; orderRef: string; items: ItemRef[]; refund: PaymentRef }
  | { kind: 'exchange'; orderRef: string; changes: Change[]; payment: PaymentRef }
  | { kind: 'modify_items'; orderRef: string; changes: Change[]; payment: PaymentRef }
  | { kind: 'order_address'; orderRef: string; address: Address }
  | { kind: 'order_payment'; orderRef: string; payment: PaymentRef }
  | { kind: 'user_address'; address: Address }
  | { kind: 'product_price'; productName: string; options: Record<string, string> }
  | { kind: 'order_total'; orderRefs: [string, string] }
  | { kind: 'transfer'; topic: string };

export interface RetailIntent {
  auth: Auth;
  requests: Request[];
}

export type Family =
  | 'status'
  | 'cancel'
  | 'return'
  | 'exchange'
  | 'modify_items'
  | 'order_address'
  | 'order_payment'
  | 'user_address'
  | 'product_price'
  | 'order_total'
  | 'transfer'
  | 'refuse_cancel_status'
  | 'refuse_cancel_reason'
  | 'refuse_return_status'
  | 'refuse_other_user'
  | 'unknown_order'
  | 'multi';

export interface RetailTask extends Task {
  family: Family;
  intent: RetailIntent;
  split: 'train' | 'test';
}
