// The checklist judge (rules J1–J6 in src/env/judge.ts) and the real-execution reward (src/env/reward.ts):
// expert trajectories score 1; a wrong id, a forbidden write, a missing fact, an error observation on a
// required call and an empty reply each score below 1 (or -0.1), and the real reward agrees where the
// database or the communicated facts differ, including writes replayed in an order that changes the database.

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { Step, Task, ToolCall } from '../../src/env/domain';
import { EMPTY_RESPONSE_REWARD, judge } from '../../src/env/judge';
import { retailDomain } from '../../src/env/retail/index';
import { retailDataPath } from '../../src/env/retail/node';
import { callsOf, factStated, realReward } from '../../src/env/reward';
import { checklistFromReference, loadTau2Tasks } from '../../src/env/tau2';
import { base, findOrder, fresh, users } from './helpers';

const domain = retailDomain(base);
const tasks = domain.tasks.generate({ split: 'train', count: 150, seed: 5 });
const opts = { isWrite: (n: string) => fresh().isWrite(n), normaliseArgs: domain.normaliseArgs };

function expertSteps(i: number): Step[] {
  return domain.expert(tasks[i], domain.createEnv(), { mistakeRate: 0 }).steps;
}
const withWrites = tasks.map((t, i) => ({ t, i })).filter(({ t }) => t.referenceActions.some((a) => opts.isWrite(a.name) && 'order_id' in a.arguments));
const withFacts = tasks.map((t, i) => ({ t, i })).filter(({ t }) => t.facts.length > 0);

/** Re-executes edited calls for real so the perturbed trajectory is internally consistent. */
function rerun(steps: Step[]): Step[] {
  const env = fresh();
  return steps.map((s) => (s.kind === 'call' ? { kind: 'call', call: s.call, observation: env.execute(s.call) } : s));
}

describe('checklist judge', () => {
  it('gives a wrong order id in the write less than 1 (and the real reward 0)', () => {
    expect(withWrites.length).toBeGreaterThan(20);
    for (const { t, i } of withWrites) {
      const steps = expertSteps(i);
      const owner = users().find((u) => u.orders.length > 1 && u.orders.includes(String((t.referenceActions.find((a) => opts.isWrite(a.name))!.arguments as { order_id: string }).order_id)));
      const k = steps.findIndex((s) => s.kind === 'call' && opts.isWrite(s.call.name));
      const s = steps[k] as Extract<Step, { kind: 'call' }>;
      const other = (owner?.orders ?? ['#W0000000']).find((o) => o !== s.call.arguments.order_id)!;
      steps[k] = { ...s, call: { name: s.call.name, arguments: { ...s.call.arguments, order_id: other } } };
      const bad = rerun(steps);
      expect(judge(t.checklist, bad, opts).reward, t.id).toBeLessThan(1);
      expect(realReward(domain.createEnv, t, bad).reward, t.id).toBe(0);
    }
  });

  it('gives an extra successful write less than 1 (and the real reward 0)', () => {
    for (let i = 0; i < 40; i++) {
      const t = tasks[i];
      const steps = expertSteps(i);
      const extra = { name: 'modify_user_address', arguments: { user_id: 'yusuf_rossi_9620', address1: '9 X St', address2: '', city: 'Y', state: 'NY', country: 'USA', zip: '10001' } };
      if (t.referenceActions.some((a) => a.name === extra.name)) continue;
      const bad = rerun([...steps.slice(0, -1), { kind: 'call', call: extra, observation: { ok: true, name: '', result: null } }, steps.at(-1)!]);
      const j = judge(t.checklist, bad, opts);
      expect(j.reward, t.id).toBeLessThan(1);
      expect(j.items.find((x) => x.item.kind === 'no_forbidden_writes')!.satisfied).toBe(false);
      expect(realReward(domain.createEnv, t, bad).reward).toBe(0);
    }
  });

  it('gives a reply missing a fact less than 1 (and the real reward 0)', () => {
    expect(withFacts.length).toBeGreaterThan(30);
    for (const { t, i } of withFacts) {
      const steps = expertSteps(i);
      const reply = steps.at(-1) as { kind: 'reply'; text: string };
      const fact = t.facts[0].replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      const text = reply.text.replace(new RegExp(fact, 'gi'), '[redacted]');
      expect(text).not.toBe(reply.text);
      const bad: Step[] = [...steps.slice(0, -1), { kind: 'reply', text }];
      expect(judge(t.checklist, bad, opts).reward, t.id).toBeLessThan(1);
      expect(realReward(domain.createEnv, t, bad).reward, t.id).toBe(0);
    }
  });

  it('zeroes a turn whose observation is an error: a required call then earns nothing', () => {
    const { t, i } = withWrites[0];
    const steps = expertSteps(i);
    const k = steps.findIndex((s) => s.kind === 'call' && opts.isWrite(s.call.name));
    const s = steps[k] as Extract<Step, { kind: 'call' }>;
    steps[k] = { ...s, observation: { ok: false, name: s.call.name, error: 'imagined failure', code: 'tool' } };
    const j = judge(t.checklist, steps, opts);
    expect(j.zeroedTurns).toEqual([k]);
    expect(j.reward).toBeLessThan(1);
    const weightOfWrite = t.checklist.find((c) => c.kind === 'call' && c.name === s.call.name)!.weight;
    const total = t.checklist.reduce((a, c) => a + c.weight, 0);
    expect(j.reward).toBeCloseTo(1 - weightOfWrite / total, 12);
  });

  it('scores an empty response -0.1', () => {
    const steps = expertSteps(0);
    expect(judge(tasks[0].checklist, [...steps.slice(0, -1), { kind: 'reply', text: '  \n' }], opts).reward).toBe(EMPTY_RESPONSE_REWARD);
    expect(judge(tasks[0].checklist, [], opts).reward).toBe(EMPTY_RESPONSE_REWARD);
  });

  it('compares unordered id lists for return and exchange, ordered ones for item modification', () => {
    const checklist = [
      { kind: 'call' as const, name: 'return_delivered_order_items', args: { order_id: '#W1', item_ids: ['a', 'b'], payment_method_id: 'p' }, weight: 1 },
      { kind: 'call' as const, name: 'modify_pending_order_items', args: { order_id: '#W2', item_ids: ['a', 'b'], new_item_ids: ['c', 'd'], payment_method_id: 'p' }, weight: 1 },
    ];
    const ok = (name: string, args: Record<string, unknown>): Step => ({ kind: 'call', call: { name, arguments: args }, observation: { ok: true, name, result: {} } });
    const r = judge(checklist, [ok('return_delivered_order_items', { order_id: '#W1', item_ids: ['b', 'a'], payment_method_id: 'p' }), ok('modify_pending_order_items', { order_id: '#W2', item_ids: ['b', 'a'], new_item_ids: ['d', 'c'], payment_method_id: 'p' }), { kind: 'reply', text: 'done' }], opts);
    expect(r.items.map((x) => x.satisfied)).toEqual([true, false]);
  });
});

describe('real-execution reward', () => {
  it('states facts case-insensitively with commas removed from the reply only', () => {
    expect(factStated('1093.34', ['You get $1,093.34 back'])).toBe(true);
    expect(factStated('DELIVERED', ['it was delivered'])).toBe(true);
    expect(factStated('1,093.34', ['1,093.34'])).toBe(false);
  });
  it('is 0 on early termination', () => {
    const t = tasks.find((x) => x.family === 'multi' && x.referenceActions.filter((a) => opts.isWrite(a.name)).length === 2)!;
    const steps = expertSteps(tasks.indexOf(t));
    expect(realReward(domain.createEnv, t, steps).reward).toBe(1);
    expect(realReward(domain.createEnv, t, steps, { terminated: true }).reward).toBe(0);
  });

  it('is 0 when writes come in another order that changes the database, 1 when the two writes commute', () => {
    // Address change then cancellation of one pending order; reversed, the cancellation goes first and the
    // address change then fails on a cancelled order, so the final database differs from the gold one.
    const order = findOrder((o) => o.status === 'pending');
    const address = { address1: '9 X St', address2: '', city: 'Y', state: 'NY', country: 'USA', zip: '10001' };
    const modify = { name: 'modify_pending_order_address', arguments: { order_id: order.order_id, ...address } };
    const cancel = { name: 'cancel_pending_order', arguments: { order_id: order.order_id, reason: 'no longer needed' } };
    const t: Task = { id: 'reorder', userMessages: ['Change the address, then cancel.'], referenceActions: [modify, cancel], facts: [], checklist: [] };
    const played = (calls: ToolCall[]): Step[] => rerun([...calls.map((call): Step => ({ kind: 'call', call, observation: { ok: true, name: call.name, result: null } })), { kind: 'reply', text: 'Done.' }]);
    const inOrder = played([modify, cancel]);
    const reordered = played([cancel, modify]);
    expect(inOrder.every((s) => s.kind !== 'call' || s.observation.ok)).toBe(true);
    expect(reordered[1]).toMatchObject({ kind: 'call', observation: { ok: false, error: 'Non-pending order cannot be modified' } });
    expect(realReward(domain.createEnv, t, inOrder).reward).toBe(1);
    expect(realReward(domain.createEnv, t, reordered)).toMatchObject({ reward: 0, db: 0, communicate: 1 });

    // A generated task whose two writes touch different records: swapping them leaves the same database.
    const m = tasks.find((x) => x.family === 'multi' && x.referenceActions.filter((a) => opts.isWrite(a.name)).length === 2)!;
    const steps = expertSteps(tasks.indexOf(m));
    const [a, b] = steps.flatMap((s, k) => (s.kind === 'call' && opts.isWrite(s.call.name) ? [k] : []));
    const swapped = [...steps];
    [swapped[a], swapped[b]] = [steps[b], steps[a]];
    expect(callsOf(swapped)).not.toEqual(callsOf(steps));
    expect(realReward(domain.createEnv, m, rerun(swapped)).reward).toBe(1);
  });
});

const tasksPath = retailDataPath('tasks-train.json');
describe.skipIf(!tasksPath)('τ²-bench train tasks through the same rewards', () => {
  it('the reference trajectory (plus a reply stating the facts) scores 1 with both rewards; without the writes it scores < 1', () => {
    const tau = loadTau2Tasks(readFileSync(tasksPath!, 'utf8'));
    let dbChanging = 0;
    for (const t of tau) {
      const env = fresh();
      const steps: Step[] = t.referenceActions.map((call) => ({ kind: 'call', call, observation: env.execute(call) }));
      steps.push({ kind: 'reply', text: t.facts.join(' and ') || 'Done.' });
      const checklist = checklistFromReference(t, fresh);
      expect(judge(checklist, steps, opts).reward, t.id).toBe(1);
      expect(realReward(fresh, t, steps).reward, t.id).toBe(1);
      const noWrites = steps.filter((s) => s.kind !== 'call' || !opts.isWrite(s.call.name));
      if (env.hash() !== fresh().hash()) {
        dbChanging++;
        expect(realReward(fresh, t, noWrites).reward, t.id).toBe(0);
        expect(judge(checklist, noWrites, opts).reward, t.id).toBeLessThan(1);
      }
    }
    expect(dbChanging).toBe(74 - 7); // seven train tasks leave the database unchanged
  });
});
