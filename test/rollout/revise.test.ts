// Rehearse, then revise (src/rollout/episode.ts ReviseOptions) on the real retail environment with scripted
// Act and Rehearse turns (a random-weight model writes garbage): a predicted error keeps the turn imagined
// (in the Act context, never executed) and Act writes it again; a predicted success runs; every checked
// call's rehearsal is scored against what the environment would have answered; the control discards the
// turn and samples again; the 'writes' scope leaves reads unchecked; the revision cap holds.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Backend } from '../../src/engine/backend';
import type { Task } from '../../src/env/domain';
import { formatCall } from '../../src/env/toolcall';
import type { Qwen3Model } from '../../src/model/qwen3';
import type { Tokenizer } from '../../src/model/tokenizer';
import { reviseReport } from '../../src/eval/evaluate';
import { RolloutConfigError, runRollouts, type RolloutConfig } from '../../src/rollout/rollout';
import { compactRetail, pendingOrderId } from '../fixtures/domains';
import { loadTinyPolicy } from '../fixtures/tiny-model';

const domain = compactRetail(['get_order_details', 'cancel_pending_order'], 'You are a retail agent.');
const pending = pendingOrderId();
const noHash = { name: 'cancel_pending_order', arguments: { order_id: pending.slice(1), reason: 'no longer needed' } };
const fixed = { name: 'cancel_pending_order', arguments: { order_id: pending, reason: 'no longer needed' } };
const read = { name: 'get_order_details', arguments: { order_id: pending } };
const task: Task = { id: 'c', userMessages: [`Cancel ${pending}, no longer needed.`], referenceActions: [fixed], facts: [], checklist: [] };
const limits = { maxTurns: 6, maxActTokens: 8, maxRehearseTokens: 96 };
const error = '<execution_result>\n{"error":"Order not found"}\n</execution_result>';
// A short rehearsed success (the byte-level tiny tokenizer makes a real order record too long for its context).
const success = '<execution_result>\n{"result":{"status":"cancelled"}}\n</execution_result>';

let backend: Backend;
let model: Qwen3Model;
let tok: Tokenizer;
beforeAll(async () => {
  ({ backend, model, tok } = await loadTinyPolicy(7));
});
afterAll(() => backend?.dispose());

const play = (acts: string[], rehearse: (name: string, args: Record<string, unknown>) => string, over: Partial<RolloutConfig> = {}) =>
  runRollouts({ model, tokenizer: tok, adapter: null }, domain, [task], {
    mode: 'real', k: 1, seed: 1, limits, temperature: 0,
    actScript: (_t, turn) => acts[turn],
    rehearseScript: (_t, _turn, p) => rehearse(p.call.name, p.call.arguments),
    revise: { max: 2, scope: 'calls' },
    rehearsePrompt: { maxGroundingChars: 150, maxHistoryChars: 150 },
    ...over,
  });

describe('rehearse, then revise', () => {
  it('a predicted error keeps the turn imagined and unexecuted; the rewritten call runs', async () => {
    const b = await play([formatCall(noHash), formatCall(fixed), 'Done.'], (_n, a) => (a.order_id === pending ? success : error));
    const r = b.rollouts[0];
    // Only the fixed call ran: the steps hold it once, and the imagined call is nowhere among them.
    expect(r.steps.filter((s) => s.kind === 'call').map((s) => (s as { call: unknown }).call)).toEqual([fixed]);
    expect(r.revisions).toBe(1);
    // The Act context shows the imagined failure as a tool message, then the fix.
    expect(r.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant', 'tool', 'assistant']);
    expect(r.messages[2].content).toContain('Order not found');
    // Both checked calls are scored against what the environment would have answered.
    expect(r.checked!.map((c) => [c.call.arguments.order_id, c.rehearsed.ok, c.real.ok, c.revised])).toEqual([
      [pending.slice(1), false, false, true],
      [pending, true, true, false],
    ]);
    expect(r.reward).toBe(1);
    const rep = reviseReport({ max: 2, scope: 'calls' }, b.rollouts, b.stats.generatedTokens);
    expect(rep).toMatchObject({ checked: 2, realErrors: 1, predictedErrors: 1, caught: 1, recall: 1, precision: 1, revisionsPerTask: 1 });
  });

  it('a call rehearsed as a success runs even when the environment refuses it (the prediction was wrong, and says so)', async () => {
    const b = await play([formatCall(noHash), 'Sorry.'], () => success);
    const r = b.rollouts[0];
    expect(r.revisions).toBe(0);
    expect(r.steps[0]).toMatchObject({ kind: 'call', call: noHash, observation: { ok: false } });
    expect(r.checked).toEqual([expect.objectContaining({ revised: false, rehearsed: expect.objectContaining({ ok: true }), real: expect.objectContaining({ ok: false }) })]);
  });

  it('stops revising at the cap: the third attempt runs whatever its rehearsal says', async () => {
    const b = await play([formatCall(noHash), formatCall(noHash), formatCall(noHash), 'Sorry.'], () => error);
    const r = b.rollouts[0];
    expect(r.revisions).toBe(2);
    expect(r.checked).toHaveLength(2);
    expect(r.steps.filter((s) => s.kind === 'call')).toHaveLength(1);
  });

  it("the 'writes' scope rehearses only turns with a write", async () => {
    const b = await play([formatCall(read), formatCall(fixed), 'Done.'], () => success, { revise: { max: 2, scope: 'writes' } });
    expect(b.rollouts[0].checked!.map((c) => c.call.name)).toEqual(['cancel_pending_order']);
    expect(b.rollouts[0].steps.filter((s) => s.kind === 'call')).toHaveLength(2);
  });

  it('the control discards a checked turn without a rehearsal and samples the next Act turn', async () => {
    const b = await play([formatCall(noHash)], () => error, { revise: { max: 1, scope: 'calls', control: true } });
    const r = b.rollouts[0];
    expect(r.revisions).toBe(1);
    expect(b.stats.rehearseGenerations).toBe(0);
    expect(r.checked).toEqual([]);
    // The discarded turn left no trace in the context: after the user message comes the sampled turn.
    expect(r.messages[1].role).toBe('assistant');
    expect(r.messages[1].content).not.toBe(formatCall(noHash));
  });

  it('is refused outside the real environment', async () => {
    await expect(runRollouts({ model, tokenizer: tok, adapter: null }, domain, [task], { mode: 'rehearse', k: 1, seed: 1, limits, revise: { max: 1, scope: 'calls' } })).rejects.toThrow(RolloutConfigError);
  });
});
