// Each attack on the server as a real client would make it, against a real server on a loopback port:
// a DNS-rebinding page (its own name in Host) on MCP and on the JSON API, a cross-origin page (Origin), a
// text/plain "simple request" POST, a non-loopback bind without a token, and one client filling the cap.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { request } from 'node:http';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveMain } from '../../src/cli/serve';
import { startServer } from '../../src/server/http';
import { taskSet } from '../../src/server/episodes';
import { captureIo } from '../helpers/cli';
import { api, startHarness, type Harness } from './helpers';

/** One raw HTTP exchange with any headers (fetch cannot set Host) from an optional local address. */
function raw(base: string, method: string, path: string, headers: Record<string, string>, body?: string, localAddress?: string): Promise<{ status: number; headers: Record<string, unknown>; json: any }> {
  const u = new URL(base + path);
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, path: u.pathname + u.search, method, headers, localAddress }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode ?? 0, headers: res.headers, json: text ? JSON.parse(text) : null });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * A fetch for the MCP SDK client that reaches the server's loopback address but says `host` in the Host
 * header: what a browser does after attacker.example was rebound to 127.0.0.1.
 */
function rebindingFetch(host: string) {
  return async (url: string | URL, init?: RequestInit): Promise<Response> => {
    const u = new URL(url);
    const headers: Record<string, string> = {};
    new Headers(init?.headers).forEach((v, k) => (headers[k] = v));
    headers.host = `${host}:${u.port}`;
    const body = typeof init?.body === 'string' ? init.body : undefined;
    return new Promise((resolve, reject) => {
      const req = request({ host: u.hostname, port: u.port, path: u.pathname + u.search, method: init?.method ?? 'GET', headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve(new Response(Buffer.concat(chunks), { status: res.statusCode, headers: res.headers as Record<string, string> })));
      });
      req.on('error', reject);
      req.end(body);
    });
  };
}

let h: Harness;
beforeAll(async () => {
  h = await startHarness('mini', { train: 4, test: 0 }, { maxEpisodes: 8, maxEpisodesPerClient: 4 });
});
afterAll(async () => {
  await h.server.close(500);
});

const port = () => new URL(h.server.url).port;

describe('DNS rebinding and cross-origin pages', () => {
  it('refuses a rebinding Host on the JSON API, for reads and writes alike', async () => {
    const before = h.server.store.size;
    const get = await raw(h.server.url, 'GET', '/tasks', { host: `attacker.example:${port()}` });
    expect(get.status).toBe(403);
    expect(get.json.error.code).toBe('forbidden_host');
    expect(get.json.error.message).toMatch(/attacker\.example.*--allowed-hosts/);
    const post = await raw(h.server.url, 'POST', '/episodes', { host: `attacker.example:${port()}`, 'content-type': 'application/json' }, JSON.stringify({ task_id: h.train[0].id }));
    expect(post.status).toBe(403);
    expect(h.server.store.size).toBe(before);
    // The loopback names are allowed, with or without a port.
    for (const host of [`localhost:${port()}`, `127.0.0.1:${port()}`, `[::1]:${port()}`, 'localhost']) {
      expect((await raw(h.server.url, 'GET', '/health', { host })).status, host).toBe(200);
    }
  });

  it('refuses a rebinding Host on MCP: the SDK client cannot open a session or call a tool', async () => {
    const before = h.server.store.size;
    const client = new Client({ name: 'rebinder', version: '0' });
    const transport = new StreamableHTTPClientTransport(new URL(`${h.server.url}/mcp?task=${h.train[0].id}`), { fetch: rebindingFetch('attacker.example') });
    await expect(client.connect(transport)).rejects.toThrow(/403|not allowed/);
    expect(h.server.store.size).toBe(before);
    // The same client by a loopback name gets in (the check is on the name, not the client).
    const ok = new Client({ name: 'local', version: '0' });
    await ok.connect(new StreamableHTTPClientTransport(new URL(`${h.server.url}/mcp?task=${h.train[0].id}`), { fetch: rebindingFetch('localhost') }));
    expect((await ok.listTools()).tools.length).toBeGreaterThan(0);
    await ok.close();
  });

  it('refuses a foreign Origin on MCP and JSON, and an opaque one', async () => {
    const client = new Client({ name: 'page', version: '0' });
    const transport = new StreamableHTTPClientTransport(new URL(`${h.server.url}/mcp?task=${h.train[0].id}`), { requestInit: { headers: { origin: 'http://attacker.example' } } });
    await expect(client.connect(transport)).rejects.toThrow(/403|not allowed/);
    for (const origin of ['http://attacker.example', 'null', 'file://']) {
      const r = await raw(h.server.url, 'POST', '/episodes', { host: `127.0.0.1:${port()}`, origin, 'content-type': 'application/json' }, JSON.stringify({ task_id: h.train[0].id }));
      expect(r.status, origin).toBe(403);
      expect(r.json.error.code).toBe('forbidden_origin');
    }
    // A tool on this machine (an MCP inspector on localhost) may.
    expect((await raw(h.server.url, 'GET', '/health', { host: `127.0.0.1:${port()}`, origin: 'http://localhost:6274' })).status).toBe(200);
  });

  it('refuses POSTs that are not application/json (the CORS "simple request" types) with 415, creating nothing', async () => {
    const before = h.server.store.size;
    const body = JSON.stringify({ task_id: h.train[0].id });
    for (const ct of ['text/plain', 'text/plain;charset=UTF-8', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', '']) {
      const headers: Record<string, string> = { host: `127.0.0.1:${port()}` };
      if (ct) headers['content-type'] = ct;
      const r = await raw(h.server.url, 'POST', '/episodes', headers, body);
      expect(r.status, ct).toBe(415);
      expect(r.json.error.code).toBe('unsupported_media_type');
      const m = await raw(h.server.url, 'POST', `/mcp?task=${h.train[0].id}`, headers, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {} }));
      expect(m.status, `mcp ${ct}`).toBe(415);
    }
    expect(h.server.store.size).toBe(before);
    expect((await raw(h.server.url, 'POST', '/episodes', { host: `127.0.0.1:${port()}`, 'content-type': 'application/json; charset=utf-8' }, body)).status).toBe(201);
  });
});

describe('one client cannot lock the others out', () => {
  it('refuses a client past its quota with 429 and Retry-After while another client still gets in', async () => {
    const s = await startHarness('mini', { train: 2, test: 0 }, { maxEpisodes: 6, maxEpisodesPerClient: 3, ttlMs: 60_000 });
    try {
      const base = s.server.url;
      const create = (from: string) => raw(base, 'POST', '/episodes', { host: new URL(base).host, 'content-type': 'application/json' }, JSON.stringify({ task_id: s.train[0].id }), from);
      const mine = [];
      for (let i = 0; i < 3; i++) mine.push(await create('127.0.0.1'));
      expect(mine.map((r) => r.status)).toEqual([201, 201, 201]);
      const over = await create('127.0.0.1');
      expect(over.status).toBe(429);
      expect(over.json.error.code).toBe('client_quota');
      expect(over.json.error.message).toMatch(/\(127\.0\.0\.1\) holds 3 live episodes/);
      expect(Number(over.headers['retry-after'])).toBeGreaterThan(0);
      expect(Number(over.headers['retry-after'])).toBeLessThanOrEqual(60);
      // A second trainer (another address) still gets in, up to the global cap, which still answers 503.
      const other = [];
      for (let i = 0; i < 3; i++) other.push(await create('127.0.0.2'));
      expect(other.map((r) => r.status)).toEqual([201, 201, 201]);
      expect((await create('127.0.0.3')).status).toBe(503);
      // Releasing one of its own gives the first client room again.
      await api(base, 'DELETE', `/episodes/${mine[0].json.episode_id}`);
      expect((await create('127.0.0.1')).status).toBe(201);
      expect((await api(base, 'GET', '/health')).json.max_episodes_per_client).toBe(3);
    } finally {
      await s.server.close(500);
    }
  });
});

describe('a server beyond loopback needs a token', () => {
  it('will not bind a non-loopback address without one (API and CLI)', async () => {
    const domain = h.domain;
    await expect(startServer({ domain, world: 'mini', tasks: taskSet(h.train), host: '0.0.0.0', port: 0, log: () => {} })).rejects.toThrow(/needs a token/);
    const io = captureIo();
    const env = process.env.ENVACE_TOKEN;
    delete process.env.ENVACE_TOKEN;
    try {
      expect(await serveMain(['--port', '0', '--host', '0.0.0.0', '--tasks', 'test', '--count', '1'], io, Promise.resolve())).toBe(2);
      expect(io.stderr()).toMatch(/--host 0\.0\.0\.0 is not a loopback address: give a token/);
    } finally {
      if (env !== undefined) process.env.ENVACE_TOKEN = env;
    }
  });

  it('with a token file, binds 0.0.0.0 and answers only requests that carry the token', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'envace-token-'));
    const token = 'a'.repeat(8) + '0123456789abcdef';
    writeFileSync(join(dir, 'token'), token + '\n');
    const io = captureIo();
    let stop!: () => void;
    const done = serveMain(['--port', '0', '--host', '0.0.0.0', '--token-file', join(dir, 'token'), '--tasks', 'test', '--count', '2', '--log', 'warn'], io, new Promise<void>((r) => (stop = r)));
    try {
      let url = '';
      for (let i = 0; i < 400 && !url; i++) {
        await new Promise((r) => setTimeout(r, 25));
        const line = io.stdout().split('\n')[0];
        if (line) url = JSON.parse(line).url;
      }
      const p = new URL(url).port;
      const base = `http://127.0.0.1:${p}`;
      const none = await raw(base, 'GET', '/tasks', { host: `127.0.0.1:${p}` });
      expect(none.status).toBe(401);
      expect(none.json.error.message).toMatch(/Authorization: Bearer/);
      expect(none.headers['www-authenticate']).toBe('Bearer realm="envace"');
      expect((await raw(base, 'GET', '/tasks', { host: `127.0.0.1:${p}`, authorization: 'Bearer wrong-token-0123456789' })).status).toBe(401);
      const ok = await raw(base, 'GET', '/tasks', { host: `127.0.0.1:${p}`, authorization: `Bearer ${token}` });
      expect(ok.status).toBe(200);
      expect(ok.json.task_ids.length).toBe(2);
      // MCP too: the SDK client with the header gets a session, without it none.
      const task = ok.json.task_ids[0];
      await expect(new Client({ name: 'x', version: '0' }).connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp?task=${task}`)))).rejects.toThrow(/401|Bearer/);
      const c = new Client({ name: 'x', version: '0' });
      await c.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp?task=${task}`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
      expect((await c.listTools()).tools.length).toBeGreaterThan(0);
      await c.close();
      // The Python client (verl's side) sends the token from ENVACE_TOKEN_FILE.
      if (existsSync('/usr/bin/python3')) {
        // Asynchronous: the server answers from this process's event loop while Python runs.
        const py = await new Promise<{ out: string; err: string }>((done) => {
          const p = spawn('/usr/bin/python3', ['-c', 'from envace_verl.client import EnvaceClient as C; import sys; print(len(C(sys.argv[1]).task_ids()))', base], {
            cwd: resolve(__dirname, '../../integrations/verl'), env: { ...process.env, ENVACE_TOKEN_FILE: join(dir, 'token'), ENVACE_TOKEN: '' },
          });
          let out = '';
          let err = '';
          p.stdout.on('data', (d) => (out += d));
          p.stderr.on('data', (d) => (err += d));
          p.on('close', () => done({ out, err }));
        });
        expect(py.out.trim(), py.err).toBe('2');
      }
    } finally {
      stop();
      expect(await done).toBe(0);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('exits 74 naming the file when the token file cannot be read, 2 on a short token', async () => {
    const io = captureIo();
    expect(await serveMain(['--port', '0', '--token-file', '/nonexistent/token'], io, Promise.resolve())).toBe(74);
    expect(io.stderr()).toMatch(/\/nonexistent\/token/);
    const io2 = captureIo();
    expect(await serveMain(['--port', '0', '--token', 'short'], io2, Promise.resolve())).toBe(2);
    expect(io2.stderr()).toMatch(/at least 16 characters/);
  });
});
