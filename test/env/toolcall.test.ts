// Tool-call parsing and execution of untrusted model output: the documented formats, and property tests
// (fast-check) that random and adversarial input never throws, and that a failing call never changes
// the database.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Environment } from '../../src/env/env';
import { ToolError } from '../../src/env/domain';
import type { ToolSpec } from '../../src/env/domain';
import {
  MAX_DEPTH,
  describeJsonError,
  endsEpisode,
  executeParsed,
  formatCall,
  formatObservation,
  parse,
  parseObservation,
  serializeObservation,
} from '../../src/env/toolcall';
import { RETAIL_TOOLS } from '../../src/env/retail/index';
import { base, fresh, orders, users } from './helpers';
import type { Product, User } from '../../src/env/retail/types';

const call = (name: string, args: Record<string, unknown>) => `<tool_call>\n${JSON.stringify({ name, arguments: args })}\n</tool_call>`;

describe('parse', () => {
  it('reads one Hermes block', () => {
    const r = parse(call('get_order_details', { order_id: '#W2378156' }));
    expect(r.calls).toEqual([{ name: 'get_order_details', arguments: { order_id: '#W2378156' } }]);
    expect(r.errors).toEqual([]);
    expect(r.reply).toBe('');
    expect(endsEpisode(r)).toBe(false);
  });
  it('reads a JSON list of calls and several blocks, in order', () => {
    const list = `<tool_call>\n[{"name":"a","arguments":{}},{"name":"b","arguments":{"x":1}}]\n</tool_call>`;
    const r = parse(`${list} then ${call('c', {})}`);
    expect(r.calls.map((c) => c.name)).toEqual(['a', 'b', 'c']);
    expect(r.reply).toBe('then');
  });
  it('a plain reply ends the episode; think spans are dropped', () => {
    const r = parse('<think>check the status</think>Your order #W2378156 was delivered.');
    expect(endsEpisode(r)).toBe(true);
    expect(r.reply).toBe('Your order #W2378156 was delivered.');
  });
  it('accepts string-encoded arguments and missing arguments', () => {
    expect(parse('<tool_call>{"name":"x","arguments":"{\\"a\\":1}"}</tool_call>').calls).toEqual([{ name: 'x', arguments: { a: 1 } }]);
    expect(parse('<tool_call>{"name":"list_all_product_types"}</tool_call>').calls[0].arguments).toEqual({});
  });
  it('accepts an unterminated last block only when its JSON is complete', () => {
    expect(parse('<tool_call>\n{"name":"x","arguments":{}}').calls.length).toBe(1);
    expect(parse('<tool_call>\n{"name":"x","argum').errors[0].error).toMatch(/unterminated/);
  });
  it.each([
    ['<tool_call>{"name": "x", </tool_call>', /invalid JSON/],
    ['<tool_call>[]</tool_call>', /empty list/],
    ['<tool_call>"hello"</tool_call>', /JSON object/],
    ['<tool_call>{"arguments":{}}</tool_call>', /no "name"/],
    ['<tool_call>{"name":"x","arguments":[1]}</tool_call>', /must be a JSON object/],
    ['<tool_call>{"name":"x","arguments":"nope"}</tool_call>', /not a JSON object/],
    ['<tool_call>' + '['.repeat(5000) + ']'.repeat(5000) + '</tool_call>', /nested too deeply/],
    ['<tool_call>{"name":"x","arguments":{"a":"' + 'y'.repeat(20000) + '"}}</tool_call>', /too long/],
    ['x'.repeat(70000), /too long/],
  ])('structured error for %#', (text, re) => {
    const r = parse(text);
    expect(r.calls).toEqual([]);
    expect(r.errors.length).toBeGreaterThan(0);
    expect(r.errors[0].error).toMatch(re);
    expect(endsEpisode(r)).toBe(false);
  });
  it('says what is wrong with malformed JSON in fixed words, whatever engine runs it', () => {
    // The words and positions are the lab's own (Node's and Chromium's JSON.parse messages differ; the policy
    // reads this text, so a run in the browser would otherwise see other observations than the same run in Node).
    expect(parse('<tool_call>{"name": "x", </tool_call>').errors[0].error).toBe('invalid JSON: expected a property name in double quotes at position 13');
    expect(parse('<tool_call>{"name": "x" "arguments": {}}</tool_call>').errors[0].error).toBe("invalid JSON: expected ',' or a closing bracket at position 13");
    expect(describeJsonError("{'a': 1}")).toBe('unexpected character at position 1');
    expect(describeJsonError('{"a": 1,}')).toBe('expected a property name in double quotes at position 8');
    expect(describeJsonError('[1, 2')).toBe("expected ']' at position 5");
    expect(describeJsonError('{"a": 1}}')).toBe('unexpected text after the JSON value at position 8');
    expect(describeJsonError('{"a": 1 // why\n}')).toBe('comments are not JSON at position 8');
    expect(describeJsonError('')).toBe('expected a value at position 0');
  });
  it('finds a syntax error exactly where JSON.parse rejects the text (property)', () => {
    const valid = (s: string) => {
      try {
        JSON.parse(s);
        return true;
      } catch {
        return false;
      }
    };
    // Valid JSON, and JSON with one character dropped, doubled or replaced by JSON punctuation.
    const text = fc.oneof(
      fc.json(),
      fc.tuple(fc.json(), fc.nat(), fc.constantFrom('', ',', '}', ']', '"', ':', "'", '/', '\\', ' ')).map(([j, i, c]) => {
        const at = j.length ? i % j.length : 0;
        return j.slice(0, at) + c + j.slice(at + 1);
      }),
    );
    fc.assert(
      fc.property(text, (s) => {
        const msg = describeJsonError(s);
        if (valid(s)) return;
        const m = /^(.+) at position (\d+)$/.exec(msg);
        expect(m, `${JSON.stringify(s)}: ${msg}`).not.toBeNull();
        expect(Number(m![2])).toBeLessThanOrEqual(s.length);
      }),
      { numRuns: 2000, seed: 19 },
    );
  });
  it('formatCall round-trips through parse', () => {
    const c = { name: 'return_delivered_order_items', arguments: { order_id: '#W1', item_ids: ['1', '2'], payment_method_id: 'p' } };
    const text = formatCall(c);
    expect(text).toBe('<tool_call>\n{"name": "return_delivered_order_items", "arguments": {"order_id": "#W1", "item_ids": ["1", "2"], "payment_method_id": "p"}}\n</tool_call>');
    expect(parse(text).calls).toEqual([c]);
  });
});

describe('observations', () => {
  it('serialise compactly and parse back from a rehearsal', () => {
    const env = fresh();
    const ok = env.execute({ name: 'find_user_id_by_email', arguments: { email: users()[0].email } });
    expect(serializeObservation(ok)).toBe(`{"result":"${users()[0].user_id}"}`);
    const bad = env.execute({ name: 'get_order_details', arguments: { order_id: 'W1' } });
    expect(serializeObservation(bad)).toBe('{"error":"Order not found"}');
    expect(parseObservation(formatObservation(ok), ok.name)).toEqual(ok);
    expect(parseObservation(formatObservation(bad), 'get_order_details')).toMatchObject({ ok: false, error: 'Order not found' });
    for (const junk of ['', '{"result":1}', '<execution_result>{"a":1}</execution_result>', '<execution_result>{"result":1,"error":"x"}</execution_result>', '<execution_result>{"error":3}</execution_result>']) {
      expect(parseObservation(junk, 'x')).toBeNull();
    }
  });
  it('product variants serialise in database order, not JS integer-key order', () => {
    const o = fresh().execute({ name: 'get_product_details', arguments: { product_id: '1656367028' } });
    expect(serializeObservation(o)).toMatch(/^\{"result":\{"name":"Mechanical Keyboard","product_id":"1656367028","variants":\{"9690244451":/);
  });
});

describe('execute: untrusted calls', () => {
  it.each([
    [null, 'parse'],
    [[1], 'parse'],
    [{ arguments: {} }, 'parse'],
    [{ name: 'rm_rf', arguments: {} }, 'unknown_tool'],
    [{ name: '__proto__', arguments: {} }, 'unknown_tool'],
    [{ name: 'constructor', arguments: {} }, 'unknown_tool'],
    [{ name: 'get_order_details', arguments: {} }, 'invalid_arguments'],
    [{ name: 'get_order_details', arguments: { order_id: 5 } }, 'invalid_arguments'],
    [{ name: 'get_order_details', arguments: { order_id: '#W2378156', extra: 1 } }, 'invalid_arguments'],
    [{ name: 'get_order_details', arguments: JSON.parse('{"order_id":"#W2378156","__proto__":{"x":1}}') }, 'invalid_arguments'],
    [{ name: 'get_order_details', arguments: JSON.parse('{"order_id":"#W2378156","constructor":1}') }, 'invalid_arguments'],
    [{ name: 'get_order_details', arguments: { order_id: 'x'.repeat(100000) } }, 'invalid_arguments'], // huge string
    [{ name: 'return_delivered_order_items', arguments: { order_id: '#W2378156', item_ids: 'x', payment_method_id: 'p' } }, 'invalid_arguments'],
    [{ name: 'return_delivered_order_items', arguments: { order_id: '#W2378156', item_ids: [1], payment_method_id: 'p' } }, 'invalid_arguments'],
    [{ name: 'get_order_details', arguments: [] }, 'invalid_arguments'],
  ])('call %# -> %s', (c, code) => {
    const env = fresh();
    const h = env.hash();
    const o = env.execute(c);
    expect(o).toMatchObject({ ok: false, code });
    expect(env.hash()).toBe(h);
    expect(({} as Record<string, unknown>).x).toBeUndefined();
  });
  it('a tool that throws after writing leaves the database untouched (transaction discarded)', () => {
    const boom: ToolSpec = {
      name: 'boom',
      description: '',
      kind: 'write',
      parameters: { type: 'object', properties: {}, required: [], additionalProperties: false },
      run(tx) {
        const u = tx.get('users', 'yusuf_rossi_9620')!;
        tx.put('users', 'yusuf_rossi_9620', { ...u, email: 'x' });
        throw new TypeError('bug');
      },
    };
    const polite: ToolSpec = { ...boom, name: 'polite', run: (tx) => { tx.put('users', 'yusuf_rossi_9620', {}); throw new ToolError('no'); } };
    const env = new Environment(base, [...RETAIL_TOOLS, boom, polite]);
    const h = env.hash();
    expect(env.execute({ name: 'boom', arguments: {} })).toMatchObject({ ok: false, code: 'internal' });
    expect(env.execute({ name: 'polite', arguments: {} })).toMatchObject({ ok: false, code: 'tool', error: 'no' });
    expect(env.hash()).toBe(h);
  });
});

// Arbitraries: real ids mixed with near-misses, so random calls reach every check of every tool.
const someOrders = orders().filter((_, i) => i % 37 === 0);
const orderIds = someOrders.map((o) => o.order_id);
const itemIds = someOrders.flatMap((o) => o.items.map((i) => i.item_id));
const pmIds = someOrders.flatMap((o) => Object.keys(base.tables.get('users')!.get(o.user_id)!.payment_methods as object));
const userIds = someOrders.map((o) => o.user_id);
const idLike = fc.oneof(
  fc.constantFrom(...orderIds, ...itemIds, ...pmIds, ...userIds),
  fc.constantFrom(...orderIds).map((s) => s.slice(1)),
  fc.constantFrom('__proto__', 'constructor', 'toString', 'no longer needed', 'ordered by mistake', '', 'USA'),
  fc.string({ maxLength: 12 }),
);
const argValue = fc.oneof({ weight: 6, arbitrary: idLike }, fc.array(idLike, { maxLength: 4 }), fc.jsonValue({ maxDepth: 3 }));
const argNames = [...new Set(RETAIL_TOOLS.flatMap((t) => Object.keys(t.parameters.properties ?? {})))];
const toolArgs = (t: ToolSpec) =>
  fc.record(Object.fromEntries(Object.keys(t.parameters.properties ?? {}).map((k) => [k, argValue])), { requiredKeys: [] });
const userOfOrder = (o: (typeof someOrders)[number]) => base.tables.get('users')!.get(o.user_id) as unknown as User;
const variantsOf = (pid: string) => Object.keys((base.tables.get('products')!.get(pid) as unknown as Product).variants);
/** Calls built around one real order (its items, variants of its products, its owner's methods), so writes often succeed. */
const plausibleCall = fc.constantFrom(...someOrders).chain((o) => {
  const u = userOfOrder(o);
  const slot: Record<string, fc.Arbitrary<unknown>> = {
    order_id: fc.oneof({ weight: 5, arbitrary: fc.constant(o.order_id) }, fc.constant(o.order_id.slice(1))),
    user_id: fc.constant(u.user_id),
    email: fc.constantFrom(u.email, u.email.toUpperCase(), 'x@y.z'),
    first_name: fc.constant(u.name.first_name),
    last_name: fc.constant(u.name.last_name),
    zip: fc.constantFrom(u.address.zip, '00000'),
    item_ids: fc.subarray(o.items.map((i) => i.item_id), { minLength: 1 }),
    new_item_ids: fc.tuple(...o.items.map((i) => fc.constantFrom(...variantsOf(i.product_id)))),
    payment_method_id: fc.constantFrom(...Object.keys(u.payment_methods), 'paypal_0000000'),
    reason: fc.constantFrom('no longer needed', 'ordered by mistake', 'too slow'),
    product_id: fc.constantFrom(...o.items.map((i) => i.product_id), ...o.items.map((i) => i.item_id)),
    expression: fc.stringMatching(/^[0-9+\-*\/(). ]{0,12}$/),
    summary: fc.string(),
  };
  return fc.constantFrom(...RETAIL_TOOLS).chain((t) => {
    const keys = Object.keys(t.parameters.properties ?? {});
    const rec = Object.fromEntries(keys.map((k) => [k, slot[k] ?? fc.string({ maxLength: 20 })]));
    return fc.record(rec).map((args) => {
      // new_item_ids pairs with item_ids position by position: keep the same length most of the time.
      if (Array.isArray(args.item_ids) && Array.isArray(args.new_item_ids)) {
        const old = args.item_ids as string[];
        args.new_item_ids = old.map((id) => {
          const k = o.items.findIndex((i) => i.item_id === id);
          return (args.new_item_ids as string[])[k];
        });
      }
      return { name: t.name, arguments: args };
    });
  });
});
const anyCall = fc.oneof(
  { weight: 8, arbitrary: plausibleCall },
  { weight: 4, arbitrary: fc.constantFrom(...RETAIL_TOOLS).chain((t) => toolArgs(t).map((a) => ({ name: t.name, arguments: a }))) },
  fc.record({
    name: fc.oneof(fc.constantFrom(...RETAIL_TOOLS.map((t) => t.name), '__proto__', 'constructor', 'hasOwnProperty'), fc.string()),
    arguments: fc.dictionary(fc.oneof(fc.constantFrom(...argNames, '__proto__', 'constructor', 'prototype'), fc.string()), argValue, { maxKeys: 5 }),
  }),
  fc.anything({ maxDepth: 3 }),
);

describe('property: random and adversarial calls', () => {
  it('execute never throws; failing calls and reads never change the hash; successful writes are undone by reset', () => {
    const env = fresh();
    const baseHash = env.hash();
    let failures = 0;
    let writes = 0;
    fc.assert(
      fc.property(fc.array(anyCall, { minLength: 1, maxLength: 6 }), (calls) => {
        env.reset();
        for (const c of calls) {
          const before = env.hash();
          let o;
          expect(() => (o = env.execute(c))).not.toThrow();
          const obs = o!;
          if (!obs.ok) {
            failures++;
            expect(env.hash()).toBe(before);
            expect(['parse', 'unknown_tool', 'invalid_arguments', 'tool']).toContain(obs.code);
          } else if (!env.isWrite(obs.name)) expect(env.hash()).toBe(before);
          else writes++;
          expect(() => serializeObservation(obs)).not.toThrow();
        }
        env.reset();
        expect(env.hash()).toBe(baseHash);
      }),
      { numRuns: 300, seed: 42 },
    );
    expect(failures).toBeGreaterThan(100);
    expect(writes).toBeGreaterThan(50); // the arbitraries do reach successful writes
  });

  it('parse never throws on arbitrary text, nor on blocks of random JSON', () => {
    const block = fc.oneof(fc.json({ maxDepth: 4 }), fc.string(), anyCall.map((c) => { try { return JSON.stringify(c) ?? ''; } catch { return ''; } }));
    const text = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 300 }),
      fc.array(fc.oneof(block.map((b) => `<tool_call>\n${b}\n</tool_call>`), fc.string(), fc.constant('<tool_call>'), fc.constant('</tool_call>'), fc.constant('<think>')), { maxLength: 5 }).map((xs) => xs.join('')),
    );
    const env = fresh();
    const h = env.hash();
    fc.assert(
      fc.property(text, (t) => {
        const r = parse(t);
        expect(r.calls.length + r.errors.length).toBe(r.parts.length);
        const obs = executeParsed(env, r);
        for (const o of obs) if (!o.ok || env.isWrite(o.name)) env.reset();
        expect(env.hash()).toBe(h);
      }),
      { numRuns: 400, seed: 7 },
    );
  });

  it('deep nesting at any depth is refused before JSON.parse', () => {
    fc.assert(
      fc.property(fc.integer({ min: MAX_DEPTH + 1, max: 200000 }), fc.constantFrom('[', '{"a":'), (n, open) => {
        const close = open === '[' ? ']' : '}';
        const r = parse(`<tool_call>{"name":"x","arguments":${open.repeat(n)}1${close.repeat(n)}}</tool_call>`);
        expect(r.errors[0]?.error).toMatch(/nested too deeply|too long/);
      }),
      { numRuns: 20, seed: 3 },
    );
  });
});

describe('property: round trips', () => {
  const jsonObj = fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 4 });
  it('parse(formatCall(c)) returns c (values as JSON would carry them)', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 30 }), jsonObj, (name, args) => {
        const c = { name, arguments: JSON.parse(JSON.stringify(args)) as Record<string, unknown> };
        const r = parse(formatCall(c));
        if (name.includes('</tool_call>') || name.includes('<think>') || JSON.stringify(args).includes('</tool_call>') || JSON.stringify(args).includes('<think>')) return;
        expect(r.calls).toEqual([c]);
        expect(r.errors).toEqual([]);
      }),
      { numRuns: 200, seed: 11 },
    );
  });
  it('parseObservation(formatObservation(o)) returns o', () => {
    fc.assert(
      fc.property(fc.oneof(fc.jsonValue({ maxDepth: 3 }).map((result) => ({ ok: true as const, name: 't', result: JSON.parse(JSON.stringify(result)) as unknown })), fc.string().map((error) => ({ ok: false as const, name: 't', error, code: 'tool' as const }))), (o) => {
        if (JSON.stringify(o).includes('</execution_result>') || JSON.stringify(o).includes('<think>')) return;
        expect(parseObservation(formatObservation(o), 't')).toEqual(o);
      }),
      { numRuns: 200, seed: 12 },
    );
  });
});

// Issue 16's fuzz, in the suite: 5,000 generations (random text, broken and adversarial markup, blocks of
// random JSON and of plausible calls) go through parse and are executed one call at a time. Every failing
// call leaves the database hash as it was; each case is one episode on a reset environment, and every 25th
// episode is replayed on a brand-new environment with the same observations (nothing leaks between
// episodes); afterwards the long-lived environment resets to the pristine hash.
describe('fuzz: generations -> parse -> execute (5,000 cases, fixed seed)', () => {
  it('no throw, failing calls change nothing, no cross-episode effect', () => {
    const jsonish = anyCall.map((c) => {
      try {
        return JSON.stringify(c) ?? '';
      } catch {
        return '';
      }
    });
    const block = fc.oneof(
      { weight: 4, arbitrary: jsonish.map((j) => `<tool_call>\n${j}\n</tool_call>`) },
      fc.array(jsonish, { maxLength: 3 }).map((js) => `<tool_call>[${js.join(',')}]</tool_call>`),
      jsonish.map((j) => `<tool_call>${j.slice(0, Math.max(0, j.length - 3))}`),
      fc.constantFrom('<tool_call>', '</tool_call>', '<think>', '</think>', '<tool_call>{"name":', '{"name": "cancel_pending_order"}', '<tool_call>null</tool_call>', '<tool_call>[]</tool_call>', '<tool_call>' + '['.repeat(40) + '</tool_call>'),
      fc.string({ maxLength: 40 }),
      fc.string({ unit: 'binary', maxLength: 40 }),
    );
    const generation = fc.oneof(
      { weight: 6, arbitrary: fc.tuple(fc.array(block, { minLength: 1, maxLength: 4 }), fc.constantFrom('', '\n', ' ')).map(([b, sep]) => b.join(sep)) },
      fc.string({ unit: 'binary', maxLength: 200 }),
    );
    const env = fresh();
    const pristine = env.hash();
    let cases = 0;
    let calls = 0;
    let failed = 0;
    let wrote = 0;
    fc.assert(
      fc.property(generation, (text) => {
        cases++;
        env.reset();
        let r: ReturnType<typeof parse> | undefined;
        expect(() => (r = parse(text))).not.toThrow();
        const observations: unknown[] = [];
        for (const part of r!.parts) {
          if (part.kind !== 'call') continue;
          calls++;
          const before = env.hash();
          let o: ReturnType<typeof env.execute> | undefined;
          expect(() => (o = env.execute(part.call))).not.toThrow();
          if (!o!.ok) {
            failed++;
            expect(env.hash(), `${part.call.name} failed and changed the database`).toBe(before);
          } else if (env.isWrite(o!.name)) wrote++;
          observations.push(o);
        }
        if (cases % 25 === 0) {
          const other = fresh();
          expect(executeParsed(other, r!).filter((_, i) => r!.parts[i].kind === 'call')).toEqual(observations);
        }
      }),
      { numRuns: 5000, seed: 1616 },
    );
    env.reset();
    expect(env.hash()).toBe(pristine);
    expect(cases).toBe(5000);
    // The generator reaches every path: failing calls, successful reads and successful writes.
    expect(failed).toBeGreaterThan(1000);
    expect(calls - failed).toBeGreaterThan(500);
    expect(wrote).toBeGreaterThan(50);
  }, 120_000);
});
