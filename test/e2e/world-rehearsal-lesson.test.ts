// The world-rehearsal lesson's one click, end to end in headless Chromium (issue 46 item 7: "the lesson's one-click run
// shows both curves and the fidelity curve"). The button in the Training dashboard trains real-only GRPO, then world
// rehearsal at the same real budget (src/method/lesson-runs.ts), with the lab's own run, keep and compare machinery, and
// draws on one plot both runs' held-out success and held-out fidelity, the base policy's line and the ceiling's line
// (pass@k from the model folder's ceiling.json) or, where the folder has none, the note that it was not measured.
//
// The default test runs the lesson at the smallest size its controls allow (URL: 1 step, held-out evaluation every
// step, 2 held-out tasks; the lab's measured budgets and turn limit, the CPU fast path), with a real pass@8 of the
// bundled policy on those same 2 held-out tasks, measured here by `npm run signal` into a temp folder and served as the
// model folder's ceiling.json (the checkout's models/ is not touched); then, reloaded without it, the plot says the
// ceiling was not measured (unless the checkout's bundled model has its own ceiling.json: then that one is drawn).
//
// The second test pauses a 3-step lesson inside its first run (the Training dashboard's Pause), and resumes it: the run
// goes on from the step it stopped at, and the lesson ends with both runs kept, as if it had never stopped.
//
// The lesson at its defaults (40 steps, 100 held-out tasks every 10 steps) takes far longer, so it is opt-in; it writes
// the README's screenshot and a record of the run (settings, end values, wall-clock, machine, commit):
//
//   LAB_WORLD_LESSON=1 [LAB_CEILING=FILE] LAB_SCREENSHOTS=docs/screenshots LAB_RECORDS=research/records npx vitest run test/e2e/world-rehearsal-lesson.test.ts
//
// LAB_CEILING: a ceiling.json written by `npm run signal -- --world mini --split test --task-seed 1 --count 100 --k 8
// --modes real --out FILE` for the bundled policy, served as its folder's (none: the folder's own, if any).
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, describe, expect, it } from 'vitest';
import { commitName } from '../../bench/lib';
import { signalCli } from '../../research/scripts/signal';
import { recordPath } from '../../src/util/record-path';
import { chromiumAvailable, servedLab, SHOTS } from './harness';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const SMALL = '?backend=cpu-fast&lsteps=1&levery=1&ltasks=2';
const CEILING_URL = '**/models/default/ceiling.json';
const OWN_CEILING = join(ROOT, 'models/default/ceiling.json');
const run = chromiumAvailable();
const full = process.env.LAB_WORLD_LESSON === '1';
const norm = (s: string | null) => (s ?? '').replace(/\s+/g, ' ').trim();

/** Serve `json` as the bundled model folder's ceiling.json (the worker reads it with HEAD, then GET). */
async function serveCeiling(ctx: BrowserContext, json: string): Promise<void> {
  await ctx.route(CEILING_URL, (route) => route.fulfill({ status: 200, contentType: 'application/json', headers: { 'Cross-Origin-Resource-Policy': 'same-origin' }, body: json }));
}

/** The lesson plot's legend labels, one per series (the x axis's own entry, where uPlot shows one, left out). */
const legend = async (page: Page) => (await page.locator('[data-testid=lesson-plot] .u-legend .u-series .u-label').allTextContents()).map(norm).filter((l) => l !== 'step');

describe.runIf(run)("the world-rehearsal lesson's one click (headless Chromium)", () => {
  const lab = servedLab();
  const tmp = mkdtempSync(join(tmpdir(), 'envace-lesson-ceiling-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it('trains both runs and draws both success curves, both fidelity curves, the base line and the ceiling line, or the note without one', async () => {
    // A real ceiling of the bundled policy on the lesson's 2 held-out tasks (k 8), measured by the script the lab names.
    const ceilingFile = join(tmp, 'ceiling.json');
    const io = { out: () => undefined, err: () => undefined };
    expect(await signalCli(['--world', 'mini', '--split', 'test', '--task-seed', '1', '--count', '2', '--k', '8', '--modes', 'real', '--threads', '1', '--out', ceilingFile], io)).toBe(0);
    const measured = JSON.parse(readFileSync(ceilingFile, 'utf8')) as { real: { passAtK: number } };

    const ctx = await lab().browser.newContext({ viewport: { width: 1280, height: 900 }, serviceWorkers: 'block' });
    await serveCeiling(ctx, readFileSync(ceilingFile, 'utf8'));
    const page = await ctx.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(lab().url + SMALL);
    await page.waitForSelector('[data-testid=load-status][data-state=ready]', { timeout: 300_000 });
    expect(await page.inputValue('[data-testid=lesson-steps]')).toBe('1');
    expect(await page.inputValue('[data-testid=lesson-eval-tasks]')).toBe('2');
    // The lesson strip's training step points to the lesson's button.
    await page.click('[data-testid=lesson-step][data-step="3"] [data-testid=lesson-go]');
    await expect.poll(() => page.evaluate(() => document.activeElement?.getAttribute('data-testid'))).toBe('lesson-run');
    const button = page.locator('[data-testid=lesson-run]');
    expect(norm(await button.textContent())).toBe('Run the world-rehearsal lesson (2 runs of 1 step)');

    const t0 = Date.now();
    await button.click();
    await page.waitForSelector('[data-testid=lesson-progress]', { timeout: 60_000 });
    await page.waitForSelector('[data-testid=lesson-progress]', { state: 'detached', timeout: 1_100_000 });
    const wallS = (Date.now() - t0) / 1000;
    expect(await page.isVisible('[data-testid=lesson-error]')).toBe(false);
    expect(await page.isVisible('[data-testid=error]')).toBe(false);

    // Both runs kept by the lab's comparison, in their modes, with their real budget named.
    const compare = page.locator('[data-testid=compare]');
    const rows = compare.locator('[data-testid=compare-row]');
    expect(await rows.evaluateAll((rs) => rs.map((r) => r.getAttribute('data-mode')))).toEqual(['real', 'rehearse']);
    const names = (await rows.locator('td:first-child').allTextContents()).map(norm);
    expect(names).toEqual(['lesson: real-only GRPO, 4 real episodes', 'lesson: world rehearsal, 4 real + 12 rehearsed episodes']);
    const other = (await rows.locator('[data-testid=compare-other]').allTextContents()).map(norm);
    expect(other[1]).toContain('strict-checklist reward');
    expect(other[1]).toContain('1 real prompt per step');
    expect(other[1]).toContain("rehearsal recalls the reference's observations");

    // One plot: step 0 (the base policy's evaluation) and step 1; six series, each with both points.
    const plot = page.locator('[data-testid=lesson-plot]');
    expect(await plot.getAttribute('data-points')).toBe('2');
    expect(await plot.getAttribute('data-series')).toBe('6');
    expect(await plot.getAttribute('data-drawn')).toBe('2,2,2,2,2,2');
    const labels = await legend(page);
    const f = String.raw`\d\.\d\d at step 1`;
    expect(labels.map((l, i) => [
      new RegExp(`^held-out success · lesson: real-only GRPO, 4 real episodes: ${f}$`),
      new RegExp(`^held-out fidelity · lesson: real-only GRPO, 4 real episodes: ${f}$`),
      new RegExp(`^held-out success · lesson: world rehearsal, 4 real \\+ 12 rehearsed episodes: ${f}$`),
      new RegExp(`^held-out fidelity · lesson: world rehearsal, 4 real \\+ 12 rehearsed episodes: ${f}$`),
      /^base policy \(step 0\): held-out success \d\.\d\d$/,
      /^ceiling: pass@8 of the base policy, \d\.\d\d \(2 held-out tasks\)$/,
    ][i].test(l))).toEqual([true, true, true, true, true, true]);
    // The ceiling drawn is the measured one.
    expect(labels[5]).toContain(measured.real.passAtK.toFixed(2));
    expect(await page.isVisible('[data-testid=lesson-ceiling-note]')).toBe(false);
    // The table of end values: both runs, base → end for success and fidelity.
    const ends = await page.locator('[data-testid=lesson-end]').evaluateAll((rs) => rs.map((r) => [r.getAttribute('data-role'), ...[...r.querySelectorAll('td')].slice(1).map((td) => td.textContent?.trim())]));
    expect(ends.map((e) => e[0])).toEqual(['real-only', 'rehearsed']);
    for (const e of ends) for (const cell of e.slice(1)) expect(cell).toMatch(/^\d\.\d\d → \d\.\d\d \(step 1\)$/);
    // The base line is both runs' step 0 (the second run reused the first's evaluation).
    expect(ends[0][1]!.slice(0, 4)).toBe(ends[1][1]!.slice(0, 4));
    await expect.poll(() => page.getAttribute('[data-testid=lesson-step][data-step="3"]', 'data-done')).toBe('true');
    await page.addStyleTag({ content: '.statusbar { position: static !important; }' });
    await page.locator('[data-testid=world-lesson]').screenshot({ path: join(SHOTS, 'world-rehearsal-lesson-smoke.png') });

    // Without a ceiling.json the plot draws no ceiling and says it was not measured (the kept runs redrawn after a reload).
    await ctx.unroute(CEILING_URL);
    await page.reload();
    await page.waitForSelector('[data-testid=load-status][data-state=ready]', { timeout: 300_000 });
    await page.waitForSelector('[data-testid=lesson-plot]', { timeout: 60_000 });
    if (existsSync(OWN_CEILING)) {
      expect(await plot.getAttribute('data-series')).toBe('6');
      expect((await legend(page)).at(-1)).toMatch(/^ceiling: pass@\d+ of the base policy, \d\.\d\d \(\d+ held-out tasks; the runs evaluate 2\)$/);
    } else {
      expect(await plot.getAttribute('data-series')).toBe('5');
      expect((await legend(page)).some((l) => /ceiling/.test(l))).toBe(false);
      expect(norm(await page.textContent('[data-testid=lesson-ceiling-note]'))).toMatch(/^ceiling not measured for this model \(no ceiling\.json in its folder\)\. npm run signal -- /);
    }
    expect(errors).toEqual([]);
    console.log(`world-rehearsal lesson, 1 step × 2 runs, 2 held-out tasks: ${wallS.toFixed(1)} s`);
    await ctx.close();
  }, 1_800_000);

  it('paused inside its first run, resumes from that step and ends with both runs kept', async () => {
    const ctx = await lab().browser.newContext({ viewport: { width: 1280, height: 900 }, serviceWorkers: 'block' });
    const page = await ctx.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(lab().url + '?backend=cpu-fast&lsteps=3&levery=3&ltasks=2');
    await page.waitForSelector('[data-testid=load-status][data-state=ready]', { timeout: 300_000 });
    const count = page.locator('[data-testid=train-step-count]');
    await page.click('[data-testid=lesson-run]');
    await page.waitForSelector('[data-testid=lesson-progress]', { timeout: 60_000 });
    // Pause (the Training dashboard's button) once the first run has made a step: it stops after the step under way.
    await expect.poll(() => count.textContent(), { timeout: 600_000, interval: 200 }).toMatch(/^[12] of 3 training steps$/);
    await page.click('[data-testid=train-stop]');
    await page.waitForSelector('[data-testid=lesson-progress]', { state: 'detached', timeout: 600_000 });
    const stopped = norm(await page.textContent('[data-testid=lesson-error]'));
    expect(stopped).toMatch(/^The lesson stopped in its run 1 \(real-only GRPO\) at step [12] of 3\. Resume continues it from there/);
    const at = Number(/at step (\d)/.exec(stopped)![1]);
    expect(norm(await count.textContent())).toBe(`${at} of 3 training steps`);
    const resume = page.locator('[data-testid=lesson-resume]');
    expect(norm(await resume.textContent())).toBe(`Resume the lesson (run 1 of 2 at step ${at} of 3)`);
    // Nothing kept yet; the stopped run is drawn as the one in training.
    expect(await page.locator('[data-testid=compare-row]').count()).toBe(0);

    // Resumed, the run goes on from its step (a restart would show step 0 first), then the second run trains.
    await resume.click();
    await page.waitForSelector('[data-testid=lesson-progress]', { timeout: 60_000 });
    const first = norm(await count.textContent());
    await page.waitForSelector('[data-testid=lesson-progress]', { state: 'detached', timeout: 1_100_000 });
    expect(first).toMatch(new RegExp(`^[${at}-3] of 3 training steps$`));
    expect(await page.isVisible('[data-testid=lesson-error]')).toBe(false);
    expect(await page.isVisible('[data-testid=lesson-resume]')).toBe(false);
    const rows = page.locator('[data-testid=compare-row]');
    expect(await rows.evaluateAll((rs) => rs.map((r) => r.getAttribute('data-mode')))).toEqual(['real', 'rehearse']);
    // Both runs end at step 3 with the base's step 0 beside it: one evaluation each, none repeated.
    const plot = page.locator('[data-testid=lesson-plot]');
    expect(await plot.getAttribute('data-points')).toBe('2');
    const ends = await page.locator('[data-testid=lesson-end]').evaluateAll((rs) => rs.map((r) => [...r.querySelectorAll('td')].slice(1).map((td) => td.textContent?.trim())));
    for (const e of ends) for (const cell of e) expect(cell).toMatch(/^\d\.\d\d → \d\.\d\d \(step 3\)$/);
    expect(errors).toEqual([]);
    await ctx.close();
  }, 1_800_000);

  it.runIf(full)('at its defaults (opt-in: LAB_WORLD_LESSON=1): the README screenshot and a record of the run', async () => {
    const ctx = await lab().browser.newContext({ viewport: { width: 1280, height: 900 }, serviceWorkers: 'block' });
    const ceilingFrom = process.env.LAB_CEILING ? resolve(ROOT, process.env.LAB_CEILING) : existsSync(OWN_CEILING) ? OWN_CEILING : null;
    if (process.env.LAB_CEILING) await serveCeiling(ctx, readFileSync(ceilingFrom!, 'utf8'));
    const page = await ctx.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(lab().url);
    await page.waitForSelector('[data-testid=load-status][data-state=ready]', { timeout: 300_000 });
    const size = {
      steps: Number(await page.inputValue('[data-testid=lesson-steps]')),
      evalEvery: Number(await page.inputValue('[data-testid=lesson-eval-every]')),
      evalTasks: Number(await page.inputValue('[data-testid=lesson-eval-tasks]')),
      seed: Number(await page.inputValue('[data-testid=seed]')),
    };
    // The machine's load (1-minute average) at the start and end: the wall-clock is this machine's as it was shared.
    const loadAtStart = loadavg()[0];
    const t0 = Date.now();
    await page.click('[data-testid=lesson-run]');
    await page.waitForSelector('[data-testid=lesson-progress]', { timeout: 60_000 });
    await page.waitForSelector('[data-testid=lesson-progress]', { state: 'detached', timeout: 14_000_000 });
    const wallS = (Date.now() - t0) / 1000;
    expect(await page.isVisible('[data-testid=lesson-error]')).toBe(false);
    await page.addStyleTag({ content: '.statusbar { position: static !important; }' });
    await page.locator('[data-testid=world-lesson]').screenshot({ path: join(SHOTS, 'world-rehearsal-lesson.png') });
    const record = {
      date: new Date().toISOString(),
      commit: commitName(),
      machine: `${cpus()[0]?.model.trim()} (${cpus().length} cores), Chromium headless`,
      backend: norm(await page.textContent('[data-testid=load-status]')),
      size,
      legend: await legend(page),
      ceilingNote: (await page.isVisible('[data-testid=lesson-ceiling-note]')) ? norm(await page.textContent('[data-testid=lesson-ceiling-note]')) : null,
      ceilingFrom: ceilingFrom ? recordPath(ceilingFrom) : null,
      wallS,
      loadAverage: { start: loadAtStart, end: loadavg()[0] },
      pageErrors: errors,
    };
    writeFileSync(join(process.env.LAB_RECORDS ? resolve(ROOT, process.env.LAB_RECORDS) : SHOTS, 'world-rehearsal-lesson.json'), JSON.stringify(record, null, 1) + '\n');
    console.log(`world-rehearsal lesson at its defaults: ${(wallS / 60).toFixed(1)} min`);
    expect(await page.getAttribute('[data-testid=lesson-plot]', 'data-series')).toBe(ceilingFrom ? '6' : '5');
    expect(errors).toEqual([]);
    await ctx.close();
  }, 14_400_000);
});
