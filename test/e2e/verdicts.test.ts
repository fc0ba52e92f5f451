// The lab's explanations are the judge's reasons, over rollouts played in the browser (issue 49). The Node test
// (test/lab/verdict-reasons.test.ts) checks the worker's view directly; this one checks what a student reads:
// two rollouts are played in the built lab in Chromium (the expert playing a rehearse rollout, then the bundled
// mini policy), each verdict's reason is read from the page, the same rollout's steps come from the lab's own
// rollout export (RolloutView.steps), and src/env/judge.ts judges them here, in the test process. Every shown
// reason must be the judge's reason for that item, numbered by the turn the stepper shows, plus only what the
// judge cannot see (an unanswered call, an early end: workers/lab/verdicts.ts).
import { readFileSync } from 'node:fs';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import type { Step, Task } from '../../src/env/domain';
import { judge, judgeOptions } from '../../src/env/judge';
import { worldDomain } from '../../src/env/retail';
import { loadRetailBase } from '../../src/env/retail/node';
import type { JudgedStep, RolloutView } from '../../src/worker-protocol';
import { chromiumAvailable, servedLab } from './harness';

const run = chromiumAvailable();

// The lab's mini world and its task list (workers/lab/lab.ts init: 12 generated tasks per split, seed 0).
const mini = worldDomain('mini', loadRetailBase());
const tasks = new Map<string, Task>((['train', 'test'] as const).flatMap((split) => mini.tasks.generate({ split, count: 12, seed: 0 })).map((t) => [t.id, t]));

describe.runIf(run)("the lab's shown verdicts are the judge's reasons (headless Chromium)", () => {
  const lab = servedLab();
  let page: Page;
  const pageErrors: string[] = [];

  const idle = () => page.waitForSelector('[data-testid=busy]', { state: 'detached', timeout: 240_000 });

  /** The verdicts as the page shows them: ✓/✗ and the reason (without the "— " the list puts before it). */
  const shown = () =>
    page.locator('[data-testid=verdict]').evaluateAll((lis) =>
      lis.map((li) => ({ ok: li.getAttribute('data-ok') === 'true', reason: (li.querySelector('[data-testid=verdict-reason]')?.textContent ?? '').replace(/^— /, '') })),
    );

  /** The rollout the stepper just finished, from the lab's rollout export (the last stepper rollout in it). */
  async function exported(): Promise<RolloutView> {
    const [dl] = await Promise.all([page.waitForEvent('download', { timeout: 60_000 }), page.click('[data-testid=export-rollouts]')]);
    const lines = readFileSync((await dl.path())!, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as RolloutView & { kind: string });
    return lines.filter((l) => l.kind === 'stepper').at(-1)!;
  }

  /**
   * Judges the exported steps here and compares every item with what the page shows. `exact`: the episode
   * ended with a reply, so nothing but the judge's reason (numbered by turn) may be shown.
   */
  async function expectJudgeReasons(taskId: string, exact: boolean): Promise<{ items: number; crosses: number }> {
    const seen = await shown();
    const r = await exported();
    expect(r.taskId).toBe(taskId);
    expect(r.reward?.kind).toBe('checklist judge');
    // The export is the rollout on screen: the same verdicts, in the same order.
    expect(r.reward!.items.map((i) => ({ ok: i.satisfied, reason: i.reason }))).toEqual(seen);
    const steps: JudgedStep[] = r.steps!;
    expect(steps.length).toBeGreaterThan(0);
    const task = tasks.get(taskId)!;
    const j = judge(task.checklist, steps as Step[], judgeOptions(mini.createEnv(), mini.normaliseArgs?.bind(mini)));
    expect(seen).toHaveLength(j.items.length);
    j.items.forEach((v, i) => {
      const at = v.turn !== null ? `turn ${steps[v.turn].turn + 1}: ` : '';
      const own = seen[i].reason === at + v.reason;
      const added = seen[i].reason.startsWith(`${at}${v.reason}; the episode ended first (`) || /^turn \d+: the call was made, but it never got an observation: /.test(seen[i].reason);
      expect(exact ? own : own || added, `shown: ${seen[i].reason}\n judge: ${at}${v.reason}`).toBe(true);
      expect(seen[i].ok).toBe(v.satisfied);
    });
    // The judge's reward is the one the page reports.
    if (exact) expect(r.reward!.value).toBeCloseTo(j.reward, 12);
    return { items: j.items.length, crosses: j.items.filter((v) => !v.satisfied).length };
  }

  it('an expert-played rehearse rollout: every shown reason is the judge reason for its item', async () => {
    page = await lab().browser.newPage({ viewport: { width: 1280, height: 800 }, acceptDownloads: true });
    page.on('pageerror', (e) => pageErrors.push(e.message));
    // The CPU fast path, named: this test is about verdicts, not the backend measurement (lab.test.ts times it).
    await page.goto(`${lab().url}?backend=cpu-fast&turns=12&task=train-0-0&src=expert&mode=rehearse`);
    await page.waitForSelector('[data-testid=load-status][data-state=ready]', { timeout: 120_000 });
    expect(await page.inputValue('[data-testid=world-select]')).toBe('mini');
    await page.click('[data-testid=play]');
    await page.waitForSelector('[data-testid=reward]', { timeout: 300_000 });
    await idle();
    expect(await page.textContent('[data-testid=rollout-status]')).toContain('ended: the expert replied to the user');
    const { items } = await expectJudgeReasons('train-0-0', true);
    expect(items).toBeGreaterThan(1);
  }, 600_000);

  it('policy-played rehearse rollouts: every shown reason is the judge reason for its item, a ✗ among them', async () => {
    await page.selectOption('[data-testid=act-source]', 'policy');
    await page.fill('[data-testid=turns]', '3');
    // Tasks in turn until the policy has left some item unmet (a ✗ whose reason is checked); the bundled policy
    // is imperfect on these, so one or two rollouts suffice, but which one is policy-dependent.
    let crosses = 0;
    for (const id of ['train-0-1', 'train-0-2', 'train-0-3', 'train-0-4']) {
      await page.selectOption('[data-testid=task-select]', id);
      await page.click('[data-testid=reset]');
      await idle();
      await page.click('[data-testid=play]');
      await page.waitForSelector('[data-testid=reward]', { timeout: 300_000 });
      await idle();
      crosses += (await expectJudgeReasons(id, false)).crosses;
      if (crosses > 0) break;
    }
    expect(crosses, 'a policy rollout with an unmet checklist item').toBeGreaterThan(0);
    expect(pageErrors).toEqual([]);
  }, 900_000);
});
