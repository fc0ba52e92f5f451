// The user played by an OpenAI-compatible endpoint (src/rollout/endpoint-user.ts), tested against the lab's
// own `npm run serve -- --openai` server (real HTTP, a tiny random model) through the official `openai`
// client: the endpoint user writes exactly what the model user writes locally from the same conversation
// (the same messages render to the same prompt, greedy on both sides), the eval CLI's --user endpoint plays
// conversations through it, and an endpoint that is not there fails the user's turns, not the process.
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Backend } from '../../src/engine/backend';
import { runRetailExpertConversation } from '../../src/env/retail/expert-conversation';
import type { RetailTask } from '../../src/env/retail/intent';
import { loadWorldDomain } from '../../src/env/retail/node';
import { evalCli } from '../../src/cli/eval';
import type { Qwen3Model } from '../../src/model/qwen3';
import type { Tokenizer } from '../../src/model/tokenizer';
import { EndpointUsers, limiter } from '../../src/rollout/endpoint-user';
import { UserGenerator } from '../../src/rollout/model-user';
import { startOpenAiServer, type RunningOpenAiServer } from '../../src/server/openai';
import { modelEngine } from '../../src/server/openai-model';
import { loadTinyPolicy } from '../fixtures/tiny-model';
import { calculateOnlyDomain, captureIo, tinyModelWorkspace } from '../helpers/cli';
import { openBackend, openModel } from '../../src/cli/args';

const mini = loadWorldDomain('mini');
const tasks = mini.tasks.generate({ split: 'test', count: 3, seed: 1 }) as RetailTask[];
const MAX = 10;

let backend: Backend;
let model: Qwen3Model;
let tok: Tokenizer;
let srv: RunningOpenAiServer;
let client: OpenAI;
beforeAll(async () => {
  ({ backend, model, tok } = await loadTinyPolicy(7));
  srv = await startOpenAiServer({ engine: modelEngine({ model, tokenizer: tok, adapter: null }), modelName: 'tiny-user' });
  client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'unused-on-loopback', maxRetries: 0 });
}, 60_000);
afterAll(async () => {
  await srv?.close();
  backend?.dispose();
});

const endpointUsers = (c: OpenAI, model = 'tiny-user') =>
  new EndpointUsers({
    maxTokens: MAX,
    complete: async (r) => (await c.chat.completions.create({ model, messages: r.messages, max_tokens: r.maxTokens, temperature: r.temperature, seed: r.seed })).choices[0].message.content,
  });

describe('the user played by an endpoint', () => {
  it('writes, through the lab\'s server and the official client, what the model user writes locally', async () => {
    const local = new UserGenerator({ model, tokenizer: tok, adapter: null, maxTokens: MAX });
    const remote = endpointUsers(client);
    // The opening, and answers later in the conversation (each prompt is ~1,500 byte tokens for this model).
    const asks = tasks.map((t, i) => ({ t, prefix: runRetailExpertConversation(t, mini.createEnv(), { seed: 0 }).turns.slice(0, 2 * i) }));
    const ins = (t: RetailTask) => mini.userInstructions!(t)!;
    const a = await Promise.all(asks.map((x) => local.user(ins(x.t), 3).next(x.prefix)));
    const b = await Promise.all(asks.map((x) => remote.user(ins(x.t), 3).next(x.prefix)));
    expect(remote.stats).toEqual({ requests: asks.length, failures: 0 });
    expect(b).toEqual(a);
    expect(a.some((x) => x.kind === 'message')).toBe(true);
  }, 300_000);

  it('fails the turn, with the server\'s reason, when the endpoint refuses or is not there', async () => {
    const wrong = await endpointUsers(client, 'no-such-model').user(mini.userInstructions!(tasks[0])!, 0).next([]);
    expect(wrong).toMatchObject({ kind: 'error', error: expect.stringMatching(/the user endpoint failed: .*no-such-model/) });
    const gone = new OpenAI({ baseURL: 'http://127.0.0.1:9/v1', apiKey: 'x', maxRetries: 0 });
    expect(await endpointUsers(gone).user(mini.userInstructions!(tasks[0])!, 0).next([])).toMatchObject({ kind: 'error', error: expect.stringMatching(/the user endpoint failed/) });
  });

  it('runs at most n requests at once', async () => {
    const run = limiter(2);
    let live = 0;
    let most = 0;
    await Promise.all(Array.from({ length: 7 }, () => run(async () => {
      most = Math.max(most, ++live);
      await new Promise((r) => setTimeout(r, 5));
      live--;
    })));
    expect(most).toBe(2);
  });
});

describe('npm run eval -- --user endpoint', () => {
  const ws = tinyModelWorkspace('cli-endpoint-');
  let cliBackend: Backend;
  let served: RunningOpenAiServer;
  beforeAll(async () => {
    // The CLI's tiny model, served: the agent and the user are the same weights, one in-process, one over HTTP.
    cliBackend = await openBackend('cpu-fast', 1);
    const p = await openModel(ws.modelDir, cliBackend);
    served = await startOpenAiServer({ engine: modelEngine({ model: p.model, tokenizer: p.tokenizer, adapter: null }), modelName: 'tiny' });
  });
  afterAll(async () => {
    await served?.close();
    cliBackend?.dispose();
  });
  const small = ['--max-act-tokens', '4', '--max-rehearse-tokens', '4', '--max-user-tokens', '4', '--threads', '1', '--max-user-turns', '2', '--max-turns', '3'];

  it('plays conversations with the user behind a real OpenAI-compatible server', async () => {
    const io = captureIo();
    expect(await evalCli(['--tasks', 'test', '--count', '2', '--model', ws.modelDir, '--user', 'endpoint', '--user-url', `${served.url}/v1`, '--user-model', 'tiny', ...small], io, { domain: calculateOnlyDomain })).toBe(0);
    const out = JSON.parse(io.stdout());
    expect(out.user).toMatchObject({ kind: 'endpoint', model: 'tiny', failures: 0 });
    expect(out.user.requests).toBeGreaterThanOrEqual(2);
    expect(out.conversation).toMatchObject({ tasks: 2, user: 'endpoint' });
  }, 300_000);

  it('fails (exit 1) when every conversation lost its user: an endpoint that is not there', async () => {
    const io = captureIo();
    expect(await evalCli(['--tasks', 'test', '--count', '1', '--model', ws.modelDir, '--user', 'endpoint', '--user-url', 'http://127.0.0.1:9/v1', '--user-model', 'tiny', ...small], io, { domain: calculateOnlyDomain })).toBe(1);
    expect(io.stderr()).toMatch(/every conversation ended with a user error \(the first: the user endpoint failed/);
  }, 60_000);
});
