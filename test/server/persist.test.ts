// Nothing lost on restart (--state DIR): a real server process killed with SIGKILL in the middle of a load
// comes back with every episode, each continuing with the observations it had and ending on the database
// hash a straight replay of its calls gives. Plus the journal's own rules: a graceful stop keeps episodes,
// release and expiry end them, a torn last line is skipped, an episode whose task is not served is dropped.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ToolCall } from '../../src/env/domain';
import { loadWorldDomain } from '../../src/env/retail/node';
import { serializeObservation } from '../../src/env/toolcall';
import { taskSet } from '../../src/server/episodes';
import { startServer } from '../../src/server/http';
import { Journal, JOURNAL_FILE, readJournal } from '../../src/server/journal';
import { api } from './helpers';

const ROOT = resolve(__dirname, '../..');
const dirs: string[] = [];
const tmp = () => {
  const d = mkdtempSync(join(tmpdir(), 'envace-state-'));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const domain = loadWorldDomain('mini');
const tasks = domain.tasks.generate({ split: 'train', count: 24, seed: 0 });

async function serve(state: string): Promise<{ child: ChildProcess; url: string; exited: Promise<unknown> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/serve.ts', '--port', '0', '--world', 'mini', '--tasks', 'train', '--count', '24', '--state', state, '--log', 'warn'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (err += d));
  const exited = new Promise((r) => child.once('exit', r));
  const t0 = Date.now();
  while (!out.includes('\n')) {
    if (Date.now() - t0 > 60_000 || child.exitCode !== null) throw new Error(`serve did not start: ${err}`);
    await new Promise((r) => setTimeout(r, 25));
  }
  return { child, url: JSON.parse(out.split('\n')[0]).url, exited };
}

/** Episode e's calls: its task's reference actions, cycled to 10 (some fail on purpose: errors are state too). */
const plan = (e: number): ToolCall[] => {
  const acts = tasks[e % tasks.length].referenceActions;
  return Array.from({ length: 10 }, (_, i) => acts[i % acts.length]);
};

/** Observations and final hash of a straight replay of `calls` on a fresh database of the world. */
function replay(calls: readonly ToolCall[]): { obs: string[]; hash: string } {
  const env = domain.createEnv();
  const obs = calls.map((c) => serializeObservation(env.execute(c)));
  return { obs, hash: env.hash() };
}

describe('episodes survive a crash', () => {
  it('kill -9 during load, restart: every episode continues with the same observations and final hash', async () => {
    const state = tmp();
    const EPISODES = 32;
    let s = await serve(state);
    const ids: string[] = [];
    for (let e = 0; e < EPISODES; e++) ids.push((await api(s.url, 'POST', '/episodes', { task_id: tasks[e % tasks.length].id })).json.episode_id);
    const seen: string[][] = ids.map(() => []);
    let acked = 0;
    let killed = false;
    // 32 clients drive their episodes concurrently; the server dies under them after ~120 answered calls.
    const load = Promise.all(
      ids.map(async (id, e) => {
        for (const c of plan(e)) {
          if (killed) return;
          try {
            const r = await api(s.url, 'POST', `/episodes/${id}/calls`, c);
            seen[e].push(r.json.observation);
            if (++acked === 120) {
              killed = true;
              s.child.kill('SIGKILL');
            }
          } catch {
            return; // the connection died with the server
          }
        }
      }),
    );
    await load;
    await s.exited;
    expect(killed).toBe(true);
    expect(acked).toBeGreaterThanOrEqual(120);
    expect(acked).toBeLessThan(EPISODES * 10);

    s = await serve(state);
    try {
      for (const [e, id] of ids.entries()) {
        const calls = plan(e);
        const want = replay(calls);
        const ep = (await api(s.url, 'GET', `/episodes/${id}`)).json;
        // Every answered call is there; a call the server died answering may be too (it was journaled first).
        expect(ep.turns, id).toBeGreaterThanOrEqual(seen[e].length);
        expect(ep.turns).toBeLessThanOrEqual(seen[e].length + 1);
        const toolMsgs = (ep.messages as { role: string; content: string }[]).filter((m) => m.role === 'tool').map((m) => m.content);
        expect(toolMsgs.slice(0, seen[e].length)).toEqual(seen[e]);
        expect(toolMsgs).toEqual(want.obs.slice(0, ep.turns));
        for (const c of calls.slice(ep.turns)) {
          const r = await api(s.url, 'POST', `/episodes/${id}/calls`, c);
          expect(r.status).toBe(200);
          toolMsgs.push(r.json.observation);
        }
        expect(toolMsgs).toEqual(want.obs);
        expect((await api(s.url, 'GET', `/episodes/${id}`)).json.db_hash).toBe(want.hash);
      }
      // Some episodes wrote: the hashes are not all the initial one.
      expect(new Set(ids.map((_, e) => replay(plan(e)).hash)).size).toBeGreaterThan(1);
    } finally {
      s.child.kill('SIGTERM');
      await s.exited;
    }
  }, 120_000);
});

describe('the journal', () => {
  const start = (state: string, served = tasks) => startServer({ domain, world: 'mini', tasks: taskSet(served), port: 0, stateDir: state, log: () => {} });

  it('keeps episodes over a graceful restart; release and expiry end them', async () => {
    const state = tmp();
    let s = await start(state);
    const a = (await api(s.url, 'POST', '/episodes', { task_id: tasks[0].id })).json.episode_id;
    const b = (await api(s.url, 'POST', '/episodes', { task_id: tasks[1].id })).json.episode_id;
    await api(s.url, 'POST', `/episodes/${a}/calls`, tasks[0].referenceActions[0]);
    await api(s.url, 'DELETE', `/episodes/${b}`);
    const before = (await api(s.url, 'GET', `/episodes/${a}`)).json;
    await s.close(500);
    s = await start(state);
    try {
      expect((await api(s.url, 'GET', `/episodes/${a}`)).json).toEqual(before);
      expect((await api(s.url, 'GET', `/episodes/${b}`)).status).toBe(404);
      expect(s.store.size).toBe(1);
      expect((await api(s.url, 'GET', '/health')).json).toMatchObject({ restored: 1, created: 0, live_episodes: 1 });
    } finally {
      await s.close(500);
    }
    // Opening compacts: the released episode's records are gone from the file.
    expect(readFileSync(join(state, JOURNAL_FILE), 'utf8')).not.toContain(b);
  });

  it('skips a torn last line and drops episodes whose task is not served', async () => {
    const state = tmp();
    let s = await start(state);
    const a = (await api(s.url, 'POST', '/episodes', { task_id: tasks[0].id })).json.episode_id;
    const c = (await api(s.url, 'POST', '/episodes', { task_id: tasks[5].id })).json.episode_id;
    await api(s.url, 'POST', `/episodes/${a}/calls`, tasks[0].referenceActions[0]);
    await s.close(500);
    appendFileSync(join(state, JOURNAL_FILE), `{"e":"call","id":"${a}","name":"get_us`); // a crash mid-write
    expect(readJournal(readFileSync(join(state, JOURNAL_FILE), 'utf8')).dropped).toBe(1);
    s = await start(state, tasks.slice(0, 5));
    try {
      expect((await api(s.url, 'GET', `/episodes/${a}`)).json.turns).toBe(1);
      expect((await api(s.url, 'GET', `/episodes/${c}`)).status).toBe(404);
    } finally {
      await s.close(500);
    }
  });

  it('rebuilds an MCP session\'s episode; the session itself ends with a 404 that says why', async () => {
    const state = tmp();
    let s = await start(state);
    const client = new Client({ name: 'mcp-restart', version: '0' });
    const transport = new StreamableHTTPClientTransport(new URL(`${s.url}/mcp?task=${tasks[0].id}`));
    await client.connect(transport);
    const sid = transport.sessionId!;
    await client.callTool({ name: tasks[0].referenceActions[0].name, arguments: tasks[0].referenceActions[0].arguments });
    const before = (await api(s.url, 'GET', `/episodes/${sid}`)).json;
    await s.close(500);
    await client.close().catch(() => {});
    s = await start(state);
    try {
      expect((await api(s.url, 'GET', `/episodes/${sid}`)).json).toEqual(before);
      const r = await fetch(`${s.url}/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': sid },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      });
      expect(r.status).toBe(404);
      expect((await r.json()).error.message).toMatch(/did not survive a server restart.*open a new session/);
    } finally {
      await s.close(500);
    }
  });

  it('compacts itself while running: released episodes do not grow the file forever', async () => {
    const state = tmp();
    const { journal } = Journal.open(state, { compactAt: 200 });
    const keep = ['keep-1', 'keep-2'];
    for (const id of keep) {
      journal.create({ id, task: tasks[0].id, client: 'c', created: 1, mcp: false });
      journal.call(id, 'get_user_details', { user_id: id });
    }
    for (let i = 0; i < 500; i++) {
      const id = `gone-${i}`;
      journal.create({ id, task: tasks[1].id, client: 'c', created: 2, mcp: false });
      for (let k = 0; k < 3; k++) journal.call(id, 'get_order_details', { order_id: `#W${k}` });
      journal.end(id, 'released');
      await journal.durable();
    }
    const lines = readFileSync(join(state, JOURNAL_FILE), 'utf8').trim().split('\n').length;
    expect(lines).toBeLessThan(200);
    expect(journal.size.liveLines).toBe(4);
    const { live, dropped } = readJournal(readFileSync(join(state, JOURNAL_FILE), 'utf8'));
    expect(dropped).toBe(0);
    expect(live.map((e) => [e.id, e.calls.length])).toEqual([['keep-1', 1], ['keep-2', 1]]);
    await journal.close();
  });
});
