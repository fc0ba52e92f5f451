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
import { canonicalJson, hash64 } from '../json';
import type { BaseData } from '../store';
import type { Auth, Family, RetailIntent, RetailTask } from './intent';
import { userMessage } from './phrasing';
import { need, pick, REQUEST_BUILDERS, Skip, type Built } from './requests';
import { RETAIL_WRITE_TOOLS } from './tools';
import type { Order, Product, User } from './types';

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

  private request(rng: Rng, family: Family, u: User, orders: Order[], exclude: string | null): Built {
    if (family === 'multi') throw new Skip();
    const mine = orders.filter((o) => o.order_id !== exclude && ('#' + exclude !== o.order_id));
    return REQUEST_BUILDERS[family]({
      rng,
      u,
      mine,
      users: this.users,
      base: this.base,
      product: (id) => this.product(id),
      withStatus: (...s: string[]) => need(mine.filter((o) => s.includes(o.status)).length > 0 && pick(rng, mine.filter((o) => s.includes(o.status)))),
      details: (id) => ({ name: 'get_order_details', arguments: { order_id: id } }),
      userDetails: { name: 'get_user_details', arguments: { user_id: u.user_id } },
    });
  }
}

const isWrite = (n: string) => RETAIL_WRITE_TOOLS.has(n);
const FREE_TEXT_TOOLS = new Set(['transfer_to_human_agents', 'calculate']);
