// `npm run serve` as docker and systemd run it: the signal goes to the npm process (the one they started),
// not to node. Real processes, real signals: after SIGTERM to npm a request in flight still completes, then
// no process listens on the port and the node process is gone. Also SIGINT, SIGKILL of npm (node notices
// its parent is gone) and node started without npm.
import { spawn, type ChildProcess } from 'node:child_process';
import { request } from 'node:http';
import { connect } from 'node:net';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(__dirname, '../..');
const ARGS = ['--port', '0', '--world', 'mini', '--tasks', 'test', '--count', '2', '--log', 'info'];

interface Started {
  child: ChildProcess;
  url: string;
  /** The node process that serves (npm's child when started through npm). */
  pid: number;
  exited: Promise<number | null>;
  stderr: () => string;
}

async function start(how: 'npm' | 'node'): Promise<Started> {
  const child = how === 'npm'
    ? spawn('npm', ['run', '--silent', 'serve', '--', ...ARGS], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] })
    : spawn(process.execPath, ['--import', 'tsx', 'src/cli/serve.ts', ...ARGS], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (err += d));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const t0 = Date.now();
  while (!out.includes('\n')) {
    if (Date.now() - t0 > 60_000 || child.exitCode !== null) throw new Error(`serve did not start: ${err}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const line = JSON.parse(out.split('\n')[0]);
  return { child, url: line.url, pid: line.pid, exited, stderr: () => err };
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** True when nothing accepts connections on the URL's port. */
const refused = (url: string) =>
  new Promise<boolean>((r) => {
    const u = new URL(url);
    const s = connect(Number(u.port), u.hostname);
    s.once('connect', () => {
      s.destroy();
      r(false);
    });
    s.once('error', () => r(true));
  });

async function gone(pid: number, ms = 15_000): Promise<boolean> {
  const t0 = Date.now();
  while (alive(pid) && Date.now() - t0 < ms) await new Promise((r) => setTimeout(r, 50));
  return !alive(pid);
}

/** A POST whose body is still arriving (first byte now, the rest after `ms`): a request in flight. */
function slowPost(base: string, path: string, body: string, ms: number): Promise<{ status: number; text: string }> {
  const u = new URL(base + path);
  return new Promise((res, rej) => {
    const req = request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (r) => {
      let text = '';
      r.on('data', (d) => (text += d));
      r.on('end', () => res({ status: r.statusCode ?? 0, text }));
    });
    req.on('error', rej);
    req.write(body.slice(0, 1));
    setTimeout(() => req.end(body.slice(1)), ms);
  });
}

describe('npm run serve stops on signals, however started', () => {
  it('SIGTERM to the npm process: the request in flight completes, then nothing listens and node is gone', async () => {
    const s = await start('npm');
    expect(s.pid).not.toBe(s.child.pid); // node is npm's child, not npm itself
    const tasks = await (await fetch(s.url + '/tasks')).json();
    const inflight = slowPost(s.url, '/episodes', JSON.stringify({ task_id: tasks.task_ids[0] }), 400);
    await new Promise((r) => setTimeout(r, 150));
    s.child.kill('SIGTERM');
    const r = await inflight;
    expect(r.status).toBe(201);
    expect(await s.exited).toBe(0);
    expect(await gone(s.pid)).toBe(true);
    expect(await refused(s.url)).toBe(true);
    expect(s.stderr()).toMatch(/"event":"stop","why":"SIGTERM"/);
  }, 90_000);

  it('SIGINT to the npm process stops it too', async () => {
    const s = await start('npm');
    s.child.kill('SIGINT');
    await s.exited;
    expect(await gone(s.pid)).toBe(true);
    expect(await refused(s.url)).toBe(true);
  }, 90_000);

  it('SIGKILL to the npm process: node sees its parent gone and shuts down by itself', async () => {
    const s = await start('npm');
    s.child.kill('SIGKILL');
    expect(await gone(s.pid)).toBe(true);
    expect(await refused(s.url)).toBe(true);
  }, 90_000);

  it('SIGTERM to node started without npm: exit 0, nothing listening', async () => {
    const s = await start('node');
    expect(s.pid).toBe(s.child.pid);
    s.child.kill('SIGTERM');
    expect(await s.exited).toBe(0);
    expect(await refused(s.url)).toBe(true);
  }, 90_000);
});
