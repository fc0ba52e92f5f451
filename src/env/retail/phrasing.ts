// Verbalises a retail intent into the user's opening message, with seeded variation (greetings, how the
// user identifies themself, how orders, items, options and payment methods are named, politeness, explicit
// consent to act). Every fact the expert needs is in the text; the wording varies so a small policy cannot
// key on one template.

import type { Rng } from '../../util/rng';
import type { Address } from './types';
import type { Auth, Change, PaymentRef, Request, RetailIntent } from './intent';

const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[rng.int(xs.length)];

const GREET = ['Hi.', 'Hello.', 'Hey there!', 'Good morning.', 'Hi there!', ''];
const CONSENT = [
  'Yes, I confirm, please go ahead.',
  'You have my confirmation to do this.',
  'Please proceed, I confirm.',
  "I'm sure, go ahead.",
  'I confirm the details, please do it now.',
];
const THANKS = ['Thanks!', 'Thank you.', 'Appreciate it.', ''];

function authText(rng: Rng, a: Auth): string {
  switch (a.kind) {
    case 'email':
      return pick(rng, [`My email is ${a.email}.`, `You can find me under ${a.email}.`, `I'm ${a.email}.`, `My account email: ${a.email}.`]);
    case 'name_zip':
      return pick(rng, [
        `I'm ${a.first} ${a.last}, zip code ${a.zip}.`,
        `My name is ${a.first} ${a.last} and my zip is ${a.zip}.`,
        `This is ${a.first} ${a.last} from zip ${a.zip}.`,
        `Name: ${a.first} ${a.last}, zip ${a.zip}.`,
      ]);
    case 'email_then_name_zip':
      return pick(rng, [
        `My email might be ${a.email}; if that doesn't work, I'm ${a.first} ${a.last}, zip ${a.zip}.`,
        `Try ${a.email}. Otherwise my name is ${a.first} ${a.last} and my zip code is ${a.zip}.`,
      ]);
  }
}

function orderText(rng: Rng, ref: string): string {
  return pick(rng, [`order ${ref}`, `my order ${ref}`, `order number ${ref}`, `the order ${ref}`]);
}

function optionsText(o: Record<string, string>): string {
  return Object.entries(o)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
}

function paymentText(rng: Rng, p: PaymentRef): string {
  switch (p.kind) {
    case 'original':
      return pick(rng, ['the original payment method', 'the same payment method I used', 'my original payment method']);
    case 'gift_card':
      return pick(rng, ['my gift card', 'the gift card on my account']);
    case 'paypal':
      return pick(rng, ['my PayPal', 'PayPal', 'my PayPal account']);
    case 'credit_card':
      return pick(rng, [`my ${p.brand} card ending in ${p.lastFour}`, `the ${p.brand} ending ${p.lastFour}`, `my credit card ending in ${p.lastFour}`]);
  }
}

function addressText(a: Address): string {
  return `${a.address1}, ${a.address2}, ${a.city}, ${a.state} ${a.zip}, ${a.country}`;
}

function changesText(rng: Rng, cs: Change[]): string {
  return cs
    .map((c) =>
      pick(rng, [
        `the ${c.item.productName} for the one with ${optionsText(c.options)}`,
        `my ${c.item.productName} to the variant with ${optionsText(c.options)}`,
      ]),
    )
    .join(' and ');
}

function requestText(rng: Rng, r: Request): string {
  switch (r.kind) {
    case 'status':
      return pick(rng, [
        `What is the status of ${orderText(rng, r.orderRef)}?`,
        `Can you tell me where ${orderText(rng, r.orderRef)} is?`,
        `I'd like to check on ${orderText(rng, r.orderRef)}.`,
      ]);
    case 'cancel':
      return pick(rng, [
        `Please cancel ${orderText(rng, r.orderRef)}, the reason is: ${r.reason}.`,
        `I want to cancel ${orderText(rng, r.orderRef)} because ${r.reason}.`,
        `Cancel ${orderText(rng, r.orderRef)} please. Reason: ${r.reason}.`,
      ]);
    case 'return':
      return pick(rng, [
        `I want to return the ${r.items.map((i) => i.productName).join(' and the ')} from ${orderText(rng, r.orderRef)}, refund to ${paymentText(rng, r.refund)}.`,
        `Please return ${r.items.map((i) => `the ${i.productName}`).join(', ')} of ${orderText(rng, r.orderRef)} and send the refund to ${paymentText(rng, r.refund)}.`,
      ]);
    case 'exchange':
      return pick(rng, [
        `For ${orderText(rng, r.orderRef)}, which was delivered, I want to exchange ${changesText(rng, r.changes)}. Use ${paymentText(rng, r.payment)} for any difference.`,
        `I'd like an exchange on ${orderText(rng, r.orderRef)}: ${changesText(rng, r.changes)}. Any price difference goes on ${paymentText(rng, r.payment)}.`,
      ]);
    case 'modify_items':
      return pick(rng, [
        `${orderText(rng, r.orderRef)} hasn't shipped yet; please change ${changesText(rng, r.changes)}. Pay the difference with ${paymentText(rng, r.payment)}. That's the complete list.`,
        `Can you modify ${orderText(rng, r.orderRef)}? Change ${changesText(rng, r.changes)}, and use ${paymentText(rng, r.payment)}. Nothing else to change.`,
      ]);
    case 'order_address':
      return pick(rng, [
        `Please ship ${orderText(rng, r.orderRef)} to ${addressText(r.address)} instead.`,
        `I need to change the shipping address of ${orderText(rng, r.orderRef)} to ${addressText(r.address)}.`,
      ]);
    case 'order_payment':
      return pick(rng, [
        `I'd like to pay for ${orderText(rng, r.orderRef)} with ${paymentText(rng, r.payment)} instead.`,
        `Switch the payment of ${orderText(rng, r.orderRef)} to ${paymentText(rng, r.payment)}.`,
      ]);
    case 'user_address':
      return pick(rng, [
        `Please update my default address to ${addressText(r.address)}.`,
        `I moved; my new address is ${addressText(r.address)}. Update my profile please.`,
      ]);
    case 'order_total':
      return pick(rng, [
        `How much did I pay for ${orderText(rng, r.orderRefs[0])} and ${orderText(rng, r.orderRefs[1])} together?`,
        `What is the combined total of orders ${r.orderRefs[0]} and ${r.orderRefs[1]}?`,
      ]);
    case 'transfer':
      return pick(rng, [`I want to talk to a human agent about ${r.topic}.`, `Please transfer me to a real person, it's about ${r.topic}.`]);
    case 'product_price':
      return pick(rng, [
        `How much is the ${r.productName} with ${optionsText(r.options)}, and is it available?`,
        `What's the price of the ${r.productName} (${optionsText(r.options)})?`,
      ]);
  }
}

/** The opening user message for an intent. Writes carry explicit consent (one-message episodes). */
export function userMessage(rng: Rng, intent: RetailIntent): string {
  const writes = intent.requests.some((r) => !['status', 'product_price', 'order_total', 'transfer'].includes(r.kind));
  const parts = [pick(rng, GREET), authText(rng, intent.auth)];
  const reqs = intent.requests.map((r) => requestText(rng, r));
  const lower = (t: string) => (/^I\b/.test(t) ? t : t[0].toLowerCase() + t.slice(1));
  parts.push(reqs.map((t, i) => (i === 0 ? t : pick(rng, ['Also, ', 'And ', 'Second, ']) + lower(t))).join(' '));
  if (writes) parts.push(pick(rng, CONSENT));
  parts.push(pick(rng, THANKS));
  return parts.filter((p) => p).join(' ');
}
