// Structured rehearsal decoding with the bundled tokenizer: the mask never forbids a faithful copy of an
// observation the prompt holds, and it does forbid a copy that starts over.
import { beforeAll, describe, expect, it } from 'vitest';
import { loadWorldDomain } from '../../src/env/retail/node';
import { formatObservation } from '../../src/env/toolcall';
import { parseExecutionResult } from '../../src/rollout/rehearse-prompt';
import { feedText, grammarComplete, initialGrammarState, plainStringRoom, type GrammarState } from '../../src/rollout/observation-grammar';
import { DirSource } from '../../src/model/source-node';
import { Tokenizer } from '../../src/model/tokenizer';
import { domainStringLimits, REHEARSE_NGRAM, rehearseConstraint, rehearseConstraintFor } from '../../src/rollout/rehearse-constraint';

let tok: Tokenizer;
beforeAll(async () => {
  tok = await Tokenizer.load(new DirSource('models/retail'));
});

/** Pushes tokens through a constraint; the index of the first one its mask forbade (-1: none). */
function firstForbidden(c: ReturnType<typeof rehearseConstraint>, tokens: readonly number[]): number {
  for (let i = 0; i < tokens.length; i++) {
    const m = c.allowed();
    if (m !== null && !m[tokens[i]]) return i;
    c.push(tokens[i]);
  }
  return -1;
}

describe('rehearse constraint', () => {
  it('lets every real observation through when the prompt holds it, and allows the stop token only at the end', () => {
    const d = loadWorldDomain('retail');
    const limits = domainStringLimits(d);
    let n = 0;
    for (const task of d.tasks.generate({ split: 'test', count: 25, seed: 1 }))
      for (const s of d.expert(task, d.createEnv()).steps) {
        if (s.kind !== 'call') continue;
        const target = tok.encode(formatObservation(s.observation));
        // The prompt holds the observation once (as a grounding example does), with other text around it.
        const prompt = [...tok.encode('# Examples\n'), ...target, ...tok.encode('\n# Call\n')];
        const c = rehearseConstraint(tok, prompt, s.call.name, { ngram: REHEARSE_NGRAM, maxStringChars: limits });
        expect(firstForbidden(c, target), formatObservation(s.observation).slice(0, 60)).toBe(-1);
        expect(c.allowed()![tok.stopIds[0]]).toBe(1);
        n++;
      }
    expect(n).toBeGreaterThan(50);
    const fresh = rehearseConstraint(tok, [], 'get_order_details', { ngram: 0 });
    expect(fresh.allowed()![tok.stopIds[0]]).toBe(0);
  });

  it('computes each mask as feeding every token would, inside strings (where plain tokens are only measured) and out', () => {
    // The reference: every token of the vocabulary fed through the grammar from the state the text has reached.
    const d = loadWorldDomain('retail');
    const limits = domainStringLimits(d);
    const special = new Set(tok.specialIds);
    const texts = Array.from({ length: tok.size }, (_, id) => (special.has(id) ? '' : tok.decode([id])));
    let checked = 0;
    let inString = 0;
    for (const task of d.tasks.generate({ split: 'test', count: 2, seed: 5 }))
      for (const s of d.expert(task, d.createEnv()).steps) {
        if (s.kind !== 'call') continue;
        const target = tok.encode(formatObservation(s.observation));
        // A limit tighter than the world's, so that strings also run out of room.
        for (const maxStr of [limits[s.call.name] ?? Infinity, 12]) {
          const c = rehearseConstraint(tok, [], s.call.name, { ngram: 0, maxStringChars: { [s.call.name]: maxStr } });
          let state: GrammarState | null = initialGrammarState(maxStr);
          for (let i = 0; i < target.length && state; i++) {
            const m = c.allowed();
            if (i % 5 === 0 && m) {
              const want = texts.map((t, id) =>
                tok.stopIds.includes(id) ? (grammarComplete(state!) ? 1 : 0) : t !== '' && feedText(state!, t) !== null ? 1 : 0,
              );
              expect([...m]).toEqual(want);
              checked++;
              if (plainStringRoom(state) >= 0) inString++;
            }
            c.push(target[i]);
            state = feedText(state, tok.decode([target[i]]));
          }
        }
      }
    expect(checked).toBeGreaterThan(40);
    expect(inString).toBeGreaterThan(10);
  });

  it('stops a copy that starts the record over, where a free decoder would loop', () => {
    const record = tok.encode('{"item_id":"6777246137","options":{"color":"red","size":"M"},"available":true,"price":47.76},');
    const prompt = [...tok.encode('<execution_result>\n{"result":{"variants":['), ...record, ...tok.encode(']}}\n</execution_result>')];
    const c = rehearseConstraint(tok, prompt, 'get_product_details', { ngram: REHEARSE_NGRAM });
    const out = [...tok.encode('<execution_result>\n{"result":{"variants":['), ...record];
    expect(firstForbidden(c, out)).toBe(-1);
    // Writing the record a second time: the guard forbids it within the first n tokens.
    const at = firstForbidden(c, record);
    expect(at).toBeGreaterThanOrEqual(0);
    expect(at).toBeLessThan(REHEARSE_NGRAM);
    // Without the guard the grammar alone would let the second copy through.
    const g = rehearseConstraint(tok, prompt, 'get_product_details', { ngram: 0 });
    expect(firstForbidden(g, [...out, ...record])).toBe(-1);
  });

  it('never leads itself into a dead end: random walks over allowed tokens stay on the grammar, across tools with different limits', () => {
    // One mask cache serves every request of a tokenizer, whatever its tool's string limit: a mask computed
    // under one limit must not be served under another.
    const limits = { a: 3, b: 40, c: 9 };
    let seed = 7;
    const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) >>> 0) % n);
    for (let walk = 0; walk < 60; walk++) {
      const tool = (['a', 'b', 'c'] as const)[walk % 3];
      const c = rehearseConstraint(tok, [], tool, { ngram: 4, maxStringChars: limits });
      const out: number[] = [];
      for (let step = 0; step < 80; step++) {
        const m = c.allowed();
        expect(m, `walk ${walk} step ${step}: ${JSON.stringify(tok.decode(out))}`).not.toBeNull();
        // Prefer short tokens and structure so that walks also finish: a random allowed id, or the first allowed.
        const ids = [...m!.keys()].filter((i) => m![i]);
        const pick = ids[rand(ids.length)];
        if (tok.stopIds.includes(pick)) break;
        c.push(pick);
        out.push(pick);
      }
      const text = tok.decode(out);
      if (text.trimEnd().endsWith('</execution_result>')) {
        expect(parseExecutionResult(text, tool).ok, text).toBe(true);
      }
    }
  });

  it('forbids special tokens and text outside the observation; free decoding has no constraint', () => {
    const c = rehearseConstraint(tok, [], 'get_order_details', { ngram: 0 });
    const m = c.allowed()!;
    for (const id of tok.specialIds) expect(m[id]).toBe(0);
    expect(m[tok.encode('<')[0]]).toBe(1);
    expect(m[tok.encode('{')[0]]).toBe(0);
    expect(rehearseConstraintFor('free', loadWorldDomain('mini'), tok, [], 'x')).toBeUndefined();
    expect(() => rehearseConstraint(tok, [], 'x', { ngram: 1 })).toThrow(/ngram/);
  });

  it('measures string limits per tool from the world, with the margin', () => {
    const l = domainStringLimits(loadWorldDomain('mini'));
    expect(l.get_order_details).toBeGreaterThanOrEqual(Math.ceil(26 * 1.5));
    expect(l.list_all_product_types).toBeGreaterThan(500);
    expect(domainStringLimits({})).toEqual({});
    // A generator that refuses leaves the limits out, not the rollout.
    const refusing = { tasks: { generate: () => { throw new Error('no generator'); } }, expert: () => ({}), createEnv: () => ({}) };
    expect(domainStringLimits(refusing)).toEqual({});
  });
});
