// The lesson's whole training run in the browser, at the lab's default settings (100 GRPO steps in the real
// environment, 4 prompts × K 4, LoRA rank 8, lr 1e-3, held-out evaluation of 100 tasks before training and
// every 50 steps, seed 1): does held-out success end above the starting policy's, and how long does it take
// on this machine? Over ten minutes on the 2-core development machine, so it is not part of `npm test`:
//
//   LAB_LESSON_RUN=1 npx vitest run test/e2e/lesson-run.test.ts
//   LAB_LESSON_RUN=1 LAB_SCREENSHOTS=docs/screenshots LAB_RECORDS=research/records npx vitest run test/e2e/lesson-run.test.ts
//   (the image and record docs/lab.md shows)
//
// It writes the dashboard's screenshot (lesson-run.png) and a record of the run (lesson-run.json: settings as
// the page shows them, the held-out success before and after, wall-clock, machine, date, commit), the record
// into LAB_RECORDS when given (docs/ holds pages and their images, never records), else beside the screenshot.
import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { commitName } from '../../bench/lib';
import { chromiumAvailable, servedLab, SHOTS } from './harness';

const run = process.env.LAB_LESSON_RUN === '1' && chromiumAvailable();

describe.runIf(run)('the lesson run in the browser (opt-in: LAB_LESSON_RUN=1)', () => {
  const lab = servedLab();

  it('trains at the default settings and ends with held-out success above the starting policy', async () => {
    const page = await lab().browser.newPage({ viewport: { width: 1280, height: 900 } });
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(lab().url);
    await page.waitForSelector('[data-testid=load-status][data-state=ready]', { timeout: 300_000 });
    expect(await page.inputValue('[data-testid=world-select]')).toBe('mini');
    const settings = {
      mode: await page.inputValue('[data-testid=train-mode]'),
      steps: Number(await page.inputValue('[data-testid=train-steps]')),
      heldOutTasks: Number(await page.inputValue('[data-testid=eval-tasks]')),
      seed: Number(await page.inputValue('[data-testid=seed]')),
      // Every input of the dashboard, by its label (the mode is the select above); a checkbox by its state (its
      // value is "on" whether it is ticked or not).
      inputs: Object.fromEntries(
        await page.locator('[data-testid=train-panel] .controls label:has(input)').evaluateAll((ls) =>
          ls.map((l) => {
            const i = l.querySelector('input') as HTMLInputElement;
            return [l.textContent!.trim(), i.type === 'checkbox' ? (i.checked ? 'ticked' : 'not ticked') : i.value];
          }),
        ),
      ) as Record<string, string>,
      backend: await page.textContent('[data-testid=load-status]'),
    };
    const t0 = Date.now();
    await page.click('[data-testid=train-start]');
    await expect.poll(() => page.textContent('[data-testid=train-step-count]'), { timeout: 3_600_000, interval: 2_000 }).toBe(`${settings.steps} of ${settings.steps} training steps`);
    await page.waitForSelector('[data-testid=busy]', { state: 'detached', timeout: 600_000 });
    const wallS = (Date.now() - t0) / 1000;
    expect(await page.isVisible('[data-testid=error]')).toBe(false);
    const summary = (await page.textContent('[data-testid=heldout-summary]'))!.replace(/\s+/g, ' ').trim();
    const m = /: (\d\.\d\d) before training → (\d\.\d\d) after step (\d+)/.exec(summary);
    expect(m, summary).not.toBeNull();
    const [before, after, atStep] = [Number(m![1]), Number(m![2]), Number(m![3])];
    await page.addStyleTag({ content: '.statusbar { position: static !important; }' });
    await page.locator('[data-testid=train-panel]').screenshot({ path: join(SHOTS, 'lesson-run.png') });
    const commit = commitName();
    const record = { date: new Date().toISOString(), commit, machine: `${cpus()[0]?.model.trim()} (${cpus().length} cores), Chromium headless`, settings, summary, before, after, atStep, wallS, pageErrors: errors };
    writeFileSync(join(process.env.LAB_RECORDS ?? SHOTS, 'lesson-run.json'), JSON.stringify(record, null, 1) + '\n');
    expect(errors).toEqual([]);
    expect(atStep).toBe(settings.steps);
    expect(after, summary).toBeGreaterThan(before);
    await page.close();
  }, 3_900_000);
});
