// node --import tsx src/cli/serve-openai.ts --port P [--world mini|retail] [--model DIR] [--adapter DIR] [--name ID]
// A lab model as an OpenAI-compatible endpoint (src/server/openai.ts): POST /v1/chat/completions with tool
// calls, streamed or not, and GET /v1/models. Prints {"url", "model"} on stdout once listening; SIGINT/SIGTERM
// stop it. `npm run serve -- --openai` is meant to reach this (see serveOpenAiMain).
import { allowedHostsOf, AUTH_FLAGS, tokenOf } from './serve-auth';
import { resolve } from 'node:path';
import { WORLD_NAMES } from '../env/retail/index';
import { loadAdapters } from '../rl/checkpoint';
import { DirStore } from '../rl/store-node';
import { modelEngine } from '../server/openai-model';
import { startOpenAiServer } from '../server/openai';
import {
  ArgError, BACKEND_FLAG, BACKEND_NAMES, enumFlag, HELP_FLAG, helpText, intFlag, isEntry, openBackend, openModel, parseFlags, processIo, runCli, strFlag, THREADS_FLAG, threadsFlag, WORLD_FLAG, type CliIo, type FlagSpec,
} from './args';

export const SERVE_OPENAI_USAGE = 'usage: node --import tsx src/cli/serve-openai.ts --port P [--host H] [--world mini|retail] [--model DIR] [--adapter DIR] [--name ID] [flags]';

export const SERVE_OPENAI_FLAGS: FlagSpec = {
  port: { type: 'string', arg: 'P', help: 'TCP port; 0: any free port (the JSON line on stdout says which) (required)' },
  host: { type: 'string', arg: 'H', help: 'address to bind; a non-loopback address needs a token', default: '127.0.0.1' },
  ...AUTH_FLAGS,
  world: WORLD_FLAG,
  model: { type: 'string', arg: 'DIR', help: 'model folder (config.json, model.safetensors, tokenizer)', default: "the world's bundled policy" },
  adapter: { type: 'string', arg: 'DIR', help: 'a PEFT adapter folder or a training run folder (its last checkpoint\'s Act adapter)', default: 'none: the base policy' },
  name: { type: 'string', arg: 'ID', help: 'the model id clients send in "model"', default: 'envace-WORLD' },
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
    const backend = await openBackend(enumFlag(v, 'backend', BACKEND_NAMES, 'cpu-fast'), threadsFlag(v));
    try {
      const policy = await openModel(strFlag(v, 'model'), backend, { world });
      const adapterDir = strFlag(v, 'adapter');
      const adapters = adapterDir ? await loadAdapters(new DirStore(adapterDir), backend, policy.model.config) : null;
      try {
        const server = await startOpenAiServer({
          engine: modelEngine({ model: policy.model, tokenizer: policy.tokenizer, adapter: adapters?.act ?? null }),
          modelName: name, host: strFlag(v, 'host', '127.0.0.1'), port, defaultMaxTokens: maxTokens, allowedHosts: allowedHostsOf(v), token: tokenOf(v),
          log: (rec) => io.err(JSON.stringify({ ts: new Date().toISOString(), ...rec }) + '\n'),
        });
        io.out(JSON.stringify({ url: `${server.url}/v1`, model: name, weights: policy.dir, adapter: adapterDir ? resolve(adapterDir) : null }) + '\n');
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
