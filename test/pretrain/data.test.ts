// The pretraining data pipeline: rollout-identical prompts, loss masks only on responses, seeded packing.
import { describe, expect, it } from 'vitest';
import { loadRetailBase } from '../../src/env/retail/node';
import { retailDomain } from '../../src/env/retail/index';
import { trainBpe } from '../../src/model/bpe';
import { encodeExample, END, expertRows, packBatches, rolloutGroundedRehearseRows, rowToExample } from '../../research/pretrain/data';
import { canonicalJson } from '../../src/env/json';
import { referenceGrounding } from '../../src/rollout/rollout';
import { pretrainBatch } from '../../research/pretrain/trainer';
import { SPECIAL_STRINGS } from '../../src/model/hf-tokenizer';
import { buildActPrompt } from '../../src/rollout/act-prompt';
import type { ChatMessage, ToolDefinition } from '../../src/rollout/chat';
import { buildRehearsePrompt } from '../../src/rollout/rehearse-prompt';

const domain = retailDomain(loadRetailBase());
const tools = domain.definitions() as unknown as ToolDefinition[];

describe('rehearse rows grounded as rollouts ground them', () => {
  const o = { split: 'train' as const, tasks: 30, seed: 4, mistakeRate: 0.3 };
  const rows = rolloutGroundedRehearseRows(domain, o);
  const tasks = new Map(expertRows(domain, o).tasks.map((t) => [t.id, t]));
  const key = (name: string, args: unknown) => name + canonicalJson(args);

  it('are the expert rehearse rows with the task reference trajectory as grounding: a reference call finds its own real result, a mistake none', () => {
    const expert = expertRows(domain, o).rows.filter((r) => r.role === 'rehearse');
    expect(rows.map((r) => [r.taskId, r.target])).toEqual(expert.map((r) => [r.taskId, r.target]));
    let own = 0;
    let mistakes = 0;
    for (const r of rows) {
      if (r.role !== 'rehearse') throw new Error('only rehearse rows');
      const task = tasks.get(r.taskId)!;
      expect(r.grounding).toEqual(referenceGrounding(domain, task));
      const prompt = rowToExample(r, domain.policy, tools).prompt;
      const isReference = task.referenceActions.some((a) => key(a.name, a.arguments) === key(r.call.name, r.call.arguments));
      const example = 'call ' + JSON.stringify({ name: r.call.name, arguments: r.call.arguments });
      if (!isReference) {
        mistakes++;
        expect(prompt.includes(example)).toBe(false);
      } else if (prompt.includes(example + '\nresult ' + r.target.slice('<execution_result>\n'.length, -'\n</execution_result>'.length) + '\n')) own++;
    }
    expect(own).toBeGreaterThan(rows.length / 2);
    expect(mistakes).toBeGreaterThan(0);
  });
});

describe('expert examples', () => {
  const { rows } = expertRows(domain, { split: 'train', tasks: 5, seed: 11, mistakeRate: 0.3 });
  const ex = rows.map((r) => rowToExample(r, domain.policy, tools));

  it('are a function of the seed', () => {
    const again = expertRows(domain, { split: 'train', tasks: 5, seed: 11, mistakeRate: 0.3 }).rows.map((r) => rowToExample(r, domain.policy, tools));
    expect(again).toEqual(ex);
    const other = expertRows(domain, { split: 'train', tasks: 5, seed: 12, mistakeRate: 0.3 }).rows.map((r) => rowToExample(r, domain.policy, tools));
    expect(other).not.toEqual(ex);
  });

  it('from a careless demonstrator: the same rows but for replies that leave out the figures owed', () => {
    const o = { split: 'train' as const, tasks: 60, seed: 11, mistakeRate: 0.3 };
    const attentive = expertRows(domain, o).rows;
    const careless = expertRows(domain, { ...o, carelessRate: 1 }).rows;
    expect(careless.length).toBe(attentive.length);
    const differ = careless.filter((r, i) => JSON.stringify(r) !== JSON.stringify(attentive[i]));
    expect(differ.length).toBeGreaterThan(5);
    for (const r of differ) {
      // Only an Act row's final reply changes: no '$' amount, no tracking number.
      expect(r.role).toBe('act');
      if (r.role !== 'act') continue;
      expect(r.target).not.toMatch(/<tool_call>|\$\d|Tracking number/);
    }
  });

  it('hold both roles, with the exact prompts the rollouts build, and responses that end the turn', () => {
    expect(new Set(ex.map((e) => e.role))).toEqual(new Set(['act', 'rehearse']));
    rows.forEach((r, i) => {
      const e = ex[i];
      expect(e.response).toBe(r.target + END);
      if (r.role === 'act') expect(e.prompt).toBe(buildActPrompt(domain.policy, tools, r.messages as ChatMessage[]));
      else {
        expect(e.prompt).toBe(buildRehearsePrompt({ tools, grounding: r.grounding, history: r.messages as ChatMessage[], call: r.call }).text);
        expect(e.response.startsWith('<execution_result>\n{')).toBe(true);
      }
      expect(e.prompt.endsWith('<|im_start|>assistant\n<think>\n\n</think>\n\n')).toBe(true);
    });
  });

  it('encode losslessly, with loss only on response tokens', () => {
    const bpe = trainBpe(ex.flatMap((e) => [e.prompt, e.response]), { vocabSize: 900, specials: SPECIAL_STRINGS, maxTokenBytes: 100_000 });
    for (const e of ex) {
      const enc = encodeExample(bpe, e);
      expect(bpe.decode(Array.from(enc.ids))).toBe(e.prompt + e.response);
      expect(bpe.decode(Array.from(enc.ids.subarray(enc.promptLen)))).toBe(e.response);
      const { targets, weight } = pretrainBatch([enc], 0);
      const masked = targets.filter((_, t) => weight[t] > 0);
      expect(Array.from(masked)).toEqual(Array.from(enc.ids.subarray(enc.promptLen)));
      // The first row with loss is the last prompt token, predicting the first response token.
      expect(weight.findIndex((w) => w > 0)).toBe(enc.promptLen - 1);
      expect(enc.ids[enc.ids.length - 1]).toBe(bpe.tokenId('<|im_end|>'));
    }
  });
});

describe('packBatches', () => {
  const lengths = [50, 300, 120, 700, 90, 400, 2000, 10, 250];
  it('keeps every batch within the token budget, uses each fitting sequence once, and is seeded', () => {
    const a = packBatches(lengths, 800, 1);
    for (const b of a) expect(b.reduce((s, i) => s + lengths[i], 0)).toBeLessThanOrEqual(800);
    expect(a.flat().sort((x, y) => x - y)).toEqual([0, 1, 2, 3, 4, 5, 7, 8]); // 2000 never fits
    expect(packBatches(lengths, 800, 1)).toEqual(a);
    expect(packBatches(lengths, 800, 2).flat()).not.toEqual(a.flat());
  });
});
