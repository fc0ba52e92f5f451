// The observation grammar accepts exactly what the strict reader accepts, one character at a time.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadWorldDomain } from '../../src/env/retail/node';
import { formatObservation } from '../../src/env/toolcall';
import { feedText, grammarComplete, initialGrammarState } from '../../src/rollout/observation-grammar';
import { parseExecutionResult } from '../../src/rollout/rehearse-prompt';

/** Whether the grammar reads the whole text and ends complete. */
const accepts = (text: string, maxString = Infinity) => {
  const s = feedText(initialGrammarState(maxString), text);
  return s !== null && grammarComplete(s);
};
/** Whether the text is a prefix the grammar can still complete. */
const viable = (text: string) => feedText(initialGrammarState(), text) !== null;

describe('observation grammar', () => {
  it('accepts every real observation of both worlds, and every prefix of it stays viable', () => {
    for (const world of ['retail', 'mini'] as const) {
      const d = loadWorldDomain(world);
      let n = 0;
      for (const task of d.tasks.generate({ split: 'train', count: 60, seed: 5 }))
        for (const s of d.expert(task, d.createEnv()).steps) {
          if (s.kind !== 'call') continue;
          const text = formatObservation(s.observation);
          expect(accepts(text), text.slice(0, 80)).toBe(true);
          for (const cut of [1, 7, 19, Math.floor(text.length / 2), text.length - 3]) expect(viable(text.slice(0, cut))).toBe(true);
          n++;
        }
      expect(n).toBeGreaterThan(100);
    }
  });

  it('accepts any JSON result and any error string, with or without whitespace (property)', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.constantFrom('', ' ', '\n', '  \n'), fc.integer({ min: 0, max: 2 }), (v, ws, indent) => {
        const body = JSON.stringify({ result: v }, null, indent);
        const text = `${ws}<execution_result>${ws}${body}${ws}</execution_result>${ws}`;
        expect(parseExecutionResult(text, 't').ok).toBe(true);
        expect(accepts(text)).toBe(true);
      }),
      { numRuns: 300 },
    );
    fc.assert(
      fc.property(fc.string(), (e) => {
        const text = `<execution_result>\n${JSON.stringify({ error: e })}\n</execution_result>`;
        // A message that spells the closing tag would end the generation inside it: the grammar refuses it.
        expect(accepts(text)).toBe(!e.includes('</execution_result>'));
      }),
    );
  });

  it('whatever it accepts, the strict reader accepts (property over mutated observations)', () => {
    const base = [
      '<execution_result>\n{"result":{"order_id":"#W1","items":[{"price":12.5,"ok":true},null],"n":-0.5e+3}}\n</execution_result>',
      '<execution_result>\n{"error":"Error: order not found"}\n</execution_result>',
    ];
    const alphabet = [...'{}[]",:\\ \n0123456789.-+eEtrufalsn<>/_resulterror'];
    fc.assert(
      fc.property(fc.constantFrom(...base), fc.array(fc.tuple(fc.nat(), fc.nat(), fc.constantFrom(...alphabet), fc.boolean()), { maxLength: 4 }), (b, edits) => {
        let t = b;
        for (const [at, len, c, insert] of edits) {
          const i = at % (t.length + 1);
          t = insert ? t.slice(0, i) + c + t.slice(i) : t.slice(0, i) + t.slice(i + 1 + (len % 3));
        }
        if (accepts(t)) expect(parseExecutionResult(t, 'x').ok, t).toBe(true);
      }),
      { numRuns: 3000 },
    );
  });

  it('refuses what the reader refuses', () => {
    const wrap = (body: string) => `<execution_result>\n${body}\n</execution_result>`;
    for (const bad of [
      wrap('{}'),
      wrap('{"results":1}'),
      wrap('{"result":1,"error":"x"}'),
      wrap('{"error":1}'),
      wrap('[1]'),
      wrap('{"result":[1,]}'),
      wrap('{"result":01}'),
      wrap('{"result":"a\tb"}'),
      wrap('{"result":tru}'),
      '{"result":1}',
      wrap('{"result":1}') + ' trailing',
      wrap('{"result":"</execution_result>"}'),
    ]) {
      expect(parseExecutionResult(bad, 'x').ok, bad).toBe(false);
      expect(accepts(bad), bad).toBe(false);
    }
  });

  it('holds result strings to the limit, error messages not', () => {
    const r = (n: number) => `<execution_result>{"result":{"k":"${'x'.repeat(n)}"}}</execution_result>`;
    expect(accepts(r(10), 10)).toBe(true);
    expect(accepts(r(11), 10)).toBe(false);
    expect(accepts(`<execution_result>{"error":"${'x'.repeat(50)}"}</execution_result>`, 10)).toBe(true);
  });
});
