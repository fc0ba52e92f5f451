// An OpenAI-compatible endpoint over a lab model (issue 47, item 4), so that external harnesses (τ²-bench
// through litellm, any `openai` client) can drive the lab's policies. node:http, no framework. Routes:
//   GET  /v1/models, /v1/models/ID     the one served model
//   POST /v1/chat/completions          chat with OpenAI tool calls, streamed (SSE) or not
// Errors are OpenAI's shape, {"error": {"message", "type", "param", "code"}}, with a 4xx/5xx status.
//
// The prompt is the lab's own Act prompt (src/rollout/chat.ts renderChat, Qwen3's template, thinking off as
// the lab's policies were trained): a conversation sent here renders byte for byte as the rollout loop
// renders it, so a model evaluated through the endpoint sees what it sees in the lab. Generation stops after
// one tool call, as an Act turn does. The completion is parsed with the rollout loop's parser
// (src/env/toolcall.ts): model output is untrusted, and a malformed call block is returned as the text the
// model wrote, never repaired into a call it did not make.
//
// Streaming sends the standard chunk sequence once the completion is ready: generate() has no per-token
// callback, so chunks arrive together at the end rather than token by token. Requests are served one at a
// time, in arrival order: one model on one backend.
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { z } from 'zod';
import { parse, safeJsonParse } from '../env/toolcall';
import type { FinishReason } from '../model/generate';
import { ACT_STOP } from '../rollout/act-prompt';
import { ApiError } from './episodes';
import { createGuard } from './guard';
import { renderChat, type ChatMessage } from '../rollout/chat';
import { USER_STOP_TOKENS } from '../env/domain';
import { DEFAULT_USER_TOKENS } from '../rollout/model-user';
import { fitUserPrompt, readUserText } from '../rollout/user-prompt';
import { scenarioInstructions, turnsOfUserView } from './lab-prompts';

/** What the endpoint needs of a model: text in, text out, token counts (src/server/openai-model.ts binds a lab model). */
export interface CompletionEngine {
  /** Tokens of the model's context (prompt plus completion). */
  contextLength: number;
  countTokens(text: string): number;
  complete(r: { prompt: string; maxTokens: number; temperature: number; topP: number; seed: number; stop: readonly string[] }): Promise<{ text: string; finishReason: FinishReason; stopIndex?: number; completionTokens: number }>;
}

export interface OpenAiServeOptions {
  engine: CompletionEngine;
  /** The id clients name in `model` (any other id is a 404, as OpenAI answers). */
  modelName: string;
  host?: string;
  /** Host names clients may use besides the loopback ones, and the bearer token (src/server/guard.ts, as the environment server). */
  allowedHosts?: readonly string[];
  token?: string;
  port?: number;
  /** Completion tokens when the request names none (capped by what the context leaves). */
  defaultMaxTokens?: number;
  maxBodyBytes?: number;
  /** Qwen3's thinking switch; default false (the lab's policies answer directly). */
  enableThinking?: boolean;
  /**
   * Lab prompts for the agent (`--prompt lab`, src/server/lab-prompts.ts): the client's system messages give
   * way to `system` and its tool definitions to `tools`, as the rollout loop's Act prompt has them.
   */
  actPrompt?: { system: string; tools: readonly object[] };
  /**
   * A second model id served as the user role (issue 47): a request naming it renders with the model user's
   * prompt (src/rollout/user-prompt.ts) from the scenario in its system message, generation stops at τ²'s stop
   * tokens (kept in the text: they are the turn's meaning), and no tool is offered. `engine` defaults to the
   * agent's; `maxTokens` (default DEFAULT_USER_TOKENS) is a turn's budget when the request names none.
   */
  userRole?: { modelName: string; engine?: CompletionEngine; maxTokens?: number };
  log?: (rec: Record<string, unknown>) => void;
}

export interface RunningOpenAiServer {
  url: string;
  server: Server;
  close(): Promise<void>;
}

const Text = z.union([z.string(), z.array(z.object({ type: z.literal('text'), text: z.string() }))]);
const ToolCallIn = z.object({ id: z.string().optional(), type: z.literal('function').optional(), function: z.object({ name: z.string().min(1).max(256), arguments: z.string() }) });
const Message = z.discriminatedUnion('role', [
  z.object({ role: z.enum(['system', 'developer']), content: Text }),
  z.object({ role: z.literal('user'), content: Text }),
  z.object({ role: z.literal('assistant'), content: Text.nullish(), tool_calls: z.array(ToolCallIn).max(64).nullish() }),
  z.object({ role: z.literal('tool'), content: Text, tool_call_id: z.string().optional() }),
]);
const Request = z.object({
  model: z.string(),
  messages: z.array(Message).min(1).max(4096),
  tools: z.array(z.object({ type: z.literal('function'), function: z.object({ name: z.string().min(1).max(256), description: z.string().optional(), parameters: z.record(z.string(), z.unknown()).optional() }) })).max(256).optional(),
  tool_choice: z.union([z.enum(['auto', 'none']), z.unknown()]).optional(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  max_tokens: z.number().int().min(1).nullish(),
  max_completion_tokens: z.number().int().min(1).nullish(),
  n: z.number().int().nullish(),
  seed: z.number().int().nullish(),
  stop: z.union([z.string(), z.array(z.string()).max(4)]).nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().optional() }).nullish(),
});
type Req = z.infer<typeof Request>;

class OpenAiError extends Error {
  constructor(readonly status: number, message: string, readonly type = 'invalid_request_error', readonly code: string | null = null, readonly param: string | null = null) {
    super(message);
  }
}

const text = (c: z.infer<typeof Text> | null | undefined): string => (c == null ? '' : typeof c === 'string' ? c : c.map((p) => p.text).join(''));

/** The request's conversation as the lab's chat messages (developer is OpenAI's newer name for system). */
export function toChatMessages(messages: Req['messages']): ChatMessage[] {
  return messages.map((m): ChatMessage => {
    if (m.role === 'system' || m.role === 'developer') return { role: 'system', content: text(m.content) };
    if (m.role === 'user') return { role: 'user', content: text(m.content) };
    if (m.role === 'tool') return { role: 'tool', content: text(m.content) };
    if (m.role !== 'assistant') return { role: 'system', content: text(m.content) };
    const toolCalls = (m.tool_calls ?? []).map((c) => {
      // Arguments arrive as a JSON string; an object renders as the template's tojson does, anything else verbatim.
      const a = safeJsonParse(c.function.arguments);
      const args = a.ok && a.value !== null && typeof a.value === 'object' && !Array.isArray(a.value) ? (a.value as Record<string, unknown>) : c.function.arguments;
      return { name: c.function.name, arguments: args };
    });
    return { role: 'assistant', content: text(m.content), ...(toolCalls.length ? { toolCalls } : {}) };
  });
}

const id = (prefix: string) => `${prefix}${randomBytes(12).toString('hex')}`;

/** The assistant message of a completion: its tool calls when every call block parses, else the text as written. */
export function toAssistantMessage(completion: string, finish: FinishReason): { content: string | null; tool_calls?: { id: string; type: 'function'; function: { name: string; arguments: string } }[]; finish_reason: 'stop' | 'length' | 'tool_calls' } {
  const p = parse(completion);
  const calls = p.parts.flatMap((x) => (x.kind === 'call' ? [x.call] : []));
  if (calls.length === 0 || p.parts.some((x) => x.kind === 'error')) return { content: completion, finish_reason: finish === 'length' ? 'length' : 'stop' };
  return {
    content: p.reply === '' ? null : p.reply,
    tool_calls: calls.map((c) => ({ id: id('call_'), type: 'function' as const, function: { name: c.name, arguments: JSON.stringify(c.arguments) } })),
    finish_reason: 'tool_calls',
  };
}

export async function startOpenAiServer(o: OpenAiServeOptions): Promise<RunningOpenAiServer> {
  const log = o.log ?? (() => {});
  const maxBody = o.maxBodyBytes ?? 4 << 20;
  // The same Host, Origin, JSON and token checks as the environment server: a rebinding page must not drive the model.
  const guard = createGuard({ bind: o.host ?? '127.0.0.1', allowedHosts: o.allowedHosts, token: o.token });
  let queue: Promise<unknown> = Promise.resolve();
  const modelObject = (name = o.modelName) => ({ id: name, object: 'model', created: 0, owned_by: 'envace-lab' });
  const names = [o.modelName, ...(o.userRole ? [o.userRole.modelName] : [])];

  async function completions(body: unknown, res: ServerResponse): Promise<void> {
    const r = Request.safeParse(body);
    if (!r.success) {
      const issue = r.error.issues[0];
      throw new OpenAiError(400, `invalid request: ${issue.path.join('.') || 'body'}: ${issue.message}`, 'invalid_request_error', null, issue.path.join('.') || null);
    }
    const q = r.data;
    const asUser = o.userRole !== undefined && q.model === o.userRole.modelName;
    if (!asUser && q.model !== o.modelName) throw new OpenAiError(404, `The model \`${q.model}\` does not exist; this server serves ${names.map((n) => `\`${n}\``).join(', ')}`, 'invalid_request_error', 'model_not_found', 'model');
    if (q.n != null && q.n !== 1) throw new OpenAiError(400, 'only n = 1 is supported', 'invalid_request_error', null, 'n');
    const choice = q.tool_choice ?? 'auto';
    if (choice !== 'auto' && choice !== 'none') throw new OpenAiError(400, 'tool_choice must be "auto" or "none" (the model cannot be forced to call a tool)', 'invalid_request_error', null, 'tool_choice');
    const engine = asUser ? (o.userRole!.engine ?? o.engine) : o.engine;
    const asked = q.max_completion_tokens ?? q.max_tokens ?? null;
    const clientStops = (q.stop == null ? [] : typeof q.stop === 'string' ? [q.stop] : q.stop).filter((s) => s !== '');
    let prompt: string;
    let maxTokens: number;
    let stops: string[];
    if (asUser) {
      // The model user's own prompt, fitted as it fits it locally (model-user.ts): the budget stays free.
      const messages = toChatMessages(q.messages);
      const system = messages.filter((m) => m.role === 'system').map((m) => m.content).join('\n\n');
      maxTokens = asked ?? o.userRole!.maxTokens ?? DEFAULT_USER_TOKENS;
      const fitted = fitUserPrompt(scenarioInstructions(system), turnsOfUserView(messages), (t) => engine.countTokens(t) + maxTokens <= engine.contextLength);
      if (!fitted) throw new OpenAiError(400, `the user prompt does not fit this model's context (${engine.contextLength} tokens with ${maxTokens} to write)`, 'invalid_request_error', 'context_length_exceeded', 'messages');
      prompt = fitted.text;
      stops = [...USER_STOP_TOKENS, ...clientStops];
    } else {
      // The client's tool definitions render as sent (key order included), not as re-serialised by validation.
      const rawTools = (body as { tools?: unknown[] }).tools ?? [];
      const lab = o.actPrompt;
      const chat = toChatMessages(q.messages);
      const messages = lab ? [{ role: 'system' as const, content: lab.system }, ...chat.filter((m) => m.role !== 'system')] : chat;
      const tools = choice === 'none' ? [] : lab ? (lab.tools as object[]) : (rawTools as object[]);
      prompt = renderChat(messages, { tools, addGenerationPrompt: true, enableThinking: o.enableThinking ?? false });
      const room = engine.contextLength - engine.countTokens(prompt);
      if (room < 1) throw new OpenAiError(400, `the prompt is ${engine.countTokens(prompt)} tokens; this model's context is ${engine.contextLength}`, 'invalid_request_error', 'context_length_exceeded', 'messages');
      if (asked !== null && asked > room) throw new OpenAiError(400, `prompt (${engine.countTokens(prompt)}) plus max_tokens (${asked}) exceeds this model's context (${engine.contextLength})`, 'invalid_request_error', 'context_length_exceeded', 'max_tokens');
      maxTokens = asked ?? Math.min(o.defaultMaxTokens ?? 1024, room);
      stops = [ACT_STOP, ...clientStops];
    }
    const promptTokens = engine.countTokens(prompt);
    const temperature = q.temperature ?? 1;
    const seed = q.seed ?? randomBytes(4).readUInt32LE(0);
    const g = await engine.complete({ prompt, maxTokens, temperature, topP: q.top_p ?? 1, seed: seed >>> 0, stop: stops });
    if (asUser) {
      // generate() cuts the text before a stop string; τ²'s stop token is what the turn means, so it goes back.
      const userStop = g.finishReason === 'stop' && g.stopIndex !== undefined && g.stopIndex < USER_STOP_TOKENS.length;
      const text = readUserText(userStop ? g.text + USER_STOP_TOKENS[g.stopIndex!] : g.text).text;
      return reply(q, res, { content: text, finish_reason: g.finishReason === 'length' ? 'length' : 'stop' }, promptTokens, g.completionTokens, o.userRole!.modelName);
    }
    const completion = g.finishReason === 'stop' && g.stopIndex === 0 ? g.text + ACT_STOP : g.text;
    return reply(q, res, toAssistantMessage(completion, g.finishReason), promptTokens, g.completionTokens, o.modelName);
  }

  function reply(q: Req, res: ServerResponse, msg: ReturnType<typeof toAssistantMessage>, promptTokens: number, completionTokens: number, model: string): void {
    const usage = { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
    const head = { id: id('chatcmpl-'), created: Math.floor(Date.now() / 1000), model, system_fingerprint: null };
    log({ event: 'completion', model, promptTokens, completionTokens, finish: msg.finish_reason, stream: q.stream === true });
    if (!q.stream) {
      const message = { role: 'assistant', content: msg.content, refusal: null, ...(msg.tool_calls ? { tool_calls: msg.tool_calls } : {}) };
      return send(res, 200, { ...head, object: 'chat.completion', choices: [{ index: 0, message, logprobs: null, finish_reason: msg.finish_reason }], usage });
    }
    const chunk = (delta: object, finish: string | null) => ({ ...head, object: 'chat.completion.chunk', choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] });
    const events: object[] = [chunk({ role: 'assistant', content: '' }, null)];
    // Content in pieces and each call's arguments after its header: what a client must reassemble in any stream.
    for (const piece of (msg.content ?? '').match(/[\s\S]{1,24}/g) ?? []) events.push(chunk({ content: piece }, null));
    (msg.tool_calls ?? []).forEach((c, index) => {
      events.push(chunk({ tool_calls: [{ index, id: c.id, type: 'function', function: { name: c.function.name, arguments: '' } }] }, null));
      events.push(chunk({ tool_calls: [{ index, function: { arguments: c.function.arguments } }] }, null));
    });
    events.push(chunk({}, msg.finish_reason));
    if (q.stream_options?.include_usage) events.push({ ...head, object: 'chat.completion.chunk', choices: [], usage });
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    for (const e of events) res.write(`data: ${JSON.stringify(e)}\n\n`);
    res.end('data: [DONE]\n\n');
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      guard.check(req, req.method === 'POST');
    } catch (e) {
      if (e instanceof ApiError) throw new OpenAiError(e.status, e.message, 'invalid_request_error', e.code);
      throw e;
    }
    const url = new URL(req.url ?? '/', 'http://localhost');
    const path = url.pathname.replace(/\/+$/, '');
    if (req.method === 'GET' && path === '/v1/models') return send(res, 200, { object: 'list', data: names.map((n) => modelObject(n)) });
    if (req.method === 'GET' && path.startsWith('/v1/models/')) {
      const name = decodeURIComponent(path.slice('/v1/models/'.length));
      if (!names.includes(name)) throw new OpenAiError(404, 'no such model', 'invalid_request_error', 'model_not_found');
      return send(res, 200, modelObject(name));
    }
    if (path !== '/v1/chat/completions') throw new OpenAiError(404, `no route ${req.method} ${path}`, 'invalid_request_error', 'not_found');
    if (req.method !== 'POST') throw new OpenAiError(405, 'use POST', 'invalid_request_error', 'method_not_allowed');
    const raw = await readBody(req, maxBody);
    const j = safeJsonParse(raw, maxBody);
    if (!j.ok) throw new OpenAiError(400, `the body is not usable JSON: ${j.error}`);
    // One generation at a time, in arrival order; a client gone while it waited costs nothing.
    const turn = queue.then(async () => {
      if (res.destroyed) return;
      await completions(j.value, res);
    });
    queue = turn.catch(() => {});
    return turn;
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((e: unknown) => {
      const err = e instanceof OpenAiError ? e : new OpenAiError(500, 'internal error', 'server_error', 'internal_error');
      if (!(e instanceof OpenAiError)) log({ event: 'error', error: String((e as Error)?.stack ?? e) });
      if (res.headersSent) return void res.end();
      send(res, err.status, { error: { message: err.message, type: err.type, param: err.param, code: err.code } });
    });
  });
  await new Promise<void>((ok, fail) => {
    server.once('error', fail);
    server.listen(o.port ?? 0, o.host ?? '127.0.0.1', () => ok());
  });
  const addr = server.address() as AddressInfo;
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return {
    url: `http://${host}:${addr.port}`,
    server,
    close: () => new Promise<void>((ok) => {
      server.closeAllConnections();
      server.close(() => ok());
    }),
  };
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const s = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(s) });
  res.end(s);
}

function readBody(req: IncomingMessage, max: number): Promise<string> {
  return new Promise((ok, fail) => {
    const chunks: Buffer[] = [];
    let n = 0;
    // Past the limit the rest is read and dropped, so the 413 still reaches the client.
    req.on('data', (c: Buffer) => {
      n += c.length;
      if (n <= max) chunks.push(c);
    });
    req.on('end', () => (n > max ? fail(new OpenAiError(413, `the body exceeds ${max} bytes`, 'invalid_request_error', 'request_too_large')) : ok(Buffer.concat(chunks).toString('utf8'))));
    req.on('error', fail);
  });
}
