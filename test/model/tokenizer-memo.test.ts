// Tokenizer.encode cuts text at special tokens and memoizes each segment's ids (a rollout re-encodes its
// whole conversation every turn). It must give exactly transformers.js's ids for the whole text: on the
// bundled policies' tokenizers (whose pre-tokenizers leave pieces of thousands of characters) and on the
// real Qwen3 tokenizer, for real prompts encoded again and again, and for special tokens at every edge.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PreTrainedTokenizer } from '@huggingface/transformers';
import { describe, expect, it } from 'vitest';
import { loadWorldDomain } from '../../src/env/retail/node';
import { DirSource } from '../../src/model/source-node';
import { Tokenizer } from '../../src/model/tokenizer';
import { expertRows, rowToExample } from '../../research/pretrain/data';
import type { ToolDefinition } from '../../src/rollout/chat';
import { QWEN3_TOKENIZER_DIR } from '../fixtures/tiny-model';

const direct = (dir: string) => {
  const json = JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8'));
  const config = JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8'));
  const t = new PreTrainedTokenizer(json, config);
  return (text: string) => t.encode(text, { add_special_tokens: false });
};

function texts(world: 'mini' | 'retail'): string[] {
  const d = loadWorldDomain(world);
  const defs = d.definitions() as unknown as ToolDefinition[];
  const ex = expertRows(d, { split: 'test', tasks: 12, seed: 5, mistakeRate: 0.2 }).rows.map((r) => rowToExample(r, d.policy, defs));
  return ex.flatMap((e) => [e.prompt, e.prompt + e.response]);
}

const EDGES = [
  '',
  '<|im_start|>',
  '<|im_start|><|im_end|>',
  'x<|im_end|>',
  '<|im_end|>\n<|im_start|>user\nOrder #W5673917, item 1234567890 and 12<|im_end|>3456<|im_end|>',
  '<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n{"name": "get_order_details", "arguments": {"order_id": "#W5673917"}}\n</tool_call><|im_end|>',
  '<|im_start|>user\n' + 'I ordered by mistake the Bluetooth Speaker, 42 pieces. '.repeat(20) + '<|im_end|>',
];

describe('Tokenizer.encode memo', () => {
  for (const [name, dir, world] of [
    ['the bundled mini policy (stated-values)', 'models/default', 'mini'],
    ['the bundled retail policy (values)', 'models/retail', 'retail'],
    ['the real Qwen3 tokenizer', QWEN3_TOKENIZER_DIR, 'mini'],
  ] as const) {
    it(`equals transformers.js on whole texts: ${name}`, async () => {
      const tok = await Tokenizer.load(new DirSource(dir));
      const want = direct(dir);
      const all = [...EDGES, ...texts(world)];
      // Twice over: the second pass is served from the memo.
      for (let pass = 0; pass < 2; pass++) for (const t of all) expect(tok.encode(t), t.slice(0, 80)).toEqual(want(t));
    });
  }

  it('a caller changing the returned ids does not change the next encode', async () => {
    const tok = await Tokenizer.load(new DirSource('models/default'));
    const t = EDGES[6];
    const a = tok.encode(t);
    const copy = [...a];
    a.fill(0);
    expect(tok.encode(t)).toEqual(copy);
  });
});
