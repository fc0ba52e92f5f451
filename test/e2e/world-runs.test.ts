// A fresh training run in the full retail world, end to end in headless Chromium (issue 48: a warning appears only
// when it is true; every phase of long work says how far it is and how long is left). test/e2e/lab.test.ts starts
// a fresh run in the mini world (the default) and sees no warning; this starts one in the retail world, opened from
// its link (?world=retail, its own bundled policy), and records from Start on every warning about the run and every
// line and time left of the status bar:
// - no warning appears (a run in one world once read as "trains in the other world" until its first step),
// - the starting policy's held-out evaluation shows a count of episodes and a time left, and so does the
//   rehearsal-fidelity check after it,
// - the first training step starts, and the run ends its one step with no error.
// Smallest settings that still run a real step: the CPU fast path (no load-time timing of two backends), real
// mode (the default: no rehearsals in the step), 1 prompt × K 2, Act budget 24, 3 turns, a Rehearse budget of 48
// tokens (the fidelity check decodes each reference call's rehearsal to it; the retail world's measured budget is
// far longer), 2 held-out tasks (a time left needs a round timed while an episode is still going), 1 step.
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { chromiumAvailable, servedLab } from './harness';

const SETTINGS = '?world=retail&backend=cpu-fast&maxNew=24&turns=3&reh=48&steps=1&k=2&prompts=1&evalEvery=1&evalTasks=2';
const run = chromiumAvailable();

describe.runIf(run)('a fresh training run in the retail world (headless Chromium)', () => {
  const lab = servedLab();
  let page: Page;

  it('starts with no warning, shows a count and the time left in the evaluation and the fidelity check before step 1, and trains its step', async () => {
    page = await lab().browser.newPage({ viewport: { width: 1280, height: 800 } });
    const pageErrors: string[] = [];
    page.on('pageerror', (e) => pageErrors.push(e.message));
    const t0 = Date.now();
    await page.goto(lab().url + SETTINGS);
    await page.waitForSelector('[data-testid=load-status][data-state=ready]', { timeout: 240_000 });
    expect(await page.inputValue('[data-testid=world-select]')).toBe('retail');
    await expect.poll(() => page.textContent('[data-testid=world-info]')).toMatch(/^full τ²-bench retail: 500 users/);
    expect(await page.textContent('[data-testid=load-status]')).toMatch(/Ready: bundled retail policy \(models\/retail\) on cpu-fast/);
    expect(await page.inputValue('[data-testid=train-mode]')).toBe('real');
    expect(await page.textContent('[data-testid=train-step-count]')).toBe('0 of 1 training steps');
    const loadS = (Date.now() - t0) / 1000;

    // Watch the status bar (line and time left) and the run's warnings from before Start.
    await page.evaluate(() => {
      const w = window as unknown as { __seen: { busy: string; eta: string }[]; __warnings: string[] };
      w.__seen = [];
      w.__warnings = [];
      const look = () => {
        const busy = document.querySelector('[data-testid=busy]')?.textContent ?? '';
        const eta = document.querySelector('[data-testid=eta]')?.textContent ?? '';
        const last = w.__seen[w.__seen.length - 1];
        if (busy && (!last || last.busy !== busy || last.eta !== eta)) w.__seen.push({ busy, eta });
        for (const el of document.querySelectorAll('[data-testid=run-warning]')) w.__warnings.push(el.textContent ?? '');
      };
      new MutationObserver(look).observe(document.body, { subtree: true, childList: true, characterData: true });
    });
    const t1 = Date.now();
    await page.click('[data-testid=train-start]');
    await expect.poll(() => page.textContent('[data-testid=train-step-count]'), { timeout: 420_000, interval: 500 }).toBe('1 of 1 training steps');
    await page.waitForSelector('[data-testid=busy]', { state: 'detached', timeout: 120_000 });
    const runS = (Date.now() - t1) / 1000;
    const seen = await page.evaluate(() => {
      const w = window as unknown as { __seen: { busy: string; eta: string }[]; __warnings: string[] };
      return { lines: [...w.__seen], warnings: [...w.__warnings] };
    });
    // No warning from Start to the end of the run, and none now.
    expect(seen.warnings).toEqual([]);
    expect(await page.locator('[data-testid=run-warning]').count()).toBe(0);
    expect(await page.isVisible('[data-testid=error]')).toBe(false);
    // Before step 1: part 1, the held-out evaluation, counts its episodes with a time left; part 2, the fidelity
    // check, counts its decoded rehearsals with a time left.
    const part1 = seen.lines.filter((l) => /before training, part 1 of 2, the starting policy · held-out evaluation.*: \d of 2 finished/.test(l.busy));
    const part2 = seen.lines.filter((l) => /before training, part 2 of 2, the starting policy · held-out rehearsal fidelity: \d+ of \d+ rehearsals of the reference calls decoded/.test(l.busy));
    expect(part1.length, seen.lines.map((l) => l.busy).join('\n')).toBeGreaterThan(0);
    expect(part2.length, seen.lines.map((l) => l.busy).join('\n')).toBeGreaterThan(0);
    expect(part1.some((l) => /^about \d+ (s|min) left$/.test(l.eta)), JSON.stringify(part1)).toBe(true);
    expect(part2.some((l) => /^about \d+ (s|min) left$/.test(l.eta)), JSON.stringify(part2)).toBe(true);
    // Then the training step itself ran: its rollouts and its update.
    expect(seen.lines.some((l) => /step 1 of 1 · rollouts: \d of 2 finished/.test(l.busy))).toBe(true);
    expect(seen.lines.some((l) => /step 1 of 1 · update/.test(l.busy))).toBe(true);
    expect(await page.textContent('[data-testid=heldout-summary]')).toMatch(/: \d\.\d\d before training → \d\.\d\d after step 1 \([+−±]\d+ points?\)\.$/);
    expect(await page.getAttribute('[data-testid=loss-plot]', 'data-points')).toBe('1');
    expect(pageErrors).toEqual([]);
    console.log(`retail run: load ${loadS.toFixed(1)} s, evaluation, fidelity check and one step ${runS.toFixed(1)} s; ${seen.lines.length} status lines`);
    await page.close();
  }, 600_000);
});
