// The observation view and the tables, end to end in headless Chromium (issue 48: rehearsal and reality compared
// at a glance; tables that read at 1280 px and at 400 px).
// - A rehearsal known to differ: a rollouts.jsonl line imported through the lab's own control, whose rehearsed
//   observation is the real answer of the retail environment with one value changed, one field left out and one
//   made up. The view must mark exactly those fields, and its numbers must be fidelity's.
// - A rehearsal by the bundled policy (the expert acts, the policy rehearses): the marks agree with the values
//   shown and with the rollout's fidelity as the worker measured it.
// - The group table at 1280 and 400 px: no word of a header and no number broken across lines, nothing wider
//   than the window; the checklist folded to a count.
// Screenshots go to a temporary folder; `LAB_SCREENSHOTS=docs/screenshots npx vitest run test/e2e/observation-view.test.ts`
// writes the committed ones (observation-1280.png, observation-400.png, group-1280.png, group-400.png).
import { join } from 'node:path';
import type { Locator, Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { serializeObservation } from '../../src/env/toolcall';
import { compareObservations } from '../../src/rollout/fidelity';
import type { Observation } from '../../src/env/domain';
import { retail } from '../fixtures/domains';
import { chromiumAvailable, servedLab, SHOTS } from './harness';
import { LESSON_ANCHORS } from '../../src/ui/lesson-links';

const run = chromiumAvailable();
// The build names the rendered guide (as a Pages workflow would, at the built commit); Vite reads VITE_* from the
// environment at build time. This file runs in its own process, so no other suite's build sees it.
const GUIDE = 'https://github.com/example/envace-lab/blob/0123abc/docs/lesson/README.md';
process.env.VITE_LESSON_URL = GUIDE;

/** A real get_order_details answer of the retail environment, and a rehearsal of it that differs in known fields. */
function knownDifference() {
  const task = retail.tasks.generate({ split: 'train', count: 40, seed: 0 }).find((t) => t.referenceActions.some((a) => a.name === 'get_order_details'))!;
  const call = task.referenceActions.find((a) => a.name === 'get_order_details')!;
  const real = retail.createEnv().execute(call);
  if (!real.ok) throw new Error('the reference call should succeed');
  const r = structuredClone(real.result) as Record<string, unknown>;
  const wrong = { ...r, status: r.status === 'cancelled' ? 'delivered' : 'cancelled', invented: 'made up' } as Record<string, unknown>;
  delete wrong.user_id;
  const rehearsed: Observation = { ok: true, name: call.name, result: wrong };
  return { call, real, rehearsed, fidelity: compareObservations(rehearsed, real) };
}

const gen = (text: string) => ({ source: 'policy', prompt: 'p', promptTokens: 1, text, tokens: [{ text, lp: -1 }], ms: 1 });

/** Texts of an element set that a line break cuts inside a word (a header "rewa/rd", a number "-0./286"). */
async function brokenWords(page: Page, sel: string): Promise<string[]> {
  return page.locator(sel).evaluateAll((els) => {
    const out: string[] = [];
    for (const el of els) {
      const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
      for (let n = walker.nextNode(); n; n = walker.nextNode()) {
        const text = n.textContent ?? '';
        for (const m of text.matchAll(/\S+/g)) {
          const range = document.createRange();
          range.setStart(n, m.index!);
          range.setEnd(n, m.index! + m[0].length);
          // One box per line the word occupies; an invisible word (folded) has none.
          const tops = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
          if (tops.size > 1) out.push(m[0]);
        }
      }
    }
    return out;
  });
}

/** The elements that reach past the window's right edge or overflow their own box (what to fix when the page scrolls sideways). */
function overflowing(page: Page, width: number): Promise<string> {
  return page.evaluate((w) => {
    const out: string[] = [];
    for (const el of document.querySelectorAll('body *')) {
      const r = el.getBoundingClientRect();
      if (r.right > w + 0.5 || el.scrollWidth > el.clientWidth + 1) out.push(`${el.tagName.toLowerCase()}.${el.className} "${(el.textContent ?? '').slice(0, 40)}" right ${Math.round(r.right)} scroll ${el.scrollWidth}/${el.clientWidth}`);
    }
    return out.slice(-12).join('; ');
  }, width);
}

describe.runIf(run)('observation view and tables (headless Chromium)', () => {
  const lab = servedLab();
  let page: Page;
  const pageErrors: string[] = [];
  const ready = () => page.waitForSelector('[data-testid=load-status][data-state=ready]', { timeout: 180_000 });
  const idle = () => page.waitForSelector('[data-testid=busy]', { state: 'detached', timeout: 240_000 });
  const shot = async (name: string, target: string | Locator) => {
    await page.addStyleTag({ content: '.statusbar { position: static !important; }' });
    await (typeof target === 'string' ? page.locator(target) : target).first().screenshot({ path: join(SHOTS, `${name}.png`) });
  };

  it('marks the fields of a rehearsal known to differ: one value, one left out, one made up; its numbers are fidelity', async () => {
    page = await lab().browser.newPage({ viewport: { width: 1280, height: 800 } });
    page.on('pageerror', (e) => pageErrors.push(e.message));
    await page.goto(lab().url);
    await ready();
    // The lesson strip links each step to its section of the guide the build named.
    expect(await page.locator('[data-testid=lesson-link]').evaluateAll((as) => as.map((a) => a.getAttribute('href')))).toEqual(
      Object.values(LESSON_ANCHORS).map((anchor) => `${GUIDE}#${anchor}`),
    );
    const k = knownDifference();
    const call = {
      call: JSON.stringify({ name: k.call.name, arguments: k.call.arguments }),
      name: k.call.name,
      rehearse: gen('<execution_result>…</execution_result>'),
      rehearsed: serializeObservation(k.rehearsed),
      rehearseError: null,
      real: serializeObservation(k.real),
      fidelity: { exact: k.fidelity.exact, f1: k.fidelity.f1, errorAgree: k.fidelity.errorAgree },
    };
    const turn = { index: 0, act: gen('<tool_call>…</tool_call>'), reply: null, calls: [call] };
    const line = { taskId: null, request: 'Where is my order?', mode: 'rehearse', seed: 1, turns: [turn], done: true, endReason: 'imported', reward: null, fidelity: null };
    await page.setInputFiles('[data-testid=import-rollouts]', { name: 'known.jsonl', mimeType: 'application/jsonl', buffer: Buffer.from(JSON.stringify(line) + '\n') });
    await expect.poll(() => page.locator('[data-testid=obs-view]').count()).toBe(1);
    const view = page.locator('[data-testid=obs-view]');
    const marked = (side: string, mark: string) => view.locator(`[data-testid=${side}] [data-mark=${mark}]`).evaluateAll((ls) => ls.map((l) => l.getAttribute('data-path')));
    // The differing value is marked on both sides, on one row; each one-sided field on its own side only.
    expect(await marked('rehearsed', 'differs')).toEqual(['$."result"."status"']);
    expect(await marked('observation-real', 'differs')).toEqual(['$."result"."status"']);
    expect(await marked('observation-real', 'real-only')).toEqual(['$."result"."user_id"']);
    expect(await marked('rehearsed', 'real-only')).toEqual([]);
    expect(await marked('rehearsed', 'rehearsed-only')).toEqual(['$."result"."invented"']);
    expect(await marked('observation-real', 'rehearsed-only')).toEqual([]);
    const status = view.locator('[data-testid=rehearsed] [data-mark=differs]');
    const realStatus = view.locator('[data-testid=observation-real] [data-mark=differs]');
    expect((await status.boundingBox())!.y).toBeCloseTo((await realStatus.boundingBox())!.y, 0);
    expect(await realStatus.textContent()).toContain(JSON.stringify((k.real as { result: { status: string } }).result.status));
    // Every other field agrees, and the counts behind F1 add up to it.
    const same = (await marked('observation-real', 'same')).length;
    expect(same).toBeGreaterThan(3);
    expect(await marked('rehearsed', 'same')).toHaveLength(same);
    expect(await view.locator('[data-testid=fidelity]').textContent()).toMatch(new RegExp(`exact match no · field F1 ${k.fidelity.f1.toFixed(2)} · error agreement yes`));
    expect(await view.locator('[data-testid=field-counts]').textContent()).toContain(`${same} agree, ≠ 1 differ, − 1 left out, + 1 made up`);
    // The rehearsed observation is printed once: its generation is folded away.
    expect(await page.isVisible('[data-testid=turn-rehearse] .tok')).toBe(false);
    expect(await page.locator('[data-testid=rehearsed]').count()).toBe(1);
    await page.evaluate(() => document.getElementById('stepper')!.scrollIntoView());
    await shot('observation-known-1280', '[data-testid=obs-view]');
    await page.close();
  }, 300_000);

  it('a rehearsal by the bundled policy: marks agree with the values and with the fidelity the worker measured; screenshots at 1280 and 400 px', async () => {
    page = await lab().browser.newPage({ viewport: { width: 1280, height: 800 } });
    page.on('pageerror', (e) => pageErrors.push(e.message));
    await page.goto(`${lab().url}?turns=12&src=expert-act`);
    await ready();
    const tasks = (await page.locator('[data-testid=task-select] option').evaluateAll((os) => os.map((o) => (o as HTMLOptionElement).value))).slice(0, 6);
    // The expert plays the task's calls, the policy rehearses each; until some rehearsal differs from the truth.
    let differs = false;
    for (const t of tasks) {
      await page.selectOption('[data-testid=task-select]', t);
      await page.click('[data-testid=reset]');
      await idle();
      await page.click('[data-testid=play]');
      await page.waitForSelector('[data-testid=reward]', { timeout: 240_000 });
      await idle();
      // Compared: the rehearsal parsed (an unparseable one is a miss, with nothing to compare field by field).
      differs = (await page.locator('[data-testid=obs-view][data-compared=true] [data-testid=fidelity]').allTextContents()).some((x) => x.includes('exact match no'));
      if (differs) break;
    }
    expect(differs, 'a policy rehearsal that differs from the real observation').toBe(true);
    const view = page.locator('[data-testid=obs-view][data-compared=true]').filter({ has: page.locator('[data-testid=fidelity]', { hasText: 'exact match no' }) }).first();
    // Each mark says what the two values on its row show.
    const rows = await view.evaluate((v) => {
      const side = (id: string) => [...v.querySelectorAll(`[data-testid=${id}] .line`)].map((l) => ({ mark: l.getAttribute('data-mark'), text: l.textContent ?? '' }));
      const a = side('rehearsed');
      const b = side('observation-real');
      return a.map((x, i) => ({ mark: x.mark ?? b[i].mark, a: x.text, b: b[i].text }));
    });
    for (const r of rows) {
      if (r.mark === 'same') expect(r.a).toBe(r.b);
      if (r.mark === 'differs') expect(r.a).not.toBe(r.b);
      if (r.mark === 'real-only') expect(r.a).toBe('');
      if (r.mark === 'rehearsed-only') expect(r.b).toBe('');
    }
    expect(rows.some((r) => r.mark !== 'same' && r.mark !== null)).toBe(true);
    // The view's numbers are the worker's: the rollout's summary over its one rehearsed call.
    const f1 = /field F1 (\d\.\d\d)/.exec((await view.locator('[data-testid=fidelity]').textContent())!)![1];
    // The view's numbers are the worker's: the mean of the calls' F1 is the rollout's summary.
    const f1s = (await page.locator('[data-testid=obs-view] [data-testid=fidelity]').allTextContents()).map((x) => Number(/field F1 (\d\.\d\d)/.exec(x)![1]));
    const summary = (await page.textContent('[data-testid=fidelity-summary]'))!;
    expect(summary).toContain(`over ${f1s.length} rehearsed call`);
    expect(Number(/mean field F1 (\d\.\d\d)/.exec(summary)![1])).toBeCloseTo(f1s.reduce((a, b) => a + b, 0) / f1s.length, 1);
    expect(f1s).toContain(Number(f1));
    // The screenshots: the turn of that rehearsal.
    const turn = page.locator('[data-testid=stepper-panel] .turn').filter({ has: view });
    await shot('observation-1280', turn);
    await page.setViewportSize({ width: 400, height: 800 });
    await expect.poll(() => page.evaluate(() => document.documentElement.scrollWidth), { message: `wider than 400 px: ${await overflowing(page, 400)}` }).toBeLessThanOrEqual(400);
    // Side by side at 400 px too: the two columns share rows.
    const [a, b] = await Promise.all(['rehearsed', 'observation-real'].map((id) => view.locator(`[data-testid=${id}]`).boundingBox()));
    expect(b!.x).toBeGreaterThan(a!.x + a!.width - 1);
    await shot('observation-400', turn);
    expect(pageErrors).toEqual([]);
  }, 600_000);

  it('the group table reads at 1280 and at 400 px: no word or number broken, checklist folded to a count', async () => {
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.fill('[data-testid=group-k]', '3');
    await page.click('[data-testid=group-run]');
    await page.waitForSelector('[data-testid=group-view]', { timeout: 480_000 });
    await idle();
    const table = '[data-testid=group-view] table';
    for (const width of [1280, 400]) {
      await page.setViewportSize({ width, height: 800 });
      await expect.poll(() => page.evaluate(() => document.documentElement.scrollWidth), { message: `wider than ${width} px: ${await overflowing(page, width)}` }).toBeLessThanOrEqual(width);
      expect(await brokenWords(page, `${table} th`), `headers at ${width} px`).toEqual([]);
      expect(await brokenWords(page, `${table} td.num`), `numbers at ${width} px`).toEqual([]);
      // Folded: the count is on screen, the items are not until opened.
      const cells = page.locator('[data-testid=group-checklist]');
      expect(await cells.first().locator('summary').textContent()).toMatch(/\d+ of \d+ passed$/);
      expect(await cells.first().locator('li').first().isVisible()).toBe(false);
      await page.evaluate(() => document.getElementById('group')!.scrollIntoView());
      await shot(`group-${width}`, '[data-testid=group-panel]');
    }
    await page.locator('[data-testid=group-checklist] summary').first().click();
    expect(await page.locator('[data-testid=group-checklist] li').first().isVisible()).toBe(true);
    // Advantages line up: the text of every row's Act advantage ends at the same x (right-aligned, tabular figures).
    const rights = await page.locator('[data-testid=advantage]').evaluateAll((els) =>
      els.filter((_, i) => i % 2 === 0).map((e) => {
        const r = document.createRange();
        r.selectNodeContents(e);
        return Math.round(r.getBoundingClientRect().right);
      }),
    );
    expect(rights).toHaveLength(3);
    expect(new Set(rights).size).toBe(1);
    expect(pageErrors).toEqual([]);
  }, 600_000);

  it("private rehearsal shows each imagined call's rehearsal beside the real answer, field by field, once", async () => {
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.fill('[data-testid=turns]', '4');
    await page.fill('[data-testid=tts-n]', '1');
    const tasks = (await page.locator('[data-testid=task-select] option').evaluateAll((os) => os.map((o) => (o as HTMLOptionElement).value))).slice(0, 4);
    // Policy-dependent: an attempt whose first rehearsal does not parse has no call to compare; try a few tasks.
    let shown = 0;
    for (const t of tasks) {
      await page.selectOption('[data-testid=task-select]', t);
      await page.click('[data-testid=tts-run]');
      await page.waitForSelector('[data-testid=tts-committed]', { timeout: 480_000 });
      await idle();
      shown = await page.locator('[data-testid=tts-attempt] [data-testid=tts-rehearsed-step]').count();
      if (shown) break;
    }
    expect(shown, 'an imagined attempt with a rehearsed call').toBeGreaterThan(0);
    const step = page.locator('[data-testid=tts-attempt] [data-testid=tts-rehearsed-step]').first();
    expect(await step.locator('[data-testid=obs-view]').getAttribute('data-compared')).toBe('true');
    expect(await step.locator('[data-testid=fidelity]').textContent()).toMatch(/exact match (yes|no) · field F1 \d\.\d\d · error agreement (yes|no)/);
    // Once: the step shows the call, and the rehearsed observation only inside the view (no "call -> observation" line).
    expect(await step.locator(':scope > span').textContent()).toMatch(/^\w+\(\{.*\}\)$/);
    expect(await step.evaluate((li) => [...li.childNodes].filter((n) => n.nodeType === Node.TEXT_NODE).map((n) => n.textContent).join(''))).not.toContain('->');
    await shot('tts-observation-1280', page.locator('[data-testid=tts-attempt]').filter({ has: page.locator('[data-testid=tts-rehearsed-step]') }));
    expect(pageErrors).toEqual([]);
  }, 1_200_000);
});
