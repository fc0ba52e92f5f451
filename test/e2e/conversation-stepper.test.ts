// The stepper holding a conversation (issue 47), end to end in headless Chromium: the scripted τ² user picked
// with the lab's own User control, a task with a write in the default (mini) world played by the expert that
// talks to that user (the same rollout as `npm run eval -- --user scripted`, its Act turns teacher-forced).
// Checked in the page: the agent's greeting, the user's opening, Act turns, then user turns answering replies,
// in the order said; the user's explicit yes marked, the stop shown as the user ending the call; the episode's
// result (the verifier under the confirmation rule) with the rule as its first item. Then the policy itself
// meets the same user for a few turns and the page shows the rule's verdict whatever the policy did. The
// conversation and its result (1280 px) go to SHOTS as conversation-stepper.png; at 400 px nothing scrolls sideways.
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { loadWorldDomain } from '../../src/env/retail/node';
import { chromiumAvailable, servedLab, SHOTS } from './harness';

const run = chromiumAvailable();
// The lab lists the world's first 12 train tasks of seed 0 (workers/lab/lab.ts): the first of them with a write.
const mini = await loadWorldDomain('mini');
const task = mini.tasks.generate({ split: 'train', count: 12, seed: 0 }).find((t) => t.referenceActions.some((a) => mini.confirmation!.isWrite(a.name)))!;

describe.runIf(run)('the stepper holds a conversation with the scripted user (headless Chromium)', () => {
  const lab = servedLab();
  let page: Page;
  const pageErrors: string[] = [];
  const idle = () => page.waitForSelector('[data-testid=busy]', { state: 'detached', timeout: 240_000 });
  /** The stepper's rows, in page order, by kind. */
  const rowKinds = () => page.$$eval('#stepper ol.turns > li', (els) => els.map((e) => e.getAttribute('data-testid') ?? ''));

  it('the expert and the scripted user: user turns between the Act turns, the yes, the stop, and the result', async () => {
    page = await lab().browser.newPage({ viewport: { width: 1280, height: 800 } });
    page.on('pageerror', (e) => pageErrors.push(e.message));
    const t0 = Date.now();
    await page.goto(`${lab().url}?backend=cpu-fast`);
    await page.waitForSelector('[data-testid=load-status][data-state=ready]', { timeout: 240_000 });
    await idle();
    await page.selectOption('[data-testid=task-select]', task.id);
    await page.selectOption('[data-testid=user-select]', 'scripted');
    await page.selectOption('[data-testid=mode-select]', 'real');
    await page.selectOption('[data-testid=act-source]', 'expert');
    await page.fill('[data-testid=turns]', '30');
    expect(new URL(page.url()).searchParams.get('user')).toBe('scripted');
    const t1 = Date.now();
    await page.click('[data-testid=play]');
    await page.waitForSelector('[data-testid=reward]', { timeout: 300_000 });
    await idle();
    const playS = (Date.now() - t1) / 1000;

    const kinds = await rowKinds();
    // The greeting, the user's opening, an Act turn; a user turn after an Act turn; the stop last.
    expect(kinds.slice(0, 3)).toEqual(['greeting', 'user-turn', 'act-row']);
    const afterAct = kinds.findIndex((k, i) => k === 'user-turn' && kinds.slice(0, i).includes('act-row'));
    expect(afterAct, kinds.join(' ')).toBeGreaterThan(2);
    expect(kinds.at(-1)).toBe('user-stop');
    const users = page.locator('[data-testid=user-turn]');
    expect(await users.count()).toBeGreaterThan(2);
    expect(await users.first().getAttribute('data-opening')).toBe('true');
    // Every user turn but the opening answers a reply: the row before it is an Act turn that wrote one.
    const answered = await page.$$eval('#stepper ol.turns > li[data-testid=user-turn][data-opening=false]', (els) =>
      els.map((e) => !!e.previousElementSibling?.querySelector('.reply')),
    );
    expect(answered.length).toBeGreaterThan(0);
    expect(answered.every(Boolean)).toBe(true);
    // The user's yes is a user turn of its own, marked; a write follows it.
    expect(await page.locator('[data-testid=user-turn][data-confirms=true]').count()).toBeGreaterThan(0);
    expect(await page.textContent('[data-testid=user-stop]')).toMatch(/###STOP###.*the user ends the call/);
    expect(await page.textContent('[data-testid=rollout-status]')).toMatch(/\d+ Act turns, \d+ user turns — ended: the user ended the call \(###STOP###\)/);
    // The result: the verifier's reward under the confirmation rule, the rule first.
    expect(await page.textContent('[data-testid=reward]')).toMatch(/^\s*Reward 1\.00 \(real environment\)/);
    const first = page.locator('[data-testid=verdict]').first();
    expect(await first.getAttribute('data-ok')).toBe('true');
    expect(await first.textContent()).toMatch(/explicit yes.*confirmation rule/);

    await page.addStyleTag({ content: '.statusbar { position: static !important; }' });
    // The conversation and its result, from the greeting to the reward's last item (page coordinates: scrolled to the top).
    await page.evaluate(() => window.scrollTo(0, 0));
    const from = (await page.locator('#stepper ol.turns').boundingBox())!;
    const to = (await page.locator('[data-testid=reward]').boundingBox())!;
    await page.screenshot({ path: join(SHOTS, 'conversation-stepper.png'), fullPage: true, clip: { x: from.x, y: from.y, width: from.width, height: to.y + to.height - from.y } });
    await page.setViewportSize({ width: 400, height: 800 });
    await expect.poll(() => page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(400);
    await page.setViewportSize({ width: 1280, height: 800 });
    console.log(`conversation stepper: load ${((t1 - t0) / 1000).toFixed(1)} s, ${kinds.length} rows played in ${playS.toFixed(1)} s`);
  }, 600_000);

  it('the policy meets the same user: whatever it does, the result carries the confirmation rule', async () => {
    await page.selectOption('[data-testid=act-source]', 'policy');
    await page.fill('[data-testid=turns]', '4');
    await page.fill('[data-testid=max-new]', '48');
    await page.click('[data-testid=reset]');
    await idle();
    // A fresh conversation: the greeting and the user's opening before any Act turn.
    expect(await rowKinds()).toEqual(['greeting', 'user-turn']);
    await page.click('[data-testid=play]');
    await page.waitForSelector('[data-testid=reward]', { timeout: 300_000 });
    await idle();
    const kinds = await rowKinds();
    expect(kinds.slice(0, 3)).toEqual(['greeting', 'user-turn', 'act-row']);
    expect(await page.textContent('[data-testid=rollout-status]')).toMatch(/Act turns?, \d+ user turns? — ended: /);
    expect(await page.locator('[data-testid=verdict]').first().textContent()).toMatch(/confirmation rule/);
    expect(await page.textContent('[data-testid=reward]')).toMatch(/^\s*Reward -?\d\.\d\d/);
    expect(pageErrors).toEqual([]);
    await page.close();
  }, 600_000);
});
