// One trainer per run folder, and stopping a trainer (issue 16): two trainers on one --out both ran, and
// SIGINT to `npm` left the trainer running as an orphan. The trainer now
// stops cleanly (exit 130, lock released, run resumable) on SIGINT, SIGTERM and SIGHUP, and also when its
// parent process disappears, whatever the parent did or did not forward.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { trainCli } from '../../src/cli/train';
import { calculateOnlyDomain, captureIo, tinyModelWorkspace } from '../helpers/cli';

const ws = tinyModelWorkspace('signals-');
const work = ws.work;

const args = (out: string) => [
  'test/reliability/train-child.ts', '--mode', 'rehearse', '--steps', '500', '--out', out, '--model', ws.modelDir, '--k', '2', '--prompts', '1',
  '--train-tasks', '3', '--eval-tasks', '0', '--max-turns', '1', '--max-act-tokens', '4', '--max-rehearse-tokens', '4',
  '--grounding-chars', '150', '--history-chars', '150', '--threads', '1',
];

/** Running (a zombie waiting for a reaper that may not exist in a container counts as stopped). */
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return true;
  }
};

async function until(what: string, ok: () => boolean, ms: number): Promise<void> {
  const t0 = Date.now();
  while (!ok()) {
    if (Date.now() - t0 > ms) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('two trainers on one folder', () => {
  it('the second is refused, naming the first one\'s pid (both used to run, interleaving their logs)', async () => {
    const out = join(work, 'two');
    const p = spawn(process.execPath, ['--import', 'tsx', ...args(out)], { stdio: 'ignore' });
    const exit = new Promise((r) => p.on('exit', r));
    try {
      await until('the first trainer to hold the folder', () => existsSync(join(out, '.lock')), 30_000);
      const io = captureIo();
      expect(await trainCli(['--mode', 'rehearse', '--steps', '500', '--out', out, '--model', ws.modelDir], io, { domain: calculateOnlyDomain })).toBe(1);
      expect(io.stderr()).toContain(`${out} is in use by process ${p.pid}`);
    } finally {
      p.kill('SIGKILL');
      await exit;
    }
  }, 60_000);
});

describe('stopping a trainer', () => {
  it('SIGTERM: exit 130 after the current operation, lock released', async () => {
    const out = join(work, 'term');
    const p = spawn(process.execPath, ['--import', 'tsx', ...args(out)], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    p.stderr.on('data', (d) => (err += d));
    const exit = new Promise<number | null>((r) => p.on('exit', (c) => r(c)));
    try {
      await until('the first checkpoint', () => existsSync(join(out, 'run.json')), 30_000);
      p.kill('SIGTERM');
      expect(await exit).toBe(130);
    } finally {
      p.kill('SIGKILL');
    }
    expect(err).toMatch(/SIGTERM: stopping after the current operation/);
    expect(err).toMatch(/interrupted; the run folder resumes from its last checkpoint with --resume/);
    expect(existsSync(join(out, '.lock'))).toBe(false);
  }, 60_000);

  it('its parent killed (as when npm gets SIGINT and does not pass it on): the trainer stops too, no orphan', async () => {
    const out = join(work, 'orphan');
    // A stand-in for npm: starts the trainer, prints its pid, then idles until killed.
    const parentCode = `const c = require('node:child_process').spawn(process.execPath, ${JSON.stringify(['--import', 'tsx', ...args(out)])}, { stdio: 'ignore' });
      console.log(c.pid); setInterval(() => {}, 1000);`;
    const parent = spawn(process.execPath, ['-e', parentCode], { stdio: ['ignore', 'pipe', 'ignore'] });
    let pid = 0;
    parent.stdout.on('data', (d) => (pid ||= Number(String(d).trim())));
    try {
      await until('the trainer pid', () => pid > 0, 10_000);
      await until('the first checkpoint', () => existsSync(join(out, 'run.json')), 30_000);
      expect(alive(pid)).toBe(true);
      parent.kill('SIGKILL');
      await until('the orphaned trainer to stop', () => !alive(pid), 20_000);
    } finally {
      parent.kill('SIGKILL');
      if (pid && alive(pid)) process.kill(pid, 'SIGKILL');
    }
    expect(existsSync(join(out, '.lock'))).toBe(false);
  }, 60_000);
});
