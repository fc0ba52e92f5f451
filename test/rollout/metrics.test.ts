import { describe, expect, it } from 'vitest';
import type { Step, ToolCall } from '../../src/env/domain';
import { makeRow } from '../../src/rollout/rows';
import { summarizeFidelity } from '../../src/rollout/fidelity';
import { matchToolCalls, summarizeRollouts } from '../../src/rollout/metrics';
import type { RolloutBatch, RolloutRecord } from '../../src/rollout/rollout';

const call = (name: string, args: Record<string, unknown>): ToolCall => ({ name, arguments: args });
const okStep = (c: ToolCall): Step => ({ kind: 'call', call: c, observation: { ok: true, name: c.name, result: 'x' } });
const refs = [call('find', { a: 1, b: 2 }), call('get', { id: '#W1' }), call('get', { id: '#W1' })];

describe('rollout metrics', () => {
  it('tool precision/recall: multiset match on name and canonical arguments', () => {
    const steps: Step[] = [
      okStep(call('find', { b: 2, a: 1 })), // matches (key order does not matter)
      okStep(call('get', { id: '#W1' })), // matches one of two
      okStep(call('get', { id: '#W1' })), // matches the second
      okStep(call('get', { id: '#W1' })), // nothing left to match
      okStep(call('get', { id: 'W1' })), // wrong argument
      { kind: 'call', call: call('', {}), observation: { ok: false, name: '', error: 'invalid JSON', code: 'parse' } }, // not a call
      { kind: 'reply', text: 'done' },
    ];
    expect(matchToolCalls(steps, refs)).toEqual({ calls: 5, matched: 3, references: 3, precision: 3 / 5, recall: 1 });
    expect(matchToolCalls([], refs)).toMatchObject({ calls: 0, precision: NaN, recall: 0 });
  });

  it('summarizes a batch', () => {
    const rec = (k: number, reward: number, end: RolloutRecord['end'], steps: Step[]): RolloutRecord => ({
      promptId: 'p', rolloutId: `p:${k}`, taskId: 't', mode: 'real', end, reward, turns: steps.length, steps, messages: [], fidelity: [], log: [], rehearseFailure: null, rows: [],
    });
    const row = makeRow({ role: 'act', promptId: 'p', rolloutId: 'p:0', turn: 1, promptTokens: [1], generated: { tokens: [2], logprobs: [-1] } });
    const batch: RolloutBatch = {
      rollouts: [rec(0, 1, 'reply', [okStep(refs[0]), okStep(refs[1])]), rec(1, 0, 'max-turns', [okStep(call('get', { id: '#W9' }))]), rec(2, -0.1, 'empty', [])],
      rows: [row],
      fidelity: summarizeFidelity([]),
      stats: { rounds: 1, actGenerations: 1, rehearseGenerations: 0, recalledObservations: 0, generatedTokens: 1, promptTokens: 1, reusedPromptTokens: 0, wallMs: 1 },
    };
    const s = summarizeRollouts(batch, () => refs);
    expect(s.rollouts).toBe(3);
    expect(s.meanReward).toBeCloseTo(0.9 / 3, 12);
    expect(s.sdReward).toBeCloseTo(Math.sqrt(((1 - 0.3) ** 2 + 0.3 ** 2 + 0.4 ** 2) / 2), 12);
    expect(s.success).toBeCloseTo(1 / 3, 12);
    expect(s.ends).toEqual({ reply: 1, 'max-turns': 1, empty: 1 });
    expect(s.meanTurns).toBe(1);
    expect(s.toolPrecision).toBeCloseTo(2 / 3, 12); // 3 calls, 2 match
    expect(s.toolRecall).toBeCloseTo(2 / 9, 12); // 3 references per rollout
    expect(s.rows).toEqual({ act: 1, rehearse: 0 });
    expect(s.fidelity.steps).toBe(0);
  });
});
