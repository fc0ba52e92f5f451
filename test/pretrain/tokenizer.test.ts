// The BPE trainer and its Hugging Face files: merges in rank order, lossless round trip, and transformers.js
// (the runtime tokenizer) agreeing token for token with our own encoder on held-out text.
import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { Bpe, BpeError, lexiconOfPattern, PRE_TOKENIZER_NAMES, preTokenizerPattern, preTokens, splitSpecials, trainBpe } from '../../src/model/bpe';
import { fromTokenizerJson, qwen3ChatTemplate, SPECIAL_STRINGS, toTokenizerConfig, toTokenizerJson } from '../../src/model/hf-tokenizer';
import { encodeExample, expertRows, rowToExample } from '../../research/pretrain/data';
import { pretrainSequence } from '../../research/pretrain/trainer';
import { loadRetailBase, loadWorldDomain } from '../../src/env/retail/node';
import { rowsFromEpisode } from '../../src/env/rows';
import { retailDomain } from '../../src/env/retail/index';
import { Tokenizer } from '../../src/model/tokenizer';
import type { ToolDefinition } from '../../src/rollout/chat';

describe('BPE trainer (hand-worked)', () => {
  it('merges the most frequent pair first, ties to the smaller ids, and applies merges in rank order', () => {
    // "abab" x3, "abc" x1: (a,b)=7 is first; then (ab,ab)=3 (vs (b,a) gone, (ab,c)=1).
    const bpe = trainBpe(['abab', 'abab', 'abab', 'abc'], { vocabSize: 258 + SPECIAL_STRINGS.length, specials: SPECIAL_STRINGS });
    const a = 97, b = 98;
    expect(bpe.merges[0]).toEqual([a, b]);
    expect(bpe.merges[1]).toEqual([256, 256]);
    expect(bpe.encode('abab')).toEqual([257]);
    expect(bpe.encode('ababc')).toEqual([257, 99]);
    expect(bpe.encode('aab')).toEqual([a, 256]);
  });

  it('leftmost non-overlapping merges on runs ("aaaaa" with a+a)', () => {
    const bpe = new Bpe([...Array.from({ length: 256 }, (_, i) => Uint8Array.of(i)), Uint8Array.of(97, 97)], [[97, 97]], []);
    expect(bpe.encode('aaaaa')).toEqual([256, 256, 97]);
  });

  it('special tokens split the text and are never merged across', () => {
    expect(splitSpecials('x<|im_end|>y<think>', SPECIAL_STRINGS)).toEqual([
      { text: 'x', special: false },
      { text: '<|im_end|>', special: true },
      { text: 'y', special: false },
      { text: '<think>', special: true },
    ]);
    const bpe = trainBpe(Array(5).fill('a<|im_end|>b'), { vocabSize: 300, specials: SPECIAL_STRINGS });
    expect(bpe.encode('a<|im_end|>b')).toEqual([97, bpe.tokenId('<|im_end|>'), 98]);
  });

  it('refuses a vocabulary too small for the bytes and the specials', () => {
    expect(() => trainBpe(['x'], { vocabSize: 200, specials: SPECIAL_STRINGS })).toThrow(BpeError);
  });

  it('with long-numbers, every digit of a 4+ digit run is its own token; shorter numbers still merge', () => {
    const texts = Array(6).fill('order #W2378156 and #W2378156, zip 19122, "maxLength": 200, 200, 200');
    const bpe = trainBpe(texts, { vocabSize: 400, specials: SPECIAL_STRINGS, preTokenizer: 'long-numbers' });
    const ids = bpe.encode('id #W2378156!');
    expect(ids.filter((i) => i >= 48 && i <= 57)).toEqual([...'2378156'].map((c) => c.charCodeAt(0)));
    expect(bpe.encode('zip 19122').filter((i) => i >= 48 && i <= 57).length).toBe(5);
    // "200" (a run of 3) takes part in merges: it is not three digit tokens.
    expect(bpe.encode('"maxLength": 200').filter((i) => i >= 48 && i <= 57).length).toBeLessThan(3);
    // Without the split the same data merges the long ids too.
    const merged = trainBpe(texts, { vocabSize: 400, specials: SPECIAL_STRINGS });
    expect(merged.encode('#W2378156').length).toBeLessThan(4);
  });

  it('is deterministic', () => {
    const texts = ['the cat sat on the mat', 'the hat', 'that cat'];
    const o = { vocabSize: 280, specials: SPECIAL_STRINGS };
    expect(trainBpe(texts, o).merges).toEqual(trainBpe(texts, o).merges);
  });

  it('values: each value a call copies is its own pre-token, whatever surrounds it', () => {
    const cut = (t: string) => preTokens(t, 'values');
    expect(cut('I\'m Sophia Garcia, zip 19122.')).toEqual(['I', '\'m ', 'Sophia', ' ', 'Garcia', ', zip ', '1', '9', '1', '2', '2', '.']);
    expect(cut('{"first_name": "Sophia", "last_name": "Garcia"}')).toEqual(['{"first_name": "', 'Sophia', '", "last_name": "', 'Garcia', '"}']);
    expect(cut('"email": "sophia.garcia1234@example.com"}')).toEqual(['"email": "', 'sophia.garcia', '1', '2', '3', '4', '@example.com', '"}']);
    expect(cut('mail sophia.garcia1234.old@example.com.')).toEqual(['mail ', 'sophia.garcia', '1', '2', '3', '4', '.', 'old', '@example.com', '.']);
    expect(cut('"user_id": "sophia_garcia_1234"')).toEqual(['"user_id": "', 'sophia_garcia_', '1', '2', '3', '4', '"']);
    expect(cut('"payment_method_id": "credit_card_9513"')).toEqual(['"payment_method_id": "', 'credit_card_', '9', '5', '1', '3', '"']);
    expect(cut('order #W2378156,')).toEqual(['order #', 'W', '2', '3', '7', '8', '1', '5', '6', ',']);
    expect(cut('get_order_details')).toEqual(['get_order_details']);
    expect(cut('{"maxLength": 200, "street": "445 Maple Drive"}')).toEqual(['{"maxLength": ', '200', ', "street": "', '445', ' ', 'Maple', ' ', 'Drive', '"}']);
  });
});

describe('stated values: a lexicon of values stated in words, each matched whole', () => {
  const lexicon = ['ordered by mistake', 'no longer needed', 'blue', 'S', 'Wi-Fi + Cellular', '1.5L', '60%', 'Running Shoes', '7'];
  const cut = (t: string) => preTokens(t, 'stated-values', lexicon);

  it('cuts a value out of the wording around it, in prose and in JSON alike, and only whole', () => {
    expect(cut('Cancel order #W2378156, the reason is: ordered by mistake.')).toEqual(['Cancel order #W', '2', '3', '7', '8', '1', '5', '6', ', the reason is: ', 'ordered by mistake', '.']);
    expect(cut('{"order_id": "#W1", "reason": "ordered by mistake"}')).toEqual(['{"order_id": "#W1", "reason": "', 'ordered by mistake', '"}']);
    expect(cut('size S, color blue')).toEqual(['size ', 'S', ', color ', 'blue']);
    expect(cut('{"size":"S","color":"blue"}')).toEqual(['{"size":"', 'S', '","color":"', 'blue', '"}']);
    // Not inside a longer word or number: "Sophia", "bluetooth", "S1", "11.5L".
    expect(cut('Sophia bluetooth S1 11.5L')).toEqual(['Sophia bluetooth S1 11.5L']);
    // Regex characters in values are literal; the longer of two overlapping values wins.
    expect(cut('with Wi-Fi + Cellular or 1.5L or 1x5L, 60%')).toEqual(['with ', 'Wi-Fi + Cellular', ' or ', '1.5L', ' or 1x5L, ', '60%']);
    expect(cut('Running Shoes')).toEqual(['Running Shoes']);
  });

  it('marks the tokens that spell a stated value (same ids as encode), and a loss weight scales only those', () => {
    const bpe = trainBpe(Array(4).fill('{"reason": "ordered by mistake"} size S, color blue #W1234567'), { vocabSize: 320, specials: SPECIAL_STRINGS, preTokenizer: 'stated-values', lexicon });
    // "7" is a stated value too (a size), but not as a digit of an order id.
    const text = '<tool_call>{"order_id": "#W7654321", "reason": "ordered by mistake", "size": "7"}</tool_call>';
    const { ids, value } = bpe.encodeMarkingValues(text);
    expect(ids).toEqual(bpe.encode(text));
    expect(bpe.decode(ids.filter((_, i) => value[i] === 1))).toBe('ordered by mistake7');
    const e = encodeExample(bpe, { role: 'act', taskId: 't', prompt: 'Cancel it, reason: ordered by mistake.', response: text }, { markValues: true });
    const seq = pretrainSequence(e, 0, 2, 5);
    for (let t = e.promptLen; t < e.ids.length; t++) expect(seq.mask[t]).toBe(e.valueMask![t] ? 10 : 2);
    expect(e.valueMask!.subarray(0, e.promptLen).every((v) => v === 0)).toBe(true);
    // Unmarked (the default), nothing is weighted.
    expect(encodeExample(bpe, { role: 'act', taskId: 't', prompt: 'x', response: text }).valueMask).toBeUndefined();
  });

  it('the pattern reads back to its lexicon; a malformed lexicon or pattern is refused', () => {
    const pattern = preTokenizerPattern('stated-values', lexicon)!;
    expect(lexiconOfPattern(pattern)!.sort()).toEqual([...lexicon].sort());
    expect(lexiconOfPattern(pattern.replace('blue', 'bl(ue'))).toBeNull();
    expect(lexiconOfPattern('[0-9]')).toBeNull();
    expect(() => preTokenizerPattern('stated-values', [])).toThrow(BpeError);
    expect(() => preTokenizerPattern('stated-values', ['a|b'])).toThrow(/holds \|/);
    expect(() => preTokenizerPattern('stated-values', ['x', 'x'])).toThrow(/twice/);
    expect(() => preTokenizerPattern('stated-values', [''])).toThrow(BpeError);
    expect(() => preTokenizerPattern('long-numbers', ['x'])).toThrow(/takes no lexicon/);
  });

  it('on the mini world, a stated reason, product or option is the same tokens in the request and in the calls and records after it; with the same vocabulary cut by long-numbers (the previous bundled tokenizer) it mostly is not', () => {
    const d = loadWorldDomain('mini');
    const defs = d.definitions() as unknown as ToolDefinition[];
    const texts = expertRows(d, { split: 'train', tasks: 40, seed: 3, mistakeRate: 0 }).rows.map((r) => rowToExample(r, d.policy, defs)).flatMap((e) => [e.prompt, e.response]);
    const stated = trainBpe(texts, { vocabSize: 1200, specials: SPECIAL_STRINGS, preTokenizer: 'stated-values', lexicon: d.statedValues!() });
    // The bundled policy's tokenizer (its vocabulary re-cut with this world's lexicon), and the same vocabulary
    // and merges cut by long-numbers alone, as the previous bundled policy cut them.
    const bundled = fromTokenizerJson(JSON.parse(readFileSync('models/default/tokenizer.json', 'utf8')));
    expect(bundled.preTokenizer).toBe('stated-values');
    expect([...bundled.lexicon].sort()).toEqual([...d.statedValues!()].sort());
    const previous = new Bpe(bundled.tokens, bundled.merges, bundled.specials, { preTokenizer: 'long-numbers' });
    const contains = (a: number[], b: number[]) => a.some((_, i) => i + b.length <= a.length && b.every((x, j) => a[i + j] === x));
    const tasks = d.tasks.generate({ split: 'test', count: 200, seed: 9 }).filter((t) => t.family === 'cancel' || t.family === 'exchange' || t.family === 'modify_items');
    const share = (bpe: Bpe) => {
      let n = 0, ok = 0;
      for (const t of tasks) {
        const request = t.userMessages.join('\n');
        // What follows the request: the expert's calls and the records that came back, as rendered rows.
        const later = rowsFromEpisode(t, d.expert(t, d.createEnv()).steps).map((r) => r.target).join('\n');
        for (const v of d.statedValues!()) {
          if (v.length < 3 || !new RegExp(`(?<![A-Za-z0-9])${v.replace(/[.*+?^${}()[\]/]/g, '\\$&')}(?![A-Za-z0-9])`).test(request) || !later.includes(v)) continue;
          n++;
          if (contains(bpe.encode(request), bpe.encode(v)) && contains(bpe.encode(later), bpe.encode(v))) ok++;
        }
      }
      return { n, ok };
    };
    const a = share(stated), b = share(bundled), c = share(previous);
    expect(a.n).toBeGreaterThan(40);
    expect(a.ok).toBe(a.n);
    expect(b.ok).toBe(b.n);
    expect(c.ok / c.n).toBeLessThan(0.5);
  });
});

describe('copyable values on held-out users of the full retail world', () => {
  // What the pre-tokenizer is for: a value a call copies (email, name, zip, order or user id, payment id) must
  // be the same token string in the prompt that shows it and in the call that repeats it.
  const d = retailDomain(loadRetailBase());
  const defs = d.definitions() as unknown as ToolDefinition[];
  const rows = (split: 'train' | 'test', n: number, seed: number) => expertRows(d, { split, tasks: n, seed, mistakeRate: 0 }).rows.map((r) => rowToExample(r, d.policy, defs));
  const train = rows('train', 12, 3).flatMap((e) => [e.prompt, e.response]);
  const calls = rows('test', 20, 5).filter((e) => e.role === 'act' && e.response.includes('<tool_call>'));
  const contains = (a: number[], b: number[]) => a.some((_, i) => i + b.length <= a.length && b.every((x, j) => a[i + j] === x));
  const copyable = (bpe: Bpe) => {
    let n = 0, ok = 0;
    for (const e of calls) {
      const args = (JSON.parse(e.response.split('<tool_call>')[1].split('</tool_call>')[0]) as { arguments: Record<string, unknown> }).arguments;
      const p = bpe.encode(e.prompt), r = bpe.encode(e.response);
      for (const v of Object.values(args).flat()) {
        if (typeof v !== 'string' || v.length < 3 || !e.prompt.includes(v)) continue;
        // The order number's '#' is scaffolding ('"#' and ' #' differ); its letter and digits are the value.
        const ids = bpe.encode(v.replace(/^#/, ''));
        n++;
        if (contains(p, ids) && contains(r, ids)) ok++;
      }
    }
    return { n, ok };
  };
  it('values: ≥ 95 % of copied argument values are token-identical in the prompt and the call; long-numbers far fewer', () => {
    const values = copyable(trainBpe(train, { vocabSize: 1500, specials: SPECIAL_STRINGS, preTokenizer: 'values' }));
    const longNumbers = copyable(trainBpe(train, { vocabSize: 1500, specials: SPECIAL_STRINGS, preTokenizer: 'long-numbers' }));
    expect(values.n).toBeGreaterThan(40);
    expect(values.ok / values.n).toBeGreaterThanOrEqual(0.95);
    expect(longNumbers.ok / longNumbers.n).toBeLessThan(0.8);
  });
});

describe.each(PRE_TOKENIZER_NAMES)('BPE on the retail expert data, through transformers.js (pre-tokenizer %s)', (preTokenizer) => {
  let bpe: Bpe;
  let heldOut: string[];
  let tok: Tokenizer;
  beforeAll(async () => {
    const d = retailDomain(loadRetailBase());
    const defs = d.definitions() as unknown as ToolDefinition[];
    const ex = (split: 'train' | 'test', n: number) =>
      expertRows(d, { split, tasks: n, seed: 3, mistakeRate: 0.2 }).rows.map((r) => rowToExample(r, d.policy, defs));
    const train = ex('train', 6);
    bpe = trainBpe(train.flatMap((e) => [e.prompt, e.response]), { vocabSize: 700, specials: SPECIAL_STRINGS, preTokenizer, lexicon: preTokenizer === 'stated-values' ? d.statedValues!() : [] });
    heldOut = ex('test', 2).flatMap((e) => [e.prompt, e.response]);
    heldOut.push('digits ٣ ½ 0123456789 #W2378156 "12.50" unicode: café — 東京 🚀, "quotes" \\ and\ttabs\n<tool_call>\n{"name": "nope"}\n</tool_call>', '', ' ');
    const json = JSON.parse(JSON.stringify(toTokenizerJson(bpe)));
    tok = Tokenizer.fromJSON(json, toTokenizerConfig(bpe, await qwen3ChatTemplate(), 2048));
  }, 120_000);

  it('round-trips held-out text losslessly', () => {
    for (const t of heldOut) expect(bpe.decode(bpe.encode(t))).toBe(t);
  });

  it('transformers.js encodes held-out text to the same ids and decodes it back', () => {
    for (const t of heldOut) {
      const ids = bpe.encode(t);
      expect(tok.encode(t)).toEqual(ids);
      if (ids.length > 0) expect(tok.decode(ids)).toBe(t);
    }
    expect(tok.size).toBe(bpe.size);
    expect(tok.stopIds).toContain(bpe.tokenId('<|im_end|>'));
  });

  it('compresses the prompts (the constant tool block becomes few tokens)', () => {
    const act = heldOut[0];
    // Isolating values costs some compression (the constant block's capitalised words stand alone).
    expect(bpe.encode(act).length).toBeLessThan(act.length / (preTokenizer === 'values' ? 5 : 6));
  });

  it('tokenizer.json reads back to the same BPE; the chat template is Qwen3\'s', async () => {
    const back = fromTokenizerJson(JSON.parse(JSON.stringify(toTokenizerJson(bpe))));
    expect(back.merges).toEqual(bpe.merges);
    expect(back.preTokenizer).toBe(preTokenizer);
    expect([...back.lexicon].sort()).toEqual([...bpe.lexicon].sort());
    expect(back.encode(heldOut[1])).toEqual(bpe.encode(heldOut[1]));
    const text = tok.chat([{ role: 'user', content: 'hi' }], { addGenerationPrompt: true, templateArgs: { enable_thinking: false } });
    expect(text).toBe('<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n');
  });
});
