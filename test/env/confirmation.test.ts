// The confirmation rule (src/env/confirmation.ts, rules C1-C4) and the retail details it checks
// (src/env/retail/confirm-details.ts): a write before the user's explicit yes is listed, the same write after
// a yes to its details is not, and odd model output never throws.

import { describe, expect, it } from 'vitest';
import { AGENT_GREETING, type Observation, type ToolCall, type Turn } from '../../src/env/domain';
import { breaksConfirmation, isExplicitYes, unconfirmedWrites } from '../../src/env/confirmation';
import { retailConfirmationDetails, retailConfirmationOptions } from '../../src/env/retail/confirm-details';
import { retailDomain } from '../../src/env/retail/index';
import { RETAIL_WRITE_TOOLS } from '../../src/env/retail/tools';
import type { User } from '../../src/env/retail/types';
import { base, findOrder, productOf, userOf } from './helpers';

const opts = retailConfirmationOptions(base);
const ok: Observation = { ok: true, name: 'x', result: {} };
const failed: Observation = { ok: false, name: 'x', error: 'Non-pending order cannot be cancelled', code: 'tool' };
const call = (c: ToolCall, observation: Observation = ok): Turn => ({ kind: 'call', call: c, observation });
const reply = (text: string): Turn => ({ kind: 'reply', text });
const user = (text: string): Turn => ({ kind: 'user', text });

const pending = findOrder((o) => o.status === 'pending');
const cancel: ToolCall = { name: 'cancel_pending_order', arguments: { order_id: pending.order_id, reason: 'no longer needed' } };
const proposal = `I will cancel order ${pending.order_id} with the reason "no longer needed". Shall I proceed (yes/no)?`;

describe('explicit yes', () => {
  it('accepts a plain yes and its usual forms', () => {
    for (const t of ['Yes.', 'yes please', 'Yes, I confirm.', 'Yep, go ahead.', 'I confirm.', 'Yes, that is correct. Please proceed.', "Yes, it's no longer needed."]) {
      expect(isExplicitYes(t), t).toBe(true);
    }
  });
  it('refuses what is not an explicit yes, or takes it back', () => {
    for (const t of ['No.', 'ok', 'Sure.', 'Yes, but refund it to my gift card.', 'Actually, wait.', "Yes... no, don't.", 'Not yet.', 'Hmm, which order?', '', 'Yes, not that one.']) {
      expect(isExplicitYes(t), t).toBe(false);
    }
    expect(isExplicitYes(undefined as unknown as string)).toBe(false);
  });
});

describe('the confirmation rule', () => {
  it('lists a write made before the yes (C1), and not the same write after it', () => {
    const before = [reply(AGENT_GREETING), user(`Cancel ${pending.order_id}, no longer needed.`), call(cancel), reply(proposal), user('Yes.')];
    const listed = unconfirmedWrites(before, opts);
    expect(listed).toEqual([{ turn: 2, call: cancel, ok: true, why: 'no-yes', missing: [] }]);
    const after = [reply(AGENT_GREETING), user(`Cancel ${pending.order_id}, no longer needed.`), reply(proposal), user('Yes.'), call(cancel), reply('Done.')];
    expect(unconfirmedWrites(after, opts)).toEqual([]);
    expect(breaksConfirmation(before, opts)).toBe(true);
    expect(breaksConfirmation(after, opts)).toBe(false);
  });

  it('counts the consent written into an opening message as no confirmation (nothing was proposed yet)', () => {
    const opening = [user(`Please cancel order ${pending.order_id}, no longer needed. Yes, I confirm, go ahead.`), call(cancel), reply('Cancelled.')];
    expect(unconfirmedWrites(opening, opts).map((w) => w.why)).toEqual(['no-yes']);
    const afterGreeting = [reply(AGENT_GREETING), ...opening];
    expect(unconfirmedWrites(afterGreeting, opts)).toMatchObject([{ why: 'details-not-stated', missing: ['order id', 'reason'] }]);
  });

  it('needs the details of the write in the proposal the yes answered (C2)', () => {
    const other = findOrder((o) => o.status === 'pending' && o.order_id !== pending.order_id);
    const wrongOrder = [reply(proposal.replace(pending.order_id, other.order_id)), user('Yes.'), call(cancel)];
    expect(unconfirmedWrites(wrongOrder, opts)).toMatchObject([{ why: 'details-not-stated', missing: ['order id'] }]);
    const wrongReason = [reply(proposal.replace('no longer needed', 'ordered by mistake')), user('Yes.'), call(cancel)];
    expect(unconfirmedWrites(wrongReason, opts)).toMatchObject([{ why: 'details-not-stated', missing: ['reason'] }]);
    // Spelling: case, commas and the leading '#' do not matter.
    const loose = [reply(`Cancel ${pending.order_id.slice(1).toLowerCase()}, reason NO LONGER NEEDED?`), user('yes'), call(cancel)];
    expect(unconfirmedWrites(loose, opts)).toEqual([]);
    // A yes answers the latest proposal only: one made before an earlier user turn does not count.
    const stale = [reply(proposal), user('Let me think.'), reply('Take your time.'), user('Yes.'), call(cancel)];
    expect(unconfirmedWrites(stale, opts)).toMatchObject([{ why: 'details-not-stated' }]);
    // A no, or a yes that changes the details, is no confirmation.
    expect(unconfirmedWrites([reply(proposal), user('No, wait.'), call(cancel)], opts)).toMatchObject([{ why: 'no-yes' }]);
  });

  it('lets one yes cover the writes its proposal stated together (C3)', () => {
    const other = findOrder((o) => o.status === 'pending' && o.order_id !== pending.order_id);
    const both: ToolCall = { name: 'cancel_pending_order', arguments: { order_id: other.order_id, reason: 'no longer needed' } };
    const turns = [reply(`I will cancel ${pending.order_id} and ${other.order_id}, both as "no longer needed". Proceed?`), user('Yes, go ahead.'), call(cancel), call(both)];
    expect(unconfirmedWrites(turns, opts)).toEqual([]);
    const onlyFirst = [reply(proposal), user('Yes.'), call(cancel), call(both)];
    expect(unconfirmedWrites(onlyFirst, opts).map((w) => w.turn)).toEqual([3]);
  });

  it('lists failed write attempts by default, flagged, and can leave them out (C4)', () => {
    const turns = [reply(AGENT_GREETING), user('Cancel it.'), call(cancel, failed)];
    expect(unconfirmedWrites(turns, opts)).toMatchObject([{ ok: false, why: 'no-yes' }]);
    expect(unconfirmedWrites(turns, { ...opts, countFailed: false })).toEqual([]);
  });

  it('ignores reads, and never throws on odd model output', () => {
    const read = call({ name: 'get_order_details', arguments: { order_id: pending.order_id } });
    expect(unconfirmedWrites([read], opts)).toEqual([]);
    const odd: Turn[] = [
      reply(42 as unknown as string),
      user('yes'),
      call({ name: 'return_delivered_order_items', arguments: { order_id: 7, item_ids: 'x', payment_method_id: null } }),
      call({ name: 'exchange_delivered_order_items', arguments: { item_ids: [{}], new_item_ids: [null, 'nope'] } }),
      call({ name: 'modify_user_address', arguments: {} }),
      { kind: 'call', call: { name: 'cancel_pending_order' } as unknown as ToolCall, observation: undefined as unknown as Observation },
      { kind: 'call', call: null as unknown as ToolCall, observation: ok },
    ];
    expect(() => unconfirmedWrites(odd, opts)).not.toThrow();
    expect(unconfirmedWrites(odd, opts).length).toBe(4);
    const throwing = { isWrite: () => true, details: () => { throw new Error('bad'); } };
    expect(unconfirmedWrites([reply('ok?'), user('yes'), call(cancel)], throwing)).toMatchObject([{ missing: ['arguments'] }]);
  });
});

describe('retail details', () => {
  const details = retailConfirmationDetails(base);
  it('names items, new options and payment methods the way a customer knows them', () => {
    const delivered = findOrder((o) => o.status === 'delivered' && Object.values(userOf(o).payment_methods).some((p) => p.source === 'credit_card'));
    const item = delivered.items[0];
    const variant = Object.values(productOf(item.product_id).variants).find((v) => v.item_id !== item.item_id)!;
    const card = Object.values(userOf(delivered).payment_methods).find((p) => p.source === 'credit_card') as Extract<User['payment_methods'][string], { source: 'credit_card' }>;
    const d = details({ name: 'exchange_delivered_order_items', arguments: { order_id: delivered.order_id, item_ids: [item.item_id], new_item_ids: [variant.item_id], payment_method_id: card.id } });
    expect(d[0]).toEqual({ label: 'order id', anyOf: [delivered.order_id] });
    expect(d.find((x) => x.label === `item ${item.item_id}`)!.anyOf).toContain(item.name);
    for (const v of Object.values(variant.options)) expect(d.some((x) => x.anyOf.includes(v))).toBe(true);
    expect(d.find((x) => x.label === 'payment method')!.anyOf).toContain(card.last_four);
    const addr = details({ name: 'modify_user_address', arguments: { user_id: delivered.user_id, address1: '1 Oak Street', address2: '', city: 'Denver', state: 'CO', zip: '80203', country: 'USA' } });
    expect(addr.map((x) => x.label)).toEqual(['address1', 'city', 'zip']);
  });

  it('shows why the one-message tasks break the rule: consent before any proposal confirms no write', () => {
    const domain = retailDomain(base);
    const tasks = domain.tasks.generate({ split: 'train', count: 60, seed: 3 });
    let writes = 0;
    for (const t of tasks) {
      const r = domain.expert(t, domain.createEnv());
      const conversation: Turn[] = [reply(AGENT_GREETING), user(t.userMessages[0]), ...r.steps];
      const n = r.steps.filter((s) => s.kind === 'call' && RETAIL_WRITE_TOOLS.has(s.call.name)).length;
      writes += n;
      expect(unconfirmedWrites(conversation, opts).length).toBe(n);
    }
    expect(writes).toBeGreaterThan(20);
  });
});
