// Item-change rows and reply-amount swaps (research/pretrain/change-drills.ts) on the mini world's expert rows.
import { describe, expect, it } from 'vitest';
import { Rng } from '../../src/util/rng';
import { loadWorldDomain } from '../../src/env/retail/node';
import { amountSwapSource, amountSwaps, changeCallDrills, changeRows } from '../../research/pretrain/change-drills';
import { expertRows, rowToExample, type Example } from '../../research/pretrain/data';

const mini = loadWorldDomain('mini');
const defs = mini.definitions() as never;
const { rows } = expertRows(mini, { split: 'train', tasks: 400, seed: 4, mistakeRate: 0 });
const acts = rows.filter((r) => r.role === 'act').map((r) => rowToExample(r, mini.policy, defs));
const callOf = (e: Example) => JSON.parse(e.response.slice('<tool_call>\n'.length, e.response.indexOf('\n</tool_call>'))) as { name: string; arguments: Record<string, unknown> };
const amounts = (s: string) => [...s.matchAll(/\$(\d+\.\d{2})/g)].map((m) => m[1]);

describe('item-change rows', () => {
  const { calls, replies } = changeRows(acts);

  it('finds every item-changing call and the reply after its result, nothing else', () => {
    const expected = acts.filter((e) => /"(exchange_delivered_order_items|modify_pending_order_items)"/.test(e.response));
    expect(calls.length).toBeGreaterThan(30);
    expect(calls).toEqual(expected);
    for (const c of calls) expect(Array.isArray(callOf(c).arguments.new_item_ids)).toBe(true);
    expect(replies.length).toBeGreaterThan(20);
    for (const r of replies) {
      expect(r.response).not.toContain('<tool_call>');
      const lastCall = r.prompt.slice(r.prompt.lastIndexOf('<|im_start|>assistant\n<tool_call>'));
      expect(lastCall).toMatch(/"new_item_ids"/);
    }
  });

  it('cuts the call drills to the request and the call', () => {
    const drills = changeCallDrills(calls, 30, new Rng(1));
    expect(drills).toHaveLength(30);
    for (const d of drills) {
      expect(d.role).toBe('copy');
      expect(d.prompt).toMatch(/^<\|im_start\|>user\n[^<]+<\|im_end\|>\n<\|im_start\|>assistant\n$/);
      const src = calls.find((c) => d.taskId.startsWith(`${c.taskId}:call-`) && c.response === d.response)!;
      expect(src).toBeDefined();
      // The request is the source's own, and it names the product whose variant the call picks.
      expect(src.prompt).toContain(d.prompt.slice(0, d.prompt.indexOf('<|im_end|>')));
    }
    // Each set of new items equally often, however often the task mix asks for it.
    const targetOf = (e: Example) => JSON.stringify(callOf(e).arguments.new_item_ids);
    const targets = new Set(calls.map(targetOf));
    const counts = new Map<string, number>();
    for (const d of changeCallDrills(calls, 200 * targets.size, new Rng(3))) counts.set(targetOf(d), (counts.get(targetOf(d)) ?? 0) + 1);
    expect(counts.size).toBe(targets.size);
    for (const c of counts.values()) expect(Math.abs(c - 200)).toBeLessThan(60);
    expect(changeCallDrills(calls, 10, new Rng(2))).toEqual(changeCallDrills(calls, 10, new Rng(2)));
    expect(() => changeCallDrills([], 1, new Rng(2))).toThrow(/no Act row/);
    expect(changeCallDrills([], 0, new Rng(2))).toEqual([]);
  });
});

describe('reply-amount swaps', () => {
  const source = amountSwapSource(acts);

  it('takes the replies whose stated amounts the last observation holds', () => {
    expect(source.length).toBeGreaterThan(50);
    const kinds = new Set(source.map((e) => e.response.split(/[;:]/)[0].replace(/#W\d+/, '#W')));
    expect(kinds.size).toBeGreaterThan(3); // exchanges, item changes, returns, cancellations, prices...
    for (const e of source) {
      expect(amounts(e.response).length).toBeGreaterThan(0);
      expect(e.response).not.toContain('<tool_call>');
    }
    // A reply stating an amount the last observation does not hold is left out (a swap could not move it).
    const e = source[0];
    const elsewhere = { ...e, response: e.response.replace(/\$\d+\.\d{2}/, '$123456.78') };
    expect(amountSwapSource([e, elsewhere])).toEqual([e]);
  });

  it('moves the amount in the observation and the reply alike, and nothing else', () => {
    const twins = amountSwaps(source, 80, new Rng(3));
    let changed = 0;
    for (const t of twins) {
      const src = source.find((e) => t.taskId.startsWith(`${e.taskId}:amount-`) && e.prompt.slice(0, 3000) === t.prompt.slice(0, 3000))!;
      expect(src).toBeDefined();
      const cut = src.prompt.lastIndexOf('<|im_start|>user\n');
      // Everything before the last observation is the source's.
      expect(t.prompt.slice(0, cut)).toBe(src.prompt.slice(0, cut));
      // The reply keeps its words; each new amount is in the new observation, as a JSON number.
      expect(t.response.replace(/\$\d+\.\d{2}/g, '$')).toBe(src.response.replace(/\$\d+\.\d{2}/g, '$'));
      const obs = t.prompt.slice(cut);
      for (const a of amounts(t.response)) expect(obs).toMatch(new RegExp(`[:,\\[]-?${a.replace('.', '\\.')}0*[,}\\]]`));
      if (amounts(t.response).join() !== amounts(src.response).join()) changed++;
      // The observation is still JSON.
      const body = /<tool_response>\n([\s\S]*)\n<\/tool_response>/.exec(obs)![1];
      expect(() => JSON.parse(body)).not.toThrow();
    }
    expect(changed).toBeGreaterThan(75);
  });

  it('cuts the short twins to the request, the last call, its result and the reply', () => {
    const full = amountSwaps(source, 20, new Rng(4));
    const short = amountSwaps(source, 20, new Rng(4), { short: true });
    short.forEach((s, i) => {
      expect(s.role).toBe('copy');
      expect(s.response).toBe(full[i].response);
      const turns = s.prompt.split('<|im_start|>').filter(Boolean);
      expect(turns.map((x) => x.split('\n')[0])).toEqual(['user', 'assistant', 'user', 'assistant']);
      expect(turns[1]).toContain('<tool_call>');
      expect(full[i].prompt.endsWith(s.prompt.slice(s.prompt.indexOf('<|im_start|>assistant\n<tool_call>')))).toBe(true);
    });
    expect(amountSwaps(source, 5, new Rng(7))).toEqual(amountSwaps(source, 5, new Rng(7)));
    expect(() => amountSwaps([], 1, new Rng(7))).toThrow(/no reply/);
  });
});
