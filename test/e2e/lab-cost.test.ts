// What the bundled mini policy costs in the lab (issue 46 item 6: "state its cost in the lab: load time, step time in
// Chromium"), measured side by side with a 4-layer policy of the same width (models/careless: the shape of fidelity
// stage E, bundled before the 8-layer one), in headless Chromium on the CPU fast path. Opt-in, it takes minutes:
//
//   LAB_COST=1 [LAB_COST_REPEATS=2] [LAB_RECORDS=DIR] npx vitest run test/e2e/lab-cost.test.ts
//
// For each policy, alternating so that the machine's load falls on both alike: a fresh page, the time from navigation to
// the model being ready (download, parse, upload to the backend), then the world-rehearsal lesson at a small size
// (2 steps per run, held-out evaluation of 4 tasks at steps 0 and 2), the time from the click to both runs finished.
// It writes lab-cost.json (each repeat's times, the machine, its load, the commit) into LAB_RECORDS (default: the
// screenshots folder). A record, not a bar: the test checks only that every run finished without an error.
import { writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { commitName } from '../../bench/lib';
import { chromiumAvailable, servedLab, SHOTS } from './harness';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const SMALL = 'backend=cpu-fast&lsteps=2&levery=2&ltasks=4';
const POLICIES = [
  { name: 'default (8 layers)', query: '' },
  { name: 'careless (4 layers)', query: '&model=careless' },
] as const;
const repeats = Math.max(1, Number(process.env.LAB_COST_REPEATS ?? 2));

describe.runIf(chromiumAvailable() && process.env.LAB_COST === '1')('the bundled policy\'s cost in the lab (opt-in: LAB_COST=1)', () => {
  const lab = servedLab();

  it('measures load time and a small lesson for the 8-layer and the 4-layer policy, alternating', async () => {
    const runs: { policy: string; repeat: number; loadS: number; lessonS: number; load: [number, number]; backend: string }[] = [];
    for (let r = 0; r < repeats; r++)
      for (const p of POLICIES) {
        const ctx = await lab().browser.newContext({ viewport: { width: 1280, height: 900 }, serviceWorkers: 'block' });
        const page = await ctx.newPage();
        const errors: string[] = [];
        page.on('pageerror', (e) => errors.push(e.message));
        const load0 = loadavg()[0];
        const t0 = Date.now();
        await page.goto(`${lab().url}?${SMALL}${p.query}`);
        await page.waitForSelector('[data-testid=load-status][data-state=ready]', { timeout: 300_000 });
        const loadS = (Date.now() - t0) / 1000;
        const t1 = Date.now();
        await page.click('[data-testid=lesson-run]');
        await page.waitForSelector('[data-testid=lesson-progress]', { timeout: 60_000 });
        await page.waitForSelector('[data-testid=lesson-progress]', { state: 'detached', timeout: 3_000_000 });
        const lessonS = (Date.now() - t1) / 1000;
        expect(await page.isVisible('[data-testid=lesson-error]')).toBe(false);
        expect(errors).toEqual([]);
        const backend = ((await page.textContent('[data-testid=load-status]')) ?? '').replace(/\s+/g, ' ').trim();
        runs.push({ policy: p.name, repeat: r, loadS, lessonS, load: [load0, loadavg()[0]], backend });
        console.log(`${p.name}, repeat ${r}: ready in ${loadS.toFixed(1)} s, small lesson ${lessonS.toFixed(1)} s (load ${load0.toFixed(1)})`);
        await ctx.close();
      }
    const record = {
      date: new Date().toISOString(),
      commit: commitName(),
      machine: `${cpus()[0]?.model.trim()} (${cpus().length} cores), Chromium headless`,
      lesson: 'world-rehearsal lesson, 2 steps per run (real-only GRPO 1 prompt × K 4, world rehearsal 4 prompts × K 4), held-out evaluation of 4 tasks at steps 0 and 2',
      runs,
    };
    writeFileSync(join(process.env.LAB_RECORDS ? resolve(ROOT, process.env.LAB_RECORDS) : SHOTS, 'lab-cost.json'), JSON.stringify(record, null, 1) + '\n');
  }, 7_200_000);
});
