// How the scripted user reads an agent's reply. The agent may be a model, so its text is untrusted and
// unconstrained: the reading is a handful of keyword tests, tried in a fixed order, that never throw and
// never look at anything but the reply's words (a user does not see calls or observations). A reply the
// reading cannot place is an "other" question, which the user answers by restating what it wants, never by
// guessing.

import type { PaymentRef, Request } from './intent';
import { TRANSFER_MESSAGE } from './intent';

export type Topic = 'transfer' | 'confirm' | 'identity' | 'order' | 'detail' | 'wrap' | 'other' | 'statement';

export interface Reading {
  topic: Topic;
  /** The agent says it could not find something (an account after a lookup by identity). */
  notFound: boolean;
  /** For 'identity': the agent names the email but neither name nor zip. */
  emailOnly: boolean;
}

const MAX_READ = 8000;

export function readAgent(raw: string): Reading {
  const text = (typeof raw === 'string' ? raw : '').slice(0, MAX_READ);
  const t = text.toLowerCase().replaceAll('’', "'");
  // What the agent asks is in its questions: a report that names "order #W1" asks nothing about it.
  const q = t
    .split(/(?<=[.!?])\s+|\n+/)
    .filter((x) => x.includes('?') || /\b(please (provide|give|tell|share|confirm)|could you|can you|may i have|let me know)\b/.test(x))
    .join(' ');
  const asks = q !== '';
  const notFound = /\b(could ?n[o']t|can ?n[o']t|can not|unable to|did ?n[o']t|was ?n[o']t able to)\b[^.?!]*\b(find|locate)\b|\bnot (be )?found\b|\bno (account|user)\b/.test(t);
  const r = (topic: Topic, emailOnly = false): Reading => ({ topic, notFound, emailOnly });
  if (text.includes(TRANSFER_MESSAGE) || /\btransferr(ed|ing) you\b|\byou are being transferred\b/.test(t)) return r('transfer');
  // "Can you confirm which order?" asks for an order, it proposes nothing: no order is named in it.
  if (asks && /\border (id|number)s?\b|\bwhich order\b/.test(q) && !/\bw\d{7}\b/.test(q)) return r('order');
  if (asks && /\b(confirm|proceed|go ahead|shall i|should i|do you want me to|would you like me to|is that correct|yes\/no)\b|\(yes\)/.test(q)) return r('confirm');
  if (asks && /\b(e-?mail|zip|postal code|your (full )?name|first name|last name|verify your identity|authenticat\w*|locate your account|find your account|user id)\b/.test(q)) {
    return r('identity', /\be-?mail\b/.test(q) && !/\b(zip|name)\b/.test(q));
  }
  if (asks && /\border (id|number)s?\b|\bwhich order\b/.test(q)) return r('order');
  if (/\banything else\b|\bwhat else\b|\bsomething else\b/.test(t)) return r('wrap');
  if (asks && /\b(reason|payment method|refund to|pay (for|with)|which items?|what items?|which address|new address|options?)\b/.test(q)) return r('detail');
  if (asks) return r('other');
  return r('statement');
}

/** The 7 digits of an order reference: how a user recognises its order in any spelling (#W1234567, W1234567). */
export const orderDigits = (ref: string) => ref.replace(/\D/g, '');

/** Words that tell one action from another in a proposal. */
const VERBS: Record<Request['kind'], RegExp> = {
  status: /\bstatus\b/,
  cancel: /\bcancel/,
  return: /\breturn/,
  exchange: /\bexchang/,
  modify_items: /\b(modif|chang|updat|swap)/,
  order_address: /\baddress\b/,
  order_payment: /\b(payment|pay)\b/,
  user_address: /\baddress\b/,
  product_price: /\b(price|cost)/,
  order_total: /\btotal\b/,
  transfer: /\b(human|transfer)/,
};
const WRITE_KINDS = new Set(['cancel', 'return', 'exchange', 'modify_items', 'order_address', 'order_payment', 'user_address']);

/** The strings that show a reply is about this request (its orders, its product, its new address). */
export function requestKeys(r: Request): string[] {
  switch (r.kind) {
    case 'order_total':
      return r.orderRefs.map(orderDigits);
    case 'product_price':
      return [r.productName.toLowerCase()];
    case 'user_address':
      return [r.address.address1.toLowerCase()];
    case 'transfer':
      return ['human', 'transfer'];
    default:
      return [orderDigits(r.orderRef)];
  }
}

export const mentions = (text: string, r: Request) => {
  const t = text.toLowerCase();
  return requestKeys(r).some((k) => k !== '' && t.includes(k));
};

function paymentStated(t: string, p: PaymentRef): boolean {
  const giftOrPaypal = /gift ?card|paypal/.test(t);
  switch (p.kind) {
    case 'original':
      // The user does not know which method was the original one: it accepts "original", or a proposal
      // that does not move the money somewhere it did not ask for.
      return /\boriginal\b|\bsame payment\b/.test(t) || !giftOrPaypal;
    case 'gift_card':
      return /gift ?card/.test(t);
    case 'paypal':
      return t.includes('paypal');
    case 'credit_card':
      return t.includes(p.lastFour);
  }
}

/**
 * Whether a proposal is about this request (its action and its order), and if so which of its details it
 * gets wrong. Reads only the agent's words. A write proposed for a read-only request is never "about" it.
 */
export function judgeProposal(raw: string, r: Request): { about: boolean; wrong: string[] } {
  const t = (typeof raw === 'string' ? raw : '').slice(0, MAX_READ).toLowerCase().replaceAll(',', '');
  if (!VERBS[r.kind].test(t)) return { about: false, wrong: [] };
  const otherOrders = [...t.matchAll(/#?w(\d{7})\b/g)].map((m) => m[1]);
  const keys = requestKeys(r);
  if (!keys.some((k) => t.includes(k))) return { about: false, wrong: [] };
  if (!WRITE_KINDS.has(r.kind)) return { about: true, wrong: [] };
  const wrong: string[] = [];
  if (r.kind !== 'user_address' && otherOrders.some((d) => !keys.includes(d))) wrong.push('order');
  const has = (s: string) => t.includes(s.toLowerCase().replaceAll(',', ''));
  switch (r.kind) {
    case 'cancel':
      if (!has(r.reason)) wrong.push('reason');
      break;
    case 'return':
      for (const i of r.items) if (!has(i.productName)) wrong.push(i.productName);
      if (!paymentStated(t, r.refund)) wrong.push('refund');
      break;
    case 'exchange':
    case 'modify_items':
      for (const c of r.changes) {
        if (!has(c.item.productName)) wrong.push(c.item.productName);
        for (const v of Object.values(c.options)) if (!has(v)) wrong.push(v);
      }
      if (!paymentStated(t, r.payment)) wrong.push('payment');
      break;
    case 'order_address':
    case 'user_address':
      for (const v of [r.address.address1, r.address.zip]) if (!has(v)) wrong.push(v);
      break;
    case 'order_payment':
      if (!paymentStated(t, r.payment) || (r.payment.kind !== 'original' && !/gift ?card|paypal|\d{4}/.test(t))) wrong.push('payment');
      break;
  }
  return { about: true, wrong };
}
