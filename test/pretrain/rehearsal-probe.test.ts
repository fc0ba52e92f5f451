// The rehearsal failure probe's classification: where an output leaves the real observation, whether what it
// wrote there stands elsewhere in the prompt, and whether an unclosed output is a loop.
import { describe, expect, it } from 'vitest';
import type { Observation } from '../../src/env/domain';
import { formatObservation } from '../../src/env/toolcall';
import type { FidelityEvalStep } from '../../src/rollout/fidelity-eval';
import { classifyStep, jsonPathAt, repeatsItself } from '../../research/pretrain/rehearsal-probe';

const real: Observation = { ok: true, name: 'get_order_details', result: { items: [{ id: '111', color: 'red' }, { id: '222', color: 'blue' }] } };
const want = formatObservation(real);
const step = (text: string, exact: boolean, failure: FidelityEvalStep['failure'] = null): FidelityEvalStep => ({
  taskId: 't', index: 0, call: { name: 'get_order_details', arguments: {} }, real, rehearsed: null, failure, text, tokens: 0,
  fidelity: { exact, f1: exact ? 1 : 0, errorAgree: true, rehearsedError: false, realError: false },
});

describe('rehearsal probe', () => {
  const prompt = `# Examples\ncall {"name":"get_order_details"}\nresult {"result":{"items":[{"id":"111","color":"red"},{"id":"222","color":"blue"}]}}\n# Call`;

  it('an exact rehearsal has no divergence; the real result is found in the prompt', () => {
    const c = classifyStep(step(want, true), prompt);
    expect(c).toMatchObject({ resultInPrompt: true, parsed: true, exact: true, divergeAt: null, divergence: null, loop: false });
    expect(classifyStep(step(want, true), '# Examples\n(none)').resultInPrompt).toBe(false);
  });

  it('a copy that resumes at the wrong item is "copied from elsewhere"; invented text is "not in the prompt"', () => {
    // After the second id it writes the first item's colour: the text from there stands in the prompt.
    const wrong = want.replace('"222","color":"blue"}]', '"222","color":"red"},{"id":"222","color":"red"}]');
    const c = classifyStep(step(wrong, false), prompt);
    expect(c.divergeAt).toBe(want.indexOf('blue'));
    expect(c.divergence).toBe('copied from elsewhere');
    const made = want.replace('blue', 'mauve-ish zebra');
    expect(classifyStep(step(made, false), prompt).divergence).toBe('not in the prompt');
  });

  it('an unclosed rehearsal that repeats a long stretch is a loop; one that is merely cut is not', () => {
    const cycle = '{"name":"T-Shirt","product_id":"9523456873","item_id":"9612497925","price":50.88,"options":{"color":"blue"}},';
    const looping = '<execution_result>\n{"result":{"items":[' + cycle.repeat(5);
    expect(repeatsItself(looping, 120)).toBe(true);
    expect(classifyStep(step(looping, false, 'no-close-tag'), prompt).loop).toBe(true);
    const distinct = '<execution_result>\n{"result":{"items":[' + Array.from({ length: 12 }, (_, i) => `{"id":"${1000 + i * 7919}","n":${i * i}}`).join(',');
    expect(repeatsItself(distinct, 120)).toBe(false);
    expect(classifyStep(step(distinct, false, 'no-close-tag'), prompt).loop).toBe(false);
    // Only an output the budget cut off can be a loop.
    expect(classifyStep(step(looping, false, 'invalid-json'), prompt).loop).toBe(false);
  });
});

describe('rehearsal probe: the field where a rehearsal leaves the real observation', () => {
  it('names the key path at the divergence, arrays as [] and digit-only keys as #', () => {
    const obs = '<execution_result>\n{"result":{"order_id":"#W1","items":[{"id":"111","price":5.5}],"variants":{"1234":{"price":9}}}}\n</execution_result>';
    expect(jsonPathAt(obs, obs.indexOf('#W1'))).toBe('result.order_id');
    expect(jsonPathAt(obs, obs.indexOf('5.5'))).toBe('result.items[].price');
    expect(jsonPathAt(obs, obs.indexOf('"111"') + 2)).toBe('result.items[].id');
    expect(jsonPathAt(obs, obs.indexOf('9}}'))).toBe('result.variants.#.price');
    // At the start of a key (the output wrote another key, or stopped a list early) the enclosing object.
    expect(jsonPathAt(obs, obs.indexOf('"price"'))).toBe('result.items[].(key)');
    expect(jsonPathAt(obs, 3)).toBe('(outside)');
    expect(jsonPathAt(obs, obs.indexOf('\n</'))).toBe('(outside)');
    // A brace or colon inside a string value is text, not structure.
    const tricky = '<execution_result>\n{"result":{"note":"a{b:c]","x":1}}';
    expect(jsonPathAt(tricky, tricky.indexOf('1}'))).toBe('result.x');
  });

  it('an inexact step carries the field and what stood there in each text', () => {
    const wrong = want.replace('blue', 'green');
    const c = classifyStep(step(wrong, false), '');
    expect(c.field).toBe('result.items[].color');
    expect(c.want?.startsWith('blue')).toBe(true);
    expect(c.wrote?.startsWith('green')).toBe(true);
    expect(classifyStep(step(want, true), '').field).toBeUndefined();
  });
});
