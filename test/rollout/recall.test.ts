// Rehearsal with recall (src/rollout/recall.ts) on the real retail environment: a call the reference made, with
// the same writes attempted before it, is answered by the reference's real observation — and it is the answer
// the real environment gives (checked against the shadow); any other call (other arguments, another state) is
// rehearsed by the policy. In a rollout, recalled calls make no Rehearse row and no fidelity record.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Backend } from '../../src/engine/backend';
import type { Task } from '../../src/env/domain';
import { formatCall, serializeObservation } from '../../src/env/toolcall';
import type { Qwen3Model } from '../../src/model/qwen3';
import type { Tokenizer } from '../../src/model/tokenizer';
import { recallObservation } from '../../src/rollout/recall';
import { referenceGrounding, RolloutConfigError, runRollouts } from '../../src/rollout/rollout';
import { compactRetail, pendingOrderId, retail } from '../fixtures/domains';
import { loadTinyPolicy } from '../fixtures/tiny-model';

const domain = compactRetail(['get_order_details', 'cancel_pending_order'], 'You are a retail agent.');
const pending = pendingOrderId();
const read = { name: 'get_order_details', arguments: { order_id: pending } };
const cancel = { name: 'cancel_pending_order', arguments: { order_id: pending, reason: 'no longer needed' } };
const otherReason = { name: 'cancel_pending_order', arguments: { order_id: pending, reason: 'ordered by mistake' } };
// The reference reads the order, cancels it, and reads it again (now cancelled).
const task: Task = { id: 'c', userMessages: [`Cancel ${pending}, no longer needed.`], referenceActions: [read, cancel, read], facts: [], checklist: [] };
const isWrite = (n: string) => retail.createEnv().isWrite(n);
const grounding = referenceGrounding(domain, task);
const status = (o: unknown) => ((o as { ok: boolean; result?: { status?: string } }).result?.status ?? null);

describe('recallObservation', () => {
  it('answers a reference call in the reference\'s state with its real observation', () => {
    const first = recallObservation(grounding, [], read, isWrite);
    expect(first && serializeObservation(first)).toBe(grounding[0].result);
    expect(status(first)).toBe('pending');
    // After the same cancellation, the same read recalls the reference's later, cancelled, answer.
    expect(status(recallObservation(grounding, [read, cancel], read, isWrite))).toBe('cancelled');
    expect(status(recallObservation(grounding, [cancel], read, isWrite))).toBe('cancelled');
    expect(recallObservation(grounding, [read], cancel, isWrite)).toMatchObject({ ok: true });
    // Key order of the arguments does not matter.
    expect(recallObservation(grounding, [], { name: 'cancel_pending_order', arguments: { reason: 'no longer needed', order_id: pending } }, isWrite)).not.toBeNull();
  });

  it('recalls nothing for other arguments or another state', () => {
    expect(recallObservation(grounding, [], { name: 'get_order_details', arguments: { order_id: pending.slice(1) } }, isWrite)).toBeNull();
    expect(recallObservation(grounding, [], otherReason, isWrite)).toBeNull();
    // A write the reference never made changes the world: no read after it is recalled.
    expect(recallObservation(grounding, [otherReason], read, isWrite)).toBeNull();
    // The cancellation attempted twice: the reference was never in that state.
    expect(recallObservation(grounding, [cancel], cancel, isWrite)).toBeNull();
    expect(recallObservation([], [], read, isWrite)).toBeNull();
  });

  it('every recalled observation is what the real environment answers in that state', () => {
    for (const calls of [[read, cancel, read], [cancel, read], [read, read, cancel, read, read]]) {
      const env = retail.createEnv();
      const before: typeof calls = [];
      for (const c of calls) {
        const real = env.execute(c);
        const r = recallObservation(grounding, before, c, isWrite);
        if (r) expect(serializeObservation(r)).toBe(serializeObservation(real));
        before.push(c);
      }
    }
  });
});

describe('a rehearsing rollout with recall', () => {
  let backend: Backend;
  let model: Qwen3Model;
  let tok: Tokenizer;
  beforeAll(async () => {
    ({ backend, model, tok } = await loadTinyPolicy(7));
  });
  afterAll(() => backend?.dispose());

  const play = (acts: string[], recall: 'reference' | undefined) =>
    runRollouts({ model, tokenizer: tok, adapter: null }, domain, [task], {
      mode: 'rehearse', k: 1, seed: 1, limits: { maxTurns: 6, maxActTokens: 8, maxRehearseTokens: 24 }, temperature: 0,
      actScript: (_t, turn) => acts[turn],
      rehearsePrompt: { maxGroundingChars: 150, maxHistoryChars: 150 },
      ...(recall ? { recall } : {}),
    });

  it('answers the reference calls from the reference, rehearses the rest, and keeps fidelity the policy\'s own', async () => {
    const b = await play([formatCall(read), formatCall(otherReason), formatCall(read), 'Done.'], 'reference');
    const r = b.rollouts[0];
    expect(r.recalled).toBe(1);
    expect(b.stats.recalledObservations).toBe(1);
    const calls = r.steps.filter((s) => s.kind === 'call');
    // The first read is the reference's real answer; the off-reference cancellation was rehearsed by the policy
    // (the tiny random model's rehearsal, whatever it wrote, or the episode ended on it).
    expect(calls[0]).toMatchObject({ observation: { ok: true, result: { status: 'pending' } } });
    expect(r.fidelity.map((f) => f.call.name)).not.toContain('get_order_details');
    expect(b.rows.filter((x) => x.role === 'rehearse').length).toBe(b.stats.rehearseGenerations);
    expect(b.stats.rehearseGenerations).toBeGreaterThanOrEqual(1);
  });

  it('without recall every call is rehearsed', async () => {
    const b = await play([formatCall(read), 'Done.'], undefined);
    expect(b.rollouts[0].recalled).toBeUndefined();
    expect(b.stats.recalledObservations).toBe(0);
    expect(b.stats.rehearseGenerations).toBe(1);
  });

  it('refuses recall where nothing is rehearsed', async () => {
    await expect(runRollouts({ model, tokenizer: tok, adapter: null }, domain, [task], {
      mode: 'real', k: 1, seed: 1, limits: { maxTurns: 2, maxActTokens: 8, maxRehearseTokens: 24 }, recall: 'reference',
    })).rejects.toThrow(RolloutConfigError);
  });
});
