// The scripted expert as a τ² agent in a conversation with a user (issue 47): it greets, asks for identity,
// asks for an order id it was not given, checks what it can through real calls, states every write's
// details and waits for an explicit yes before making it, reports each outcome, and asks for anything else.
// The one-message expert (expert.ts) is untouched: pretraining data and bit-exact reproductions depend on
// its output.
//
// Like the one-message expert it stands in for perfect understanding: it reads the structured meaning the
// scripted user attaches to each message (what it revealed, confirmed or corrected) rather than parsing
// the words, and only ever what the user has said so far: ids come from calls, order ids from the user's
// turns, never from the task's reference actions or facts. It cannot play against a user without that
// meaning (a model user); that is what the policy, trained on these conversations, is for.
//
// mistakeRate adds the recoverable mistakes of the one-message expert that cannot break the confirmation
// rule: an order id looked up without '#', and a cancel reason passed with the wrong case (after the yes).
// It never tries a write the policy forbids: that would be a write without a yes.
//
// wrongProposalRate adds the mistake a conversation policy makes most (research/records/2026-12-06-write-chain):
// a first proposal that is not what the user asked (another action on the same order, or a cancellation's other
// reason). The user says no and restates what it wants; the expert apologises and proposes again, right. The
// wrong proposal is listed in `wrongTurns`, so training rows can keep it in the history (what the policy must
// recover from) without ever making it a target.

import { Rng } from '../../util/rng';
import { pyRound2 } from '../json';
import { AGENT_GREETING, type ExpertOptions, type Observation, type Step, type Turn, type UserSimulator, type UserStopToken } from '../domain';
import type { Environment } from '../env';
import { describePm, mistakeSeed, money, productPrice, sameOptions } from './expert';
import type { Change, PaymentRef, Request, RetailTask } from './intent';
import { TRANSFER_MESSAGE } from './intent';
import { CANCEL_REASONS } from './tools';
import type { Order, Product, User } from './types';
import { retailUser, type RetailUserMeaning } from './user';
import { addressText, optionsText } from './user-phrasing';

export interface ConversationOptions extends ExpertOptions {
  /** The user to talk to (default: the scripted user of the task under `userSeed`). */
  user?: UserSimulator<RetailUserMeaning>;
  userSeed?: number;
  /** User turns before the episode is cut off (τ²'s max_steps counts both sides; 30 user turns is ample here). */
  maxUserTurns?: number;
  /** Probability, per write request's first proposal, that it proposes the wrong thing first (wrongProposal); default 0. */
  wrongProposalRate?: number;
}

export interface ConversationResult {
  turns: Turn[];
  /** The agent's side, for realReward and the judge. */
  steps: Step[];
  /** How the user ended it; null when the turn limit cut it off. */
  stop: UserStopToken | null;
  mistakes: number;
  /** Indices in `turns` of the wrong proposals (wrongProposalRate): replies no one should learn to write. */
  wrongTurns: number[];
}


interface Slot {
  index: number;
  request: Request;
  idsGiven: boolean;
  state: 'todo' | 'confirm' | 'done';
  /** A wrong proposal was made for this request already (at most one per request). */
  misled?: boolean;
  write?: { name: string; args: Record<string, unknown>; report: (o: Observation) => string };
}

type Outcome = { text: string; write?: Slot['write']; final?: boolean };

class Agent {
  readonly turns: Turn[] = [{ kind: 'reply', text: AGENT_GREETING }];
  readonly wrongTurns: number[] = [];
  mistakes = 0;
  private userId: string | null = null;
  private readonly slots: Slot[] = [];

  constructor(
    private readonly env: Environment,
    private readonly rng: Rng,
    private readonly rate: number,
    private readonly wrongRate = 0,
  ) {}

  private call(name: string, args: Record<string, unknown>): Observation {
    const observation = this.env.execute({ name, arguments: args });
    this.turns.push({ kind: 'call', call: { name, arguments: args }, observation });
    return observation;
  }

  private reply(parts: string[]): void {
    this.turns.push({ kind: 'reply', text: parts.filter((p) => p).join('\n\n') });
  }

  private slip(): boolean {
    if (this.rate > 0 && this.rng.next() < this.rate) return ++this.mistakes > 0;
    return false;
  }

  respond(m: RetailUserMeaning): void {
    const slot = (i: number) => this.slots.find((s) => s.index === i);
    switch (m.kind) {
      case 'open':
        for (const r of m.requests) this.slots.push({ index: r.index, request: r.request, idsGiven: r.idsGiven, state: 'todo' });
        return this.proceed([]);
      case 'ask':
      case 'remind': {
        const s = slot(m.index);
        if (!s) this.slots.push({ index: m.index, request: m.request, idsGiven: m.kind === 'ask' ? m.idsGiven : true, state: 'todo' });
        else if (s.state !== 'done') s.request = m.request;
        return this.proceed([]);
      }
      case 'identity': {
        const o = 'email' in m ? this.call('find_user_id_by_email', { email: m.email }) : this.call('find_user_id_by_name_zip', { first_name: m.first, last_name: m.last, zip: m.zip });
        if (!o.ok) {
          const what = 'email' in m ? 'that email address' : 'that name and zip code';
          return this.reply([`I could not find an account with ${what}. Could you check it, or give me your first name, last name and zip code instead?`]);
        }
        this.userId = o.result as string;
        return this.proceed(['Thank you, I found your account.']);
      }
      case 'order': {
        const s = slot(m.index);
        if (s) s.idsGiven = true;
        return this.proceed([]);
      }
      case 'yes': {
        const s = slot(m.index);
        if (!s || s.state !== 'confirm' || !s.write) return this.proceed([]);
        const w = s.write;
        if (w.name === 'cancel_pending_order' && this.slip()) this.call(w.name, { ...w.args, reason: cap(String(w.args.reason)) });
        const o = this.call(w.name, w.args);
        s.state = 'done';
        return this.proceed([w.report(o)]);
      }
      case 'correct':
      case 'change': {
        const s = slot(m.index);
        if (s) Object.assign(s, { request: m.request, state: 'todo', write: undefined });
        return this.proceed([m.kind === 'change' ? 'No problem, let me update that.' : 'I am sorry about that, let me correct it.']);
      }
      case 'unknown':
      case 'stop':
        return this.proceed([]);
    }
  }

  /** Works through the requests in order until one needs the user (an id or a yes), then replies. */
  private proceed(parts: string[]): void {
    if (this.userId === null) {
      return this.reply([...parts, 'I can help with that. First, could you give me your email address, or your first name, last name and zip code, so I can find your account?']);
    }
    for (const s of this.slots) {
      if (s.state === 'done') continue;
      if (!s.idsGiven && needsOrder(s.request)) return this.reply([...parts, askOrder(s.request)]);
      const out = this.plan(this.userId, s.request);
      if (out.write) {
        const wrong = !s.misled && this.wrongRate > 0 && this.rng.next() < this.wrongRate ? wrongProposal(s.request) : null;
        if (wrong) {
          // The user will say no and restate the request (a 'correct'), which plans this request again.
          Object.assign(s, { state: 'confirm', misled: true, write: undefined });
          this.mistakes++;
          this.wrongTurns.push(this.turns.length);
          return this.reply([...parts, wrong]);
        }
        Object.assign(s, { state: 'confirm', write: out.write });
        return this.reply([...parts, out.text]);
      }
      s.state = 'done';
      if (out.final) return this.reply([...parts, out.text]);
      parts.push(out.text);
    }
    this.reply([...parts, 'Is there anything else I can help you with?']);
  }

  private fetchOrder(ref: string): { id: string; order: Order | null } {
    const id = orderId(ref);
    if (id !== ref && this.slip()) this.call('get_order_details', { order_id: ref });
    const o = this.call('get_order_details', { order_id: id });
    return { id, order: o.ok ? (o.result as Order) : null };
  }

  private resolvePayment(userId: string, order: Order, ref: PaymentRef): { id: string; text: string } | null {
    const orig = order.payment_history[0]?.payment_method_id;
    if (ref.kind === 'original') return orig ? { id: orig, text: 'the original payment method' } : null;
    const o = this.call('get_user_details', { user_id: userId });
    if (!o.ok) return null;
    const pms = Object.values((o.result as User).payment_methods);
    const pm = ref.kind === 'credit_card' ? pms.find((p) => p.source === 'credit_card' && p.last_four === ref.lastFour) : pms.find((p) => p.source === ref.kind);
    return pm ? { id: pm.id, text: describePm(pm) } : null;
  }

  private resolveChanges(order: Order, changes: Change[]) {
    const products = new Map<string, Product>();
    const out = { old: [] as string[], neu: [] as string[], diff: 0, lines: [] as string[] };
    for (const c of changes) {
      const item = order.items.find((i) => i.name === c.item.productName);
      if (!item) return null;
      let p = products.get(item.product_id);
      if (!p) {
        const o = this.call('get_product_details', { product_id: item.product_id });
        if (!o.ok) return null;
        p = o.result as Product;
        products.set(item.product_id, p);
      }
      const v = Object.values(p.variants).find((x) => sameOptions(x.options, c.options));
      if (!v || !v.available) return null;
      out.old.push(item.item_id);
      out.neu.push(v.item_id);
      out.diff += v.price - item.price;
      out.lines.push(`the ${item.name} (${optionsText(item.options)}) for the one with ${optionsText(v.options)}`);
    }
    return out;
  }

  private plan(userId: string, r: Request): Outcome {
    if (r.kind === 'user_address') {
      return {
        text: `To confirm: I will change the default address on your account to ${addressText(r.address)}. Shall I proceed (yes/no)?`,
        write: { name: 'modify_user_address', args: { user_id: userId, ...r.address }, report: (o) => (o.ok ? `Your default address is now ${r.address.address1}, ${r.address.city}.` : `I could not update your address (${o.error}).`) },
      };
    }
    if (r.kind === 'transfer') {
      this.call('transfer_to_human_agents', { summary: `The user asks for a human agent about ${r.topic}.` });
      return { text: TRANSFER_MESSAGE, final: true };
    }
    if (r.kind === 'product_price') return { text: this.price(r.productName, r.options) };
    if (r.kind === 'order_total') {
      const amounts: number[] = [];
      for (const ref of r.orderRefs) {
        const { id, order } = this.fetchOrder(ref);
        if (!order || order.user_id !== userId) return { text: `I could not find order ${id} on your account.` };
        amounts.push(order.payment_history[0].amount);
      }
      const sum = this.call('calculate', { expression: amounts.join(' + ') });
      const ids = r.orderRefs.map(orderId);
      return { text: sum.ok ? `Orders ${ids[0]} and ${ids[1]} together cost ${money(Number(sum.result))}.` : 'I could not add up the totals.' };
    }
    const { id, order } = this.fetchOrder(r.orderRef);
    if (!order) {
      const u = this.call('get_user_details', { user_id: userId });
      return { text: `I could not find order ${id}. The orders on your account are ${u.ok ? (u.result as User).orders.join(', ') : 'unknown'}.` };
    }
    if (order.user_id !== userId) return { text: `Order ${id} is not on your account, so I can't help with it.` };
    const ask = (what: string) => `To confirm: I will ${what}. Shall I proceed (yes/no)?`;
    switch (r.kind) {
      case 'status': {
        const tracking = order.status === 'delivered' || order.status === 'processed' ? order.fulfillments.flatMap((f) => f.tracking_id) : [];
        return { text: `Order ${id} is ${order.status}.` + (tracking.length ? ` Tracking number: ${tracking.join(', ')}.` : '') };
      }
      case 'cancel': {
        if (order.status !== 'pending') {
          return { text: order.status === 'cancelled' ? `Order ${id} is already cancelled.` : `Order ${id} is ${order.status}, so it can no longer be cancelled; only pending orders can be.` };
        }
        if (!(CANCEL_REASONS as readonly string[]).includes(r.reason)) {
          return { text: `Order ${id} cannot be cancelled for that reason: I can only cancel an order when it is no longer needed or was ordered by mistake.` };
        }
        const refund = order.payment_history.reduce((a, p) => a + p.amount, 0);
        return {
          text: ask(`cancel order ${id} with the reason "${r.reason}"; ${money(refund)} will be refunded to the original payment method`),
          write: { name: 'cancel_pending_order', args: { order_id: id, reason: r.reason }, report: (o) => (o.ok ? `Order ${id} is cancelled; ${money(refund)} will be refunded to the original payment method.` : `I could not cancel order ${id} (${o.error}).`) },
        };
      }
      case 'return': {
        if (order.status !== 'delivered') return { text: `Order ${id} is ${order.status}, so its items cannot be returned yet.` };
        const items = r.items.map((it) => order.items.find((i) => i.name === it.productName)).filter((x) => x !== undefined);
        const pm = this.resolvePayment(userId, order, r.refund);
        if (!pm) return { text: 'I could not find that payment method on your account.' };
        const total = items.reduce((a, i) => a + i.price, 0);
        return {
          text: ask(`return ${items.map((i) => `the ${i.name}`).join(' and ')} from order ${id}; ${money(total)} will be refunded to ${pm.text}`),
          write: {
            name: 'return_delivered_order_items',
            args: { order_id: id, item_ids: items.map((i) => i.item_id), payment_method_id: pm.id },
            report: (o) => (o.ok ? `The return for order ${id} is requested: ${money(total)} will be refunded to ${pm.text}. You will receive an email with return instructions.` : `I could not request the return (${o.error}).`),
          },
        };
      }
      case 'exchange':
      case 'modify_items': {
        const exchange = r.kind === 'exchange';
        if (order.status !== (exchange ? 'delivered' : 'pending')) return { text: `Order ${id} is ${order.status}, so its items cannot be ${exchange ? 'exchanged' : 'modified'}.` };
        const c = this.resolveChanges(order, r.changes);
        if (!c) return { text: 'I could not find an available variant with those options.' };
        const pm = this.resolvePayment(userId, order, r.payment);
        if (!pm) return { text: 'I could not find that payment method on your account.' };
        const diff = exchange ? pyRound2(c.diff) : c.diff;
        const how = diff > 0 ? `${money(diff)} will be charged to ${pm.text}` : `${money(Math.abs(diff))} will be refunded to ${pm.text}`;
        const tool = exchange ? 'exchange_delivered_order_items' : 'modify_pending_order_items';
        const all = exchange ? '' : ' Please make sure these are all the items you want to change: an order can be modified only once.';
        return {
          text: ask(`${exchange ? 'exchange' : 'modify order ' + id + ', changing'} ${c.lines.join(' and ')}${exchange ? ` in order ${id}` : ''}; ${how}`) + all,
          write: {
            name: tool,
            args: { order_id: id, item_ids: c.old, new_item_ids: c.neu, payment_method_id: pm.id },
            report: (o) => {
              if (!o.ok) return `I could not change the items (${o.error}).`;
              const res = o.result as Order;
              const last = res.payment_history[res.payment_history.length - 1];
              const d = exchange ? res.exchange_price_difference! : last.amount * (last.transaction_type === 'payment' ? 1 : -1);
              const done = d > 0 ? `${money(d)} will be charged to ${pm.text}` : `${money(Math.abs(d))} will be refunded to ${pm.text}`;
              return exchange ? `The exchange for order ${id} is requested; ${done}. You will receive an email with instructions.` : `Order ${id} is updated; ${done}.`;
            },
          },
        };
      }
      case 'order_address': {
        if (!order.status.includes('pending')) return { text: `Order ${id} is ${order.status}, so its address cannot be changed.` };
        return {
          text: ask(`change the shipping address of order ${id} to ${addressText(r.address)}`),
          write: { name: 'modify_pending_order_address', args: { order_id: id, ...r.address }, report: (o) => (o.ok ? `Order ${id} will ship to ${r.address.address1}, ${r.address.city}.` : `I could not change the address (${o.error}).`) },
        };
      }
      case 'order_payment': {
        if (!order.status.includes('pending')) return { text: `Order ${id} is ${order.status}, so its payment cannot be changed.` };
        const pm = this.resolvePayment(userId, order, r.payment);
        if (!pm) return { text: 'I could not find that payment method on your account.' };
        return {
          text: ask(`change the payment method of order ${id} to ${pm.text}`),
          write: { name: 'modify_pending_order_payment', args: { order_id: id, payment_method_id: pm.id }, report: (o) => (o.ok ? `Order ${id} is now paid with ${pm.text}.` : `I could not change the payment (${o.error}).`) },
        };
      }
    }
  }

  private price(name: string, options: Record<string, string>): string {
    return productPrice((n, a) => this.call(n, a), name, options);
  }
}

const cap = (t: string) => t.charAt(0).toUpperCase() + t.slice(1);
/** An order id as the tools take it: the user may leave out the '#'. */
const orderId = (ref: string) => (ref.startsWith('#') ? ref : '#' + ref);

/**
 * A proposal of the wrong thing for a write request, in the expert's words: a cancellation's other reason, or for
 * the other order writes a cancellation of the same order (the wrong action). None for a user's address (no order to
 * misname). The order id is the user's own, so the scripted user reads it as about the request, or as not what it
 * asked for, and corrects it either way.
 */
export function wrongProposal(r: Request): string | null {
  if (!('orderRef' in r)) return null;
  const id = orderId(r.orderRef);
  const reason = r.kind === 'cancel' ? CANCEL_REASONS.find((x) => x !== r.reason) : CANCEL_REASONS[0];
  if (!reason) return null;
  return `To confirm: I will cancel order ${id} with the reason "${reason}". Shall I proceed (yes/no)?`;
}
const needsOrder = (r: Request) => r.kind === 'order_total' || 'orderRef' in r;

/** How the expert names the order it asks for, by the request's kind (research/scripts/misread-requests.ts reads them too). */
export const ORDER_QUESTIONS: Partial<Record<Request['kind'], string>> = {
  status: 'the order you want to check',
  cancel: 'the order you want to cancel',
  return: 'the order with the items to return',
  exchange: 'the order with the items to exchange',
  modify_items: 'the order you want to modify',
  order_address: 'the order whose address should change',
  order_payment: 'the order whose payment should change',
};

function askOrder(r: Request): string {
  return r.kind === 'order_total' ? 'Could you tell me the order ids of the two orders?' : `Could you tell me the order id of ${ORDER_QUESTIONS[r.kind] ?? 'that order'}?`;
}

export function runRetailExpertConversation(task: RetailTask, env: Environment, opts: ConversationOptions = {}): ConversationResult {
  const user = opts.user ?? retailUser(task, { seed: opts.userSeed ?? opts.seed ?? 0 });
  const agent = new Agent(env, new Rng(mistakeSeed((opts.seed ?? 0) ^ 0x7a1c, task.id)), opts.mistakeRate ?? 0, opts.wrongProposalRate ?? 0);
  const limit = opts.maxUserTurns ?? 30;
  let stop: UserStopToken | null = null;
  for (let k = 0; k < limit; k++) {
    const act = user.next(agent.turns);
    agent.turns.push({ kind: 'user', text: act.text });
    if (act.kind === 'stop') {
      stop = act.token;
      break;
    }
    if (!act.meaning) throw new Error('the conversation expert reads the meaning a scripted user attaches to its messages');
    agent.respond(act.meaning);
  }
  const steps = agent.turns.filter((t): t is Step => t.kind !== 'user');
  return { turns: agent.turns, steps, stop, mistakes: agent.mistakes, wrongTurns: agent.wrongTurns };
}
