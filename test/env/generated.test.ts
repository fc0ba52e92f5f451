// Generated retail tasks: determinism, held-out split, family coverage, and the scripted expert solving
// them in the real environment (real-execution reward) with and without deliberate mistakes.

import { describe, expect, it } from 'vitest';
import type { Step } from '../../src/env/domain';
import { judge, judgeOptions } from '../../src/env/judge';
import { retailDomain } from '../../src/env/retail/index';
import type { RetailTask } from '../../src/env/retail/intent';
import { FAMILY_WEIGHTS, userSplit } from '../../src/env/retail/generator';
import { realReward } from '../../src/env/reward';
import { base, fresh } from './helpers';

const domain = retailDomain(base);
const train = domain.tasks.generate({ split: 'train', count: 240, seed: 11 });
const test = domain.tasks.generate({ split: 'test', count: 80, seed: 11 });

function solve(task: RetailTask, mistakeRate: number, seed = 1) {
  const env = domain.createEnv();
  const r = domain.expert(task, env, { mistakeRate, seed });
  return { ...r, env, real: realReward(domain.createEnv, task, r.steps) };
}

const orderOwner = (id: string) => (base.tables.get('orders')!.get(id) as { user_id: string } | undefined)?.user_id;

describe('task generator', () => {
  it('is a pure function of (split, seed, count)', () => {
    expect(domain.tasks.generate({ split: 'train', count: 240, seed: 11 })).toEqual(train);
    const other = domain.tasks.generate({ split: 'train', count: 20, seed: 12 });
    expect(other.map((t) => t.userMessages[0])).not.toEqual(train.slice(0, 20).map((t) => t.userMessages[0]));
  });

  it('keeps the test split on held-out users only', () => {
    for (const [tasks, split] of [[train, 'train'], [test, 'test']] as const) {
      for (const t of tasks) {
        expect(t.split).toBe(split);
        for (const a of t.referenceActions) {
          const args = a.arguments as Record<string, string>;
          if (args.user_id) expect(userSplit(args.user_id)).toBe(split);
          const owner = args.order_id ? orderOwner(args.order_id) : undefined;
          if (owner) expect(userSplit(owner)).toBe(split);
        }
      }
    }
    const trainMsgs = new Set(train.map((t) => t.userMessages[0]));
    expect(test.some((t) => trainMsgs.has(t.userMessages[0]))).toBe(false);
  });

  it('covers every family, ids without "#", unknown ids and multi-step requests', () => {
    const fams = new Set(train.map((t) => t.family));
    for (const f of Object.keys(FAMILY_WEIGHTS)) expect(fams, f).toContain(f);
    expect(train.some((t) => / W\d{7}\b/.test(t.userMessages[0]))).toBe(true);
    expect(train.filter((t) => t.family === 'multi').every((t) => t.intent.requests.length === 2)).toBe(true);
    expect(new Set(train.map((t) => t.userMessages[0])).size).toBe(train.length);
    for (const t of train) {
      expect(t.checklist.some((c) => c.kind === 'no_forbidden_writes')).toBe(true);
      expect(t.checklist.filter((c) => c.kind === 'fact').map((c) => (c as { text: string }).text)).toEqual(t.facts);
    }
  });

  it('reference actions of refusal tasks write nothing; the others write', () => {
    const env = fresh();
    for (const t of train) {
      const writes = t.referenceActions.filter((a) => env.isWrite(a.name));
      if (t.family.startsWith('refuse') || ['status', 'unknown_order', 'product_price', 'order_total', 'transfer'].includes(t.family)) expect(writes, t.id).toEqual([]);
      else if (t.family !== 'multi') expect(writes.length, t.id).toBeGreaterThan(0);
    }
  });
});

describe('scripted expert in the real environment', () => {
  it('solves >= 99% of train and test tasks without mistakes, and its trajectories judge 1', () => {
    for (const tasks of [train, test]) {
      let solved = 0;
      for (const t of tasks) {
        const r = solve(t, 0);
        if (r.real.reward === 1) solved++;
        expect(r.mistakes).toBe(0);
        expect(judge(t.checklist, r.steps, judgeOptions(r.env, domain.normaliseArgs)).reward, t.id).toBe(1);
      }
      expect(solved / tasks.length).toBeGreaterThanOrEqual(0.99);
    }
  });

  it('with mistakes it still solves >= 99%: each mistake is an error observation followed by the fix', () => {
    let solved = 0;
    let mistakes = 0;
    let errorSteps = 0;
    let forbidden = 0;
    for (const t of train) {
      const r = solve(t, 0.5, 3);
      if (r.real.reward === 1) solved++;
      mistakes += r.mistakes;
      // Error turns that are not reference actions (those fail on purpose, e.g. a wrong email) are mistakes.
      const ref = new Set(t.referenceActions.map((a) => JSON.stringify(a)));
      const errs = r.steps.filter((s) => s.kind === 'call' && !s.observation.ok && !ref.has(JSON.stringify(s.call)));
      errorSteps += errs.length;
      // The judge counts a write as made whatever its observation says (rule J2): a mistaken write the tools
      // refused still breaks no_forbidden_writes, and nothing else does.
      const o = judgeOptions(r.env, domain.normaliseArgs);
      const refusedWrite = errs.some((s) => s.kind === 'call' && o.isWrite(s.call.name) && o.staticError!(s.call) === null);
      const j = judge(t.checklist, r.steps, o);
      if (refusedWrite) {
        forbidden++;
        expect(j.items.filter((v) => !v.satisfied).map((v) => v.item.kind), t.id).toEqual(['no_forbidden_writes']);
      } else expect(j.reward, t.id).toBe(1);
    }
    expect(solved / train.length).toBeGreaterThanOrEqual(0.99);
    expect(forbidden).toBeGreaterThan(0);
    expect(mistakes).toBeGreaterThan(20);
    expect(errorSteps).toBe(mistakes);
  });

  it('shows the documented mistakes: forgotten "#", a forbidden write, a wrong reason text', () => {
    const errors = new Set<string>();
    for (const t of train) {
      for (const s of solve(t, 1, 9).steps) if (s.kind === 'call' && !s.observation.ok) errors.add(s.observation.error);
    }
    expect(errors).toContain('Order not found');
    expect(errors).toContain('Non-pending order cannot be cancelled');
    expect(errors).toContain('Non-delivered order cannot be returned');
    expect(errors).toContain('Invalid reason');
  });

  it('as a careless demonstrator, leaves out the figures owed: the same calls, a reply that fails COMMUNICATE', () => {
    const owed = train.filter((t) => ['status', 'cancel', 'return', 'exchange', 'modify_items'].includes(t.family) && t.facts.some((f) => /^\d/.test(f)) && solve(t, 0).real.reward === 1);
    let careless = 0;
    for (const t of train) {
      const clean = solve(t, 0.15);
      const r = domain.expert(t, domain.createEnv(), { mistakeRate: 0.15, carelessRate: 1, seed: 1 });
      // Its own stream: the calls (and the recoverable mistakes) are the ones of the attentive expert.
      expect(r.steps.filter((s) => s.kind === 'call')).toEqual(clean.steps.filter((s) => s.kind === 'call'));
      expect(r.mistakes).toBe(clean.mistakes);
      const real = realReward(domain.createEnv, t, r.steps);
      expect(real.db).toBe(clean.real.db);
      if (r.careless! > 0) {
        careless++;
        expect(real.communicate).toBe(0);
        expect(real.missingFacts.every((f) => /^\d/.test(f))).toBe(true);
      } else {
        expect(real.reward).toBe(clean.real.reward);
      }
    }
    // Every status lookup with a tracking number and every cancellation, return and item change that went through.
    expect(owed.length).toBeGreaterThan(40);
    expect(careless).toBeGreaterThanOrEqual(owed.length);
    expect(train.filter((t) => t.family === 'order_total' || t.family === 'product_price').every((t) => domain.expert(t, domain.createEnv(), { carelessRate: 1, seed: 1 }).careless === 0)).toBe(true);
    const half = train.map((t) => domain.expert(t, domain.createEnv(), { carelessRate: 0.5, seed: 1 }).careless!).reduce((a, b) => a + b, 0);
    expect(half).toBeGreaterThan(careless * 0.3);
    expect(half).toBeLessThan(careless * 0.7);
  });

  it('a careless demonstrator of refusals leaves out why it refuses, and nothing else', () => {
    const refusals = new Set(['refuse_cancel_status', 'refuse_cancel_reason', 'refuse_return_status']);
    let careless = 0;
    for (const t of train) {
      const clean = solve(t, 0.15);
      const r = domain.expert(t, domain.createEnv(), { mistakeRate: 0.15, carelessRate: 1, carelessAbout: ['refusals'], seed: 1 });
      expect(r.steps.filter((s) => s.kind === 'call')).toEqual(clean.steps.filter((s) => s.kind === 'call'));
      const real = realReward(domain.createEnv, t, r.steps);
      if (refusals.has(t.family)) {
        expect(r.careless).toBe(1);
        expect(real.db).toBe(1);
        expect(real.missingFacts).toEqual(t.facts);
      }
      if (r.careless! > 0) careless++;
      else expect(r.steps).toEqual(clean.steps);
    }
    expect(careless).toBeGreaterThanOrEqual(train.filter((t) => refusals.has(t.family)).length);
    // The default habit is the figures: the same episodes as naming it.
    for (const t of train.slice(0, 60)) {
      const o = { mistakeRate: 0.15, carelessRate: 0.5, seed: 1 };
      expect(domain.expert(t, domain.createEnv(), o)).toEqual(domain.expert(t, domain.createEnv(), { ...o, carelessAbout: ['figures'] }));
    }
  });

  it('a careless demonstrator of lookups leaves out what a lookup found, and nothing else', () => {
    const lookups = new Set(['refuse_cancel_status', 'refuse_return_status', 'unknown_order']);
    const tracked = (t: (typeof train)[number]) => t.family === 'status' && t.facts.length > 1;
    const untouched = new Set(['cancel', 'return', 'refuse_cancel_reason', 'order_total', 'product_price', 'user_address', 'transfer']);
    let careless = 0;
    for (const t of train) {
      const clean = solve(t, 0.15);
      const r = domain.expert(t, domain.createEnv(), { mistakeRate: 0.15, carelessRate: 1, carelessAbout: ['lookups'], seed: 1 });
      expect(r.steps.filter((s) => s.kind === 'call')).toEqual(clean.steps.filter((s) => s.kind === 'call'));
      const real = realReward(domain.createEnv, t, r.steps);
      if (lookups.has(t.family) || tracked(t)) {
        expect(r.careless).toBe(1);
        expect(real.db).toBe(clean.real.db);
        expect(real.communicate).toBe(0);
        // The status itself is what a status lookup's reply is about; only the tracking number goes.
        expect(real.missingFacts).toEqual(tracked(t) ? t.facts.slice(1) : t.facts);
      }
      if (untouched.has(t.family)) expect(r.steps).toEqual(clean.steps);
      if (r.careless! > 0) careless++;
    }
    expect(careless).toBeGreaterThan(30);
    // Naming a second habit leaves the first one's episodes where it has nothing to leave out.
    for (const t of train.filter((x) => x.family === 'cancel').slice(0, 20)) {
      const o = { mistakeRate: 0.15, carelessRate: 0.5, seed: 1 };
      expect(domain.expert(t, domain.createEnv(), { ...o, carelessAbout: ['figures', 'lookups'] })).toEqual(domain.expert(t, domain.createEnv(), { ...o, carelessAbout: ['figures'] }));
    }
  });
});

describe('expert rows', () => {
  it('one act row per turn, one rehearse row per call, with real observations and grounding from the same task', async () => {
    const { parse, parseObservation } = await import('../../src/env/toolcall');
    const t = train.find((x) => x.family === 'exchange')!;
    const r = solve(t, 0);
    const calls = r.steps.filter((s): s is Extract<Step, { kind: 'call' }> => s.kind === 'call');
    const act = r.rows.filter((x) => x.role === 'act');
    const reh = r.rows.filter((x) => x.role === 'rehearse');
    expect(act.length).toBe(r.steps.length);
    expect(reh.length).toBe(calls.length);
    expect(act[0].messages).toEqual([{ role: 'user', content: t.userMessages[0] }]);
    calls.forEach((s, i) => {
      expect(parse(act[i].target).calls).toEqual([s.call]);
      const row = reh[i];
      if (row.role !== 'rehearse') throw new Error('role');
      expect(row.call).toEqual(s.call);
      expect(parseObservation(row.target, s.call.name)).toEqual(JSON.parse(JSON.stringify(s.observation.ok ? s.observation : { ...s.observation, code: 'tool' })));
      expect(row.grounding.length).toBeGreaterThan(0);
      for (const g of row.grounding) expect(g.name === s.call.name && JSON.stringify(g.arguments) === JSON.stringify(s.call.arguments)).toBe(false);
      expect(row.messages.length).toBe(1 + 2 * i);
    });
    expect(act.at(-1)!.target).toBe((r.steps.at(-1) as { text: string }).text);
    expect(act.at(-1)!.messages.at(-1)!.role).toBe('tool');
  });
});
