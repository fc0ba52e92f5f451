// The MCP side of the server: one MCP session (streamable HTTP, the official SDK's transport) is one
// episode, whose session id is the episode id (so the JSON API can score or inspect an MCP session). The
// tool list is exactly the domain's tools with their JSON schemas; a call runs through the same
// ServerEpisode.call as the JSON API, and its result is the observation text the policy would read, with
// isError set for error observations.
//
// Tool-call requests are checked here, on the raw JSON, before the SDK sees them: the SDK parses params with
// zod first, so a non-object "arguments" came back as -32603 (internal error) with a zod dump, and zod's
// record copy silently dropped a "__proto__" key that the JSON API rejects. Malformed params now get
// -32602 (invalid params), and the handler calls the episode with the raw arguments the client sent, so both
// APIs answer the same call with the same observation.
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { serializeObservation } from '../env/toolcall';
import { ApiError, type ServerEpisode } from './episodes';
import type { EpisodeStore } from './store';

export const SERVER_NAME = 'envace-lab';
export const SERVER_VERSION = '0.1.0';

const transports = new WeakMap<ServerEpisode, StreamableHTTPServerTransport>();
/** Raw tools/call arguments by episode and JSON-RPC id, from the request body to the SDK's handler. */
const rawArgs = new WeakMap<ServerEpisode, Map<string, unknown>>();

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The first malformed tools/call in a JSON-RPC message or batch: its id and what is wrong; null if none. */
function badToolCall(body: unknown): { id: unknown; message: string } | null {
  for (const m of Array.isArray(body) ? body : [body]) {
    if (!isObject(m) || m.method !== 'tools/call') continue;
    const id = Object.hasOwn(m, 'id') ? m.id : null;
    const p = m.params;
    if (!isObject(p)) return { id, message: 'Invalid params: tools/call needs "params": {"name", "arguments"}' };
    if (typeof p.name !== 'string') return { id, message: 'Invalid params: "name" must be the tool name (a string)' };
    if (Object.hasOwn(p, 'arguments') && p.arguments !== undefined && !isObject(p.arguments)) {
      return { id, message: `Invalid params: "arguments" must be a JSON object (got ${Array.isArray(p.arguments) ? 'an array' : p.arguments === null ? 'null' : typeof p.arguments})` };
    }
  }
  return null;
}

function stashArgs(ep: ServerEpisode, body: unknown): void {
  for (const m of Array.isArray(body) ? body : [body]) {
    if (!isObject(m) || m.method !== 'tools/call' || !isObject(m.params)) continue;
    let map = rawArgs.get(ep);
    if (!map) rawArgs.set(ep, (map = new Map()));
    map.set(JSON.stringify(m.id), m.params.arguments);
  }
}

function mcpServerFor(store: EpisodeStore, ep: ServerEpisode): Server {
  const server = new Server({ name: SERVER_NAME, version: SERVER_VERSION }, { capabilities: { tools: {} }, instructions: ep.domain.policy });
  const tools = store.tools.map((d) => ({ name: d.function.name, description: d.function.description, inputSchema: d.function.parameters as { type: 'object' } & Record<string, unknown> }));
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }));
  server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
    const key = JSON.stringify(extra.requestId);
    const map = rawArgs.get(ep);
    const args = map?.has(key) ? map.get(key) : req.params.arguments;
    map?.delete(key);
    if (!store.has(ep.id)) return { content: [{ type: 'text' as const, text: 'the episode has expired or was released' }], isError: true };
    store.get(ep.id); // touches lastUsed
    try {
      const obs = store.call(ep, req.params.name, args);
      await store.durable();
      return { content: [{ type: 'text' as const, text: serializeObservation(obs) }], isError: !obs.ok };
    } catch (e) {
      if (e instanceof ApiError) return { content: [{ type: 'text' as const, text: e.message }], isError: true };
      throw e;
    }
  });
  return server;
}

function jsonRpcError(res: ServerResponse, status: number, message: string, code = -32000, id: unknown = null): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id }));
}

/**
 * Handles a request to /mcp. A request without a session id must be an initialize request and name the
 * task (`?task=ID`): it creates the episode and its transport. Others go to their session's transport.
 * Returns the episode id the request belonged to (for logs), if any.
 */
export async function handleMcp(store: EpisodeStore, req: IncomingMessage, res: ServerResponse, url: URL, body: unknown, client = 'local'): Promise<string | undefined> {
  const sid = req.headers['mcp-session-id'];
  const bad = badToolCall(body);
  if (bad) {
    jsonRpcError(res, 200, bad.message, -32602, bad.id);
    return typeof sid === 'string' ? sid : undefined;
  }
  if (typeof sid === 'string') {
    if (!store.has(sid)) {
      jsonRpcError(res, 404, 'unknown MCP session (the episode was released or expired)');
      return sid;
    }
    const ep = store.get(sid);
    const t = transports.get(ep);
    if (!t) {
      // A restart (--state) rebuilds the episode but not the SDK's session: 404 tells the client to start a new one.
      jsonRpcError(res, 404, ep.mcp ? `the MCP session did not survive a server restart; its episode lives on at /episodes/${sid}; open a new session` : 'this episode is not an MCP session');
      return sid;
    }
    stashArgs(ep, body);
    await t.handleRequest(req, res, body);
    return sid;
  }
  if (req.method !== 'POST') {
    jsonRpcError(res, 400, 'a request without an mcp-session-id must be an initialize POST');
    return undefined;
  }
  const isInit = body !== null && typeof body === 'object' && !Array.isArray(body) && (body as { method?: unknown }).method === 'initialize';
  if (!isInit) {
    jsonRpcError(res, 400, 'no mcp-session-id: the first request must be "initialize"');
    return undefined;
  }
  const task = url.searchParams.get('task');
  if (!task) {
    jsonRpcError(res, 400, 'name the task: /mcp?task=TASK_ID (GET /tasks lists them)');
    return undefined;
  }
  let ep: ServerEpisode;
  try {
    ep = store.create(task, client, { mcp: true });
    await store.durable();
  } catch (e) {
    if (e instanceof ApiError) {
      jsonRpcError(res, e.status, e.message);
      return undefined;
    }
    throw e;
  }
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: () => ep.id,
    enableJsonResponse: true,
    onsessionclosed: (id) => {
      store.remove(id, 'released');
    },
  });
  const server = mcpServerFor(store, ep);
  transports.set(ep, transport);
  ep.close = () => {
    void server.close().catch(() => {});
  };
  await server.connect(transport);
  await transport.handleRequest(req, res, body);
  if (transport.sessionId === undefined) store.remove(ep.id, 'released'); // initialize was rejected
  return ep.id;
}
