// A scripted expert agent for generated retail tasks. It reads the task's structured intent (what the user
// message says) and discovers everything else through real tool calls: the user id, the order and its
// status, item ids from product names, variant ids from wanted options, payment method ids from how the
// user named them, and the amounts it reports. It follows the policy: authenticate first, check the status
// before any write, refuse what the rules forbid, one final reply that states the outcome.
//
// With mistakeRate > 0 it makes realistic mistakes and recovers from them, so the data shows the
// environment's error dynamics:
//  - forgotten '#': an order id the user gave without '#' is first looked up as written (Order not found),
//    then with '#';
//  - write on a forbidden status: in a refusal case it tries the write anyway (cancel a non-pending order,
//    return from a non-delivered one), gets the error, then refuses;
//  - wrong cancel reason text: it first passes the user's reason capitalised (Invalid reason), then the
//    exact text.
// Each mistake is a failed call, so the database and the real reward are unaffected.
//
// With carelessRate > 0 it is a careless demonstrator instead, whose slips do cost the reward: a reply
// leaves out what the user was owed while every call stays right. Its habits (carelessAbout): 'figures' —
// the tracking number of a status lookup, the amount refunded or charged after a cancellation, return,
// exchange or item change (replies whose whole answer is a figure, an order total or a price, keep it);
// 'refusals' — why a cancellation or a return is refused (the order's status, the reasons allowed);
// 'lookups' — what a lookup found and the user was owed: the tracking number of a status lookup, the status
// that stops a cancellation, return, exchange or item change, the orders on the account when an order is not
// found. These draws come from their own stream, so the data's other mistakes are the same at any careless
// rate, and a reply draws only when one of its habits is chosen, so adding a habit leaves the others' data as
// it was.

import { deriveSeedFromText, hash32, Rng } from '../../util/rng';
import { DEFAULT_CARELESS_ABOUT, type CarelessHabit, type ExpertOptions, type ExpertResult, type Observation, type Step } from '../domain';
import type { Environment } from '../env';
import { rowsFromEpisode } from '../rows';
import type { Change, PaymentRef, Request, RetailTask } from './intent';
import { TRANSFER_MESSAGE } from './intent';
import type { Order, PaymentMethod, Product, User } from './types';

// Shared with the conversation expert (expert-conversation.ts): the same words for the same facts.
export const money = (x: number) => '$' + x.toFixed(2);
export const sameOptions = (a: Record<string, string>, b: Record<string, string>) =>
  Object.keys(a).length === Object.keys(b).length && Object.keys(a).every((k) => Object.hasOwn(b, k) && a[k] === b[k]);

class Episode {
  readonly steps: Step[] = [];
  mistakes = 0;
  careless = 0;
  constructor(
    private readonly env: Environment,
    private readonly rng: Rng,
    private readonly rate: number,
    private readonly carelessRng: Rng,
    private readonly carelessRate: number,
    private readonly carelessAbout: readonly CarelessHabit[],
  ) {}

  call(name: string, args: Record<string, unknown>): Observation {
    const obs = this.env.execute({ name, arguments: args });
    this.steps.push({ kind: 'call', call: { name, arguments: args }, observation: obs });
    return obs;
  }

  /** Decides whether to make a deliberate mistake at this opportunity. */
  slip(): boolean {
    if (this.rate > 0 && this.rng.next() < this.rate) {
      this.mistakes++;
      return true;
    }
    return false;
  }

  /** Decides whether this reply leaves out what it owes; `habits` are the habits that would leave it out. */
  skips(...habits: CarelessHabit[]): boolean {
    if (this.carelessRate > 0 && habits.some((h) => this.carelessAbout.includes(h)) && this.carelessRng.next() < this.carelessRate) {
      this.careless++;
      return true;
    }
    return false;
  }
}

export function describePm(pm: PaymentMethod): string {
  if (pm.source === 'credit_card') return `your ${pm.brand} card ending in ${pm.last_four}`;
  return pm.source === 'paypal' ? 'your PayPal account' : 'your gift card';
}

/** The seed of the expert's mistakes on a task: they depend on (seed, task), so a batch of tasks does not repeat one pattern. */
export const mistakeSeed = (seed: number, taskId: string) => deriveSeedFromText(hash32(seed ^ 0x3e9e47), taskId);
const carelessSeed = (seed: number, taskId: string) => deriveSeedFromText(hash32(seed ^ 0x5ca7e1), taskId);

export function runRetailExpert(task: RetailTask, env: Environment, opts: ExpertOptions = {}): ExpertResult {
  const seed = opts.seed ?? 0;
  const ep = new Episode(env, new Rng(mistakeSeed(seed, task.id)), opts.mistakeRate ?? 0, new Rng(carelessSeed(seed, task.id)), opts.carelessRate ?? 0, opts.carelessAbout ?? DEFAULT_CARELESS_ABOUT);
  const parts: string[] = [];
  const userId = authenticate(ep, task);
  if (userId === null) {
    parts.push("I'm sorry, I could not find your account with the details you gave.");
  } else {
    for (const r of task.intent.requests) parts.push(handle(ep, userId, r));
  }
  ep.steps.push({ kind: 'reply', text: parts.join(' ') });
  return { steps: ep.steps, rows: rowsFromEpisode(task, ep.steps), mistakes: ep.mistakes, careless: ep.careless };
}

function authenticate(ep: Episode, task: RetailTask): string | null {
  const a = task.intent.auth;
  if (a.kind === 'email' || a.kind === 'email_then_name_zip') {
    const o = ep.call('find_user_id_by_email', { email: a.email });
    if (o.ok) return o.result as string;
    if (a.kind === 'email') return null;
  }
  if (a.kind === 'name_zip' || a.kind === 'email_then_name_zip') {
    const o = ep.call('find_user_id_by_name_zip', { first_name: a.first, last_name: a.last, zip: a.zip });
    if (o.ok) return o.result as string;
  }
  return null;
}

function userDetails(ep: Episode, userId: string): User | null {
  const o = ep.call('get_user_details', { user_id: userId });
  return o.ok ? (o.result as User) : null;
}

/** Resolves how the user named a payment method to an id of theirs (the original needs the order only). */
function resolvePayment(ep: Episode, userId: string, order: Order, ref: PaymentRef): PaymentMethod | string | null {
  if (ref.kind === 'original') return order.payment_history[0]?.payment_method_id ?? null;
  const u = userDetails(ep, userId);
  if (!u) return null;
  const pms = Object.values(u.payment_methods);
  const found =
    ref.kind === 'credit_card'
      ? pms.find((p) => p.source === 'credit_card' && p.last_four === ref.lastFour)
      : pms.find((p) => p.source === ref.kind);
  return found ?? null;
}

const pmId = (p: PaymentMethod | string) => (typeof p === 'string' ? p : p.id);
const pmText = (p: PaymentMethod | string) => (typeof p === 'string' ? 'the original payment method' : describePm(p));

function fetchOrder(ep: Episode, ref: string): { id: string; order: Order | null } {
  const id = ref.startsWith('#') ? ref : '#' + ref;
  if (id !== ref && ep.slip()) ep.call('get_order_details', { order_id: ref });
  const o = ep.call('get_order_details', { order_id: id });
  return { id, order: o.ok ? (o.result as Order) : null };
}

/** Variant ids for the wanted changes, looking up each product once. */
function resolveChanges(ep: Episode, order: Order, changes: Change[]): { old: string[]; neu: string[] } | null {
  const products = new Map<string, Product>();
  const old: string[] = [];
  const neu: string[] = [];
  for (const c of changes) {
    const item = order.items.find((i) => i.name === c.item.productName);
    if (!item) return null;
    let p = products.get(item.product_id);
    if (!p) {
      const o = ep.call('get_product_details', { product_id: item.product_id });
      if (!o.ok) return null;
      p = o.result as Product;
      products.set(item.product_id, p);
    }
    const v = Object.values(p.variants).find((x) => sameOptions(x.options, c.options));
    if (!v || !v.available) return null;
    old.push(item.item_id);
    neu.push(v.item_id);
  }
  return { old, neu };
}

function handle(ep: Episode, userId: string, r: Request): string {
  if (r.kind === 'user_address') {
    const o = ep.call('modify_user_address', { user_id: userId, ...r.address });
    return o.ok ? `Your default address is now ${r.address.address1}, ${r.address.city}.` : `I could not update your address (${o.error}).`;
  }
  if (r.kind === 'product_price') return productPrice((n, a) => ep.call(n, a), r.productName, r.options);
  if (r.kind === 'transfer') {
    ep.call('transfer_to_human_agents', { summary: `The user asks for a human agent about ${r.topic}.` });
    return TRANSFER_MESSAGE;
  }
  if (r.kind === 'order_total') {
    const amounts: number[] = [];
    for (const ref of r.orderRefs) {
      const { id, order } = fetchOrder(ep, ref);
      if (!order || order.user_id !== userId) return `I could not find order ${id} on your account.`;
      amounts.push(order.payment_history[0].amount);
    }
    const sum = ep.call('calculate', { expression: amounts.join(' + ') });
    return sum.ok ? `Together the two orders cost ${money(Number(sum.result))}.` : 'I could not add up the totals.';
  }
  const { id, order } = fetchOrder(ep, r.orderRef);
  if (!order) {
    const u = userDetails(ep, userId);
    if (ep.skips('lookups')) return `I could not find order ${id}.`;
    return `I could not find order ${id}. The orders on your account are ${u ? u.orders.join(', ') : 'unknown'}.`;
  }
  if (order.user_id !== userId) return `Order ${id} is not on your account, so I can't help with it.`;
  switch (r.kind) {
    case 'status': {
      const tracking = order.status === 'delivered' || order.status === 'processed' ? order.fulfillments.flatMap((f) => f.tracking_id) : [];
      if (tracking.length && ep.skips('figures', 'lookups')) return `Order ${id} is ${order.status}.`;
      return `Order ${id} is ${order.status}.` + (tracking.length ? ` Tracking number: ${tracking.join(', ')}.` : '');
    }
    case 'cancel': {
      if (order.status !== 'pending') {
        if (ep.slip()) ep.call('cancel_pending_order', { order_id: id, reason: r.reason });
        if (ep.skips('refusals', 'lookups')) return `I'm sorry, but I can't cancel order ${id}.`;
        return order.status === 'cancelled'
          ? `Order ${id} is already cancelled.`
          : `Order ${id} is ${order.status}, so it can no longer be cancelled; only pending orders can be.`;
      }
      if (r.reason !== 'no longer needed' && r.reason !== 'ordered by mistake') {
        if (ep.skips('refusals')) return `I'm sorry, but I can't cancel order ${id} for that reason.`;
        return 'I can only cancel an order when it is no longer needed or was ordered by mistake.';
      }
      if (ep.slip()) ep.call('cancel_pending_order', { order_id: id, reason: r.reason[0].toUpperCase() + r.reason.slice(1) });
      const o = ep.call('cancel_pending_order', { order_id: id, reason: r.reason });
      if (!o.ok) return `I could not cancel order ${id} (${o.error}).`;
      if (ep.skips('figures')) return `Order ${id} is cancelled; the refund will go to the original payment method.`;
      const refund = order.payment_history.reduce((a, p) => a + p.amount, 0);
      return `Order ${id} is cancelled; ${money(refund)} will be refunded to the original payment method.`;
    }
    case 'return': {
      const itemIds = r.items.map((it) => order.items.find((i) => i.name === it.productName)?.item_id).filter((x): x is string => !!x);
      if (order.status !== 'delivered') {
        if (ep.slip()) ep.call('return_delivered_order_items', { order_id: id, item_ids: itemIds, payment_method_id: order.payment_history[0]?.payment_method_id ?? '' });
        if (ep.skips('refusals', 'lookups')) return `I'm sorry, but I can't return items from order ${id}.`;
        return `Order ${id} is ${order.status}, so its items cannot be returned yet.`;
      }
      const pm = resolvePayment(ep, userId, order, r.refund);
      if (!pm) return 'I could not find that payment method on your account.';
      const o = ep.call('return_delivered_order_items', { order_id: id, item_ids: itemIds, payment_method_id: pmId(pm) });
      if (!o.ok) return `I could not request the return (${o.error}).`;
      if (ep.skips('figures')) return `The return is requested; the refund will go to ${pmText(pm)}. You will receive an email with return instructions.`;
      const total = itemIds.reduce((a, x) => a + order.items.find((i) => i.item_id === x)!.price, 0);
      return `The return is requested: ${money(total)} will be refunded to ${pmText(pm)}. You will receive an email with return instructions.`;
    }
    case 'exchange':
    case 'modify_items': {
      const exchange = r.kind === 'exchange';
      if (order.status !== (exchange ? 'delivered' : 'pending')) {
        if (ep.skips('lookups')) return `I'm sorry, but I can't ${exchange ? 'exchange' : 'modify'} the items of order ${id}.`;
        return `Order ${id} is ${order.status}, so its items cannot be ${exchange ? 'exchanged' : 'modified'}.`;
      }
      const c = resolveChanges(ep, order, r.changes);
      if (!c) return 'I could not find an available variant with those options.';
      const pm = resolvePayment(ep, userId, order, r.payment);
      if (!pm) return 'I could not find that payment method on your account.';
      const tool = exchange ? 'exchange_delivered_order_items' : 'modify_pending_order_items';
      const o = ep.call(tool, { order_id: id, item_ids: c.old, new_item_ids: c.neu, payment_method_id: pmId(pm) });
      if (!o.ok) return `I could not change the items (${o.error}).`;
      if (ep.skips('figures')) {
        return exchange
          ? `The exchange is requested; the difference will be settled with ${pmText(pm)}. You will receive an email with instructions.`
          : `Order ${id} is updated; the difference will be settled with ${pmText(pm)}.`;
      }
      const res = o.result as Order;
      const diff = exchange ? res.exchange_price_difference! : res.payment_history[res.payment_history.length - 1].amount * (res.payment_history[res.payment_history.length - 1].transaction_type === 'payment' ? 1 : -1);
      const how = diff > 0 ? `${money(diff)} will be charged to` : `${money(Math.abs(diff))} will be refunded to`;
      return exchange
        ? `The exchange is requested; ${how} ${pmText(pm)}. You will receive an email with instructions.`
        : `Order ${id} is updated; ${how} ${pmText(pm)}.`;
    }
    case 'order_address': {
      if (!order.status.includes('pending')) return `Order ${id} is ${order.status}, so its address cannot be changed.`;
      const o = ep.call('modify_pending_order_address', { order_id: id, ...r.address });
      return o.ok ? `Order ${id} will ship to ${r.address.address1}, ${r.address.city}.` : `I could not change the address (${o.error}).`;
    }
    case 'order_payment': {
      if (!order.status.includes('pending')) return `Order ${id} is ${order.status}, so its payment cannot be changed.`;
      const pm = resolvePayment(ep, userId, order, r.payment);
      if (!pm) return 'I could not find that payment method on your account.';
      const o = ep.call('modify_pending_order_payment', { order_id: id, payment_method_id: pmId(pm) });
      return o.ok ? `Order ${id} is now paid with ${pmText(pm)}.` : `I could not change the payment (${o.error}).`;
    }
  }
}

/** The price answer: the product's id from the catalogue, then the variant with exactly these options. */
export function productPrice(call: (name: string, args: Record<string, unknown>) => Observation, name: string, options: Record<string, string>): string {
  const list = call('list_all_product_types', {});
  if (!list.ok) return 'I could not list the products.';
  let pid: string | undefined;
  try {
    pid = (JSON.parse(list.result as string) as Record<string, string>)[name];
  } catch {
    pid = undefined;
  }
  if (!pid) return `We do not sell a product called ${name}.`;
  const p = call('get_product_details', { product_id: pid });
  if (!p.ok) return `I could not look up the ${name}.`;
  const v = Object.values((p.result as Product).variants).find((x) => sameOptions(x.options, options));
  if (!v) return `There is no ${name} with those options.`;
  return `The ${name} with those options costs ${money(v.price)} and is ${v.available ? 'available' : 'currently unavailable'}.`;
}
