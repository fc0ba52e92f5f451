// The student guide, docs/lesson/README.md, followed in the lab by its own words (issue 48: "the E2E follows its
// steps by the lab's own controls"). The guide writes every control, panel and heading a student uses in *italics*,
// as the lab shows it on screen. This test reads the guide, and for each of its five steps:
// - does what the step's **Click:** says, finding each control by the name the guide gives it (a panel by its
//   heading, a setting by its label, a button by its text, an option by its text); every name the Click line gives
//   is used, and a name the lab does not show fails the test;
// - then finds on screen every name the step's **Look at:** gives, and checks what the guide says should be seen
//   there (the field marks and field F1 of a rehearsal, A = R − μ in the group, a count and the time left before
//   training, every run on the comparison plots, the committed episode beside the one without memory);
// - and sees the lab's lesson strip mark the step done.
// The bundled mini policy at the lab's defaults (the world, budgets, turn limit, K = 4, rehearsal decoding), as a
// student has it; only the training runs are cut for E2E time (URL: 1 step, 1 prompt per step, 2 held-out tasks; the
// world-rehearsal lesson's runs 1 step each, 2 held-out tasks evaluated every step).
// Policy-dependent where the guide says so: a group whose rewards are all equal sends the student to another task,
// and the test does the same.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Locator, Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { chromiumAvailable, servedLab } from './harness';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');
const SETTINGS = '?steps=1&prompts=1&evalTasks=2&lsteps=1&levery=1&ltasks=2';
const norm = (s: string) => s.replace(/\s+/g, ' ').trim();
const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

type Step = 1 | 2 | 3 | 4 | 5;
interface GuideStep {
  click: string[];
  look: string[];
}

/** The guide's five steps: the names in italics of each step's Click and Look at lines. */
function readGuide(): Record<Step, GuideStep> {
  const text = readFileSync(join(ROOT, 'docs/lesson/README.md'), 'utf8');
  const out = {} as Record<Step, GuideStep>;
  for (const section of text.split(/^## /m).slice(1)) {
    const m = /^(\d)\. /.exec(section);
    if (!m) continue;
    const bullet = (label: string) => {
      const at = section.indexOf(`- **${label}:**`);
      if (at < 0) throw new Error(`step ${m[1]} has no "${label}:" line`);
      const rest = section.slice(at + label.length + 8);
      const end = rest.search(/^- \*\*/m);
      const body = end < 0 ? rest : rest.slice(0, end);
      return [...body.replace(/!\[[^\]]*\]\([^)]*\)/g, '').matchAll(/\*([^*]+)\*/g)].map((x) => norm(x[1]));
    };
    out[Number(m[1]) as Step] = { click: bullet('Click'), look: bullet('Look at') };
  }
  return out;
}

/** A name as a pattern: … stands for the rest of the text (a task's name, a run's name). */
const pattern = (name: string) => new RegExp(name.split('…').map((p) => escape(p.trim())).filter(Boolean).join('.*'));

const run = chromiumAvailable();

describe.runIf(run)('the student guide (docs/lesson/README.md) followed in the lab, by its own words (headless Chromium)', () => {
  const lab = servedLab();
  const guide = readGuide();
  let page: Page;
  const pageErrors: string[] = [];
  const used = new Map<Step, Set<string>>();
  const ready = () => page.waitForSelector('[data-testid=load-status][data-state=ready]', { timeout: 240_000 });
  const idle = () => page.waitForSelector('[data-testid=busy]', { state: 'detached', timeout: 480_000 });

  /** A name the step's Click line gives: it must be there, and is counted as followed. */
  const named = (n: Step, name: string) => {
    expect(guide[n].click, `step ${n}'s Click line names “${name}”`).toContain(name);
    (used.get(n) ?? used.set(n, new Set()).get(n)!).add(name);
    return name;
  };
  /** A panel by its heading, as the guide names it. */
  const panel = (n: Step, name: string): Locator => {
    const h = JSON.stringify(named(n, name));
    return page.locator(`xpath=//*[self::section or self::div][./h2[normalize-space()=${h}] or ./h3[normalize-space()=${h}]]`);
  };
  /** A button by its text. */
  const button = (n: Step, scope: Locator, name: string) => scope.getByRole('button', { name: pattern(named(n, name)) });
  /** A setting (select or input) by the text its label starts with. */
  const setting = (n: Step, scope: Locator, name: string) =>
    scope.locator('label').filter({ hasText: new RegExp(`^\\s*${escape(named(n, name))}\\b`) }).first().locator('select, input');
  /** The text of a select's chosen option. */
  const chosen = (select: Locator) => select.evaluate((s) => (s as HTMLSelectElement).selectedOptions[0]?.textContent?.trim() ?? '');
  /** Choose an option of a select by the text the guide gives it. */
  const choose = async (n: Step, select: Locator, name: string) => {
    await select.selectOption({ label: named(n, name) });
  };
  /** Every name the step's Click line gives was followed; every name its Look at line gives is on screen. */
  async function followed(n: Step): Promise<void> {
    expect([...(used.get(n) ?? [])].sort(), `step ${n}: the names of its Click line the test followed`).toEqual([...new Set(guide[n].click)].sort());
    const screen = norm(await page.evaluate(() => document.body.innerText));
    // Case aside: the lab sets some headings in capitals (text-transform), and innerText is what the student reads.
    for (const name of guide[n].look) expect(screen, `step ${n}'s Look at names “${name}”`).toMatch(new RegExp(pattern(name).source, 'i'));
    await expect.poll(() => page.getAttribute(`[data-testid=lesson-step][data-step="${n}"]`, 'data-done'), { message: `the strip marks step ${n} done` }).toBe('true');
  }

  it('the guide gives each step a Click and a Look at line with the names of what to use and see', () => {
    expect(Object.keys(guide)).toEqual(['1', '2', '3', '4', '5']);
    for (const n of [1, 2, 3, 4, 5] as Step[]) {
      expect(guide[n].click.length, `step ${n}'s Click names`).toBeGreaterThan(1);
      expect(guide[n].look.length, `step ${n}'s Look at names`).toBeGreaterThan(1);
    }
  });

  it('1. step through a rollout: the rehearsed observation beside the real one, fidelity, field by field', async () => {
    page = await lab().browser.newPage({ viewport: { width: 1280, height: 800 } });
    page.on('pageerror', (e) => pageErrors.push(e.message));
    await page.goto(lab().url + SETTINGS);
    await ready();
    expect(await page.getAttribute('[data-testid=lesson-step][data-step="1"]', 'data-done')).toBe('false');
    const stepper = panel(1, 'Rollout stepper');
    expect(await chosen(setting(1, stepper, 'Mode'))).toBe(named(1, 'rehearse (EnvACE)'));
    expect(await chosen(setting(1, stepper, 'Played by'))).toBe(named(1, 'the policy (acts and rehearses)'));
    const task = setting(1, stepper, 'Task');
    const tasks = (await task.locator('option').evaluateAll((os) => os.map((o) => (o as HTMLOptionElement).value))).slice(0, 6);
    const stepOne = button(1, stepper, 'Step one turn');
    // "Step one turn a few times": until a call's rehearsal is compared with the real answer (a new task when a
    // rollout ends without one).
    let compared = 0;
    for (const t of tasks) {
      await task.selectOption(t);
      await button(1, stepper, 'Reset').click();
      await idle();
      for (let i = 0; i < 4 && !compared; i++) {
        if (await stepOne.isDisabled()) break; // the rollout ended
        await stepOne.click();
        await idle();
        compared = await stepper.locator('[data-testid=obs-view][data-compared=true]').count();
      }
      if (compared) break;
    }
    expect(compared, 'a rehearsed call compared with the real observation').toBeGreaterThan(0);
    named(1, 'Play'); // the other way on: the guide names it as an alternative to stepping
    await expect(button(1, stepper, 'Play').isVisible()).resolves.toBe(true);
    expect(await page.textContent('[data-testid=rollout-status]')).toMatch(/^\s*rehearse rollout/);
    // The Fidelity line, the field marks and the count of marks that field F1 is worked out of.
    const view = stepper.locator('[data-testid=obs-view][data-compared=true]').first();
    const line = norm((await view.locator('[data-testid=fidelity]').textContent()) ?? '');
    const m = /^Fidelity: exact match (yes|no) · field F1 (\d\.\d\d) · error agreement (yes|no)$/.exec(line);
    expect(m, line).not.toBeNull();
    const counts = norm((await view.locator('[data-testid=field-counts]').textContent()) ?? '');
    const c = /= (\d+) agree, ≠ (\d+) differ, − (\d+) left out, \+ (\d+) made up; F1 = 2 × (\d+) \/ \((\d+) rehearsed \+ (\d+) real fields\)/.exec(counts);
    expect(c, counts).not.toBeNull();
    const [same, differs, leftOut, madeUp, , rehearsedN, realN] = c!.slice(1).map(Number);
    expect(rehearsedN).toBe(same + differs + madeUp);
    expect(realN).toBe(same + differs + leftOut);
    expect(Number(m![2])).toBeCloseTo(rehearsedN + realN ? (2 * same) / (rehearsedN + realN) : m![1] === 'yes' ? 1 : 0, 2);
    expect(m![1] === 'yes').toBe(differs + leftOut + madeUp === 0 && m![3] === 'yes');
    // Each field's mark is one of the four, and as many marks of each kind as the line counts.
    const marks = await view.locator('.marks .mark').evaluateAll((els) => els.map((e) => e.textContent ?? '').filter(Boolean));
    expect(marks.every((x) => ['=', '≠', '−', '+'].includes(x)), marks.join(' ')).toBe(true);
    expect([marks.filter((x) => x === '=').length, marks.filter((x) => x === '≠').length, marks.filter((x) => x === '−').length, marks.filter((x) => x === '+').length]).toEqual([same, differs, leftOut, madeUp]);
    named(1, 'Task');
    await followed(1);
  }, 480_000);

  it('2. open a group whose rollouts differ: rewards, role-wise baselines, A = R − μ', async () => {
    const group = panel(2, 'Group view');
    expect(await setting(2, group, 'K rollouts').inputValue()).toBe('4');
    const runGroup = button(2, group, 'Run 4 rollouts of …');
    const stepper = page.locator('#stepper');
    const task = setting(2, stepper, 'Task');
    expect(await setting(2, stepper, 'Seed').count()).toBe(1);
    const tasks = (await task.locator('option').evaluateAll((os) => os.map((o) => (o as HTMLOptionElement).value))).slice(0, 4);
    let spread = false;
    for (const t of tasks) {
      await task.selectOption(t);
      await runGroup.click();
      await page.waitForSelector('[data-testid=group-view]', { timeout: 480_000 });
      await idle();
      const rewards = await group.locator('tbody tr td:nth-child(2)').allTextContents();
      spread = new Set(rewards.map(Number)).size > 1;
      if (spread) break;
    }
    expect(spread, 'a group whose rewards differ').toBe(true);
    // A = R − μ in each role's column, from the baselines shown above the table (three decimals shown).
    const mu = (role: string) => group.locator(`[data-testid=mu-${role}]`).textContent().then((t) => Number(t));
    const muAct = await mu('act');
    const rows = await group.locator('tbody tr').evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent?.trim() ?? '')));
    expect(rows).toHaveLength(4);
    const rehearseText = (await group.locator('[data-testid=mu-rehearse]').textContent()) ?? '';
    for (const [, r, actRows, aAct, rehRows, aReh] of rows) {
      expect(Number(actRows)).toBeGreaterThan(0);
      expect(Math.abs(Number(aAct) - (Number(r) - muAct))).toBeLessThan(0.006);
      if (Number(rehRows) > 0) expect(Math.abs(Number(aReh) - (Number(r) - Number(rehearseText)))).toBeLessThan(0.006);
    }
    expect(await page.textContent('[data-testid=group-explain]')).toMatch(/^Rewards range from/);
    await followed(2);
  }, 600_000);

  it("3. train, and watch held-out success and fidelity: the world-rehearsal lesson's two runs on one plot, the starting policy evaluated first", async () => {
    const train = panel(3, 'Training dashboard');
    const box = panel(3, 'World-rehearsal lesson');
    expect(await train.locator('[data-testid=world-lesson]').count()).toBe(1);
    // The strip's Show me of this step takes the student to the lesson's button.
    await button(3, page.locator('[data-testid=lesson-step][data-step="3"]'), 'Show me').click();
    await expect.poll(() => page.evaluate(() => document.activeElement?.getAttribute('data-testid'))).toBe('lesson-run');
    await page.evaluate(() => {
      const w = window as unknown as { __before: { busy: string; eta: string }[] };
      w.__before = [];
      new MutationObserver(() => {
        const busy = document.querySelector('[data-testid=busy]')?.textContent ?? '';
        const eta = document.querySelector('[data-testid=eta]')?.textContent ?? '';
        if (busy.includes('before training')) w.__before.push({ busy, eta });
      }).observe(document.querySelector('.statusbar')!, { subtree: true, childList: true, characterData: true });
    });
    await button(3, box, 'Run the world-rehearsal lesson …').click();
    await page.waitForSelector('[data-testid=lesson-progress]', { timeout: 60_000 });
    await page.waitForSelector('[data-testid=lesson-progress]', { state: 'detached', timeout: 1_100_000 });
    await idle();
    expect(await page.isVisible('[data-testid=error]')).toBe(false);
    expect(await page.isVisible('[data-testid=lesson-error]')).toBe(false);
    // "First it evaluates the starting policy (before training), with a count and the time left."
    const before = await page.evaluate(() => (window as unknown as { __before: { busy: string; eta: string }[] }).__before);
    named(3, 'before training');
    expect(before.some((b) => /before training.*held-out evaluation.*: \d of 2 finished/.test(b.busy)), before.map((b) => b.busy).join('\n')).toBe(true);
    expect(before.some((b) => /left$/.test(b.eta)), JSON.stringify(before)).toBe(true);
    // Both runs on the lesson's plot: two success and two fidelity curves from step 0, the base line (and the ceiling's, where measured).
    const plot = box.locator('[data-testid=lesson-plot]');
    expect(await plot.getAttribute('data-points')).toBe('2');
    expect((await plot.getAttribute('data-drawn'))!.split(',').slice(0, 5)).toEqual(['2', '2', '2', '2', '2']);
    expect(await box.locator('[data-testid=lesson-end]').evaluateAll((rs) => rs.map((r) => r.getAttribute('data-role')))).toEqual(['real-only', 'rehearsed']);
    await followed(3);
  }, 1_200_000);

  it('4. compare EnvACE with the frozen simulator: the same steps from the base policy, every run on the same plots', async () => {
    const compare = panel(4, 'Compare runs');
    // The lesson kept both of its runs.
    await expect.poll(() => compare.locator('[data-testid=compare-row]').count()).toBe(2);
    await choose(4, setting(4, compare, 'Comparison mode'), 'frozen-simulator GRPO');
    await button(4, compare, 'Train frozen-simulator GRPO with the settings of …').click();
    await expect.poll(() => compare.locator('[data-testid=compare-row]').count(), { timeout: 540_000, interval: 500 }).toBe(3);
    await expect.poll(() => page.textContent('[data-testid=train-step-count]'), { timeout: 540_000, interval: 500 }).toBe('1 of 1 training steps');
    await idle();
    // "When it is done, press Keep this run … for comparison to keep it too."
    await button(4, compare, 'Keep this run … for comparison').click();
    await expect.poll(() => compare.locator('[data-testid=keep-run]').textContent()).toMatch(/This run is kept/);
    expect(await page.isVisible('[data-testid=error]')).toBe(false);
    expect(await compare.locator('[data-testid=compare-row]').evaluateAll((rs) => rs.map((r) => r.getAttribute('data-mode')))).toEqual(['real', 'rehearse', 'frozen-simulator']);
    // The same number of steps in every run, and every run on each plot.
    expect(await compare.locator('[data-testid=compare-row] td:nth-child(6)').allTextContents()).toEqual(['1 of 1', '1 of 1', '1 of 1']);
    for (const id of ['compare-success-plot', 'compare-fidelity-plot', 'compare-reward-plot']) expect(await compare.locator(`[data-testid=${id}]`).getAttribute('data-series')).toBe('3');
    await followed(4);
  }, 1_200_000);

  it('5. private rehearsal: imagined attempts compared field by field, the memory, the committed episode beside the one without memory', async () => {
    const tts = panel(5, 'Private rehearsal');
    expect(Number(await setting(5, tts, 'N').inputValue())).toBeGreaterThanOrEqual(1);
    const go = button(5, tts, 'Rehearse …, then commit');
    const task = setting(5, page.locator('#stepper'), 'Task');
    const tasks = (await task.locator('option').evaluateAll((os) => os.map((o) => (o as HTMLOptionElement).value))).slice(0, 4);
    let shown = 0;
    for (const t of tasks) {
      await task.selectOption(t);
      await go.click();
      await page.waitForSelector('[data-testid=tts-committed]', { timeout: 480_000 });
      await idle();
      shown = await tts.locator('[data-testid=tts-attempt] [data-testid=tts-rehearsed-step] [data-testid=obs-view][data-compared=true]').count();
      if (shown) break;
    }
    expect(shown, 'an imagined call whose rehearsal is compared with the real answer').toBeGreaterThan(0);
    const step = tts.locator('[data-testid=tts-rehearsed-step]').first();
    expect(norm((await step.locator('[data-testid=fidelity]').textContent()) ?? '')).toMatch(/^Fidelity: exact match (yes|no) · field F1 \d\.\d\d · error agreement (yes|no)$/);
    expect(await step.locator('.marks .mark').evaluateAll((els) => els.map((e) => e.textContent ?? '').filter(Boolean).every((x) => ['=', '≠', '−', '+'].includes(x)))).toBe(true);
    // Step by step, side by side.
    const a = (await tts.locator('[data-testid=tts-committed]').boundingBox())!;
    const b = (await tts.locator('[data-testid=tts-without-memory]').boundingBox())!;
    expect(Math.abs(a.y - b.y)).toBeLessThan(2);
    expect(b.x).toBeGreaterThan(a.x + a.width - 1);
    expect(await tts.locator('[data-testid=tts-diff-summary]').textContent()).toMatch(/^\s*The memory (did not change the committed episode|changed \d+ of \d+ steps?)/);
    await followed(5);
    if ([1, 2, 3, 4].every((n) => used.has(n as Step))) expect(await page.textContent('[data-testid=lesson-count]')).toBe('(5 of 5 done)');
    expect(pageErrors).toEqual([]);
  }, 600_000);
});
