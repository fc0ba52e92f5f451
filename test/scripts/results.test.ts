// npm run results (research/scripts/results.ts): the committed pages and docs/results/summary.json are what the
// committed records render to, an edited table is caught and named, nothing is written unasked, and summary.json's
// figures agree with the same records read by hand.
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BUDGET, BUDGET_FIGURE, LESSON_PAGE, RESULTS_PAGE, resultsCli, SUMMARY_FILE } from '../../research/scripts/results';
import { captureIo } from '../helpers/cli';

const ROOT = resolve(import.meta.dirname, '../..');
const work = mkdtempSync(join(tmpdir(), 'envace-results-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** A checkout to edit: copies of the pages and summary.json, the records shared (read only). */
function copyOfCheckout(name: string): string {
  const root = join(work, name);
  mkdirSync(join(root, 'docs/results'), { recursive: true });
  mkdirSync(join(root, 'docs/figures'), { recursive: true });
  for (const f of [RESULTS_PAGE, LESSON_PAGE, SUMMARY_FILE, BUDGET_FIGURE]) cpSync(join(ROOT, f), join(root, f));
  symlinkSync(join(ROOT, 'research'), join(root, 'research'));
  return root;
}

/** The first table row of a section that starts with `prefix`, with one figure changed. */
function editRow(page: string, prefix: string): { edited: string; line: number } {
  const lines = readFileSync(page, 'utf8').split('\n');
  const i = lines.findIndex((l) => l.startsWith(prefix));
  expect(i, prefix).toBeGreaterThan(0);
  const changed = lines[i].replace(/\d+\.\d/, (x) => (Number(x) + 1).toFixed(1));
  expect(changed).not.toBe(lines[i]);
  lines[i] = changed;
  writeFileSync(page, lines.join('\n'));
  return { edited: changed, line: i + 1 };
}

interface Entry {
  world: string;
  config: string;
  records: string;
  realEpisodes: number;
  seeds: number;
  tasks: number;
  success: number;
  ci: [number, number];
  vsBase: { delta: number; ci: [number, number] } | null;
  vsRealSameBudget: { delta: number; ci: [number, number]; against: string } | null;
}

describe('npm run results', () => {
  it('--check passes on the committed tree', async () => {
    const io = captureIo();
    expect(await resultsCli(['--check'], io), io.stderr()).toBe(0);
    expect(io.stdout()).toMatch(/match their records/);
  });

  it('--check fails on an edited table, naming the section and the first differing line', async () => {
    const root = copyOfCheckout('edited-budget');
    const { edited, line } = editRow(join(root, RESULTS_PAGE), '| GRPO, real environment, 1/4 of the real episodes |');
    const io = captureIo();
    expect(await resultsCli(['--check', '--root', root], io)).toBe(1);
    expect(io.stderr()).toContain(`docs/results.md: section budget differs from its records at line ${line}`);
    expect(io.stderr()).toContain(edited);
  });

  it("--check covers docs/lesson.md's summary table and summary.json", async () => {
    const lesson = copyOfCheckout('edited-lesson');
    editRow(join(lesson, LESSON_PAGE), '| research/records/lesson-records/session26/lesson |');
    const io = captureIo();
    expect(await resultsCli(['--check', '--root', lesson], io)).toBe(1);
    expect(io.stderr()).toContain('docs/lesson.md: section lesson-summary differs');

    const summary = copyOfCheckout('edited-summary');
    const f = join(summary, SUMMARY_FILE);
    writeFileSync(f, readFileSync(f, 'utf8').replace('"success": 0.516', '"success": 0.517'));
    const io2 = captureIo();
    expect(await resultsCli(['--check', '--root', summary], io2)).toBe(1);
    expect(io2.stderr()).toContain(`${SUMMARY_FILE} differs from its records`);

    const figure = copyOfCheckout('edited-figure');
    const g = join(figure, BUDGET_FIGURE);
    writeFileSync(g, readFileSync(g, 'utf8').replace(/cy="(\d+)/, (_m, d: string) => `cy="${Number(d) + 1}`));
    const io3 = captureIo();
    expect(await resultsCli(['--check', '--root', figure], io3)).toBe(1);
    expect(io3.stderr()).toContain(`${BUDGET_FIGURE} differs from its records`);
  });

  it('writes only with --write-committed, and then the check passes', async () => {
    const root = copyOfCheckout('rewrite');
    editRow(join(root, RESULTS_PAGE), '| EnvACE, role-wise |');
    const before = readFileSync(join(root, RESULTS_PAGE), 'utf8');
    const io = captureIo();
    expect(await resultsCli(['--root', root], io)).toBe(2);
    expect(io.stderr()).toContain('--write-committed');
    expect(readFileSync(join(root, RESULTS_PAGE), 'utf8')).toBe(before);
    expect(await resultsCli(['--root', root, '--write-committed'], captureIo())).toBe(0);
    expect(readFileSync(join(root, RESULTS_PAGE), 'utf8')).toBe(readFileSync(join(ROOT, RESULTS_PAGE), 'utf8'));
    expect(await resultsCli(['--check', '--root', root], captureIo())).toBe(0);
  });

  it('a seed copied into the budget records shows up in its section, the claims and summary.json after a re-render', async () => {
    // The budget records copied (the lead adds runs there), every other records folder shared.
    const root = join(work, 'new-seed');
    mkdirSync(join(root, 'docs/results'), { recursive: true });
    mkdirSync(join(root, 'docs/figures'), { recursive: true });
    for (const f of [RESULTS_PAGE, LESSON_PAGE, SUMMARY_FILE, BUDGET_FIGURE]) cpSync(join(ROOT, f), join(root, f));
    mkdirSync(join(root, 'research/records'), { recursive: true });
    for (const d of readdirSync(join(ROOT, 'research/records'))) {
      if (join('research/records', d) === BUDGET) cpSync(join(ROOT, BUDGET), join(root, BUDGET), { recursive: true });
      else symlinkSync(join(ROOT, 'research/records', d), join(root, 'research/records', d));
    }
    // Whatever dyna-q-sim runs are in by now make way for one stand-in of known figures.
    for (const d of readdirSync(join(root, BUDGET, 'ablation'))) if (d.startsWith('dyna-q-sim-s')) rmSync(join(root, BUDGET, 'ablation', d), { recursive: true });
    const runDir = join(root, BUDGET, 'ablation/dyna-q-sim-s0');
    mkdirSync(runDir);
    // A stand-in run: dyna-q-obs seed 0's results under dyna-q-sim's name.
    const run = JSON.parse(readFileSync(join(root, BUDGET, 'ablation/dyna-q-obs-s0/result.json'), 'utf8'));
    writeFileSync(join(runDir, 'result.json'), JSON.stringify({ ...run, config: 'dyna-q-sim' }));
    const io = captureIo();
    expect(await resultsCli(['--check', '--root', root], io)).toBe(1);
    expect(io.stderr()).toContain('section claims differs');
    expect(await resultsCli(['--root', root, '--write-committed'], captureIo())).toBe(0);
    const page = readFileSync(join(root, RESULTS_PAGE), 'utf8');
    expect(page).toContain('dyna-q-sim 1 of 5');
    expect(page).toContain('| EnvACE + 1/4 real episodes, simulator on real observations (dynamics, not copies) | 160 | 1 of 5 (0) | 45.0 [35.0, 55.0] |');
    expect(page).toContain('The first row is the pre-registered decision.');
    expect(page).toMatch(/- \*\*not resolved\*\*: rehearsed episodes beside ¼ of the real episodes beat real-only GRPO with the same ¼ [^\n]*Here -2\.0 \[-5\.0, 0\.0\] pts \(100 paired results\)/);
    const sim = (JSON.parse(readFileSync(join(root, SUMMARY_FILE), 'utf8')) as { entries: Entry[] }).entries.find((e) => e.config === 'dyna-q-sim')!;
    expect(sim).toMatchObject({ records: BUDGET, realEpisodes: 160, seeds: 1, success: 0.45, vsRealSameBudget: { delta: -0.02, against: 'real-q' } });
    expect(await resultsCli(['--check', '--root', root], captureIo())).toBe(0);
  });

  describe('docs/results/summary.json', () => {
    const entries = (JSON.parse(readFileSync(join(ROOT, SUMMARY_FILE), 'utf8')) as { entries: Entry[] }).entries;
    const find = (records: string, config: string) => {
      const e = entries.find((x) => x.records === records && x.config === config);
      expect(e, `${records} ${config}`).toBeDefined();
      return e!;
    };

    it('has the fields issue 46 names, intervals around their estimates', () => {
      expect(entries.length).toBeGreaterThan(10);
      const diff = (d: Entry['vsBase']) => {
        if (d === null) return;
        expect(d.ci).toHaveLength(2);
        expect(d.ci[0]).toBeLessThanOrEqual(d.delta);
        expect(d.delta).toBeLessThanOrEqual(d.ci[1]);
      };
      for (const e of entries) {
        expect(Object.keys(e)).toEqual(expect.arrayContaining(['world', 'config', 'realEpisodes', 'seeds', 'tasks', 'success', 'ci', 'vsBase', 'vsRealSameBudget']));
        expect(e.world).toBe('mini');
        expect(Number.isInteger(e.realEpisodes) && e.realEpisodes >= 0).toBe(true);
        expect(e.seeds).toBeGreaterThan(0);
        expect(e.tasks).toBeGreaterThanOrEqual(100); // the 100 held-out tasks, or more (the powered record: 300)
        expect(e.ci[0]).toBeLessThanOrEqual(e.success);
        expect(e.success).toBeLessThanOrEqual(e.ci[1]);
        diff(e.vsBase);
        diff(e.vsRealSameBudget);
        // The base has nothing to differ from; real-only GRPO is its own budget's reference.
        if (e.config === 'base') expect([e.vsBase, e.vsRealSameBudget]).toEqual([null, null]);
        if (e.config === 'real' || e.config === 'real-q') expect(e.vsRealSameBudget).toBeNull();
      }
      // No real-only run spends zero real episodes: the rehearsed configurations of the ablation have no such reference.
      expect(find('research/records/ablation-records-s17', 'envace').vsRealSameBudget).toBeNull();
      expect(find('research/records/ablation-records-s17', 'real-checklist').vsRealSameBudget?.against).toBe('real');
    });

    it("agrees with the budget experiment's records read by hand", () => {
      const dir = join(ROOT, BUDGET, 'ablation');
      const runs = readdirSync(dir).filter((d) => /-s\d+$/.test(d)).flatMap((d) => {
        try {
          return [JSON.parse(readFileSync(join(dir, d, 'result.json'), 'utf8')) as { config: string; seed: number; perTask: { taskId: string; reward: number }[] }];
        } catch {
          return []; // a run still without its result
        }
      });
      const budget = JSON.parse(readFileSync(join(dir, 'real-q-s0/ablation.json'), 'utf8')).budget as { steps: number; k: number };
      const solved = (config: string, seed: number) => new Map(runs.find((r) => r.config === config && r.seed === seed)!.perTask.map((t) => [t.taskId, t.reward >= 1 ? 1 : 0]));
      const realQ = runs.filter((r) => r.config === 'real-q').map((r) => r.seed).sort();
      const rate = (m: Map<string, number>) => [...m.values()].reduce((a, x) => a + x, 0) / m.size;
      const e = find(BUDGET, 'real-q');
      // 1 prompt × K per step, every step: a quarter of real GRPO's 4 prompts.
      expect(e.realEpisodes).toBe(budget.steps * budget.k * 1);
      expect(e.seeds).toBe(realQ.length);
      expect(e.success).toBeCloseTo(realQ.reduce((a, s) => a + rate(solved('real-q', s)), 0) / realQ.length, 4);
      // The base's one greedy run pairs with every seed, task by task.
      const base = solved('base', 0);
      const vsBase = realQ.reduce((a, s) => a + [...solved('real-q', s)].reduce((b, [t, v]) => b + v - base.get(t)!, 0) / base.size, 0) / realQ.length;
      expect(e.vsBase!.delta).toBeCloseTo(vsBase, 4);
      // dyna-q-obs against real-q: the seeds both have, the same tasks.
      const obs = find(BUDGET, 'dyna-q-obs');
      const common = runs.filter((r) => r.config === 'dyna-q-obs' && realQ.includes(r.seed)).map((r) => r.seed);
      const d = common.reduce((a, s) => a + rate(solved('dyna-q-obs', s)) - rate(solved('real-q', s)), 0) / common.length;
      expect(obs.realEpisodes).toBe(e.realEpisodes);
      expect(obs.vsRealSameBudget).toMatchObject({ against: 'real-q' });
      expect(obs.vsRealSameBudget!.delta).toBeCloseTo(d, 4);
    });
  });
});
