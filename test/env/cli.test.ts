// The env CLI as a user runs it: replay of the τ²-bench train tasks (results, summary, exit status, a
// trace identical to gold-train.jsonl), failure reporting, and generated tasks round-tripping through replay.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { retailDomain } from '../../src/env/retail/index';
import { retailDataPath } from '../../src/env/retail/node';
import { base } from './helpers';

const run = (...args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/env.ts', ...args], { encoding: 'utf8' });
const dir = mkdtempSync(join(tmpdir(), 'env-cli-'));
const tasksPath = retailDataPath('tasks-train.json');
const goldPath = retailDataPath('gold-train.jsonl');

describe('npm run env -- replay', () => {
  it.skipIf(!tasksPath || !goldPath)('replays the train tasks: 74 passed, trace byte-identical to gold', () => {
    const trace = join(dir, 'trace.jsonl');
    const r = run('replay', tasksPath!, '--trace', trace, '--gold', goldPath!);
    expect(r.status).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines.at(-1)).toBe('74 passed, 0 failed');
    expect(JSON.parse(lines[0])).toEqual({ id: '0', ok: true, reward: 1 });
    expect(readFileSync(trace, 'utf8')).toBe(readFileSync(goldPath!, 'utf8'));
    expect(r.stderr).toMatch(/74\/74/);
  });

  it('reports a bad task and exits non-zero', () => {
    const f = join(dir, 'bad.json');
    writeFileSync(f, JSON.stringify([
      { id: 'a', user_scenario: { instructions: 'x' }, evaluation_criteria: { actions: [{ name: 'get_order_details', arguments: { order_id: '#W2378156' } }], communicate_info: [] } },
      { id: 'b', user_scenario: { instructions: 'x' }, evaluation_criteria: { actions: [{ name: 'drop_tables', arguments: {} }], communicate_info: [] } },
    ]));
    const r = run('replay', f);
    expect(r.status).toBe(1);
    const lines = r.stdout.trim().split('\n').map((l) => l);
    expect(JSON.parse(lines[1])).toMatchObject({ id: 'b', ok: false, error: "action drop_tables: Tool 'drop_tables' not found." });
    expect(lines.at(-1)).toBe('1 passed, 1 failed');
  });

  it('replays generated tasks', () => {
    const f = join(dir, 'gen.json');
    // Written as `npm run env -- generate --out` writes it.
    writeFileSync(f, JSON.stringify(retailDomain(base).tasks.generate({ split: 'train', count: 12, seed: 3 }), null, 1) + '\n');
    const r = run('replay', f);
    expect(r.stdout.trim().split('\n').at(-1)).toBe('12 passed, 0 failed');
    expect(r.status).toBe(0);
  });

  it('rejects usage errors with exit status 2', () => {
    expect(run('frobnicate').status).toBe(2);
    expect(run('expert', '--split', 'test', '--rows', join(dir, 'r.jsonl')).status).toBe(2);
  });
});
