// The OpenAI-compatible endpoint (src/server/openai.ts) as a real HTTP server on loopback, driven by fetch the
// way the `openai` npm client drives it (that package is not installed here; the wire format is OpenAI's chat
// completions API). A scripted engine pins what the model "wrote", to test the mapping both ways: the prompt
// is byte for byte the lab's own Act prompt, a call block becomes an OpenAI tool call (and back), a malformed
// one stays text, a stream reassembles to the non-streamed message. The tiny random model and the CLI entry
// run end to end.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Backend } from '../../src/engine/backend';
import { loadWorldDomain } from '../../src/env/retail/node';
import { formatCall, serializeObservation } from '../../src/env/toolcall';
import type { FinishReason } from '../../src/model/generate';
import type { Qwen3Model } from '../../src/model/qwen3';
import type { Tokenizer } from '../../src/model/tokenizer';
import { ACT_STOP, buildActPrompt } from '../../src/rollout/act-prompt';
import { startOpenAiServer, type CompletionEngine, type RunningOpenAiServer } from '../../src/server/openai';
import { modelEngine } from '../../src/server/openai-model';
import { scenarioInstructions } from '../../src/server/lab-prompts';
import { AGENT_GREETING, type Turn } from '../../src/env/domain';
import { renderUserPrompt, userMessages } from '../../src/rollout/user-prompt';
import { SERVE_OPENAI_FLAGS, serveOpenAiMain } from '../../src/cli/serve-openai';
import { loadTinyPolicy, tinyConfig, writeTinyModel } from '../fixtures/tiny-model';
import { captureIo } from '../helpers/cli';

const mini = await loadWorldDomain('mini');
const tools = JSON.parse(JSON.stringify(mini.definitions())) as object[];
const find = { name: 'find_user_id_by_email', arguments: { email: 'mia.garcia@example.com' } };
const findObs = mini.createEnv().execute(find);

/** What generate() would return for a model that writes `text`: cut before the first stop string. */
function asGenerated(text: string, stops: readonly string[]): { text: string; finishReason: FinishReason; stopIndex?: number } {
  let best: { at: number; i: number } | null = null;
  stops.forEach((s, i) => {
    const at = text.indexOf(s);
    if (at >= 0 && (!best || at < best.at)) best = { at, i };
  });
  const b = best as { at: number; i: number } | null;
  return b ? { text: text.slice(0, b.at), finishReason: 'stop', stopIndex: b.i } : { text, finishReason: 'eos' };
}

const prompts: string[] = [];
let writes = '';
const scripted: CompletionEngine = {
  contextLength: 100_000,
  countTokens: (t) => t.length,
  async complete(r) {
    prompts.push(r.prompt);
    const g = asGenerated(writes, r.stop);
    return { ...g, completionTokens: Math.min(r.maxTokens, g.text.length) };
  },
};

let srv: RunningOpenAiServer;
beforeAll(async () => {
  srv = await startOpenAiServer({ engine: scripted, modelName: 'lab-test' });
});
afterAll(() => srv?.close());

async function post(body: unknown, url = `${srv.url}/v1/chat/completions`): Promise<{ status: number; json: any; text: string }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer unused' }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await res.text();
  let json: unknown = null;
  try {
    json = JSON.parse(text);
  } catch {
    json = null;
  }
  return { status: res.status, json, text };
}

/** Reassembles an SSE stream the way the openai client's ChatCompletionStream does. */
function reassemble(sse: string): { message: { content: string | null; tool_calls?: { id: string; type: string; function: { name: string; arguments: string } }[] }; finish: string | null; usage: unknown; done: boolean } {
  const events = sse.split('\n\n').filter((e) => e.startsWith('data: ')).map((e) => e.slice(6));
  const done = events[events.length - 1] === '[DONE]';
  let content: string | null = null;
  const calls: { id: string; type: string; function: { name: string; arguments: string } }[] = [];
  let finish: string | null = null;
  let usage: unknown = null;
  for (const e of events.filter((x) => x !== '[DONE]').map((x) => JSON.parse(x))) {
    expect(e.object).toBe('chat.completion.chunk');
    if (e.usage) usage = e.usage;
    for (const c of e.choices) {
      if (typeof c.delta.content === 'string') content = (content ?? '') + c.delta.content;
      for (const t of c.delta.tool_calls ?? []) {
        const slot = (calls[t.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } });
        if (t.id) slot.id = t.id;
        if (t.function?.name) slot.function.name += t.function.name;
        if (t.function?.arguments) slot.function.arguments += t.function.arguments;
      }
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { message: { content: content === '' ? null : content, ...(calls.length ? { tool_calls: calls } : {}) }, finish, usage, done };
}

const opening = 'Hi, I want to cancel an order. My email is mia.garcia@example.com.';
const base = { model: 'lab-test', tools, temperature: 0 };

describe('OpenAI-compatible endpoint (scripted engine, real HTTP)', () => {
  it('lists the served model', async () => {
    const r = await fetch(`${srv.url}/v1/models`);
    expect(await r.json()).toEqual({ object: 'list', data: [{ id: 'lab-test', object: 'model', created: 0, owned_by: 'envace-lab' }] });
    expect((await fetch(`${srv.url}/v1/models/lab-test`)).status).toBe(200);
    expect((await fetch(`${srv.url}/v1/models/other`)).status).toBe(404);
  });

  it("a call block becomes an OpenAI tool call; sent back with its result, the prompt is the lab's own Act prompt byte for byte", async () => {
    writes = formatCall(find) + '<|im_end|>';
    const messages = [{ role: 'system', content: mini.policy }, { role: 'user', content: opening }];
    const r1 = await post({ ...base, messages });
    expect(r1.status).toBe(200);
    expect(r1.json.object).toBe('chat.completion');
    const choice = r1.json.choices[0];
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.content).toBeNull();
    expect(choice.message.tool_calls).toHaveLength(1);
    const tc = choice.message.tool_calls[0];
    expect(tc.id).toMatch(/^call_[0-9a-f]{24}$/);
    expect(tc.function.name).toBe(find.name);
    expect(JSON.parse(tc.function.arguments)).toEqual(find.arguments);
    expect(prompts.at(-1)).toBe(buildActPrompt(mini.policy, mini.definitions(), [{ role: 'user', content: opening }]));
    expect(r1.json.usage).toEqual({ prompt_tokens: prompts.at(-1)!.length, completion_tokens: formatCall(find).length - ACT_STOP.length, total_tokens: prompts.at(-1)!.length + formatCall(find).length - ACT_STOP.length });

    writes = 'I found your account.';
    const r2 = await post({ ...base, messages: [...messages, choice.message, { role: 'tool', tool_call_id: tc.id, content: serializeObservation(findObs) }] });
    expect(r2.json.choices[0]).toMatchObject({ finish_reason: 'stop', message: { role: 'assistant', content: 'I found your account.' } });
    expect(r2.json.choices[0].message.tool_calls).toBeUndefined();
    const lab = [{ role: 'user' as const, content: opening }, { role: 'assistant' as const, content: formatCall(find) }, { role: 'tool' as const, content: serializeObservation(findObs) }];
    expect(prompts.at(-1)).toBe(buildActPrompt(mini.policy, mini.definitions(), lab));
  });

  it('a stream reassembles to the non-streamed message (tool call and long text), ends with [DONE], and carries usage when asked', async () => {
    for (const w of [formatCall(find), 'Your order #W2611340 is cancelled; the refund of $1,093.34 goes back to your card ending in 7712.']) {
      writes = w;
      const plain = await post({ ...base, messages: [{ role: 'user', content: opening }] });
      const streamed = await post({ ...base, messages: [{ role: 'user', content: opening }], stream: true, stream_options: { include_usage: true } });
      expect(streamed.status).toBe(200);
      const s = reassemble(streamed.text);
      expect(s.done).toBe(true);
      const m = plain.json.choices[0].message;
      expect(s.finish).toBe(plain.json.choices[0].finish_reason);
      expect(s.message.content).toEqual(m.content);
      expect(s.message.tool_calls?.map((c) => c.function)).toEqual(m.tool_calls?.map((c: { function: unknown }) => c.function));
      expect(s.usage).toEqual(plain.json.usage);
      // Text arrives in several pieces (the role chunk's empty content is one more).
      if (m.content) expect(streamed.text.split('"content":').length - 1).toBe(1 + Math.ceil(m.content.length / 24));
    }
  });

  it('model output is untrusted: a malformed call block is returned as the text written, never as a call', async () => {
    for (const w of ['<tool_call>\n{"name": "cancel_pending_order", "arguments": {"order_id": \n</tool_call>', '<tool_call>\n{"name": 7}\n</tool_call>', 'Sure. <tool_call>{"name": "x"']) {
      writes = w;
      const r = await post({ ...base, messages: [{ role: 'user', content: opening }] });
      expect(r.status).toBe(200);
      expect(r.json.choices[0].message.tool_calls).toBeUndefined();
      expect(r.json.choices[0].finish_reason).toBe('stop');
      expect(r.json.choices[0].message.content).toBe(asGenerated(w, [ACT_STOP]).text + (w.includes(ACT_STOP) ? ACT_STOP : ''));
    }
  });

  it("tool_choice none renders no tools; the client's stop strings stop the completion", async () => {
    writes = 'One. STOPHERE Two.';
    const r = await post({ ...base, tool_choice: 'none', stop: ['STOPHERE'], messages: [{ role: 'user', content: opening }] });
    expect(r.json.choices[0].message.content).toBe('One. ');
    expect(prompts.at(-1)).not.toContain('<tools>');
  });

  it('answers malformed requests with OpenAI errors, never a crash', async () => {
    const cases: [unknown, number, RegExp][] = [
      ['{not json', 400, /not usable JSON/],
      [{ ...base, model: 'gpt-4o', messages: [{ role: 'user', content: 'x' }] }, 404, /does not exist/],
      [{ ...base, messages: [] }, 400, /messages/],
      [{ ...base, messages: [{ role: 'wizard', content: 'x' }] }, 400, /invalid request/],
      [{ ...base, n: 2, messages: [{ role: 'user', content: 'x' }] }, 400, /n = 1/],
      [{ ...base, tool_choice: 'required', messages: [{ role: 'user', content: 'x' }] }, 400, /tool_choice/],
      [{ ...base, max_tokens: 10_000_000, messages: [{ role: 'user', content: 'x' }] }, 400, /exceeds this model's context/],
      [{ ...base, temperature: 5, messages: [{ role: 'user', content: 'x' }] }, 400, /temperature/],
      [{ ...base, messages: [{ role: 'assistant', content: null, tool_calls: [{ id: 'a', type: 'function', function: { name: 'f', arguments: '{"a":' } }] }, { role: 'user', content: 'x' }] }, 200, /./],
    ];
    for (const [body, status, msg] of cases) {
      const r = await post(body);
      expect(r.status, JSON.stringify(body).slice(0, 80)).toBe(status);
      if (status !== 200) {
        expect(r.json.error.message).toMatch(msg);
        expect(typeof r.json.error.type).toBe('string');
      }
    }
    expect((await post({ ...base, messages: [{ role: 'user', content: 'x'.repeat(5 << 20) }] })).status).toBe(413);
    expect((await fetch(`${srv.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).status).toBe(404);
    // The environment server's guard (src/server/guard.ts): no text/plain POST (a cross-origin page's), no
    // foreign Host (a DNS-rebinding page's), no foreign Origin.
    expect((await fetch(`${srv.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: JSON.stringify(base) })).status).toBe(415);
    const { request } = await import('node:http');
    const status = (headers: Record<string, string>) =>
      new Promise<number>((ok, fail) => {
        const u = new URL(`${srv.url}/v1/models`);
        request({ host: u.hostname, port: u.port, path: u.pathname, headers }, (r) => (r.resume(), ok(r.statusCode!))).on('error', fail).end();
      });
    expect(await status({ host: 'rebind.attacker.example' })).toBe(403);
    expect(await status({ host: `127.0.0.1:${new URL(srv.url).port}`, origin: 'http://evil.example' })).toBe(403);
    expect(await status({ host: `127.0.0.1:${new URL(srv.url).port}` })).toBe(200);
    expect((await fetch(`${srv.url}/v1/chat/completions`)).status).toBe(405);
  });
});

describe('lab prompts and the user role (--prompt lab --user-name, as scripts/tau2-harness.sh serves τ²-bench)', () => {
  let lab: RunningOpenAiServer;
  beforeAll(async () => {
    lab = await startOpenAiServer({ engine: scripted, modelName: 'lab-act', actPrompt: { system: mini.policy, tools: mini.definitions() }, userRole: { modelName: 'lab-user', maxTokens: 64 } });
  });
  afterAll(() => lab?.close());
  const at = () => `${lab.url}/v1/chat/completions`;
  // τ²'s user-simulator system prompt: its guidelines, then the task's instructions as StructuredUserInstructions.__str__ writes them.
  const ins = { reasonForCall: 'You want to cancel order #W2611340.\nYou ordered it by mistake.', knownInfo: 'You are Mia Garcia, email mia.garcia@example.com.', unknownInfo: 'You do not remember your zip code.', taskInstructions: 'Say yes only to the cancellation.' };
  const tau2UserSystem = `# User Simulation Guidelines\nYou are playing the role of a customer...\n\n<scenario>\nDomain: retail\nReason for call:\n\tYou want to cancel order #W2611340.\n\tYou ordered it by mistake.\nKnown info:\n\t${ins.knownInfo}\nUnknown info:\n\t${ins.unknownInfo}\nTask instructions:\n\t${ins.taskInstructions}\n</scenario>`;

  it("reads τ²'s scenario block into the model user's instructions; free text is the reason for the call", () => {
    expect(scenarioInstructions(tau2UserSystem)).toEqual(ins);
    expect(scenarioInstructions('Just ask for a refund.')).toEqual({ reasonForCall: 'Just ask for a refund.', knownInfo: '', unknownInfo: '', taskInstructions: '' });
  });

  it("the agent's request renders with the world's policy and tools, whatever system prompt and tools the client sends", async () => {
    writes = 'How can I help?';
    const r = await post({ model: 'lab-act', tools: [{ type: 'function', function: { name: 'other', parameters: {} } }], messages: [{ role: 'system', content: '<instructions>τ² policy</instructions>' }, { role: 'assistant', content: AGENT_GREETING }, { role: 'user', content: opening }] }, at());
    expect(r.status).toBe(200);
    expect(prompts.at(-1)).toBe(buildActPrompt(mini.policy, mini.definitions(), [{ role: 'assistant', content: AGENT_GREETING }, { role: 'user', content: opening }]));
  });

  it("the user role's request renders as the model user's prompt, keeps the stop token it ended on, and is listed", async () => {
    const conversation: Turn[] = [{ kind: 'reply', text: AGENT_GREETING }, { kind: 'user', text: 'I want to cancel an order.' }, { kind: 'reply', text: 'Your email, please?' }];
    const flipped = [{ role: 'user', content: AGENT_GREETING }, { role: 'assistant', content: 'I want to cancel an order.' }, { role: 'user', content: 'Your email, please?' }];
    writes = 'mia.garcia@example.com';
    const r = await post({ model: 'lab-user', temperature: 0, messages: [{ role: 'system', content: tau2UserSystem }, ...flipped] }, at());
    expect(r.status).toBe(200);
    expect(r.json.model).toBe('lab-user');
    expect(r.json.choices[0].message).toMatchObject({ role: 'assistant', content: 'mia.garcia@example.com' });
    expect(prompts.at(-1)).toBe(renderUserPrompt(userMessages(ins, conversation)));
    writes = 'Thanks, that is all. ###STOP### and more';
    const s = await post({ model: 'lab-user', messages: [{ role: 'system', content: tau2UserSystem }, ...flipped] }, at());
    expect(s.json.choices[0].message.content).toBe('Thanks, that is all. ###STOP###');
    const models = await (await fetch(`${lab.url}/v1/models`)).json();
    expect(models.data.map((m: { id: string }) => m.id)).toEqual(['lab-act', 'lab-user']);
  });
});

describe('OpenAI-compatible endpoint over a real model', () => {
  let backend: Backend;
  let model: Qwen3Model;
  let tok: Tokenizer;
  let real: RunningOpenAiServer;
  beforeAll(async () => {
    ({ backend, model, tok } = await loadTinyPolicy(6));
    real = await startOpenAiServer({ engine: modelEngine({ model, tokenizer: tok, adapter: null }), modelName: 'tiny' });
  });
  afterAll(async () => {
    await real?.close();
    backend?.dispose();
  });

  it('greedy completions agree streamed and not; usage counts the prompt in model tokens; max_tokens bounds the completion', async () => {
    const body = { model: 'tiny', temperature: 0, max_tokens: 12, messages: [{ role: 'system', content: 'You are a retail agent.' }, { role: 'user', content: 'Hello' }] };
    const plain = await post(body, `${real.url}/v1/chat/completions`);
    expect(plain.status).toBe(200);
    const streamed = reassemble((await post({ ...body, stream: true }, `${real.url}/v1/chat/completions`)).text);
    expect(streamed.message.content).toEqual(plain.json.choices[0].message.content);
    expect(streamed.finish).toBe(plain.json.choices[0].finish_reason);
    const prompt = buildActPrompt('You are a retail agent.', [], [{ role: 'user', content: 'Hello' }]);
    expect(plain.json.usage.prompt_tokens).toBe(tok.encode(prompt).length);
    expect(plain.json.usage.completion_tokens).toBeLessThanOrEqual(12);
  });
});

describe('serve-openai entry', () => {
  it('--help lists every flag with its default; --port is required', async () => {
    const io = captureIo();
    expect(await serveOpenAiMain(['--help'], io)).toBe(0);
    for (const name of Object.keys(SERVE_OPENAI_FLAGS)) expect(io.stdout()).toMatch(new RegExp(`--${name}\\b`));
    const bad = captureIo();
    expect(await serveOpenAiMain([], bad)).toBe(2);
    expect(bad.stderr()).toMatch(/--port is required/);
  });

  it('loads a model folder, prints its URL, serves, and shuts down cleanly', async () => {
    const dir = await writeTinyModel(tinyConfig({ maxPositionEmbeddings: 2048 }), 4);
    const io = captureIo();
    let stop!: () => void;
    const stopped = new Promise<void>((r) => (stop = r));
    const run = serveOpenAiMain(['--port', '0', '--model', dir, '--name', 'tiny-cli', '--threads', '1'], io, stopped);
    for (let i = 0; i < 200 && !io.stdout().includes('\n'); i++) await new Promise((r) => setTimeout(r, 25));
    const { url, model } = JSON.parse(io.stdout());
    expect(model).toBe('tiny-cli');
    const r = await post({ model: 'tiny-cli', temperature: 0, max_tokens: 4, messages: [{ role: 'user', content: 'Hi' }] }, `${url}/chat/completions`);
    expect(r.status).toBe(200);
    expect(r.json.model).toBe('tiny-cli');
    stop();
    expect(await run).toBe(0);
  });
});
