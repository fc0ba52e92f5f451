// Pretraining rows for test-time private rehearsal: reviews agree with the checklist judge and name what
// failed; memory-conditioned Act rows carry a bounded memory in private rehearsal's own placement.
import { describe, expect, it } from 'vitest';
import type { Step } from '../../src/env/domain';
import { judge, judgeOptions } from '../../src/env/judge';
import { retailDomain } from '../../src/env/retail/index';
import { loadRetailBase } from '../../src/env/retail/node';
import { SPECIAL_STRINGS } from '../../src/model/hf-tokenizer';
import { trainBpe } from '../../src/model/bpe';
import { expertRows } from '../../research/pretrain/data';
import { reviewRows, writeReview } from '../../research/pretrain/review-rows';
import { MEMORY_HEADER } from '../../src/rollout/rehearsal-memory';
import { buildSelfEvalPrompt, SELF_EVAL_SYSTEM } from '../../src/rollout/self-eval';

describe('writeReview', () => {
  const failed: Step = { kind: 'call', call: { name: 'get_order_details', arguments: { order_id: 'W1' } }, observation: { ok: false, name: 'get_order_details', error: 'Order not found', code: 'tool' } };
  it('a satisfied attempt gets a yes; a failed one names the failed call and the first unmet call', () => {
    expect(writeReview({ reward: 1, unmet: [] }, [failed], 'reply')).toMatch(/^Yes/);
    const r = writeReview({ reward: 0.5, unmet: ['fact "12.50"', 'call cancel_pending_order {"order_id":"#W1"}'] }, [failed], 'max-turns');
    expect(r).toBe('No, the request was not satisfied. get_order_details failed: Order not found. Next time: call cancel_pending_order {"order_id":"#W1"}.');
    expect(writeReview({ reward: 0, unmet: ['fact "12.50"'] }, [], 'max-turns')).toBe('No, the request was not satisfied. It stopped (max-turns) before finishing. Next time: fact "12.50".');
  });
});

describe('reviewRows on retail', () => {
  const d = retailDomain(loadRetailBase());
  const { tasks } = expertRows(d, { split: 'train', tasks: 12, seed: 4, mistakeRate: 0.15 });
  const bpe = trainBpe(['a b c the order'], { vocabSize: 300, specials: SPECIAL_STRINGS });
  const count = (t: string) => bpe.encode(t).length;
  const rv = reviewRows(d, tasks, { tasks: 10, seed: 4, memoryTokens: 4000, countTokens: count });
  const judgeOpts = judgeOptions(d.createEnv(), d.normaliseArgs?.bind(d));

  it('one review row per task, on the self-evaluation prompt; both verdicts occur and agree with the judge', () => {
    expect(rv.reviews).toHaveLength(10);
    for (const r of rv.reviews) {
      expect(r.role).toBe('review');
      expect(r.prompt).toContain(SELF_EVAL_SYSTEM);
      expect(r.response.endsWith('<|im_end|>')).toBe(true);
    }
    const yes = rv.reviews.filter((r) => r.response.startsWith('Yes')).length;
    expect(yes).toBeGreaterThan(0);
    expect(yes).toBeLessThan(10);
    // Each verdict is the checklist judge's on the attempt the row shows: Yes exactly when the judge gives
    // the attempt 1, and a No names the judge's first unmet call.
    expect(rv.attempts.map((a) => a.taskId)).toEqual(rv.reviews.map((r) => r.taskId));
    rv.reviews.forEach((r, i) => {
      const a = rv.attempts[i];
      const task = tasks.find((t) => t.id === r.taskId)!;
      expect(r.prompt).toBe(buildSelfEvalPrompt(task, a.steps, a.end));
      const j = judge(task.checklist, a.steps, judgeOpts);
      expect(r.response.startsWith('Yes'), r.taskId).toBe(j.reward >= 1);
      const unmetCall = j.items.find((v) => !v.satisfied && v.item.kind === 'call');
      if (unmetCall?.item.kind === 'call') expect(r.response).toContain(`Next time: call ${unmetCall.item.name} `);
    });
    // Deterministic in the seed.
    expect(reviewRows(d, tasks, { tasks: 10, seed: 4, memoryTokens: 4000, countTokens: count }).reviews).toEqual(rv.reviews);
  });

  it('memory-conditioned Act rows: the memory is a user message after the request, its review inside', () => {
    expect(rv.memoryActs.length).toBeGreaterThanOrEqual(5);
    for (const e of rv.memoryActs) {
      expect(e.role).toBe('act');
      const user = e.prompt.indexOf('<|im_start|>user\n');
      const mem = e.prompt.indexOf(`<|im_start|>user\n${MEMORY_HEADER}`);
      expect(mem).toBeGreaterThan(user);
      expect(e.prompt).toMatch(/Self-evaluation: (Yes|No)/);
    }
  });

  it('the memory respects its token bound (a tight cap cuts or drops it)', () => {
    const cap = count(MEMORY_HEADER) + 40;
    const tight = reviewRows(d, tasks, { tasks: 4, seed: 4, memoryTokens: cap, countTokens: count });
    expect(tight.memoryActs.length).toBeGreaterThan(0);
    expect(tight.memoryActs.every((e) => e.prompt.includes('…'))).toBe(true); // cut to fit
    for (const e of tight.memoryActs) {
      const m = e.prompt.slice(e.prompt.indexOf(MEMORY_HEADER));
      expect(count(m.slice(0, m.indexOf('<|im_end|>')))).toBeLessThanOrEqual(cap);
    }
  });
});
