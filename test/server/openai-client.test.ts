// The official `openai` npm client against `npm run serve -- --openai`'s server with the bundled mini policy
// (real weights, real tokenizer, real HTTP): a chat with tools, not streamed and streamed, comes back as an
// OpenAI tool call the client parses, and the streamed and the whole answers agree.
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openBackend, openModel } from '../../src/cli/args';
import type { Backend } from '../../src/engine/backend';
import { loadWorldDomain } from '../../src/env/retail/node';
import { startOpenAiServer, type RunningOpenAiServer } from '../../src/server/openai';
import { modelEngine } from '../../src/server/openai-model';

const mini = loadWorldDomain('mini');
const tools = JSON.parse(JSON.stringify(mini.definitions())) as OpenAI.Chat.Completions.ChatCompletionTool[];
// A held-out mini task's opening: the bundled policy identifies the user by email first.
const task = mini.tasks.generate({ split: 'test', count: 40, seed: 1 }).find((t) => /@/.test(t.userMessages[0]) && t.referenceActions[0]?.name === 'find_user_id_by_email')!;

let backend: Backend;
let srv: RunningOpenAiServer;
let client: OpenAI;
beforeAll(async () => {
  backend = await openBackend('cpu-fast', 1);
  const policy = await openModel(undefined, backend, { world: 'mini' });
  srv = await startOpenAiServer({ engine: modelEngine({ model: policy.model, tokenizer: policy.tokenizer, adapter: null }), modelName: 'envace-mini' });
  client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'unused-on-loopback', maxRetries: 0 });
}, 120_000);
afterAll(async () => {
  await srv?.close();
  backend?.dispose();
});

describe('the official openai client', () => {
  it('lists the model and gets a tool call, whole and streamed', async () => {
    expect(task, 'a held-out task that opens with an email').toBeDefined();
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual(['envace-mini']);
    const ask = { model: 'envace-mini', messages: [{ role: 'user' as const, content: task.userMessages[0] }], tools, temperature: 0, max_tokens: 96 };
    const whole = await client.chat.completions.create(ask);
    const call = whole.choices[0].message.tool_calls?.[0];
    expect(whole.choices[0].finish_reason).toBe('tool_calls');
    expect(call?.type).toBe('function');
    const want = task.referenceActions[0];
    expect(call && 'function' in call ? call.function.name : null).toBe(want.name);
    expect(JSON.parse(call && 'function' in call ? call.function.arguments : '{}')).toEqual(want.arguments);

    const stream = await client.chat.completions.create({ ...ask, stream: true });
    let name = '';
    let args = '';
    let finish: string | null = null;
    for await (const chunk of stream) {
      for (const c of chunk.choices) {
        for (const t of c.delta.tool_calls ?? []) {
          name += t.function?.name ?? '';
          args += t.function?.arguments ?? '';
        }
        finish = c.finish_reason ?? finish;
      }
    }
    expect(finish).toBe('tool_calls');
    expect(name).toBe(want.name);
    expect(JSON.parse(args)).toEqual(want.arguments);
  }, 120_000);

  it('surfaces the server refusing a request as the client\'s typed error', async () => {
    await expect(client.chat.completions.create({ model: 'envace-mini', messages: [] })).rejects.toBeInstanceOf(OpenAI.BadRequestError);
  });
});
