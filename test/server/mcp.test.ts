// The server on a loopback port, driven by the MCP SDK's own client: the tool
// list, 20 concurrent sessions replaying reference actions against `npm run env -- replay`'s own replay
// (same base database, same replayTask), write isolation, malformed calls.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Task } from '../../src/env/domain';
import { RETAIL_WRITE_TOOLS, retailEnvFactory } from '../../src/env/retail/index';
import { loadRetailBase } from '../../src/env/retail/node';
import { serializeObservation } from '../../src/env/toolcall';
import { jsonDiff, replayTask } from '../../src/env/trace';
import { api, startHarness, type Harness } from './helpers';

let h: Harness;
const clients: Client[] = [];

async function connect(taskId: string): Promise<{ client: Client; sessionId: string }> {
  const client = new Client({ name: 'envace-test', version: '0.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${h.server.url}/mcp?task=${encodeURIComponent(taskId)}`));
  await client.connect(transport);
  clients.push(client);
  return { client, sessionId: transport.sessionId! };
}

const text = (r: any): string => (r.content as { type: string; text: string }[]).map((c) => c.text).join('');
const hashOf = async (sid: string) => (await api(h.server.url, 'GET', `/episodes/${sid}`)).json.db_hash as string;

beforeAll(async () => {
  // The full retail world: the database `npm run env -- replay` replays on (loadRetailBase()).
  h = await startHarness('retail', { train: 20, test: 0 });
});

afterAll(async () => {
  for (const c of clients) await c.close().catch(() => {});
  await h.server.close(1000);
});

describe('MCP endpoint', () => {
  it('lists exactly the domain tools with their JSON schemas', async () => {
    const { client } = await connect(h.train[0].id);
    const { tools } = await client.listTools();
    const defs = h.domain.definitions();
    expect(tools.length).toBe(15);
    expect(tools.map((t) => t.name)).toEqual(defs.map((d) => d.function.name));
    for (const [i, t] of tools.entries()) {
      expect(t.inputSchema).toEqual(defs[i].function.parameters);
      expect(t.description).toBe(defs[i].function.description);
    }
  });

  it('replays the reference actions of 20 train tasks in 20 concurrent sessions like `env replay`', async () => {
    const fresh = retailEnvFactory(loadRetailBase()); // what src/cli/env.ts replay uses
    expect(h.train.length).toBe(20);
    const sessions = await Promise.all(h.train.map((t) => connect(t.id)));
    const results = await Promise.all(
      h.train.map(async (task, i) => {
        const { client, sessionId } = sessions[i];
        const out: { text: string; isError: boolean }[] = [];
        for (const a of task.referenceActions) {
          const r = await client.callTool({ name: a.name, arguments: a.arguments });
          out.push({ text: text(r), isError: r.isError === true });
        }
        return { out, hash: await hashOf(sessionId) };
      }),
    );
    let calls = 0;
    h.train.forEach((task, i) => {
      const ref = replayTask(fresh(), task);
      expect(results[i].out.map((o) => o.text)).toEqual(ref.observations.map(serializeObservation));
      expect(results[i].out.map((o) => o.isError)).toEqual(ref.observations.map((o) => !o.ok));
      expect(results[i].hash).toBe(ref.hash);
      calls += task.referenceActions.length;
    });
    expect(calls).toBeGreaterThan(40);
    // Some of these tasks write: their final databases differ from the initial one.
    const h0 = fresh().hash();
    expect(results.filter((r) => r.hash !== h0).length).toBeGreaterThan(3);
    // Every session is its own episode.
    expect(new Set(sessions.map((s) => s.sessionId)).size).toBe(20);

    // And the CLI itself: `npm run env -- replay FILE --trace T` (its process, its own database load) writes
    // each action's output and every changed record; both must equal what the MCP sessions saw and wrote.
    const dir = mkdtempSync(join(tmpdir(), 'envace-replay-'));
    try {
      writeFileSync(join(dir, 'tasks.json'), JSON.stringify(h.train));
      const code = await new Promise<number | null>((done) => {
        const p = spawn(process.execPath, ['--import', 'tsx', 'src/cli/env.ts', 'replay', join(dir, 'tasks.json'), '--trace', join(dir, 'trace.jsonl')], { cwd: resolve(__dirname, '../..'), stdio: 'ignore' });
        p.on('close', done);
      });
      expect(code).toBe(0);
      const trace = readFileSync(join(dir, 'trace.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
      expect(trace.map((t) => t.id)).toEqual(h.train.map((t) => t.id));
      for (const [i, t] of trace.entries()) {
        const seen = results[i].out.map((o) => JSON.parse(o.text));
        const fromCli = t.actions.map((a: { ok: boolean; output?: unknown; error?: string }) => (a.ok ? { result: a.output } : { error: a.error }));
        expect(jsonDiff(seen, fromCli), t.id).toBeNull();
        const changed = (await api(h.server.url, 'GET', `/episodes/${sessions[i].sessionId}`)).json.changed;
        expect(jsonDiff(changed, t.changed), t.id).toBeNull();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('keeps writes of one session invisible in another', async () => {
    const task = h.train.find((t) => t.referenceActions.some((a) => RETAIL_WRITE_TOOLS.has(a.name))) as Task;
    expect(task).toBeDefined();
    const a = await connect(task.id);
    const b = await connect(task.id);
    const h0 = await hashOf(b.sessionId);
    const write = task.referenceActions.find((x) => RETAIL_WRITE_TOOLS.has(x.name))!;
    // Replay up to and including the first write in session A.
    for (const x of task.referenceActions.slice(0, task.referenceActions.indexOf(write) + 1)) await a.client.callTool({ name: x.name, arguments: x.arguments });
    const ha = await hashOf(a.sessionId);
    expect(ha).not.toBe(h0);
    // B reads what A wrote to: it sees the original record.
    const orderId = (write.arguments as { order_id?: string }).order_id;
    const userId = (write.arguments as { user_id?: string }).user_id;
    const read = orderId ? { name: 'get_order_details', arguments: { order_id: orderId } } : { name: 'get_user_details', arguments: { user_id: userId } };
    const rb = await b.client.callTool(read);
    const fresh = retailEnvFactory(loadRetailBase())();
    expect(text(rb)).toBe(serializeObservation(fresh.execute(read)));
    const ra = await a.client.callTool(read);
    expect(text(ra)).not.toBe(text(rb));
    expect(await hashOf(b.sessionId)).toBe(h0);
    expect(await hashOf(a.sessionId)).toBe(ha);
  });

  it('answers a malformed call with an error result and leaves the database hash unchanged', async () => {
    const task = h.train[1];
    const { client, sessionId } = await connect(task.id);
    const write = { name: 'cancel_pending_order', arguments: { order_id: '#W0000000', reason: 'no longer needed' } };
    const before = await hashOf(sessionId);
    const bad = [
      { name: 'cancel_pending_order', arguments: { order_id: 5, reason: 'no longer needed' } }, // wrong type
      { name: 'cancel_pending_order', arguments: { order_id: '#W1', reason: 'no longer needed', extra: 1 } }, // unknown argument
      { name: 'cancel_pending_order', arguments: {} }, // missing arguments
      { name: 'no_such_tool', arguments: {} },
      write, // a domain error (unknown order)
    ];
    for (const c of bad) {
      const r = await client.callTool(c);
      expect(r.isError, c.name).toBe(true);
      expect(JSON.parse(text(r))).toHaveProperty('error');
      expect(await hashOf(sessionId)).toBe(before);
    }
    // The same through the JSON API: a call whose name is not a string, and a body that is not JSON.
    const r1 = await api(h.server.url, 'POST', `/episodes/${sessionId}/calls`, { name: { evil: true }, arguments: [1] });
    expect(r1.status).toBe(200);
    expect(r1.json).toMatchObject({ ok: false, code: 'parse' });
    const r2 = await api(h.server.url, 'POST', `/episodes/${sessionId}/calls`, '{"name": "cancel_pending_order", "arguments": {');
    expect(r2.status).toBe(400);
    expect(r2.json.error.code).toBe('bad_json');
    expect(await hashOf(sessionId)).toBe(before);
  });

  it('expires an idle MCP session: its episode is reclaimed and the session is gone', async () => {
    const s = await startHarness('mini', { train: 1, test: 0 }, { ttlMs: 150 });
    const transport = new StreamableHTTPClientTransport(new URL(`${s.server.url}/mcp?task=${s.train[0].id}`));
    const c = new Client({ name: 'envace-test', version: '0.0.0' });
    try {
      await c.connect(transport);
      await c.callTool({ name: 'list_all_product_types', arguments: {} });
      expect(s.server.store.size).toBe(1);
      await new Promise((r) => setTimeout(r, 500));
      expect(s.server.store.size).toBe(0);
      await expect(c.callTool({ name: 'list_all_product_types', arguments: {} })).rejects.toThrow();
    } finally {
      await c.close().catch(() => {});
      await s.server.close(500);
    }
  });

  it('refuses sessions without a task or for an unknown task, and ends a session on close', async () => {
    const bad = new Client({ name: 'envace-test', version: '0.0.0' });
    await expect(bad.connect(new StreamableHTTPClientTransport(new URL(`${h.server.url}/mcp?task=nope`)))).rejects.toThrow();
    const live = h.server.store.size;
    const transport = new StreamableHTTPClientTransport(new URL(`${h.server.url}/mcp?task=${h.train[2].id}`));
    const c = new Client({ name: 'envace-test', version: '0.0.0' });
    await c.connect(transport);
    expect(h.server.store.size).toBe(live + 1);
    await transport.terminateSession();
    await c.close();
    expect(h.server.store.size).toBe(live);
  });
});
