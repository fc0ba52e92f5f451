import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { renderChat, type ChatMessage, type ToolDefinition } from '../../src/rollout/chat';
import type { Observation } from '../../src/env/domain';
import { formatObservation, parseObservation, serializeObservation } from '../../src/env/toolcall';
import {
  buildRehearsePrompt,
  parseExecutionResult,
  rehearseTarget,
  REHEARSE_SYSTEM,
  selectGrounding,
  serializeHistory,
  toolsSection,
  type GroundingExample,
} from '../../src/rollout/rehearse-prompt';

const tools: ToolDefinition[] = [
  {
    type: 'function',
    function: {
      name: 'get_order_details',
      description: 'Get an order.',
      parameters: { type: 'object', properties: { order_id: { type: 'string' } }, required: ['order_id'] },
    },
  },
  {
    type: 'function',
    function: { name: 'calculate', description: 'Math.', parameters: { type: 'object', properties: { expression: { type: 'string' } }, required: ['expression'] } },
  },
];

const ok = (result: unknown, name = 'get_order_details'): Observation => ({ ok: true, name, result });
const fail = (error: string, name = 'get_order_details'): Observation => ({ ok: false, name, error, code: 'tool' });

const grounding: GroundingExample[] = [
  { name: 'find_user_id_by_name_zip', arguments: { first_name: 'Yusuf', last_name: 'Rossi', zip: '19122' }, result: serializeObservation(ok('yusuf_rossi_9620')) },
  { name: 'get_order_details', arguments: { order_id: '#W2378156' }, result: serializeObservation(ok({ order_id: '#W2378156', status: 'delivered' })) },
  { name: 'calculate', arguments: { expression: '1/0' }, result: serializeObservation(fail('division by zero')) },
];

const history: ChatMessage[] = [
  { role: 'system', content: 'ACT SYSTEM PROMPT' },
  { role: 'user', content: 'I am Yusuf Rossi, 19122. Where is #W2378156?' },
  { role: 'assistant', content: '<tool_call>\n{"name": "find_user_id_by_name_zip", "arguments": {"first_name": "Yusuf"}}\n</tool_call>' },
  { role: 'tool', content: 'yusuf_rossi_9620' },
];

describe('Rehearse prompt', () => {
  it('has its sections in order, compact, and renders through the chat template', () => {
    const { messages, text } = buildRehearsePrompt({ tools, grounding, history, call: { name: 'get_order_details', arguments: { order_id: '#W2378156' } } });
    expect(messages[0]).toEqual({ role: 'system', content: REHEARSE_SYSTEM });
    const u = messages[1].content;
    const at = ['# Tools\n', '# Examples\n', '# Conversation\n', '# Call\n'].map((h) => u.indexOf(h));
    expect(at.every((p, i) => p >= 0 && (i === 0 || p > at[i - 1]))).toBe(true);
    // Tool schemas: the inner function object, compact JSON, one per line.
    expect(u).toContain('\n{"name":"get_order_details","description":"Get an order.","parameters":{"type":"object"');
    // Only the called tool's schema; the others by name (toolSchemas 'called', the default).
    expect(u).toContain('\nOther tools: calculate\n# Examples');
    expect(u).not.toContain('"name":"calculate","description"');
    const all = buildRehearsePrompt({ tools, grounding, history, call: { name: 'get_order_details', arguments: {} } }, { toolSchemas: 'all' }).messages[1].content;
    expect(all).toContain('{"name":"calculate","description":"Math."');
    expect(toolsSection(tools, 'fly', 'called')).toBe('Other tools: get_order_details, calculate');
    // The called tool's example comes first; errors are written as {"error": ...}.
    const ex = u.slice(at[1], at[2]);
    expect(ex.indexOf('get_order_details')).toBeLessThan(ex.indexOf('find_user_id_by_name_zip'));
    expect(ex).toContain('result {"error":"division by zero"}');
    // History: no system message, tool-call markup shortened.
    expect(u).not.toContain('ACT SYSTEM PROMPT');
    expect(u).toContain('assistant: call {"name": "find_user_id_by_name_zip"');
    expect(u).toContain('tool: yusuf_rossi_9620');
    expect(u.endsWith('# Call\n{"name":"get_order_details","arguments":{"order_id":"#W2378156"}}')).toBe(true);
    expect(text).toBe(renderChat(messages, { addGenerationPrompt: true, enableThinking: false }));
    expect(text.endsWith('<|im_start|>assistant\n<think>\n\n</think>\n\n')).toBe(true);
  });

  it('grounding: whole examples within the budget, duplicates dropped', () => {
    const all = selectGrounding([...grounding, grounding[1]], 'calculate', 10_000);
    expect(all).toHaveLength(3);
    expect(all[0]).toBe('call {"name":"calculate","arguments":{"expression":"1/0"}}\nresult {"error":"division by zero"}');
    expect(all[1]).toBe('call {"name":"find_user_id_by_name_zip","arguments":{"first_name":"Yusuf","last_name":"Rossi","zip":"19122"}}\nresult {"result":"yusuf_rossi_9620"}');
    const some = selectGrounding(grounding, 'calculate', all[0].length + 1);
    expect(some).toEqual([all[0]]);
    expect(selectGrounding(grounding, 'calculate', 5)).toEqual([]);
    // Excluding the simulated call itself (argument order does not matter), as expert rows do.
    const g = [grounding[0], { ...grounding[1] }, { name: 'get_order_details', arguments: { order_id: '#W1' }, result: '{"result":{}}' }];
    const ex = selectGrounding(g, 'get_order_details', 10_000, { name: 'get_order_details', arguments: { order_id: '#W2378156' } });
    expect(ex.map((e) => e.split('\n')[0])).toEqual(['call {"name":"get_order_details","arguments":{"order_id":"#W1"}}', expect.stringContaining('find_user_id_by_name_zip')]);
    const args = { last_name: 'Rossi', zip: '19122', first_name: 'Yusuf' };
    expect(selectGrounding(grounding, 'x', 10_000, { name: 'find_user_id_by_name_zip', arguments: args }).join()).not.toContain('find_user_id');
  });

  it('history: keeps the first user message and the most recent messages within the budget', () => {
    const long: ChatMessage[] = [{ role: 'user', content: 'TASK' }];
    for (let i = 0; i < 20; i++) long.push({ role: 'assistant', content: `a${i}` }, { role: 'tool', content: `t${i}` });
    const s = serializeHistory(long, 60);
    expect(s.length).toBeLessThanOrEqual(60 + 40); // + the omission marker
    const lines = s.split('\n');
    expect(lines[0]).toBe('user: TASK');
    expect(lines[1]).toMatch(/^\(\d+ earlier messages omitted\)$/);
    expect(lines[lines.length - 1]).toBe('tool: t19');
    const omitted = Number(/\d+/.exec(lines[1])![0]);
    expect(omitted + lines.length - 1).toBe(long.length); // every message is either shown or counted
    expect(serializeHistory([], 100)).toBe('(empty)');
    expect(serializeHistory(history, 100_000).split('\n')).toHaveLength(3 + 0 + 1 - 1 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0);
  });

  it('is compact on a real task (τ²-bench retail train task 0 with its real reference outputs)', () => {
    const task = JSON.parse(readFileSync(new URL('../../data/tau2-retail/tasks-train.json', import.meta.url), 'utf8'))[0];
    const gold = JSON.parse(readFileSync(new URL('../../data/tau2-retail/gold-train.jsonl', import.meta.url), 'utf8').split('\n')[0]);
    const examples: GroundingExample[] = task.evaluation_criteria.actions.map((a: { name: string; arguments: Record<string, unknown> }, i: number) => ({
      name: a.name,
      arguments: a.arguments,
      result: serializeObservation(gold.actions[i].ok ? ok(gold.actions[i].output, a.name) : fail(gold.actions[i].error, a.name)),
    }));
    const { text } = buildRehearsePrompt({ tools, grounding: examples, history, call: { name: 'get_product_details', arguments: { product_id: '1656367028' } } });
    // Budgets: 1600 + 1600 characters plus fixed parts.
    expect(text.length).toBeLessThan(REHEARSE_SYSTEM.length + 1600 + 1600 + 1000);
    expect(text).toContain('# Call\n{"name":"get_product_details","arguments":{"product_id":"1656367028"}}<|im_end|>');
    // The keyboard's own record (~2.9K characters) does not fit the budget; the thermostat's, same tool, does and comes first.
    expect(text).toContain('# Examples\ncall {"name":"get_product_details","arguments":{"product_id":"4896585277"}}\nresult {"result":{"name":"Smart Thermostat"');
  });
});

describe('parseExecutionResult (untrusted output)', () => {
  const cases = [ok({ order_id: '#W1', items: [1, 2.5, null], ok: true }), ok('yusuf_rossi_9620'), ok('4.0'), ok([]), ok(null), fail('Order not found')];
  it('round-trips every target, with or without end tokens, and agrees with the env reader', () => {
    for (const o of cases) {
      for (const suffix of ['', '<|im_end|>', '\n<|im_end|>\n', '<|im_end|><|endoftext|>']) {
        const text = rehearseTarget(o) + suffix;
        const r = parseExecutionResult(text, o.name);
        expect(r.ok).toBe(true);
        if (r.ok) expect(r.observation).toEqual(o);
      }
      expect(rehearseTarget(o)).toBe(formatObservation(o));
    }
    const r = parseExecutionResult('<think>\n\n</think>\n\n' + rehearseTarget(ok({ a: 1 })), 'get_order_details');
    expect(r.ok && r.observation).toEqual(ok({ a: 1 }));
  });

  it('rejects malformed output with a typed failure', () => {
    const bad: [string, string][] = [
      ['', 'empty'],
      ['  <|im_end|>', 'empty'],
      ['{"result":1}', 'no-open-tag'],
      ['Sure! <execution_result>\n{"result":1}\n</execution_result>', 'no-open-tag'],
      ['<execution_result>\n{"result":', 'no-close-tag'],
      ['<execution_result>\n{"result":1}\n</execution_result> and more', 'trailing-text'],
      ['<execution_result>\n{"result":1}\n</execution_result>\n<execution_result>\n{}\n</execution_result>', 'trailing-text'],
      ['<execution_result>\n{result:1}\n</execution_result>', 'invalid-json'],
      ['<execution_result>\n\n</execution_result>', 'invalid-json'],
      ['<execution_result>\n{"result":1} {"b":2}\n</execution_result>', 'invalid-json'],
      ['<execution_result>\n' + '['.repeat(40) + ']'.repeat(40) + '\n</execution_result>', 'invalid-json'],
      ['<execution_result>\n{"order_id":"#W1"}\n</execution_result>', 'bad-shape'],
      ['<execution_result>\n{"result":1,"error":"x"}\n</execution_result>', 'bad-shape'],
      ['<execution_result>\n{"error":42}\n</execution_result>', 'bad-shape'],
      ['<execution_result>\n"text"\n</execution_result>', 'bad-shape'],
      ['x'.repeat(70_000), 'too-long'],
    ];
    for (const [text, code] of bad) {
      const r = parseExecutionResult(text, 'get_order_details');
      expect(r.ok, text.slice(0, 60)).toBe(false);
      if (!r.ok) expect(r.error.code, text.slice(0, 60)).toBe(code);
      // The env's reader rejects the same texts.
      expect(parseObservation(text, 'get_order_details')).toBeNull();
    }
  });

  it('never throws on arbitrary text and accepts exactly what the env reader accepts', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 80 }), fc.constantFrom(0, 1, 2), (s, wrap) => {
        const text = wrap === 0 ? s : wrap === 1 ? `<execution_result>\n${s}\n</execution_result>` : `<execution_result>\n{"result":${s}}\n</execution_result>`;
        const r = parseExecutionResult(text, 'calculate');
        const env = parseObservation(text, 'calculate');
        expect(r.ok ? r.observation : null).toEqual(env);
      }),
      { numRuns: 500, seed: 2 },
    );
  });
});
