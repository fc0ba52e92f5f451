// The run log's JSONL import (src/ui/runlog.svelte.ts) keeps a conversation's user side, so a stepper conversation
// exported and imported again still shows its user turns; a malformed one is reported, not shown.
import { describe, expect, it } from 'vitest';
import { parseRolloutsJsonl } from '../../src/ui/runlog.svelte';
import type { RolloutView } from '../../src/worker-protocol';

const view: RolloutView = {
  taskId: 'train-0-1', request: 'cancel', mode: 'real', seed: 1, done: true, endReason: 'the user ended the call (###STOP###)', reward: null, fidelity: null,
  turns: [{ index: 0, act: { source: 'expert', prompt: '', promptTokens: 0, text: 'Shall I?', tokens: [], ms: 0 }, calls: [], reply: 'Shall I?' }],
  conversation: { user: 'scripted', greeting: 'Hi!', userTurns: [{ before: 0, text: 'cancel', opening: true, confirms: false }, { before: 1, text: 'Yes.', opening: false, confirms: true }], stop: '###STOP###', unconfirmed: [] },
};

describe('run log import of a conversation', () => {
  it('keeps the conversation of an exported stepper rollout', () => {
    const { rollouts, errors } = parseRolloutsJsonl(JSON.stringify({ run: 'r', kind: 'stepper', ...view }) + '\n');
    expect(errors).toEqual([]);
    expect(rollouts[0].conversation).toEqual(view.conversation);
  });

  it('reports a malformed conversation by line, and still reads a rollout without one', () => {
    const bad = { ...view, conversation: { ...view.conversation, userTurns: [{ before: 'x' }] } };
    const { rollouts, errors } = parseRolloutsJsonl(`${JSON.stringify(bad)}\n${JSON.stringify({ ...view, conversation: undefined })}\n`);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/^line 1: conversation\.userTurns/);
    expect(rollouts).toHaveLength(1);
    expect(rollouts[0].conversation).toBeUndefined();
  });
});
