// The checklist judge (rules J1–J6 in src/env/judge.ts) and the real-execution reward (src/env/reward.ts):
// expert trajectories score 1; a wrong id, a forbidden write, a missing fact and an empty reply each score below
// 1 (or -0.1), no rewriting of observations changes a score, and the real reward agrees where the
// database or the communicated facts differ, including writes replayed in an order that changes the database.

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import type { Observation, Step, Task, ToolCall } from '../../src/env/domain';
import { EMPTY_RESPONSE_REWARD, judge, judgeOptions } from '../../src/env/judge';
import { retailDomain } from '../../src/env/retail/index';
import { retailDataPath } from '../../src/env/retail/node';
import { callsOf, factStated, realReward } from '../../src/env/reward';
import { checklistFromReference, loadTau2Tasks } from '../../src/env/tau2';
import { base, findOrder, fresh, users } from './helpers';

const domain = retailDomain(base);
const tasks = domain.tasks.generate({ split: 'train', count: 150, seed: 5 });
const opts = judgeOptions(fresh(), domain.normaliseArgs);

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

  it('never reads an observation: an imagined error on a required write still counts it made', () => {
    const { t, i } = withWrites[0];
    const steps = expertSteps(i);
    const k = steps.findIndex((s) => s.kind === 'call' && opts.isWrite(s.call.name));
    const s = steps[k] as Extract<Step, { kind: 'call' }>;
    steps[k] = { ...s, observation: { ok: false, name: s.call.name, error: 'imagined failure', code: 'tool' } };
    const j = judge(t.checklist, steps, opts);
    expect(j.zeroedTurns).toEqual([]);
    expect(j.reward).toBe(1);
  });

  it('counts a call for nothing only when it fails a state-free check (malformed, unknown tool, schema)', () => {
    const { t, i } = withWrites[0];
    const steps = expertSteps(i);
    const k = steps.findIndex((s) => s.kind === 'call' && opts.isWrite(s.call.name));
    const s = steps[k] as Extract<Step, { kind: 'call' }>;
    const err = { ok: false as const, name: s.call.name, error: 'x', code: 'invalid_arguments' as const };
    // The write without its order id fails the schema: it could not have changed any database.
    const { order_id: _dropped, ...rest } = s.call.arguments;
    const invalid: Step = { kind: 'call', call: { name: s.call.name, arguments: rest }, observation: err };
    const unknown: Step = { kind: 'call', call: { name: 'drop_database', arguments: {} }, observation: { ...err, name: 'drop_database' } };
    const played = [...steps.slice(0, k), invalid, unknown, ...steps.slice(k)];
    const j = judge(t.checklist, played, opts);
    expect(j.zeroedTurns).toEqual([k, k + 1]);
    expect(j.reward).toBe(1);
  });

  it('scores the wrong-reason cancellation the same whether it is rehearsed as an error or as a success', () => {
    // The loophole this rule closes: rehearsed as an error, the forbidden write used to vanish (0.667 against 0.333).
    const t = tasks.find((x) => x.family === 'cancel')!;
    const steps = expertSteps(tasks.indexOf(t));
    const k = steps.findIndex((s) => s.kind === 'call' && s.call.name === 'cancel_pending_order');
    const s = steps[k] as Extract<Step, { kind: 'call' }>;
    const reason = s.call.arguments.reason === 'no longer needed' ? 'ordered by mistake' : 'no longer needed';
    const call = { name: s.call.name, arguments: { ...s.call.arguments, reason } };
    const faithful = fresh();
    for (const x of steps.slice(0, k)) if (x.kind === 'call') faithful.execute(x.call);
    const asSuccess = [...steps.slice(0, k), { kind: 'call' as const, call, observation: faithful.execute(call) }, ...steps.slice(k + 1)];
    expect((asSuccess[k] as Extract<Step, { kind: 'call' }>).observation.ok).toBe(true);
    const asError = [...steps.slice(0, k), { kind: 'call' as const, call, observation: { ok: false as const, name: call.name, error: 'Order cannot be cancelled', code: 'tool' as const } }, ...steps.slice(k + 1)];
    const rs = judge(t.checklist, asSuccess, opts);
    const re = judge(t.checklist, asError, opts);
    expect(rs.reward).toBeLessThan(1);
    expect(re.reward).toBe(rs.reward);
    expect(re.items.find((x) => x.item.kind === 'no_forbidden_writes')!.satisfied).toBe(false);
  });

  it('cannot be raised by rewriting observations (fast-check: success and error swapped, fields dropped)', () => {
    const arb = fc.record({
      task: fc.nat(tasks.length - 1),
      mistakes: fc.boolean(),
      edits: fc.array(fc.record({ at: fc.nat(), how: fc.constantFrom('swap', 'drop', 'empty') }), { maxLength: 6 }),
    });
    fc.assert(
      fc.property(arb, ({ task, mistakes, edits }) => {
        const t = tasks[task];
        const steps = domain.expert(t, domain.createEnv(), { mistakeRate: mistakes ? 0.5 : 0, seed: task }).steps;
        const calls = steps.flatMap((s, k) => (s.kind === 'call' ? [k] : []));
        if (calls.length === 0) return;
        const edited = [...steps];
        for (const e of edits) {
          const k = calls[e.at % calls.length];
          const s = edited[k] as Extract<Step, { kind: 'call' }>;
          const o = s.observation;
          const observation: Observation =
            e.how === 'swap'
              ? o.ok ? { ok: false, name: o.name, error: 'imagined', code: 'tool' } : { ok: true, name: o.name, result: { status: 'ok' } }
              : e.how === 'drop' && o.ok && o.result && typeof o.result === 'object'
                ? { ok: true, name: o.name, result: Object.fromEntries(Object.entries(o.result).slice(1)) }
                : { ok: true, name: o.name, result: null };
          edited[k] = { ...s, observation };
        }
        expect(judge(t.checklist, edited, opts).reward).toBe(judge(t.checklist, steps, opts).reward);
      }),
      { numRuns: 200, seed: 46 },
    );
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
