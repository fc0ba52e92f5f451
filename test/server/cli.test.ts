// `npm run serve` in-process: flags, the listening line, a JSON log, and a clean shutdown on the stop signal.
import { describe, expect, it } from 'vitest';
import { serveMain } from '../../src/cli/serve';
import { captureIo } from '../helpers/cli';

describe('npm run serve', () => {
  it('serves the chosen world and tasks until stopped, logging JSON lines', async () => {
    const io = captureIo();
    let stop!: () => void;
    const stopped = new Promise<void>((r) => (stop = r));
    const done = serveMain(['--port', '0', '--world', 'mini', '--tasks', 'test', '--count', '3', '--ttl', '60', '--log', 'info'], io, stopped);
    let url = '';
    for (let i = 0; i < 200 && !url; i++) {
      await new Promise((r) => setTimeout(r, 25));
      const line = io.stdout().split('\n')[0];
      if (line) url = JSON.parse(line).url;
    }
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const health = await (await fetch(url + '/health')).json();
    expect(health).toMatchObject({ status: 'ok', world: 'mini', tasks: { train: 0, test: 3 }, ttl_s: 60 });
    stop();
    expect(await done).toBe(0);
    const events = io.stderr().trim().split('\n').map((l) => JSON.parse(l).event);
    expect(events).toEqual(['listening', 'stop', 'shutdown', 'closed']);
  });

  it('rejects bad flags with a usage error', async () => {
    for (const args of [[], ['--port', 'x'], ['--port', '0', '--world', 'mars'], ['--port', '0', '--tasks', '/nonexistent.json']]) {
      const io = captureIo();
      expect(await serveMain(args, io, Promise.resolve()), args.join(' ')).toBe(2);
      expect(io.stderr()).toMatch(/usage: npm run serve|error:/);
    }
  });
});
