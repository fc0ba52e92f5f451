// Issue 48: the starting policy's evaluation before training is reused when this browser has measured the same
// base (model, world, held-out tasks, limits), and can be skipped, the page saying what the comparison then lacks.
// Three one-step runs of the bundled mini policy in the built lab (Chromium, CPU fast path, one held-out task): the
// first measures its base, the second (after Reset, same settings) reuses it without a "before training" phase, the
// third skips it. The worker's side is tested in Node (test/lab/base-eval.test.ts); this checks what a student sees.
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { chromiumAvailable, servedLab } from './harness';

const run = chromiumAvailable();

describe.runIf(run)('the base evaluation in the lab (headless Chromium)', () => {
  const lab = servedLab();
  let page: Page;
  const idle = () => page.waitForSelector('[data-testid=busy]', { state: 'detached', timeout: 240_000 });

  /** Starts a run with the settings on the page; what the status bar said before step 1, and the summary after. */
  async function trainOnce(): Promise<{ before: string[]; summary: string | null }> {
    await page.evaluate(() => {
      const w = window as unknown as { __before: string[] };
      w.__before = [];
      new MutationObserver(() => {
        const b = document.querySelector('[data-testid=busy]')?.textContent ?? '';
        if (b.includes('before training')) w.__before.push(b);
      }).observe(document.querySelector('.statusbar')!, { subtree: true, childList: true, characterData: true });
    });
    await page.click('[data-testid=train-start]');
    await expect.poll(() => page.textContent('[data-testid=train-step-count]'), { timeout: 300_000, interval: 200 }).toBe('1 of 1 training steps');
    await idle();
    expect(await page.isVisible('[data-testid=error]')).toBe(false);
    const before = await page.evaluate(() => (window as unknown as { __before: string[] }).__before);
    const summary = (await page.locator('[data-testid=heldout-summary]').count()) ? (await page.textContent('[data-testid=heldout-summary]'))!.replace(/\s+/g, ' ').trim() : null;
    return { before, summary };
  }

  it('measures the base once, reuses it for the same run after a reset, and says what a skipped base takes away', async () => {
    page = await lab().browser.newPage({ viewport: { width: 1280, height: 800 } });
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${lab().url}?backend=cpu-fast&tmode=real&steps=1&k=2&prompts=1&evalEvery=1&evalTasks=1&turns=2&maxNew=24`);
    await page.waitForSelector('[data-testid=load-status][data-state=ready]', { timeout: 120_000 });
    expect(await page.inputValue('[data-testid=train-base-eval]')).toBe('reuse');

    const first = await trainOnce();
    expect(first.before.some((b) => b.includes('held-out evaluation'))).toBe(true);
    expect(first.summary).toMatch(/: \d\.\d\d before training → \d\.\d\d after step 1/);
    expect(await page.locator('[data-testid=base-reused]').count()).toBe(0);

    await page.click('[data-testid=train-reset]');
    await idle();
    const second = await trainOnce();
    expect(second.before).toEqual([]);
    // The same starting point as measured, now said to be reused.
    expect(second.summary!.split(' before training')[0]).toBe(first.summary!.split(' before training')[0]);
    expect(await page.textContent('[data-testid=base-reused]')).toMatch(/reused: this browser measured the same model on the same held-out tasks and limits at \d{4}-\d\d-\d\dT/);

    await page.click('[data-testid=train-reset]');
    await idle();
    await page.selectOption('[data-testid=train-base-eval]', 'skip');
    expect(new URL(page.url()).searchParams.get('baseEval')).toBe('skip');
    const third = await trainOnce();
    expect(third.before).toEqual([]);
    expect(third.summary).toBeNull();
    expect((await page.textContent('[data-testid=base-skipped]'))!.replace(/\s+/g, ' ')).toMatch(/no “before training” point: no change against the base, none per task family/);
    expect(errors).toEqual([]);
  }, 900_000);
});
