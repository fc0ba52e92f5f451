// The rehearsal memory's bound and truncation order, with a real tokenizer (the tiny models' byte-level one:
// every byte is a token, so bounds are tight and easy to reason about) and with a BPE-like counter.
import { beforeAll, describe, expect, it } from 'vitest';
import type { Step } from '../../src/env/domain';
import { MemorySource } from '../../src/model/source';
import { Tokenizer } from '../../src/model/tokenizer';
import {
  attemptBlock, buildRehearsalMemory, MEMORY_HEADER, MemoryConfigError, withMemory, type MemoryAttempt, type MemoryOptions,
} from '../../src/rollout/rehearsal-memory';
import { buildSelfEvalPrompt, cleanEvaluation, judgeVerdict } from '../../src/rollout/self-eval';
import { tinyConfig, tinyModelFiles } from '../fixtures/tiny-model';

let tok: Tokenizer;
beforeAll(async () => {
  tok = await Tokenizer.load(new MemorySource(await tinyModelFiles(tinyConfig(), 1)));
});
const count = (s: string) => tok.encode(s).length;

const bigResult = { ok: true as const, name: 'get_order_details', result: { order_id: '#W1', items: Array.from({ length: 40 }, (_, i) => ({ item_id: `${1000 + i}`, price: i * 3.5 })) } };
function attempt(index: number, evalText = `attempt ${index} forgot to cancel the order`): MemoryAttempt {
  const steps: Step[] = [
    { kind: 'call', call: { name: 'get_order_details', arguments: { order_id: `#W${index}` } }, observation: bigResult },
    { kind: 'call', call: { name: 'cancel_pending_order', arguments: { order_id: `#W${index}`, reason: 'no longer needed' } }, observation: { ok: false, name: 'cancel_pending_order', error: 'Non-pending order cannot be cancelled', code: 'tool' } },
    { kind: 'reply', text: `Reply number ${index}: your order is cancelled. `.repeat(6) },
  ];
  return { index, steps, end: 'reply', selfEval: evalText, judge: { reward: 0.25 * index, unmet: [`call cancel_pending_order {"order_id":"#W${index}"}`] } };
}
const opts = (maxTokens: number, over: Partial<MemoryOptions> = {}): MemoryOptions => ({ maxTokens, evaluation: 'self', ...over });

describe('rehearsal memory', () => {
  it('never exceeds its token cap, and drops the oldest attempts first', () => {
    const atts = [0, 1, 2, 3, 4].map((i) => attempt(i));
    const blockLen = count(attemptBlock(atts[4], opts(0)));
    const headerLen = count(MEMORY_HEADER);
    let sawPartial = false;
    for (const cap of [0, 10, headerLen, headerLen + 30, headerLen + blockLen + 1, headerLen + 2 * blockLen + 5, 3 * (headerLen + blockLen), 100_000]) {
      const m = buildRehearsalMemory(atts, count, opts(cap));
      expect(m.tokens).toBe(m.text === '' ? 0 : count(m.text));
      expect(m.tokens).toBeLessThanOrEqual(cap);
      // Kept attempts are always the newest ones, in order; everything else is reported dropped.
      expect(m.included).toEqual([0, 1, 2, 3, 4].slice(5 - m.included.length));
      expect([...m.dropped, ...m.included].sort()).toEqual([0, 1, 2, 3, 4]);
      if (m.included.length > 0 && m.included.length < 5) sawPartial = true;
      for (const i of m.included) expect(m.text).toContain(`Attempt ${i + 1} (imagined`);
      for (const i of m.dropped) expect(m.text).not.toContain(`Attempt ${i + 1} (imagined`);
    }
    expect(sawPartial).toBe(true);
    expect(buildRehearsalMemory(atts, count, opts(100_000)).included).toEqual([0, 1, 2, 3, 4]);
  });

  it('cuts the newest block when nothing whole fits, and is empty when even the header does not fit', () => {
    const atts = [attempt(0), attempt(1)];
    const headerLen = count(MEMORY_HEADER);
    const m = buildRehearsalMemory(atts, count, opts(headerLen + 40));
    expect(m.truncated).toBe(true);
    expect(m.included).toEqual([1]);
    expect(m.text.startsWith(MEMORY_HEADER + '\nAttempt 2 (imagined')).toBe(true);
    expect(m.text.endsWith('…')).toBe(true);
    expect(m.tokens).toBeLessThanOrEqual(headerLen + 40);
    expect(m.tokens).toBeGreaterThan(headerLen + 30); // the cut keeps as much as fits, not an arbitrary stub
    const none = buildRehearsalMemory(atts, count, opts(headerLen - 1));
    expect(none).toMatchObject({ text: '', tokens: 0, included: [], dropped: [0, 1] });
  });

  it('holds the bound under a counter where tokens are not characters', () => {
    // Words as tokens: a very different granularity from bytes.
    const words = (s: string) => s.split(/\s+/).filter(Boolean).length;
    const atts = [0, 1, 2, 3].map((i) => attempt(i));
    for (let cap = 0; cap < 400; cap += 13) expect(buildRehearsalMemory(atts, words, opts(cap)).tokens).toBeLessThanOrEqual(cap);
  });

  it('puts the chosen evaluation in the memory: self, judge, both or none', () => {
    const a = [attempt(2, 'I should have checked the status first')];
    const text = (evaluation: MemoryOptions['evaluation']) => buildRehearsalMemory(a, count, opts(10_000, { evaluation })).text;
    expect(text('self')).toContain('Self-evaluation: I should have checked the status first');
    expect(text('self')).not.toContain('Checklist judge');
    expect(text('judge')).toContain('Checklist judge: 0.50; unmet: call cancel_pending_order {"order_id":"#W2"}');
    expect(text('judge')).not.toContain('Self-evaluation');
    expect(text('both')).toMatch(/Self-evaluation[\s\S]*Checklist judge/);
    expect(text('none')).not.toMatch(/Self-evaluation|Checklist judge/);
    expect(() => buildRehearsalMemory(a, count, opts(-1))).toThrow(MemoryConfigError);
    expect(() => buildRehearsalMemory(a, count, opts(10, { evaluation: 'oracle' as never }))).toThrow(MemoryConfigError);
  });

  it('leaves the system prompt unchanged when empty, and clips observations and replies', () => {
    const empty = buildRehearsalMemory([], count, opts(100));
    expect(withMemory('POLICY', empty)).toBe('POLICY');
    const m = buildRehearsalMemory([attempt(0)], count, opts(10_000, { maxResultChars: 50, maxReplyChars: 30 }));
    expect(withMemory('POLICY', m)).toBe(`POLICY\n\n${m.text}`);
    const lines = m.text.split('\n');
    const obsLine = lines.find((l) => l.startsWith('1. get_order_details'))!;
    expect(obsLine.split(' -> ')[1].length).toBe(50);
    expect(lines.find((l) => l.startsWith('3. reply: '))!.length).toBe('3. reply: '.length + 30);
  });
});

describe('self-evaluation inputs', () => {
  it('shows the request and the imagined steps; the judge verdict names unmet items', () => {
    const a = attempt(3);
    const p = buildSelfEvalPrompt({ userMessages: ['Cancel #W3 please.'] }, a.steps, 'reply');
    expect(p).toContain('Request:\nCancel #W3 please.');
    expect(p).toContain('1. get_order_details({"order_id":"#W3"}) -> ');
    expect(p).toContain('Non-pending order cannot be cancelled');
    expect(p.endsWith('<|im_start|>assistant\n<think>\n\n</think>\n\n')).toBe(true);
    expect(cleanEvaluation('<think>x</think>  It  failed.\n')).toBe('It failed.');
    const v = judgeVerdict(
      { checklist: [{ kind: 'call', name: 'cancel_pending_order', args: { order_id: '#W3' }, weight: 2 }, { kind: 'fact', text: 'cancelled', weight: 1 }] },
      a.steps,
      { isWrite: (n) => n === 'cancel_pending_order' },
    );
    // The cancel's observation is an error, but the judge counts the call as made (rule J2: it never reads an
    // observation) and the reply states the fact: 3 of 3. Without the call it is 1 of 3.
    expect(v.reward).toBe(1);
    expect(v.unmet).toEqual([]);
    const noCall = judgeVerdict({ checklist: [{ kind: 'call', name: 'cancel_pending_order', args: { order_id: '#W3' }, weight: 2 }, { kind: 'fact', text: 'cancelled', weight: 1 }] }, a.steps.filter((s) => s.kind !== 'call' || s.call.name !== 'cancel_pending_order'), { isWrite: (n) => n === 'cancel_pending_order' });
    expect(noCall.reward).toBeCloseTo(1 / 3, 12);
    expect(noCall.unmet).toEqual(['call cancel_pending_order {"order_id":"#W3"}']);
  });
});

describe('tokenizer edge used by the evaluations', () => {
  it('decodes an empty generation (eos first) to the empty string', () => {
    expect(tok.decode([])).toBe('');
  });
});
