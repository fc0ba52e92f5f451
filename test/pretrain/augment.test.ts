// Identity swap: the values a request asks the policy to copy are replaced consistently in every row of
// the task, and nothing else changes.
import { describe, expect, it } from 'vitest';
import { Rng } from '../../src/util/rng';
import { retailDomain } from '../../src/env/retail/index';
import { loadRetailBase } from '../../src/env/retail/node';
import { copyDrills, copyTargets, recordCopies, spanCopies, statedValueSwaps, swapIdentities, swapRecordValues, valueSwapSource } from '../../research/pretrain/augment';
import { loadWorldDomain } from '../../src/env/retail/node';
import { expertRows, rowToExample } from '../../research/pretrain/data';

const d = retailDomain(loadRetailBase());
const defs = d.definitions() as never;

describe('identity swap', () => {
  it('finds the names and long numbers the reference actions copy from the request', () => {
    const task = { userMessages: ["Good morning. I'm James Kim, zip code 92199. I'd like to check on order number #W3901983."], referenceActions: [
      { name: 'find_user_id_by_name_zip', arguments: { first_name: 'James', last_name: 'Kim', zip: '92199' } },
      { name: 'get_order_details', arguments: { order_id: '#W3901983' } },
      { name: 'get_product_details', arguments: { product_id: '1234567890' } }, // not in the request: not a target
    ] };
    expect(copyTargets(task)).toEqual({ names: ['james', 'kim'], numbers: ['92199', '3901983'] });
  });

  it('swaps every occurrence consistently; the calls still copy from the (swapped) request; other text is untouched', () => {
    const { tasks, rows } = expertRows(d, { split: 'train', tasks: 20, seed: 2, mistakeRate: 0.15 });
    let checked = 0;
    for (const task of tasks) {
      const ex = rows.filter((r) => r.taskId === task.id).map((r) => rowToExample(r, d.policy, defs));
      const { names, numbers } = copyTargets(task);
      if (names.length === 0 || numbers.length === 0) continue;
      const sw = swapIdentities(task, ex, new Rng(1));
      expect(sw).toHaveLength(ex.length);
      const all = sw.map((e) => e.prompt + e.response).join('\n');
      for (const n of numbers) expect(all).not.toMatch(new RegExp(`(?<![0-9])${n}(?![0-9])`));
      for (const n of names) expect(all).not.toMatch(new RegExp(`(?<=[._@])${n}(?![a-z])|\\b${n.charAt(0).toUpperCase()}${n.slice(1)}\\b`));
      // Every call argument of the first act turn (an identity lookup) appears verbatim in its own request.
      const first = sw.find((e) => e.role === 'act' && e.response.startsWith('<tool_call>'))!;
      const call = JSON.parse(first.response.slice('<tool_call>\n'.length, first.response.indexOf('\n</tool_call>'))) as { arguments: Record<string, string> };
      const user = first.prompt.slice(first.prompt.lastIndexOf('<|im_start|>user\n'));
      for (const v of Object.values(call.arguments)) expect(user.toLowerCase()).toContain(String(v).toLowerCase());
      // The system prompt and tool block are untouched.
      expect(sw[0].prompt.slice(0, 2000)).toBe(ex[0].prompt.slice(0, 2000));
      checked++;
    }
    expect(checked).toBeGreaterThan(5);
  });
});

describe('copy drills', () => {
  it('the response repeats exactly the listed values, after filler; seeded', () => {
    const filler = ['I am Ann Lee, zip 12345.', 'Order #W7654321 please.'];
    const a = copyDrills(50, new Rng(3), filler);
    expect(a).toHaveLength(50);
    for (const e of a) {
      expect(e.role).toBe('copy');
      const listed = e.prompt.slice(e.prompt.indexOf('Please repeat exactly: ') + 23, e.prompt.indexOf('<|im_end|>'));
      expect(e.response).toBe(`${listed}<|im_end|>`);
    }
    expect(a.some((e) => e.prompt.includes(filler[1]))).toBe(true);
    expect(copyDrills(50, new Rng(3), filler)).toEqual(a);
  });
});

describe('span copies (induction warm-up)', () => {
  it('are eot span eot span with the loss on the second copy, within the token and row budgets', () => {
    const rows = [0, 1, 2].map((k) => ({ role: 'act' as const, ids: Int32Array.from({ length: 200 }, (_, i) => 10 + ((i * (k + 3)) % 97)), promptLen: 50 }));
    const seqs = spanCopies(rows, 2048, 32, 4095, new Rng(1));
    expect(seqs.length).toBeGreaterThan(10);
    expect(seqs.reduce((a, s) => a + s.ids.length, 0)).toBeLessThanOrEqual(2048);
    for (const s of seqs) {
      const len = (s.ids.length - 2) / 2;
      expect(len).toBeGreaterThanOrEqual(20);
      expect(len).toBeLessThanOrEqual(60);
      expect(s.ids[0]).toBe(4095);
      expect(s.ids[len + 1]).toBe(4095);
      expect([...s.ids.subarray(len + 2)]).toEqual([...s.ids.subarray(1, len + 1)]);
      expect(s.promptLen).toBe(len + 2);
      // The span is a contiguous piece of one of the rows, shuffled: the same multiset of tokens.
      const sorted = (xs: ArrayLike<number>) => [...Array.from(xs)].sort((a, b) => a - b).join(',');
      const want = sorted(s.ids.subarray(1, len + 1));
      expect(rows.some((r) => Array.from({ length: r.ids.length - len + 1 }, (_, at) => sorted(r.ids.subarray(at, at + len))).includes(want))).toBe(true);
    }
    expect(spanCopies(rows, 2048, 4, 4095, new Rng(1)).length).toBe(4);
  });
});

describe('record value swap (Rehearse rows)', () => {
  const e = {
    role: 'rehearse' as const, taskId: 't',
    prompt: 'user: my order #W4860251, zip 10034\n# Examples\nresult {"result":{"order_id":"#W4860251","items":[{"item_id":"5209958006","price":514.72,"qty":3}],"zip":"10034"}}',
    response: '<execution_result>\n{"result":{"order_id":"#W4860251","items":[{"item_id":"5209958006","price":514.72,"qty":3}],"zip":"10034"}}\n</execution_result><|im_end|>',
  };
  it('replaces every long number and price consistently in prompt and target, keeping their shapes', () => {
    const s = swapRecordValues(e, new Rng(1));
    for (const v of ['4860251', '5209958006', '514.72', '10034']) {
      expect(s.prompt).not.toContain(v);
      expect(s.response).not.toContain(v);
    }
    // The example in the prompt still holds the target exactly, and short numbers are left alone.
    const body = s.response.slice('<execution_result>\n'.length, s.response.indexOf('\n</execution_result>'));
    expect(s.prompt).toContain(body);
    expect(body).toMatch(/^\{"result":\{"order_id":"#W[1-9][0-9]{6}","items":\[\{"item_id":"[1-9][0-9]{9}","price":[1-9][0-9]{2}\.[1-9][0-9],"qty":3\}\],"zip":"[1-9][0-9]{4}"\}\}$/);
    expect(swapRecordValues(e, new Rng(1))).toEqual(s);
    expect(swapRecordValues(e, new Rng(2)).response).not.toBe(s.response);
  });
});

describe('record-copy drills', () => {
  it('list 2-3 records of one kind with fresh values and ask for one of them back exactly', () => {
    const orders = [1, 2, 3].map((i) => `{"result":{"order_id":"#W${i}234567","items":[{"item_id":"${i}209958006","price":51${i}.72}]}}`);
    const drills = recordCopies(20, new Rng(4), [orders, ['{"result":{"user_id":"x_1234"}}']]);
    expect(drills).toHaveLength(20);
    for (const d of drills) {
      const listed = [...d.prompt.matchAll(/^\d\. (.*)$/gm)].map((m) => m[1]);
      const want = Number(/repeat record (\d) exactly/.exec(d.prompt)![1]);
      expect(listed.length).toBeGreaterThanOrEqual(2);
      expect(d.response).toBe(listed[want - 1] + '<|im_end|>');
      for (const o of orders) expect(d.prompt).not.toContain(o.slice(20, 40));
      expect(new Set(listed).size).toBe(listed.length);
    }
    expect(() => recordCopies(1, new Rng(1), [['{"result":{}}']])).toThrow(/two records/);
  });
});

describe('stated-value swaps (Act rows that write a value the user stated)', () => {
  const mini = loadWorldDomain('mini');
  const lexicon = [...mini.statedValues!()];
  const { rows } = expertRows(mini, { split: 'train', tasks: 150, seed: 3, mistakeRate: 0 });
  const acts = rows.filter((r) => r.role === 'act').map((r) => rowToExample(r, mini.policy, mini.definitions() as never));
  const source = valueSwapSource(acts, lexicon);
  const reasonOf = (s: string) => /"reason": "([^"]+)"/.exec(s)?.[1];
  const REASONS = ['ordered by mistake', 'no longer needed'];

  it('swaps the reason of a cancel call in the request and the call alike, never in the system turn', () => {
    const twins = statedValueSwaps(source, 60, new Rng(5));
    expect(twins).toHaveLength(60);
    const reasons = new Set<string>();
    let real = 0;
    for (const t of twins) {
      const src = acts.find((e) => t.taskId.startsWith(`${e.taskId}:swap-`) && e.prompt.length > 0 && t.prompt.slice(0, t.prompt.indexOf('<|im_end|>')) === e.prompt.slice(0, e.prompt.indexOf('<|im_end|>')))!;
      expect(src).toBeDefined();
      const w = reasonOf(t.response)!;
      expect(w).toBeDefined();
      expect(lexicon).toContain(w);
      reasons.add(w);
      if (REASONS.includes(w)) real++;
      const head = t.prompt.indexOf('<|im_end|>');
      // The system turn (tool descriptions name both real reasons) is the domain's; the request states the new value.
      expect(t.prompt.slice(0, head)).toBe(src.prompt.slice(0, src.prompt.indexOf('<|im_end|>')));
      const user = t.prompt.slice(t.prompt.indexOf('<|im_start|>user\n'));
      expect(user).toContain(w);
      if (w !== reasonOf(src.response)) expect(user).not.toMatch(new RegExp(`(?<![A-Za-z0-9])${reasonOf(src.response)}(?![A-Za-z0-9])`));
    }
    expect(reasons.size).toBeGreaterThan(20); // many values in the reason's place, not two
    // About half state a real reason (kept or exchanged for the other), so those are copied too.
    expect(real).toBeGreaterThan(15);
    expect(real).toBeLessThan(45);
  });

  it('cuts the short drills to the request and the call', () => {
    const full = statedValueSwaps(source, 20, new Rng(6));
    const short = statedValueSwaps(source, 20, new Rng(6), { short: true });
    short.forEach((d, i) => {
      expect(d.role).toBe('copy');
      expect(d.response).toBe(full[i].response);
      expect(d.prompt).toMatch(/^<\|im_start\|>user\n[^<]+<\|im_end\|>\n<\|im_start\|>assistant\n$/);
      expect(d.prompt).toContain(reasonOf(d.response)!);
      expect(full[i].prompt).toContain(d.prompt.slice(0, d.prompt.indexOf('<|im_end|>')));
    });
  });

  it('is seeded, and refuses what it cannot do', () => {
    expect(statedValueSwaps(source, 10, new Rng(9))).toEqual(statedValueSwaps(source, 10, new Rng(9)));
    expect(statedValueSwaps(source, 0, new Rng(9))).toEqual([]);
    expect(() => valueSwapSource(acts, ['ordered by mistake'])).toThrow(/two values/);
    expect(() => valueSwapSource(acts, REASONS)).toThrow(/no call spells/);
    expect(() => valueSwapSource(acts.filter((e) => !reasonOf(e.response)), lexicon)).toThrow(/no Act row/);
  });
});
