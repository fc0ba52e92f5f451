// Replaying the τ²-bench train tasks must reproduce, for every task, what the real upstream code
// returned (gold-train.jsonl): outputs, error texts and changed records, numbers to 1e-9 relative; and,
// stronger, the same bytes as upstream's Python writer.

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { RETAIL_FLOAT_KEYS } from '../../src/env/retail/index';
import { retailDataPath } from '../../src/env/retail/node';
import { loadTau2Tasks, TaskFileError } from '../../src/env/tau2';
import { jsonDiff, replayTask, traceLineText } from '../../src/env/trace';
import { fresh } from './helpers';

const tasksPath = retailDataPath('tasks-train.json');
const goldPath = retailDataPath('gold-train.jsonl');

describe.skipIf(!tasksPath || !goldPath)('gold replay (tasks-train.json vs gold-train.jsonl)', () => {
  const tasks = loadTau2Tasks(readFileSync(tasksPath!, 'utf8'));
  const gold = readFileSync(goldPath!, 'utf8').trim().split('\n');

  it('has one gold line per task, same ids and order', () => {
    expect(tasks.length).toBe(74);
    expect(gold.map((l) => (JSON.parse(l) as { id: string }).id)).toEqual(tasks.map((t) => t.id));
  });

  it('every trace deep-equals its gold line (numbers to 1e-9 relative)', () => {
    const diffs: string[] = [];
    tasks.forEach((t, i) => {
      const line = traceLineText(replayTask(fresh(), t).trace, RETAIL_FLOAT_KEYS);
      const d = jsonDiff(JSON.parse(line), JSON.parse(gold[i]));
      if (d) diffs.push(`task ${t.id}: ${d}`);
    });
    expect(diffs).toEqual([]);
  });

  it('every trace line is byte-identical to upstream output', () => {
    const differing = tasks.filter((t, i) => traceLineText(replayTask(fresh(), t).trace, RETAIL_FLOAT_KEYS) !== gold[i]);
    expect(differing.map((t) => t.id)).toEqual([]);
  });

  it('jsonDiff catches a changed number, a missing key and a different error text', () => {
    const g = JSON.parse(gold[30]) as Record<string, unknown>;
    const mutated = structuredClone(g) as { actions: { error?: string; ok: boolean }[]; changed: Record<string, unknown> };
    const user = Object.values(mutated.changed.users as Record<string, { payment_methods: Record<string, { balance?: number }> }>)[0];
    const gc = Object.values(user.payment_methods).find((p) => p.balance !== undefined)!;
    gc.balance = gc.balance! * (1 + 1e-7);
    expect(jsonDiff(mutated, g)).toMatch(/balance/);
    gc.balance = gc.balance / (1 + 1e-7);
    expect(jsonDiff(mutated, g)).toBeNull();
    delete (mutated.changed as Record<string, unknown>).products;
    expect(jsonDiff(mutated, g)).toMatch(/keys/);
  });
});

describe('task file loader', () => {
  it('rejects malformed files with a typed error naming the task and field', () => {
    expect(() => loadTau2Tasks('{')).toThrow(TaskFileError);
    expect(() => loadTau2Tasks('{}')).toThrow(/array/);
    expect(() =>
      loadTau2Tasks(JSON.stringify([{ id: '7', user_scenario: { instructions: 'x' }, evaluation_criteria: { actions: [{ name: 3 }] } }])),
    ).toThrow(/task 7: evaluation_criteria\.actions\.0\.name/);
  });
  it('accepts a minimal task', () => {
    const [t] = loadTau2Tasks([{ id: 1, user_scenario: { instructions: 'hello' } }]);
    expect(t).toMatchObject({ id: '1', referenceActions: [], facts: [], userMessages: ['hello'] });
  });
});
