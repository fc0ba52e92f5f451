// node --import tsx src/cli/serve-openai.ts --port P [--world mini|retail] [--model DIR] [--adapter DIR] [--name ID]
//   [--prompt client|lab] [--user-name ID]
// A lab model as an OpenAI-compatible endpoint (src/server/openai.ts): POST /v1/chat/completions with tool
// calls, streamed or not, and GET /v1/models. Prints {"url", "model"} on stdout once listening; SIGINT/SIGTERM
// stop it. `npm run serve -- --openai` is meant to reach this (see serveOpenAiMain).
import { allowedHostsOf, AUTH_FLAGS, tokenOf } from './serve-auth';
import { resolve } from 'node:path';
import { WORLD_NAMES } from '../env/retail/index';
import { loadWorldDomain } from '../env/retail/node';
import { DEFAULT_USER_TOKENS } from '../rollout/model-user';
import { loadAdapters } from '../rl/checkpoint';
import { DirStore } from '../rl/store-node';
import { modelEngine } from '../server/openai-model';
import { startOpenAiServer } from '../server/openai';
import {
  ArgError, BACKEND_FLAG, BACKEND_NAMES, enumFlag, HELP_FLAG, helpText, intFlag, isEntry, openBackend, openModel, parseFlags, processIo, runCli, strFlag, THREADS_FLAG, threadsFlag, WORLD_FLAG, type CliIo, type FlagSpec,
} from './args';

export const SERVE_OPENAI_USAGE = 'usage: node --import tsx src/cli/serve-openai.ts --port P [--host H] [--world mini|retail] [--model DIR] [--adapter DIR] [--name ID] [--prompt client|lab] [--user-name ID] [flags]';

export const SERVE_OPENAI_FLAGS: FlagSpec = {
  port: { type: 'string', arg: 'P', help: 'TCP port; 0: any free port (the JSON line on stdout says which) (required)' },
  host: { type: 'string', arg: 'H', help: 'address to bind; a non-loopback address needs a token', default: '127.0.0.1' },
  ...AUTH_FLAGS,
  world: WORLD_FLAG,
  model: { type: 'string', arg: 'DIR', help: 'model folder (config.json, model.safetensors, tokenizer)', default: "the world's bundled policy" },
  adapter: { type: 'string', arg: 'DIR', help: 'a PEFT adapter folder or a training run folder (its last checkpoint\'s Act adapter)', default: 'none: the base policy' },
  name: { type: 'string', arg: 'ID', help: 'the model id clients send in "model"', default: 'envace-WORLD' },
  prompt: { type: 'string', arg: 'P', help: 'client: render the conversation with the system prompt and tools the client sends; lab: with the world\'s own policy and tools (the rollout loop\'s Act prompt), and the user role (--user-name) with the model user\'s prompt (for harnesses such as τ²-bench whose prompts a small model cannot read)', default: 'client' },
  'user-name': { type: 'string', arg: 'ID', help: 'also serve the same model as the user role under this id: the model user\'s prompt from the scenario in the request\'s system message (τ²\'s <scenario> block), stopping at τ²\'s stop tokens', default: 'none' },
  'max-user-tokens': { type: 'string', arg: 'N', help: 'with --user-name: completion tokens of a user turn when a request names none, 1..4096', default: String(DEFAULT_USER_TOKENS) },
  'max-tokens': { type: 'string', arg: 'N', help: 'completion tokens when a request names none, 1..65536', default: '1024' },
  backend: BACKEND_FLAG,
  threads: THREADS_FLAG,
  help: HELP_FLAG,
};

/** Serves until `stop` resolves (default: SIGINT or SIGTERM). */
export async function serveOpenAiMain(argv: readonly string[], io: CliIo = processIo, stop?: Promise<unknown>): Promise<number> {
  return runCli(io, SERVE_OPENAI_USAGE, async () => {
    const v = parseFlags(argv, SERVE_OPENAI_FLAGS);
    if (v.help) {
      io.out(helpText(SERVE_OPENAI_USAGE, SERVE_OPENAI_FLAGS, 'exit status: 0 after a clean shutdown, 1 failure, 2 usage error.'));
      return;
    }
    if (v.port === undefined) throw new ArgError('--port is required');
    const port = intFlag(v, 'port', 0, 0, 65535);
    const world = enumFlag(v, 'world', WORLD_NAMES, 'mini');
    const name = strFlag(v, 'name', `envace-${world}`)!;
    const maxTokens = intFlag(v, 'max-tokens', 1024, 1, 65536);
    const promptMode = enumFlag(v, 'prompt', ['client', 'lab'] as const, 'client');
    const userName = strFlag(v, 'user-name');
    if (userName !== undefined && userName === name) throw new ArgError('--user-name must differ from --name');
    if (v['max-user-tokens'] !== undefined && userName === undefined) throw new ArgError('--max-user-tokens needs --user-name');
    const maxUserTokens = intFlag(v, 'max-user-tokens', DEFAULT_USER_TOKENS, 1, 4096);
    const domain = promptMode === 'lab' ? loadWorldDomain(world) : null;
    const backend = await openBackend(enumFlag(v, 'backend', BACKEND_NAMES, 'cpu-fast'), threadsFlag(v));
    try {
      const policy = await openModel(strFlag(v, 'model'), backend, { world });
      const adapterDir = strFlag(v, 'adapter');
      const adapters = adapterDir ? await loadAdapters(new DirStore(adapterDir), backend, policy.model.config) : null;
      try {
        const server = await startOpenAiServer({
          engine: modelEngine({ model: policy.model, tokenizer: policy.tokenizer, adapter: adapters?.act ?? null }),
          modelName: name, host: strFlag(v, 'host', '127.0.0.1'), port, defaultMaxTokens: maxTokens, allowedHosts: allowedHostsOf(v), token: tokenOf(v),
          ...(domain ? { actPrompt: { system: domain.policy, tools: domain.definitions() } } : {}),
          ...(userName !== undefined ? { userRole: { modelName: userName, maxTokens: maxUserTokens } } : {}),
          log: (rec) => io.err(JSON.stringify({ ts: new Date().toISOString(), ...rec }) + '\n'),
        });
        io.out(JSON.stringify({ url: `${server.url}/v1`, model: name, ...(userName !== undefined ? { userModel: userName } : {}), prompt: promptMode, weights: policy.dir, adapter: adapterDir ? resolve(adapterDir) : null }) + '\n');
        await (stop ?? new Promise((r) => {
          process.once('SIGINT', r);
          process.once('SIGTERM', r);
        }));
        await server.close();
      } finally {
        adapters?.act.free(backend);
        adapters?.rehearse?.free(backend);
        policy.model.free();
      }
    } finally {
      backend.dispose();
    }
  });
}

if (isEntry(import.meta.url)) process.exitCode = await serveOpenAiMain(process.argv.slice(2));
