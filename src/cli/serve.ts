// npm run serve -- --port P [--host H] [--world mini|retail] [--tasks train|test|FILE.json] [--count N]
//   [--task-seed S] [--ttl SECONDS] [--max-episodes N] [--max-turns N] [--max-body BYTES] [--log debug|info|warn|off]
// The environment, the world-rehearsal prompts and the rewards as a server (issue 15; src/server/http.ts
// lists the routes): an MCP endpoint at /mcp?task=ID and a JSON API for trainers (integrations/verl/).
// Logs are JSON lines on stderr; SIGINT/SIGTERM shut it down gracefully. Exit 0 after a clean shutdown.
import { loadWorldDomain } from '../env/retail/node';
import { WORLD_NAMES } from '../env/retail/index';
import { DEFAULTS, jsonLogger, startServer } from '../server/http';
import { taskSet } from '../server/episodes';
import { loadTasks } from '../server/tasks';
import { ArgError, enumFlag, intFlag, isEntry, parseFlags, processIo, runCli, strFlag, type CliIo, type FlagSpec } from './args';

export const SERVE_USAGE = `usage: npm run serve -- --port P [--host H] [--world mini|retail] [--tasks train|test|FILE.json]
  [--count N] [--task-seed S] [--ttl SECONDS] [--max-episodes N] [--max-turns N] [--max-body BYTES] [--log debug|info|warn|off]
  --port       TCP port (0: any free port; the log line "listening" says which)
  --host       address to bind (default ${DEFAULTS.host}; bind 0.0.0.0 only on a trusted network: there is no auth)
  --world      mini (default) or retail
  --tasks      train, test, or a task file (default: both generated splits)
  --count      tasks per generated split (default 200); --task-seed: generator seed (default 0; test uses seed+1)
  --ttl        seconds an idle episode lives (default ${DEFAULTS.ttlMs / 1000}); --max-episodes: live cap (default ${DEFAULTS.maxEpisodes})
  --max-turns  calls per episode (default ${DEFAULTS.maxTurns}, the paper's turn limit)`;

const FLAGS: FlagSpec = {
  port: { type: 'string' }, host: { type: 'string' }, world: { type: 'string' }, tasks: { type: 'string' }, count: { type: 'string' },
  'task-seed': { type: 'string' }, ttl: { type: 'string' }, 'max-episodes': { type: 'string' }, 'max-turns': { type: 'string' },
  'max-body': { type: 'string' }, log: { type: 'string' }, help: { type: 'boolean', short: 'h' },
};

/** Runs the server until `stop` resolves (default: SIGINT or SIGTERM). */
export async function serveMain(argv: readonly string[], io: CliIo = processIo, stop?: Promise<unknown>): Promise<number> {
  return runCli(io, SERVE_USAGE, async () => {
    const v = parseFlags(argv, FLAGS);
    if (v.help) {
      io.out(SERVE_USAGE + '\n');
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
