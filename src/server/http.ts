// The environment server: node:http, no framework. Routes:
//   GET    /health                              status, task counts, live episodes, counters
//   GET    /tasks?split=train|test              {"split", "task_ids"}
//   GET    /tools                               the domain's tools (OpenAI function format)
//   POST   /episodes {"task_id"}                {"episode_id", "task_id", "tools", "messages", "prompt"}
//   GET    /episodes/ID                         {"episode_id", "task_id", "turns", "done", "end", "db_hash", "changed", "messages"}
//   POST   /episodes/ID/calls {"name","arguments"}          {"observation", "error", "code", "ok", "done"}
//   POST   /episodes/ID/rehearse-prompt {"name","arguments","options"?,"history"?}   {"prompt", "messages"}
//   POST   /episodes/ID/parse-rehearsal {"text","name"}     {"ok", "observation", "error"}
//   POST   /episodes/ID/score {"messages"?, "imagined"?, "replay"?, "terminated"?}  {"reward", "checklist", "kind", …}
//          messages: real reward of this episode's calls + the replies in messages; replay: true: real reward
//          of the calls in messages replayed on a fresh database; imagined: the checklist judge
//   POST   /episodes/ID/act {"text", "mode"?}    POST /episodes/ID/rehearse {"text"}   a whole trajectory's raw
//          generations, applied by the lab's Episode (trajectory.ts); score {"trajectory": true} is its reward
//   DELETE /episodes/ID                         {"released": true}
//   *      /mcp?task=ID                          MCP streamable HTTP (one session = one episode)
// Every request first passes the guard (guard.ts: Host, Origin, bearer token, JSON content type).
// Every error is {"error": {"code", "message"}} with a 4xx/5xx status. Bodies are limited in size and JSON
// nesting; one JSON log line per request and per lifecycle event goes to the logger.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Domain } from '../env/domain';
import { jsonDepth } from '../env/toolcall';
import { serializeObservation } from '../env/toolcall';
import type { RehearsePromptOptions } from '../rollout/rehearse-prompt';
import { parseExecutionResult } from '../rollout/rehearse-prompt';
import { ApiError, requireCall, type TaskSet, type WireMessage } from './episodes';
import { EpisodeStore } from './store';
import { createGuard } from './guard';
import { Journal } from './journal';
import { scoreTrajectory } from './trajectory';
import { handleMcp, SERVER_NAME, SERVER_VERSION } from './mcp';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export type Logger = (rec: { level: LogLevel; event: string } & Record<string, unknown>) => void;

/** JSON lines on stderr at or above `min` ('off' logs nothing). */
export function jsonLogger(min: LogLevel | 'off' = 'info', write: (s: string) => void = (s) => process.stderr.write(s)): Logger {
  const rank: Record<LogLevel | 'off', number> = { debug: 0, info: 1, warn: 2, error: 3, off: 9 };
  return (rec) => {
    if (rank[rec.level] < rank[min]) return;
    write(JSON.stringify({ ts: new Date().toISOString(), ...rec }) + '\n');
  };
}

export interface ServeOptions {
  domain: Domain;
  tasks: TaskSet;
  world: string;
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  ttlMs?: number;
  maxEpisodes?: number;
  /** Live episodes per client (remote address); default half of maxEpisodes, so no one client locks the others out. */
  maxEpisodesPerClient?: number;
  maxTurns?: number;
  /** Largest request body in bytes (413 above). */
  maxBodyBytes?: number;
  /** Deepest JSON nesting accepted in a body (400 above). */
  maxJsonDepth?: number;
  log?: Logger;
  /** Host names clients may use besides the loopback ones (guard.ts); '*': any. */
  allowedHosts?: readonly string[];
  /** Bearer token every request must carry; required when `host` is not a loopback address. */
  token?: string;
  /** Directory of the episode journal (journal.ts): episodes survive a restart. None: memory only. */
  stateDir?: string;
}

export const DEFAULTS = { host: '127.0.0.1', ttlMs: 10 * 60_000, maxEpisodes: 1024, maxTurns: 30, maxBodyBytes: 1 << 20, maxJsonDepth: 32 };

export interface RunningServer {
  url: string;
  port: number;
  store: EpisodeStore;
  http: Server;
  /** Graceful shutdown: stop accepting, end every episode and MCP session, let requests in flight finish (up to graceMs). */
  close(graceMs?: number): Promise<void>;
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** The client went away before its request was read: nothing to answer, nothing wrong on our side. */
class ClientGone extends Error {
  override readonly name = 'ClientGone';
}

/** Reads a JSON body within the limits; an empty body is {}. */
async function readJson(req: IncomingMessage, maxBytes: number, maxDepth: number): Promise<unknown> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) throw new ApiError(413, 'too_large', `request body of ${declared} bytes exceeds the limit of ${maxBytes}`);
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const c of req) {
      size += (c as Buffer).length;
      if (size > maxBytes) throw new ApiError(413, 'too_large', `request body exceeds the limit of ${maxBytes} bytes`);
      chunks.push(c as Buffer);
    }
  } catch (e) {
    if (e instanceof ApiError) throw e;
    throw new ClientGone(`the client aborted its upload after ${size} bytes (${(e as Error).message})`);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return {};
  if (jsonDepth(text, maxDepth) > maxDepth) throw new ApiError(400, 'bad_json', `JSON nested more than ${maxDepth} levels`);
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new ApiError(400, 'bad_json', `the body is not JSON: ${(e as Error).message}`);
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

function objectBody(b: unknown): Record<string, unknown> {
  if (!isObject(b)) throw new ApiError(400, 'bad_request', 'the body must be a JSON object');
  return b;
}

function messagesOf(v: unknown, field: string): WireMessage[] {
  if (!Array.isArray(v)) throw new ApiError(400, 'bad_request', `"${field}" must be a list of chat messages`);
  if (v.length > 1000) throw new ApiError(400, 'bad_request', `"${field}" has more than 1000 messages`);
  return v.map((m, i) => {
    if (!isObject(m) || typeof m.role !== 'string') throw new ApiError(400, 'bad_request', `"${field}"[${i}] must be an object with a "role"`);
    return m as unknown as WireMessage;
  });
}

function rehearseOptions(v: unknown): RehearsePromptOptions {
  if (v === undefined) return {};
  if (!isObject(v)) throw new ApiError(400, 'bad_request', '"options" must be an object');
  const o: RehearsePromptOptions = {};
  for (const [k, x] of Object.entries(v)) {
    if ((k === 'maxGroundingChars' || k === 'maxHistoryChars') && Number.isInteger(x) && (x as number) >= 0 && (x as number) <= 1_000_000) o[k] = x as number;
    else if ((k === 'excludeSameCall' || k === 'enableThinking') && typeof x === 'boolean') o[k] = x;
    else if (k === 'toolSchemas' && (x === 'called' || x === 'all')) o.toolSchemas = x;
    else throw new ApiError(400, 'bad_request', `options.${k}: unknown option or bad value (maxGroundingChars, maxHistoryChars: integers; excludeSameCall, enableThinking: booleans; toolSchemas: "called" | "all")`);
  }
  return o;
}

/** The quota's notion of a client: its remote address (IPv4-mapped IPv6 folded to IPv4). */
function clientOf(req: IncomingMessage): string {
  const a = req.socket.remoteAddress ?? 'unknown';
  return a.startsWith('::ffff:') ? a.slice(7) : a;
}

export async function startServer(o: ServeOptions): Promise<RunningServer> {
  const log: Logger = o.log ?? jsonLogger('info');
  const maxBody = o.maxBodyBytes ?? DEFAULTS.maxBodyBytes;
  const maxDepth = o.maxJsonDepth ?? DEFAULTS.maxJsonDepth;
  const maxTurns = o.maxTurns ?? DEFAULTS.maxTurns;
  const guard = createGuard({ bind: o.host ?? DEFAULTS.host, allowedHosts: o.allowedHosts, token: o.token });
  const maxEpisodes = o.maxEpisodes ?? DEFAULTS.maxEpisodes;
  const opened = o.stateDir === undefined ? null : Journal.open(o.stateDir);
  const store = new EpisodeStore(o.domain, o.tasks, {
    ttlMs: o.ttlMs ?? DEFAULTS.ttlMs,
    maxEpisodes,
    maxPerClient: o.maxEpisodesPerClient ?? Math.max(1, Math.ceil(maxEpisodes / 2)),
    maxTurns,
    journal: opened?.journal,
    onRemove: (ep, why) => log({ level: why === 'released' ? 'debug' : 'info', event: 'episode_end', episode: ep.id, task: ep.task.id, why, turns: ep.ep.turns, live_s: (Date.now() - ep.created) / 1000 }),
  });
  if (opened) {
    const r = store.restore(opened.live);
    log({ level: 'info', event: 'restored', state: o.stateDir, episodes: r.restored, skipped: r.skipped.length, damaged_lines: opened.dropped });
    if (r.skipped.length > 0) log({ level: 'warn', event: 'restore_skipped', why: 'their tasks are not served now', episodes: r.skipped.slice(0, 20) });
  }
  const started = Date.now();
  let closing = false;
  let inflight = 0;

  async function route(req: IncomingMessage, res: ServerResponse, url: URL): Promise<string | undefined> {
    const method = req.method ?? 'GET';
    guard.check(req, method === 'POST');
    const client = clientOf(req);
    const parts = url.pathname.split('/').filter(Boolean);
    if (parts[0] === 'mcp' && parts.length === 1) {
      if (closing && req.headers['mcp-session-id'] === undefined) throw new ApiError(503, 'closing', 'the server is shutting down');
      const body = method === 'POST' ? await readJson(req, maxBody, maxDepth) : undefined;
      return handleMcp(store, req, res, url, body, client);
    }
    if (method === 'GET' && url.pathname === '/health') {
      send(res, 200, {
        status: closing ? 'closing' : 'ok', name: SERVER_NAME, version: SERVER_VERSION, world: o.world,
        tasks: { train: o.tasks.splits.train.length, test: o.tasks.splits.test.length },
        live_episodes: store.size, max_episodes: store.opts.maxEpisodes, max_episodes_per_client: store.opts.maxPerClient, ttl_s: store.opts.ttlMs / 1000, ...store.stats,
        uptime_s: Math.round((Date.now() - started) / 1000), heap_mb: Math.round(process.memoryUsage().heapUsed / 2 ** 20),
      });
      return;
    }
    if (method === 'GET' && url.pathname === '/tasks') {
      const split = url.searchParams.get('split');
      if (split !== null && split !== 'train' && split !== 'test') throw new ApiError(400, 'bad_request', 'split must be train or test');
      send(res, 200, split ? { split, task_ids: o.tasks.splits[split] } : { split: null, task_ids: [...o.tasks.splits.train, ...o.tasks.splits.test] });
      return;
    }
    if (method === 'GET' && url.pathname === '/tools') {
      send(res, 200, { tools: store.tools });
      return;
    }
    if (parts[0] !== 'episodes') throw new ApiError(404, 'not_found', `no route ${method} ${url.pathname}`);
    if (parts.length === 1) {
      if (method !== 'POST') throw new ApiError(405, 'method_not_allowed', 'POST /episodes {"task_id"}');
      if (closing) throw new ApiError(503, 'closing', 'the server is shutting down');
      const b = objectBody(await readJson(req, maxBody, maxDepth));
      const ep = store.create(b.task_id, client);
      await store.durable();
      log({ level: 'debug', event: 'episode_start', episode: ep.id, task: ep.task.id });
      send(res, 201, { episode_id: ep.id, task_id: ep.task.id, tools: store.tools, messages: ep.firstMessages(), prompt: ep.actPrompt() });
      return ep.id;
    }
    const id = parts[1];
    const ep = store.get(id);
    if (parts.length === 2) {
      if (method === 'DELETE') {
        store.remove(id, 'released');
        await store.durable();
        send(res, 200, { released: true, episode_id: id });
      } else if (method === 'GET') {
        send(res, 200, { episode_id: id, task_id: ep.task.id, turns: ep.ep.turns, done: ep.ep.done, end: ep.ep.end, db_hash: ep.hash(), changed: ep.ep.env.changed(), messages: ep.ep.messages });
      } else throw new ApiError(405, 'method_not_allowed', 'GET or DELETE /episodes/ID');
      return id;
    }
    if (parts.length !== 3 || method !== 'POST') throw new ApiError(404, 'not_found', `no route ${method} ${url.pathname}`);
    const b = objectBody(await readJson(req, maxBody, maxDepth));
    switch (parts[2]) {
      case 'calls': {
        const obs = store.call(ep, b.name, Object.hasOwn(b, 'arguments') ? b.arguments : undefined);
        await store.durable();
        send(res, 200, { observation: serializeObservation(obs), ok: obs.ok, error: obs.ok ? null : obs.error, code: obs.ok ? null : obs.code, done: ep.ep.done });
        break;
      }
      case 'rehearse-prompt': {
        const r = ep.rehearsePrompt(requireCall(b), rehearseOptions(b.options), b.history === undefined ? undefined : messagesOf(b.history, 'history'));
        send(res, 200, r);
        break;
      }
      case 'parse-rehearsal': {
        if (typeof b.text !== 'string') throw new ApiError(400, 'bad_request', '"text" must be a string (the Rehearse generation)');
        if (typeof b.name !== 'string') throw new ApiError(400, 'bad_request', '"name" must be the called tool\'s name');
        const r = parseExecutionResult(b.text, b.name);
        send(res, 200, r.ok ? { ok: true, observation: serializeObservation(r.observation), error: null } : { ok: false, observation: null, error: { code: r.error.code, message: r.error.message } });
        break;
      }
      case 'act':
      case 'rehearse': {
        if (b.mode !== undefined && b.mode !== 'real' && b.mode !== 'simulate') throw new ApiError(400, 'bad_request', '"mode" must be "real" or "simulate"');
        if (typeof b.text !== 'string') throw new ApiError(400, 'bad_request', `"text" must be the ${parts[2] === 'act' ? 'Act' : 'Rehearse'} generation (a string)`);
        const r = store.step(ep, parts[2] === 'act' ? { act: b.text, mode: (b.mode as 'real' | 'simulate' | undefined) ?? 'real' } : { rehearse: b.text });
        await store.durable();
        send(res, 200, r);
        break;
      }
      case 'score': {
        if (b.trajectory === true) {
          send(res, 200, scoreTrajectory(ep));
          break;
        }
        if (b.terminated !== undefined && typeof b.terminated !== 'boolean') throw new ApiError(400, 'bad_request', '"terminated" must be a boolean');
        if (b.imagined !== undefined && b.messages !== undefined) throw new ApiError(400, 'bad_request', 'send "messages" (real reward) or "imagined" (judge), not both');
        if (b.replay !== undefined && typeof b.replay !== 'boolean') throw new ApiError(400, 'bad_request', '"replay" must be a boolean');
        if (b.replay === true && b.messages === undefined) throw new ApiError(400, 'bad_request', '"replay" needs "messages"');
        const r = b.imagined !== undefined
          ? ep.scoreImagined(messagesOf(b.imagined, 'imagined'), maxTurns)
          : b.replay === true
            ? ep.scoreReplay(messagesOf(b.messages, 'messages'), maxTurns)
            : ep.scoreReal(b.messages === undefined ? undefined : messagesOf(b.messages, 'messages'), b.terminated === true);
        send(res, 200, r);
        break;
      }
      default:
        throw new ApiError(404, 'not_found', `no route ${method} ${url.pathname}`);
    }
    return id;
  }

  const http = createServer((req, res) => {
    const t0 = performance.now();
    inflight++;
    let episode: string | undefined;
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://localhost');
    } catch {
      url = new URL('http://localhost/');
    }
    res.on('close', () => {
      inflight--;
      const status = res.headersSent ? res.statusCode : 'aborted';
      log({ level: res.headersSent && res.statusCode >= 500 ? 'error' : 'debug', event: 'request', method: req.method, path: url.pathname, status, ms: Math.round((performance.now() - t0) * 100) / 100, ...(episode ? { episode } : {}) });
    });
    route(req, res, url).then(
      (ep) => {
        episode = ep;
      },
      (e: unknown) => {
        if (res.headersSent) {
          res.destroy();
          return;
        }
        if (e instanceof ClientGone) {
          log({ level: 'info', event: 'client_aborted', path: url.pathname, message: e.message });
          res.destroy();
          return;
        }
        if (e instanceof ApiError) {
          if (e.status === 413) res.setHeader('connection', 'close');
          if (e.retryAfterS !== undefined) res.setHeader('retry-after', String(e.retryAfterS));
          if (e.status === 401) res.setHeader('www-authenticate', 'Bearer realm="envace"');
          send(res, e.status, { error: { code: e.code, message: e.message } });
        } else {
          log({ level: 'error', event: 'internal_error', path: url.pathname, message: (e as Error)?.message ?? String(e) });
          send(res, 500, { error: { code: 'internal', message: 'internal error' } });
        }
      },
    );
  });
  http.requestTimeout = 30_000;
  http.headersTimeout = 10_000;
  await new Promise<void>((resolve, reject) => {
    http.once('error', (e) => {
      void opened?.journal.close();
      reject(e);
    });
    http.listen(o.port ?? 0, o.host ?? DEFAULTS.host, () => resolve());
  });
  store.start();
  const addr = http.address() as AddressInfo;
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  const url = `http://${host}:${addr.port}`;
  log({ level: 'info', event: 'listening', url, allowed_hosts: guard.hosts, auth: o.token !== undefined, world: o.world, tasks: { train: o.tasks.splits.train.length, test: o.tasks.splits.test.length }, ttl_s: store.opts.ttlMs / 1000, max_episodes: store.opts.maxEpisodes });

  async function close(graceMs = 5000): Promise<void> {
    if (closing) return;
    closing = true;
    log({ level: 'info', event: 'shutdown', live_episodes: store.size, inflight });
    const done = new Promise<void>((r) => http.close(() => r()));
    store.shutdown();
    http.closeIdleConnections();
    const deadline = Date.now() + graceMs;
    while (inflight > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    http.closeAllConnections();
    await done;
    await opened?.journal.close();
    log({ level: 'info', event: 'closed' });
  }

  return { url, port: addr.port, store, http, close };
}
