// Seeded generator of retail tasks for the small default policy. Each task picks real records from the
// database, states a request in words (phrasing.ts), and carries the reference actions, the facts the reply
// must state and its checklist, all computed here from the data (independently of the expert, which must
// rediscover them through tool calls).
//
// Splits: users are split by a hash of their id (one in five is held out). Test tasks only involve held-out
// users and their orders, train tasks only the others, and the two splits use disjoint seed streams, so no
// test-split record ever appears in training data. generate() is a pure function of (split, seed, count).

import { deriveSeedFromText, hash32, Rng } from '../../util/rng';
import type { ChecklistItem, ToolCall } from '../domain';
import { canonicalJson, hash64, pyRound2 } from '../json';
import type { BaseData } from '../store';
import type { Auth, Change, Family, PaymentRef, Request, RetailIntent, RetailTask } from './intent';
import { TRANSFER_MESSAGE } from './intent';
import { userMessage } from './phrasing';
import { RETAIL_WRITE_TOOLS } from './tools';
import type { Address, Order, PaymentMethod, Product, User } from './types';

export const FAMILY_WEIGHTS: Readonly<Record<Family, number>> = {
  status: 3,
  cancel: 3,
  return: 3,
  exchange: 3,
  modify_items: 3,
  order_address: 2,
  order_payment: 4,
  user_address: 2,
  product_price: 1,
  order_total: 2,
  transfer: 1,
  refuse_cancel_status: 2,
  refuse_cancel_reason: 1,
  refuse_return_status: 2,
  refuse_other_user: 1,
  unknown_order: 2,
  multi: 3,
};

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

/**
 * What the test split holds out. 'users' (the full retail world): one user in five, with their orders, never
 * appears in training. 'tasks' (a compact world, where every user must be seen to be learned): the same users
 * in both splits, and one *request* in five (a hash of the family and the structured intent: who, which
 * orders, items, options, addresses, payment) is test-only, so no held-out task's intent is ever trained on;
 * phrasings are not part of the key, so a held-out intent is never a re-worded train task either.
 */
export type HeldOut = 'users' | 'tasks';

/** Which split a task's intent belongs to under held-out 'tasks' (fixed: a hash of the intent, not the seed). */
export function intentSplit(family: Family, intent: RetailIntent): 'train' | 'test' {
  return parseInt(hash64(family + '\u0000' + canonicalJson(intent)).slice(0, 8), 16) % 5 === 0 ? 'test' : 'train';
}

/** Which split a user belongs to (fixed: a hash of the id, not the seed). */
export function userSplit(userId: string): 'train' | 'test' {
  return deriveSeedFromText(0, userId) % 5 === 0 ? 'test' : 'train';
}

const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[rng.int(xs.length)];
const money = (x: number) => x.toFixed(2);

class Skip extends Error {}
function need<T>(v: T | undefined | null | false): T {
  if (v === undefined || v === null || v === false) throw new Skip();
  return v;
}

interface Built {
  request: Request;
  actions: ToolCall[];
  facts: string[];
  /** Reference actions that are expected to fail (not checklist items). */
  failing?: ToolCall[];
}

export class RetailTaskGenerator {
  private readonly users: User[];
  private readonly byUser = new Map<string, Order[]>();

  constructor(
    private readonly base: BaseData,
    readonly split: 'train' | 'test',
    readonly heldOut: HeldOut = 'users',
  ) {
    this.users = [...base.tables.get('users')!.values()].map((u) => u as unknown as User).filter((u) => heldOut === 'tasks' || userSplit(u.user_id) === split);
    for (const u of this.users) {
      this.byUser.set(
        u.user_id,
        u.orders.map((id) => base.tables.get('orders')!.get(id) as unknown as Order).filter((o) => o !== undefined),
      );
    }
  }

  private product(id: string): Product {
    return this.base.tables.get('products')!.get(id) as unknown as Product;
  }

  generate(seed: number, count: number): RetailTask[] {
    const rng = new Rng(hash32(seed) ^ (this.split === 'train' ? 0x5eed0001 : 0x7e570002));
    const families = Object.entries(FAMILY_WEIGHTS) as [Family, number][];
    const total = families.reduce((a, [, w]) => a + w, 0);
    const tasks: RetailTask[] = [];
    let attempts = 0;
    const seen = new Set<string>();
    while (tasks.length < count) {
      if (++attempts > count * 400) throw new Error(`retail generator: cannot build ${count} tasks for split ${this.split}`);
      let r = rng.next() * total;
      let family = families[0][0];
      for (const [f, w] of families) {
        if ((r -= w) < 0) {
          family = f;
          break;
        }
      }
      try {
        const t = this.build(rng, family, `${this.split}-${seed}-${tasks.length}`);
        if (this.heldOut === 'tasks') {
          if (intentSplit(t.family, t.intent) !== this.split) continue;
          // A held-out set of a small world would otherwise repeat its commonest intents.
          const key = t.family + canonicalJson(t.intent);
          if (this.split === 'test' && seen.has(key)) continue;
          seen.add(key);
        }
        tasks.push(t);
      } catch (e) {
        if (!(e instanceof Skip)) throw e;
      }
    }
    return tasks;
  }

  private build(rng: Rng, family: Family, id: string): RetailTask {
    const user = pick(rng, this.users);
    const orders = this.byUser.get(user.user_id)!;
    const auth = this.auth(rng, user);
    const built: Built[] = [];
    if (family === 'multi') {
      const fams: Family[] = ['status', 'cancel', 'return', 'order_address', 'user_address', 'exchange', 'refuse_cancel_status'];
      const a = this.request(rng, pick(rng, fams), user, orders, null);
      const used = 'orderRef' in a.request ? a.request.orderRef : null;
      const b = this.request(rng, pick(rng, fams.filter((f) => f !== 'user_address' || a.request.kind !== 'user_address')), user, orders, used);
      built.push(a, b);
    } else {
      built.push(this.request(rng, family, user, orders, null));
    }
    const intent: RetailIntent = { auth, requests: built.map((b) => b.request) };
    const authActions = this.authActions(auth);
    const referenceActions = [...authActions.actions, ...built.flatMap((b) => b.actions)];
    const failing = [...authActions.failing, ...built.flatMap((b) => b.failing ?? [])];
    const facts = [...new Set(built.flatMap((b) => b.facts))];
    const checklist: ChecklistItem[] = referenceActions
      .filter((a) => !failing.includes(a))
      // Free-text arguments (a summary, an expression) are not required verbatim: the name is the item.
      .map((a) => ({ kind: 'call', name: a.name, args: FREE_TEXT_TOOLS.has(a.name) ? {} : a.arguments, weight: isWrite(a.name) ? 2 : 1 }));
    checklist.push({ kind: 'no_forbidden_writes', weight: 2 });
    for (const f of facts) checklist.push({ kind: 'fact', text: f, weight: 1 });
    return {
      id,
      family,
      split: this.split,
      intent,
      userMessages: [userMessage(rng, intent)],
      referenceActions,
      facts,
      checklist,
    };
  }

  private auth(rng: Rng, u: User): Auth {
    const x = rng.next();
    const nz = { first: u.name.first_name, last: u.name.last_name, zip: u.address.zip };
    if (x < 0.45) return { kind: 'email', email: rng.next() < 0.2 ? u.email.toUpperCase() : u.email };
    if (x < 0.9) return { kind: 'name_zip', ...nz };
    return { kind: 'email_then_name_zip', email: u.email.replace('@', '.old@'), ...nz };
  }

  private authActions(a: Auth): { actions: ToolCall[]; failing: ToolCall[] } {
    const nz = (x: { first: string; last: string; zip: string }): ToolCall => ({
      name: 'find_user_id_by_name_zip',
      arguments: { first_name: x.first, last_name: x.last, zip: x.zip },
    });
    if (a.kind === 'email') return { actions: [{ name: 'find_user_id_by_email', arguments: { email: a.email } }], failing: [] };
    if (a.kind === 'name_zip') return { actions: [nz(a)], failing: [] };
    const bad: ToolCall = { name: 'find_user_id_by_email', arguments: { email: a.email } };
    return { actions: [bad, nz(a)], failing: [bad] };
  }

  private orderRef(rng: Rng, id: string): string {
    return rng.next() < 0.35 ? id.slice(1) : id;
  }

  private paymentRef(pm: PaymentMethod): PaymentRef {
    if (pm.source === 'gift_card') return { kind: 'gift_card' };
    if (pm.source === 'paypal') return { kind: 'paypal' };
    return { kind: 'credit_card', brand: pm.brand, lastFour: pm.last_four };
  }

  private address(rng: Rng): Address {
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
  private uniqueItems(o: Order) {
    return o.items.filter((i) => o.items.filter((j) => j.name === i.name).length === 1);
  }

  /** Up to n changes to other available variants; returns the changes, new ids and unrounded difference. */
  private changes(rng: Rng, o: Order, n: number) {
    const cands = this.uniqueItems(o).filter((i) =>
      Object.values(this.product(i.product_id).variants).some((v) => v.available && v.item_id !== i.item_id),
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
      const v = pick(rng, Object.values(this.product(it.product_id).variants).filter((x) => x.available && x.item_id !== it.item_id));
      changes.push({ item: { productName: it.name }, options: { ...v.options } });
      oldIds.push(it.item_id);
      newIds.push(v.item_id);
      diff += v.price - it.price;
    }
    const pids = [...new Set(chosen.map((c) => c.product_id))];
    return { changes, oldIds, newIds, diff, pids };
  }

  /** A payment method for a price difference: the original one, or another the user has that can pay. */
  private payFor(rng: Rng, o: Order, u: User, diff: number): { ref: PaymentRef; id: string; lookup: boolean } {
    const orig = u.payment_methods[o.payment_history[0].payment_method_id];
    const ok = (pm: PaymentMethod) => pm.source !== 'gift_card' || pm.balance >= diff;
    if (orig && ok(orig) && rng.next() < 0.6) return { ref: { kind: 'original' }, id: orig.id, lookup: false };
    const others = Object.values(u.payment_methods).filter(ok);
    const pm = need(others.length > 0 && pick(rng, others));
    return { ref: this.paymentRef(pm), id: pm.id, lookup: true };
  }

  private request(rng: Rng, family: Family, u: User, orders: Order[], exclude: string | null): Built {
    const mine = orders.filter((o) => o.order_id !== exclude && ('#' + exclude !== o.order_id));
    const withStatus = (...s: string[]) => need(mine.filter((o) => s.includes(o.status)).length > 0 && pick(rng, mine.filter((o) => s.includes(o.status))));
    const details = (id: string): ToolCall => ({ name: 'get_order_details', arguments: { order_id: id } });
    const userDetails: ToolCall = { name: 'get_user_details', arguments: { user_id: u.user_id } };
    switch (family) {
      case 'status': {
        const o = need(mine.length > 0 && pick(rng, mine));
        const facts = [o.status, ...(o.status === 'delivered' || o.status === 'processed' ? o.fulfillments.flatMap((f) => f.tracking_id) : [])];
        return { request: { kind: 'status', orderRef: this.orderRef(rng, o.order_id) }, actions: [details(o.order_id)], facts };
      }
      case 'cancel': {
        const o = withStatus('pending');
        const reason = pick(rng, CANCEL_REASONS);
        const refund = o.payment_history.reduce((a, p) => a + p.amount, 0);
        return {
          request: { kind: 'cancel', orderRef: this.orderRef(rng, o.order_id), reason },
          actions: [details(o.order_id), { name: 'cancel_pending_order', arguments: { order_id: o.order_id, reason } }],
          facts: [money(refund)],
        };
      }
      case 'refuse_cancel_status': {
        const o = withStatus('processed', 'delivered', 'cancelled');
        return {
          request: { kind: 'cancel', orderRef: this.orderRef(rng, o.order_id), reason: pick(rng, CANCEL_REASONS) },
          actions: [details(o.order_id)],
          facts: [o.status],
        };
      }
      case 'refuse_cancel_reason': {
        const o = withStatus('pending');
        return {
          request: { kind: 'cancel', orderRef: this.orderRef(rng, o.order_id), reason: pick(rng, BAD_REASONS) },
          actions: [details(o.order_id)],
          facts: [...CANCEL_REASONS],
        };
      }
      case 'return': {
        const o = withStatus('delivered');
        const items = need(this.uniqueItems(o).length > 0 && this.uniqueItems(o));
        const chosen = rng.next() < 0.7 || items.length < 2 ? [pick(rng, items)] : items.slice(0, 2);
        const gift = Object.values(u.payment_methods).find((p) => p.source === 'gift_card');
        const toGift = gift !== undefined && rng.next() < 0.4;
        const pm = toGift ? gift.id : o.payment_history[0].payment_method_id;
        const total = chosen.reduce((a, i) => a + i.price, 0);
        return {
          request: { kind: 'return', orderRef: this.orderRef(rng, o.order_id), items: chosen.map((i) => ({ productName: i.name })), refund: toGift ? { kind: 'gift_card' } : { kind: 'original' } },
          actions: [
            details(o.order_id),
            ...(toGift ? [userDetails] : []),
            { name: 'return_delivered_order_items', arguments: { order_id: o.order_id, item_ids: chosen.map((i) => i.item_id), payment_method_id: pm } },
          ],
          facts: [money(total)],
        };
      }
      case 'refuse_return_status': {
        const o = withStatus('pending', 'processed');
        const items = need(this.uniqueItems(o).length > 0 && this.uniqueItems(o));
        return {
          request: { kind: 'return', orderRef: this.orderRef(rng, o.order_id), items: [{ productName: pick(rng, items).name }], refund: { kind: 'original' } },
          actions: [details(o.order_id)],
          facts: [o.status],
        };
      }
      case 'exchange':
      case 'modify_items': {
        const o = withStatus(family === 'exchange' ? 'delivered' : 'pending');
        const c = this.changes(rng, o, rng.next() < 0.75 ? 1 : 2);
        const diff = family === 'exchange' ? pyRound2(c.diff) : c.diff;
        const pay = this.payFor(rng, o, u, diff);
        const tool = family === 'exchange' ? 'exchange_delivered_order_items' : 'modify_pending_order_items';
        const ref = this.orderRef(rng, o.order_id);
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
      case 'order_address': {
        const o = withStatus('pending');
        const address = this.address(rng);
        return {
          request: { kind: 'order_address', orderRef: this.orderRef(rng, o.order_id), address },
          actions: [details(o.order_id), { name: 'modify_pending_order_address', arguments: { order_id: o.order_id, ...address } }],
          facts: [],
        };
      }
      case 'order_payment': {
        const o = withStatus('pending');
        const amount = o.payment_history[0].amount;
        const others = Object.values(u.payment_methods).filter(
          (p) => p.id !== o.payment_history[0].payment_method_id && (p.source !== 'gift_card' || p.balance >= amount),
        );
        const pm = need(others.length > 0 && pick(rng, others));
        return {
          request: { kind: 'order_payment', orderRef: this.orderRef(rng, o.order_id), payment: this.paymentRef(pm) },
          actions: [details(o.order_id), userDetails, { name: 'modify_pending_order_payment', arguments: { order_id: o.order_id, payment_method_id: pm.id } }],
          facts: [],
        };
      }
      case 'user_address': {
        const address = this.address(rng);
        return { request: { kind: 'user_address', address }, actions: [{ name: 'modify_user_address', arguments: { user_id: u.user_id, ...address } }], facts: [] };
      }
      case 'product_price': {
        const products = [...this.base.tables.get('products')!.values()] as unknown as Product[];
        const p = pick(rng, products);
        const v = pick(rng, Object.values(p.variants));
        return {
          request: { kind: 'product_price', productName: p.name, options: { ...v.options } },
          actions: [{ name: 'list_all_product_types', arguments: {} }, { name: 'get_product_details', arguments: { product_id: p.product_id } }],
          facts: [money(v.price)],
        };
      }
      case 'order_total': {
        need(mine.length >= 2);
        const a = pick(rng, mine);
        const b = pick(rng, mine.filter((o) => o !== a));
        const [x, y] = [a.payment_history[0].amount, b.payment_history[0].amount];
        return {
          request: { kind: 'order_total', orderRefs: [this.orderRef(rng, a.order_id), this.orderRef(rng, b.order_id)] },
          actions: [details(a.order_id), details(b.order_id), { name: 'calculate', arguments: { expression: `${x} + ${y}` } }],
          facts: [money(pyRound2(x + y))],
        };
      }
      case 'transfer': {
        const topic = pick(rng, TOPICS);
        return {
          request: { kind: 'transfer', topic },
          actions: [{ name: 'transfer_to_human_agents', arguments: { summary: `The user asks for a human agent about ${topic}.` } }],
          facts: [TRANSFER_MESSAGE],
        };
      }
      case 'refuse_other_user': {
        const others = this.users.filter((x) => x.user_id !== u.user_id && x.orders.length > 0);
        const other = pick(rng, others);
        const id = pick(rng, other.orders);
        const orderRef = this.orderRef(rng, id);
        const request: Request = rng.next() < 0.5 ? { kind: 'status', orderRef } : { kind: 'cancel', orderRef, reason: pick(rng, CANCEL_REASONS) };
        return { request, actions: [details(id)], facts: [] };
      }
      case 'unknown_order': {
        const known = new Set(this.base.tables.get('orders')!.keys());
        let id = '';
        for (let k = 0; k < 20 && (id === '' || known.has(id)); k++) id = '#W' + String(1000000 + rng.int(9000000));
        need(!known.has(id));
        const bad = details(id);
        return {
          request: { kind: 'status', orderRef: this.orderRef(rng, id) },
          actions: [bad, userDetails],
          failing: [bad],
          facts: need(u.orders.length > 0) && [...u.orders],
        };
      }
      case 'multi':
        throw new Skip();
    }
  }
}

const isWrite = (n: string) => RETAIL_WRITE_TOOLS.has(n);
const FREE_TEXT_TOOLS = new Set(['transfer_to_human_agents', 'calculate']);
