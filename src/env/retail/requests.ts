// The requests of retail tasks, one builder per intent family: each picks real records for a user (through
// the generator's random stream, in a fixed order, so that a seed always gives the same task), states the
// request as a structured intent, and computes the reference actions and the facts the reply must state from
// the data. A builder throws Skip when the user has nothing it can ask about (the generator draws again).
import type { Rng } from '../../util/rng';
import type { ToolCall } from '../domain';
import { pyRound2 } from '../json';
import type { BaseData } from '../store';
import { TRANSFER_MESSAGE, type Change, type Family, type PaymentRef, type Request } from './intent';
import type { Address, Order, PaymentMethod, Product, User } from './types';

export const CANCEL_REASONS = ['no longer needed', 'ordered by mistake'] as const;
const TOPICS = ['a billing dispute', 'a warranty claim', 'a damaged package', 'my loyalty points'];
const BAD_REASONS = ['I found it cheaper elsewhere', 'the delivery is taking too long', 'I changed my mind about the color'];
const STREETS = ['Oak Street', 'Maple Avenue', 'Cedar Lane', 'Pine Road', 'Elm Court', 'Birch Way', 'Willow Drive', 'Lakeview Blvd'];
const CITIES: [string, string, string][] = [
  ['Denver', 'CO', '80203'],
  ['Portland', 'OR', '97205'],
  ['Austin', 'TX', '78701'],
  ['Columbus', 'OH', '43215'],
  ['Madison', 'WI', '53703'],
  ['Raleigh', 'NC', '27601'],
  ['Tucson', 'AZ', '85701'],
  ['Boise', 'ID', '83702'],
];

export const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[rng.int(xs.length)];
const money = (x: number) => x.toFixed(2);

export class Skip extends Error {}
export function need<T>(v: T | undefined | null | false): T {
  if (v === undefined || v === null || v === false) throw new Skip();
  return v;
}

export interface Built {
  request: Request;
  actions: ToolCall[];
  facts: string[];
  /** Reference actions that are expected to fail (not checklist items). */
  failing?: ToolCall[];
}

function orderRef(rng: Rng, id: string): string {
  return rng.next() < 0.35 ? id.slice(1) : id;
}

function paymentRef(pm: PaymentMethod): PaymentRef {
  if (pm.source === 'gift_card') return { kind: 'gift_card' };
  if (pm.source === 'paypal') return { kind: 'paypal' };
  return { kind: 'credit_card', brand: pm.brand, lastFour: pm.last_four };
}

function randomAddress(rng: Rng): Address {
  const [city, state, zip] = pick(rng, CITIES);
  return {
    address1: `${100 + rng.int(9800)} ${pick(rng, STREETS)}`,
    address2: `${pick(rng, ['Apt', 'Suite', 'Unit'])} ${1 + rng.int(999)}`,
    city,
    country: 'USA',
    state,
    zip,
  };
}

/** Items whose product name occurs once in the order (so a name identifies the item). */
function uniqueItems(o: Order) {
  return o.items.filter((i) => o.items.filter((j) => j.name === i.name).length === 1);
}

/** Up to n changes to other available variants; returns the changes, new ids and unrounded difference. */
function changes(rng: Rng, product: (id: string) => Product, o: Order, n: number) {
  const cands = uniqueItems(o).filter((i) =>
    Object.values(product(i.product_id).variants).some((v) => v.available && v.item_id !== i.item_id),
  );
  need(cands.length > 0);
  const chosen: typeof cands = [];
  while (chosen.length < Math.min(n, cands.length)) {
    const c = pick(rng, cands);
    if (!chosen.includes(c)) chosen.push(c);
  }
  const changes: Change[] = [];
  const oldIds: string[] = [];
  const newIds: string[] = [];
  let diff = 0;
  for (const it of chosen) {
    const v = pick(rng, Object.values(product(it.product_id).variants).filter((x) => x.available && x.item_id !== it.item_id));
    changes.push({ item: { productName: it.name }, options: { ...v.options } });
    oldIds.push(it.item_id);
    newIds.push(v.item_id);
    diff += v.price - it.price;
  }
  const pids = [...new Set(chosen.map((c) => c.product_id))];
  return { changes, oldIds, newIds, diff, pids };
}

/** A payment method for a price difference: the original one, or another the user has that can pay. */
function payFor(rng: Rng, o: Order, u: User, diff: number): { ref: PaymentRef; id: string; lookup: boolean } {
  const orig = u.payment_methods[o.payment_history[0].payment_method_id];
  const ok = (pm: PaymentMethod) => pm.source !== 'gift_card' || pm.balance >= diff;
  if (orig && ok(orig) && rng.next() < 0.6) return { ref: { kind: 'original' }, id: orig.id, lookup: false };
  const others = Object.values(u.payment_methods).filter(ok);
  const pm = need(others.length > 0 && pick(rng, others));
  return { ref: paymentRef(pm), id: pm.id, lookup: true };
}

/** What a family's builder may read: the random stream, the user and their orders, the world's users and base data. */
export interface RequestContext {
  rng: Rng;
  u: User;
  /** The user's orders, less one the task's other request already uses. */
  mine: Order[];
  users: readonly User[];
  base: BaseData;
  product: (id: string) => Product;
  /** One of `mine` in one of these statuses (Skip when there is none). */
  withStatus: (...status: string[]) => Order;
  details: (orderId: string) => ToolCall;
  userDetails: ToolCall;
}

function changeItems(family: 'exchange' | 'modify_items', { rng, u, product, withStatus, details, userDetails }: RequestContext): Built {
  const o = withStatus(family === 'exchange' ? 'delivered' : 'pending');
  const c = changes(rng, product, o, rng.next() < 0.75 ? 1 : 2);
  const diff = family === 'exchange' ? pyRound2(c.diff) : c.diff;
  const pay = payFor(rng, o, u, diff);
  const tool = family === 'exchange' ? 'exchange_delivered_order_items' : 'modify_pending_order_items';
  const ref = orderRef(rng, o.order_id);
  return {
    request: family === 'exchange' ? { kind: 'exchange', orderRef: ref, changes: c.changes, payment: pay.ref } : { kind: 'modify_items', orderRef: ref, changes: c.changes, payment: pay.ref },
    actions: [
      details(o.order_id),
      ...c.pids.map((p): ToolCall => ({ name: 'get_product_details', arguments: { product_id: p } })),
      ...(pay.lookup ? [userDetails] : []),
      { name: tool, arguments: { order_id: o.order_id, item_ids: c.oldIds, new_item_ids: c.newIds, payment_method_id: pay.id } },
    ],
    facts: [money(Math.abs(diff))],
  };
}

export const REQUEST_BUILDERS: Readonly<Record<Exclude<Family, 'multi'>, (x: RequestContext) => Built>> = {
  status: ({ rng, mine, details }) => {
    const o = need(mine.length > 0 && pick(rng, mine));
    const facts = [o.status, ...(o.status === 'delivered' || o.status === 'processed' ? o.fulfillments.flatMap((f) => f.tracking_id) : [])];
    return { request: { kind: 'status', orderRef: orderRef(rng, o.order_id) }, actions: [details(o.order_id)], facts };
  },
  cancel: ({ rng, withStatus, details }) => {
    const o = withStatus('pending');
    const reason = pick(rng, CANCEL_REASONS);
    const refund = o.payment_history.reduce((a, p) => a + p.amount, 0);
    return {
      request: { kind: 'cancel', orderRef: orderRef(rng, o.order_id), reason },
      actions: [details(o.order_id), { name: 'cancel_pending_order', arguments: { order_id: o.order_id, reason } }],
      facts: [money(refund)],
    };
  },
  refuse_cancel_status: ({ rng, withStatus, details }) => {
    const o = withStatus('processed', 'delivered', 'cancelled');
    return {
      request: { kind: 'cancel', orderRef: orderRef(rng, o.order_id), reason: pick(rng, CANCEL_REASONS) },
      actions: [details(o.order_id)],
      facts: [o.status],
    };
  },
  refuse_cancel_reason: ({ rng, withStatus, details }) => {
    const o = withStatus('pending');
    return {
      request: { kind: 'cancel', orderRef: orderRef(rng, o.order_id), reason: pick(rng, BAD_REASONS) },
      actions: [details(o.order_id)],
      facts: [...CANCEL_REASONS],
    };
  },
  return: ({ rng, u, withStatus, details, userDetails }) => {
    const o = withStatus('delivered');
    const items = need(uniqueItems(o).length > 0 && uniqueItems(o));
    const chosen = rng.next() < 0.7 || items.length < 2 ? [pick(rng, items)] : items.slice(0, 2);
    const gift = Object.values(u.payment_methods).find((p) => p.source === 'gift_card');
    const toGift = gift !== undefined && rng.next() < 0.4;
    const pm = toGift ? gift.id : o.payment_history[0].payment_method_id;
    const total = chosen.reduce((a, i) => a + i.price, 0);
    return {
      request: { kind: 'return', orderRef: orderRef(rng, o.order_id), items: chosen.map((i) => ({ productName: i.name })), refund: toGift ? { kind: 'gift_card' } : { kind: 'original' } },
      actions: [
        details(o.order_id),
        ...(toGift ? [userDetails] : []),
        { name: 'return_delivered_order_items', arguments: { order_id: o.order_id, item_ids: chosen.map((i) => i.item_id), payment_method_id: pm } },
      ],
      facts: [money(total)],
    };
  },
  refuse_return_status: ({ rng, withStatus, details }) => {
    const o = withStatus('pending', 'processed');
    const items = need(uniqueItems(o).length > 0 && uniqueItems(o));
    return {
      request: { kind: 'return', orderRef: orderRef(rng, o.order_id), items: [{ productName: pick(rng, items).name }], refund: { kind: 'original' } },
      actions: [details(o.order_id)],
      facts: [o.status],
    };
  },
  exchange: (x) => changeItems('exchange', x),
  modify_items: (x) => changeItems('modify_items', x),
  order_address: ({ rng, withStatus, details }) => {
    const o = withStatus('pending');
    const address = randomAddress(rng);
    return {
      request: { kind: 'order_address', orderRef: orderRef(rng, o.order_id), address },
      actions: [details(o.order_id), { name: 'modify_pending_order_address', arguments: { order_id: o.order_id, ...address } }],
      facts: [],
    };
  },
  order_payment: ({ rng, u, withStatus, details, userDetails }) => {
    const o = withStatus('pending');
    const amount = o.payment_history[0].amount;
    const others = Object.values(u.payment_methods).filter(
      (p) => p.id !== o.payment_history[0].payment_method_id && (p.source !== 'gift_card' || p.balance >= amount),
    );
    const pm = need(others.length > 0 && pick(rng, others));
    return {
      request: { kind: 'order_payment', orderRef: orderRef(rng, o.order_id), payment: paymentRef(pm) },
      actions: [details(o.order_id), userDetails, { name: 'modify_pending_order_payment', arguments: { order_id: o.order_id, payment_method_id: pm.id } }],
      facts: [],
    };
  },
  user_address: ({ rng, u }) => {
    const address = randomAddress(rng);
    return { request: { kind: 'user_address', address }, actions: [{ name: 'modify_user_address', arguments: { user_id: u.user_id, ...address } }], facts: [] };
  },
  product_price: ({ rng, base }) => {
    const products = [...base.tables.get('products')!.values()] as unknown as Product[];
    const p = pick(rng, products);
    const v = pick(rng, Object.values(p.variants));
    return {
      request: { kind: 'product_price', productName: p.name, options: { ...v.options } },
      actions: [{ name: 'list_all_product_types', arguments: {} }, { name: 'get_product_details', arguments: { product_id: p.product_id } }],
      facts: [money(v.price)],
    };
  },
  order_total: ({ rng, mine, details }) => {
    need(mine.length >= 2);
    const a = pick(rng, mine);
    const b = pick(rng, mine.filter((o) => o !== a));
    const [x, y] = [a.payment_history[0].amount, b.payment_history[0].amount];
    return {
      request: { kind: 'order_total', orderRefs: [orderRef(rng, a.order_id), orderRef(rng, b.order_id)] },
      actions: [details(a.order_id), details(b.order_id), { name: 'calculate', arguments: { expression: `${x} + ${y}` } }],
      facts: [money(pyRound2(x + y))],
    };
  },
  transfer: ({ rng }) => {
    const topic = pick(rng, TOPICS);
    return {
      request: { kind: 'transfer', topic },
      actions: [{ name: 'transfer_to_human_agents', arguments: { summary: `The user asks for a human agent about ${topic}.` } }],
      facts: [TRANSFER_MESSAGE],
    };
  },
  refuse_other_user: ({ rng, u, users, details }) => {
    const others = users.filter((x) => x.user_id !== u.user_id && x.orders.length > 0);
    const other = pick(rng, others);
    const id = pick(rng, other.orders);
    const ref = orderRef(rng, id);
    const request: Request = rng.next() < 0.5 ? { kind: 'status', orderRef: ref } : { kind: 'cancel', orderRef: ref, reason: pick(rng, CANCEL_REASONS) };
    return { request, actions: [details(id)], facts: [] };
  },
  unknown_order: ({ rng, u, base, details, userDetails }) => {
    const known = new Set(base.tables.get('orders')!.keys());
    let id = '';
    for (let k = 0; k < 20 && (id === '' || known.has(id)); k++) id = '#W' + String(1000000 + rng.int(9000000));
    need(!known.has(id));
    const bad = details(id);
    return {
      request: { kind: 'status', orderRef: orderRef(rng, id) },
      actions: [bad, userDetails],
      failing: [bad],
      facts: need(u.orders.length > 0) && [...u.orders],
    };
  },
};
