// npm run serve -- --port P [--host H] [--world mini|retail] [--tasks train|test|FILE.json] [--count N]
//   [--task-seed S] [--ttl SECONDS] [--max-episodes N] [--max-turns N] [--max-body BYTES] [--log debug|info|warn|off]
// The environment, the world-rehearsal prompts and the rewards as a server (src/server/http.ts lists
// the routes): an MCP endpoint at /mcp?task=ID and a JSON API for trainers (integrations/verl/).
// Logs are JSON lines on stderr; SIGINT/SIGTERM shut it down gracefully. Exit 0 after a clean shutdown.
import { loadWorldDomain } from '../env/retail/node';
import { WORLD_NAMES } from '../env/retail/index';
import { DEFAULTS, jsonLogger, startServer } from '../server/http';
import { taskSet } from '../server/episodes';
import { loadTasks } from '../server/tasks';
import {
  ArgError, enumFlag, HELP_FLAG, helpText, intFlag, isEntry, parseFlags, processIo, runCli, strFlag, WORLD_FLAG, type CliIo, type FlagSpec,
} from './args';

export const SERVE_USAGE = `usage: npm run serve -- --port P [--host H] [--world mini|retail] [--tasks train|test|FILE.json]
  [--count N] [--task-seed S] [--ttl SECONDS] [--max-episodes N] [--max-turns N] [--max-body BYTES] [--log debug|info|warn|off]`;

export const SERVE_FLAGS: FlagSpec = {
  port: { type: 'string', arg: 'P', help: 'TCP port; 0: any free port (the log line "listening" says which) (required)' },
  host: { type: 'string', arg: 'H', help: 'address to bind (0.0.0.0 only on a trusted network: there is no auth)', default: DEFAULTS.host },
  world: WORLD_FLAG,
  tasks: { type: 'string', arg: 'T', help: 'train, test, or a task file', default: 'both generated splits' },
  count: { type: 'string', arg: 'N', help: 'tasks per generated split, 1..100000', default: '200' },
  'task-seed': { type: 'string', arg: 'S', help: 'generator seed (test uses seed + 1)', default: '0' },
  ttl: { type: 'string', arg: 'SECONDS', help: 'seconds an idle episode lives', default: String(DEFAULTS.ttlMs / 1000) },
  'max-episodes': { type: 'string', arg: 'N', help: 'live episodes at most', default: String(DEFAULTS.maxEpisodes) },
  'max-turns': { type: 'string', arg: 'N', help: 'calls per episode (the paper\'s turn limit)', default: String(DEFAULTS.maxTurns) },
  'max-body': { type: 'string', arg: 'BYTES', help: 'largest request body', default: String(DEFAULTS.maxBodyBytes) },
  log: { type: 'string', arg: 'L', help: 'log level of the JSON log lines on stderr: debug, info, warn or off', default: 'info' },
  help: HELP_FLAG,
};

const SERVE_NOTES = 'SIGINT/SIGTERM shut the server down gracefully. exit status: 0 after a clean shutdown, 1 failure, 2 usage error.';

/** Runs the server until `stop` resolves (default: SIGINT or SIGTERM). */
export async function serveMain(argv: readonly string[], io: CliIo = processIo, stop?: Promise<unknown>): Promise<number> {
  return runCli(io, SERVE_USAGE, async () => {
    const v = parseFlags(argv, SERVE_FLAGS);
    if (v.help) {
      io.out(helpText(SERVE_USAGE, SERVE_FLAGS, SERVE_NOTES));
      return;
    }
    if (v.port === undefined) throw new ArgError('--port is required');
    const port = intFlag(v, 'port', 0, 0, 65535);
    const world = enumFlag(v, 'world', WORLD_NAMES, 'mini');
    const level = enumFlag(v, 'log', ['debug', 'info', 'warn', 'off'] as const, 'info');
    const log = jsonLogger(level, io.err);
    const domain = loadWorldDomain(world);
    const tasks = await loadTasks(domain, { tasks: strFlag(v, 'tasks') ?? 'both', count: intFlag(v, 'count', 200, 1, 100_000), seed: intFlag(v, 'task-seed', 0, 0, 0xfffffff0) });
    const server = await startServer({
      domain, world, tasks: taskSet(tasks), port, host: strFlag(v, 'host', DEFAULTS.host), log,
      ttlMs: intFlag(v, 'ttl', DEFAULTS.ttlMs / 1000, 1, 7 * 86400) * 1000,
      maxEpisodes: intFlag(v, 'max-episodes', DEFAULTS.maxEpisodes, 1, 1_000_000),
      maxTurns: intFlag(v, 'max-turns', DEFAULTS.maxTurns, 1, 1000),
      maxBodyBytes: intFlag(v, 'max-body', DEFAULTS.maxBodyBytes, 1024, 1 << 30),
    });
    io.out(JSON.stringify({ url: server.url, mcp: `${server.url}/mcp?task=TASK_ID` }) + '\n');
    await (stop ?? new Promise((r) => {
      process.once('SIGINT', r);
      process.once('SIGTERM', r);
    }));
    await server.close();
  });
}

if (isEntry(import.meta.url)) serveMain(process.argv.slice(2)).then((code) => process.exit(code));
