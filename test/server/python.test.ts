// The verl adapter's Python tests (integrations/verl/tests, standard library only) against a live server:
// create / execute / calc_reward / release, isolation, simulate mode, the reward function. Debian's python3
// is preferred; the test is skipped only when no python3 exists at all and CI is not set.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { RETAIL_WRITE_TOOLS } from '../../src/env/retail/index';
import { serializeObservation } from '../../src/env/toolcall';
import { replayTask } from '../../src/env/trace';
import { startHarness, type Harness } from './helpers';

// ENVACE_PYTHON: another interpreter (one with the tokenizers package runs the real-Qwen3-tokenizer test too).
const PY = process.env.ENVACE_PYTHON ? process.env.ENVACE_PYTHON : existsSync('/usr/bin/python3') ? '/usr/bin/python3' : spawnSync('python3', ['--version']).status === 0 ? 'python3' : null;
const ROOT = resolve(__dirname, '../..');

let h: Harness;
let dir: string;
beforeAll(async () => {
  h = await startHarness('mini', { train: 6, test: 0 });
  dir = mkdtempSync(join(tmpdir(), 'envace-py-'));
});
afterAll(async () => {
  await h.server.close(1000);
  rmSync(dir, { recursive: true, force: true });
});

it.skipIf(!PY && process.env.CI !== 'true')('passes the Python adapter tests against a live server', async () => {
  expect(PY, 'python3 is required under CI').not.toBeNull();
  const tasks = h.train.map((t) => {
    const r = replayTask(h.domain.createEnv(), t);
    return {
      id: t.id,
      facts: t.facts,
      writes: t.referenceActions.some((a) => RETAIL_WRITE_TOOLS.has(a.name)),
      actions: t.referenceActions.map((a, i) => ({ name: a.name, arguments: a.arguments, observation: serializeObservation(r.observations[i]) })),
      hash: r.hash,
    };
  });
  expect(tasks.some((t) => t.writes)).toBe(true);
  const file = join(dir, 'tasks.json');
  writeFileSync(file, JSON.stringify(tasks));
  // Asynchronous: the server answers from this process's event loop while Python runs.
  const { code, out } = await new Promise<{ code: number | null; out: string }>((done) => {
    const p = spawn(PY!, ['-m', 'unittest', 'discover', '-s', 'tests', '-v'], {
      cwd: join(ROOT, 'integrations/verl'),
      env: { ...process.env, ENVACE_URL: h.server.url, ENVACE_TASKS: file, PYTHONDONTWRITEBYTECODE: '1' },
    });
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (out += d));
    p.on('close', (code) => done({ code, out }));
  });
  if (process.env.ENVACE_PY_VERBOSE) console.log(out);
  expect(code, out).toBe(0);
  expect(out).toMatch(/Ran 17 tests/);
  expect(out).not.toMatch(/needs a live server/);
  expect(h.server.store.size).toBe(0); // every episode the adapter opened was released
});
