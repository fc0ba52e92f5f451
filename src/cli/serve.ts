// npm run serve -- --port P [--host H] [--allowed-hosts A,B] [--token-file F] [--state DIR] [--world mini|retail]
//   [--tasks train|test|FILE.json] [--count N] [--task-seed S] [--ttl SECONDS] [--max-episodes N]
//   [--max-episodes-per-client N] [--max-turns N] [--max-body BYTES] [--log debug|info|warn|off]
// The environment, the world-rehearsal prompts and the rewards as a server (src/server/http.ts lists
// the routes): an MCP endpoint at /mcp?task=ID and a JSON API for trainers (integrations/verl/).
// Logs are JSON lines on stderr. SIGINT/SIGTERM shut it down gracefully (requests in flight finish), and so
// does losing the parent that started it: `npm run serve` runs node under npm, and a SIGKILL'ed or vanished
// npm must not leave a server listening with nobody to stop it. package.json's script starts node with
// `exec`: /bin/sh (dash) would otherwise stand between npm and node, die of the SIGTERM npm forwards, and
// orphan node. Exit 0 after a clean shutdown.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { loadWorldDomain } from '../env/retail/node';
import { WORLD_NAMES } from '../env/retail/index';
import { IoError } from '../util/atomic-file';
import { DEFAULTS, jsonLogger, startServer } from '../server/http';
import { taskSet } from '../server/episodes';
import { isLoopback } from '../server/guard';
import { loadTasks } from '../server/tasks';
import { allowedHostsOf, AUTH_FLAGS, tokenOf } from './serve-auth';
import { serveOpenAiMain } from './serve-openai';
import {
  ArgError, enumFlag, HELP_FLAG, helpText, intFlag, isEntry, parseFlags, processIo, runCli, strFlag, WORLD_FLAG, type CliIo, type FlagSpec, type FlagValues,
} from './args';

export const SERVE_USAGE = `usage: npm run serve -- --port P [--host H] [--allowed-hosts A,B] [--token-file F] [--state DIR] [--world mini|retail]
  [--tasks train|test|FILE.json] [--count N] [--task-seed S] [--ttl SECONDS] [--max-episodes N] [--max-episodes-per-client N]
  [--max-turns N] [--max-body BYTES] [--log debug|info|warn|off]`;

export const SERVE_FLAGS: FlagSpec = {
  ...AUTH_FLAGS,
  port: { type: 'string', arg: 'P', help: 'TCP port; 0: any free port (the log line "listening" says which) (required)' },
  host: { type: 'string', arg: 'H', help: 'address to bind; a non-loopback one (0.0.0.0) needs a token', default: DEFAULTS.host },
  state: { type: 'string', arg: 'DIR', help: 'directory of the episode journal: live episodes survive a restart or crash', default: 'none: in memory only' },
  world: WORLD_FLAG,
  tasks: { type: 'string', arg: 'T', help: 'train, test, or a task file', default: 'both generated splits' },
  count: { type: 'string', arg: 'N', help: 'tasks per generated split, 1..100000', default: '200' },
  'task-seed': { type: 'string', arg: 'S', help: 'generator seed (test uses seed + 1)', default: '0' },
  ttl: { type: 'string', arg: 'SECONDS', help: 'seconds an idle episode lives', default: String(DEFAULTS.ttlMs / 1000) },
  'max-episodes': { type: 'string', arg: 'N', help: 'live episodes at most', default: String(DEFAULTS.maxEpisodes) },
  'max-episodes-per-client': { type: 'string', arg: 'N', help: 'live episodes one client address may hold', default: 'half of --max-episodes' },
  'max-turns': { type: 'string', arg: 'N', help: 'calls per episode (the paper\'s turn limit)', default: String(DEFAULTS.maxTurns) },
  'max-body': { type: 'string', arg: 'BYTES', help: 'largest request body', default: String(DEFAULTS.maxBodyBytes) },
  log: { type: 'string', arg: 'L', help: 'log level of the JSON log lines on stderr: debug, info, warn or off', default: 'info' },
  help: HELP_FLAG,
};

const SERVE_NOTES = `SIGINT/SIGTERM (to node or to npm) shut the server down gracefully, letting requests in flight finish.
exit status: 0 after a clean shutdown, 1 failure, 2 usage error, 74 I/O error (the message names the file).`;

/** Resolves on SIGINT, SIGTERM, or when the parent process goes away (this process was re-parented). */
function stopSignal(): Promise<string> {
  return new Promise((resolveStop) => {
    const ppid = process.ppid;
    const done = (why: string) => {
      clearInterval(watch);
      resolveStop(why);
    };
    // process.on, not once: npm forwards the terminal's SIGINT that node also got, and a second signal must
    // not kill the process halfway through its graceful shutdown.
    process.on('SIGINT', () => done('SIGINT'));
    process.on('SIGTERM', () => done('SIGTERM'));
    const watch = setInterval(() => {
      if (process.ppid !== ppid) done('parent-exited');
    }, 250);
    watch.unref();
  });
}

/** Runs the server until `stop` resolves (default: SIGINT or SIGTERM). */
export async function serveMain(argv: readonly string[], io: CliIo = processIo, stop?: Promise<unknown>): Promise<number> {
  // --openai: the same command serves a lab model as an OpenAI-compatible chat endpoint instead (src/cli/serve-openai.ts).
  if (argv.includes('--openai')) return serveOpenAiMain(argv.filter((a) => a !== '--openai'), io, stop);
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
    const host = strFlag(v, 'host', DEFAULTS.host)!;
    const token = tokenOf(v);
    if (!isLoopback(host) && token === undefined) {
      throw new ArgError(`--host ${host} is not a loopback address: give a token (--token-file FILE or ENVACE_TOKEN), or anything that reaches the port drives the server`);
    }
    const allowedHosts = allowedHostsOf(v);
    const domain = loadWorldDomain(world);
    const tasks = await loadTasks(domain, { tasks: strFlag(v, 'tasks') ?? 'both', count: intFlag(v, 'count', 200, 1, 100_000), seed: intFlag(v, 'task-seed', 0, 0, 0xfffffff0), world });
    const maxEpisodes = intFlag(v, 'max-episodes', DEFAULTS.maxEpisodes, 1, 1_000_000);
    const server = await startServer({
      domain, world, tasks: taskSet(tasks), port, host, log, token, allowedHosts, stateDir: strFlag(v, 'state'),
      maxEpisodes,
      maxEpisodesPerClient: intFlag(v, 'max-episodes-per-client', Math.max(1, Math.ceil(maxEpisodes / 2)), 1, 1_000_000),
      ttlMs: intFlag(v, 'ttl', DEFAULTS.ttlMs / 1000, 1, 7 * 86400) * 1000,
      maxTurns: intFlag(v, 'max-turns', DEFAULTS.maxTurns, 1, 1000),
      maxBodyBytes: intFlag(v, 'max-body', DEFAULTS.maxBodyBytes, 1024, 1 << 30),
    });
    io.out(JSON.stringify({ url: server.url, mcp: `${server.url}/mcp?task=TASK_ID`, pid: process.pid }) + '\n');
    const why = await (stop ?? stopSignal());
    log({ level: 'info', event: 'stop', why: typeof why === 'string' ? why : 'requested' });
    await server.close();
  });
}

if (isEntry(import.meta.url)) serveMain(process.argv.slice(2)).then((code) => process.exit(code));
