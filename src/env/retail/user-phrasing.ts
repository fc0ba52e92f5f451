// The scripted user's words. Every line is picked from a few paraphrases by the turn's own random stream, so
// a small policy cannot key on one template, and none repeats the rendered instructions verbatim (τ²'s
// guideline: paraphrase, never read the scenario out). Each sentence carries exactly the facts its caller
// passes in: nothing here knows the task, so nothing here can reveal more than the script decided to.

import type { Rng } from '../../util/rng';
import type { Change, PaymentRef, Request } from './intent';
import type { Address } from './types';

export const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[rng.int(xs.length)];

export const optionsText = (o: Record<string, string>) =>
  Object.entries(o)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');

export const addressText = (a: Address) => `${a.address1}, ${a.address2}, ${a.city}, ${a.state} ${a.zip}, ${a.country}`;

export function paymentSay(rng: Rng, p: PaymentRef): string {
  switch (p.kind) {
    case 'original':
      return pick(rng, ['the original payment method', 'the same payment method I used for the order']);
    case 'gift_card':
      return pick(rng, ['my gift card', 'the gift card on my account']);
    case 'paypal':
      return pick(rng, ['my PayPal account', 'PayPal']);
    case 'credit_card':
      return pick(rng, [`my ${p.brand} card ending in ${p.lastFour}`, `the credit card ending in ${p.lastFour}`]);
  }
}

const changesSay = (rng: Rng, cs: Change[]) =>
  cs.map((c) => pick(rng, [`the ${c.item.productName} for the one with ${optionsText(c.options)}`, `my ${c.item.productName} to the version with ${optionsText(c.options)}`])).join(' and ');

const items = (r: { items: { productName: string }[] }) => r.items.map((i) => `the ${i.productName}`).join(' and ');

/** A request in the user's words; `ids` false leaves the order ids out (the user gives them when asked). */
export function requestSay(rng: Rng, r: Request, ids: boolean): string {
  const ord = (ref: string) => (ids ? pick(rng, [`order ${ref}`, `my order ${ref}`, `order number ${ref}`]) : pick(rng, ['one of my orders', 'an order of mine', 'an order I placed']));
  switch (r.kind) {
    case 'status':
      return pick(rng, [`I'd like to know the status of ${ord(r.orderRef)}.`, `Could you tell me where ${ord(r.orderRef)} is?`]);
    case 'cancel':
      return pick(rng, [`I want to cancel ${ord(r.orderRef)}. The reason: ${r.reason}.`, `I need to cancel ${ord(r.orderRef)}. Reason: ${r.reason}.`]);
    case 'return':
      return pick(rng, [`I'd like to return ${items(r)} from ${ord(r.orderRef)}, with the refund going to ${paymentSay(rng, r.refund)}.`, `I want to send back ${items(r)} of ${ord(r.orderRef)} and get the money back on ${paymentSay(rng, r.refund)}.`]);
    case 'exchange':
      return pick(rng, [`I received ${ord(r.orderRef)} and want to exchange ${changesSay(rng, r.changes)}. Any difference can go on ${paymentSay(rng, r.payment)}.`, `For ${ord(r.orderRef)}, which was delivered, I'd like to swap ${changesSay(rng, r.changes)}, settling the difference with ${paymentSay(rng, r.payment)}.`]);
    case 'modify_items':
      return pick(rng, [`${ids ? `Order ${r.orderRef}` : 'An order of mine'} hasn't shipped yet and I want to change ${changesSay(rng, r.changes)}, paying any difference with ${paymentSay(rng, r.payment)}. That's everything I want to change.`, `I'd like to modify ${ord(r.orderRef)}: change ${changesSay(rng, r.changes)}, using ${paymentSay(rng, r.payment)} for the difference. Nothing else.`]);
    case 'order_address':
      return pick(rng, [`I need ${ord(r.orderRef)} shipped to ${addressText(r.address)} instead.`, `Please change the shipping address of ${ord(r.orderRef)} to ${addressText(r.address)}.`]);
    case 'order_payment':
      return pick(rng, [`I'd like to pay for ${ord(r.orderRef)} with ${paymentSay(rng, r.payment)} instead.`, `Can you switch the payment of ${ord(r.orderRef)} to ${paymentSay(rng, r.payment)}?`]);
    case 'user_address':
      return pick(rng, [`I moved, and my default address should now be ${addressText(r.address)}.`, `Please update the address on my account to ${addressText(r.address)}.`]);
    case 'product_price':
      return pick(rng, [`How much is the ${r.productName} with ${optionsText(r.options)}, and can I buy it?`, `What does the ${r.productName} (${optionsText(r.options)}) cost?`]);
    case 'order_total':
      return ids
        ? pick(rng, [`How much did I pay for orders ${r.orderRefs[0]} and ${r.orderRefs[1]} together?`, `What's the combined total of my orders ${r.orderRefs[0]} and ${r.orderRefs[1]}?`])
        : pick(rng, ['I want to know how much two of my orders cost together.', "What's the combined total of two of my orders?"]);
    case 'transfer':
      return pick(rng, [`I'd like to speak with a human agent about ${r.topic}.`, `Can you put me through to a real person? It's about ${r.topic}.`]);
  }
}

/** The detail a changed mind or a correction states, in a short sentence. */
export function detailSay(rng: Rng, r: Request): string {
  switch (r.kind) {
    case 'cancel':
      return `the reason should be "${r.reason}"`;
    case 'return':
      return `I want ${items(r)} returned with the refund to ${paymentSay(rng, r.refund)}`;
    case 'exchange':
    case 'modify_items':
      return `I want ${changesSay(rng, r.changes)}, with ${paymentSay(rng, r.payment)} for the difference`;
    default:
      return requestSay(rng, r, true).replace(/[.?]$/, '');
  }
}

export const GREET = ['Hi.', 'Hello.', 'Hi there!', 'Good morning.', ''];
export const YES = ['Yes, please go ahead.', 'Yes, I confirm.', 'Yes, that is correct. Please proceed.', 'Yes.'];
export const DONT_KNOW = ["I'm sorry, I don't have that information.", "I don't know that, sorry.", "I'm afraid I don't know."];
export const NO_EMAIL = ["I don't remember my email address.", "I can't remember which email I used."];
export const NO_ORDER = ["I don't have an order number for this.", "There's no order number for this request."];

export function nameZipSay(rng: Rng, first: string, last: string, zip: string): string {
  return pick(rng, [`My name is ${first} ${last} and my zip code is ${zip}.`, `I'm ${first} ${last}, zip code ${zip}.`, `It's ${first} ${last}, and the zip is ${zip}.`]);
}

export function emailSay(rng: Rng, email: string): string {
  return pick(rng, [`My email is ${email}.`, `Sure, it's ${email}.`, `You can use ${email}.`]);
}

export function orderRefsSay(rng: Rng, refs: string[]): string {
  return refs.length === 1 ? pick(rng, [`The order number is ${refs[0]}.`, `It's order ${refs[0]}.`]) : `They are ${refs[0]} and ${refs[1]}.`;
}
