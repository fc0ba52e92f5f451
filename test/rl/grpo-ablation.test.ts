// The ablation tables: per-configuration bootstrap intervals over tasks and seeds, the paired difference to the
// base policy (its one run against every seed) and between configurations with a significance flag and the
// paper-ordering verdict, wall-clock per configuration × seed, the rendered Markdown, and the marker section
// replacement that leaves the rest of docs/results.md alone.
import { describe, expect, it } from 'vitest';
import {
  ABLATION_CONFIGS, ABLATION_END, ABLATION_START, DEFAULT_CONFIG_IDS, emptyResultsDoc, renderAblation, replaceSection, stat, summarize, TTS_END, TTS_START, verdict,
  type AblationMeta, type AblationRun,
} from '../../research/ablation/grpo-ablation';

const TASKS = 40;
/** A run whose first `solved` of TASKS tasks succeed. */
const run = (config: string, seed: number, solved: number, exact = 0.5): AblationRun => ({
  key: 'k', config, seed, steps: config === 'base' ? 0 : 4, success: solved / TASKS, meanReward: solved / TASKS, toolPrecision: 0.5, toolRecall: 0.25,
  fidelity: { exact, f1: exact, errorAgree: 1, invalid: 0, steps: 10 },
  perTask: Array.from({ length: TASKS }, (_, t) => ({ taskId: `t${t}`, reward: t < solved ? 1 : 0, tier: t < 20 ? 1 : 2 })),
  trainReward: config === 'base' ? null : { first: 0.1, last: 0.3, mean: 0.2 }, spread: config === 'base' ? null : 0.5,
  trainS: config === 'base' ? 0 : 600 + 60 * seed, curveS: 0, evalS: 60, wallS: (config === 'base' ? 0 : 600 + 60 * seed) + 60,
});

const meta: AblationMeta = {
  date: '2026-12-01 08:00 UTC', world: 'mini', model: 'models/default', modelParams: 1_312_128, backend: 'cpu-fast', machine: 'test machine', command: 'npm run ablation',
  budget: { steps: 4, seeds: 3, evalTasks: TASKS, trainTasks: 200, k: 4, prompts: 2, lr: 0.002, rank: 8 }, bootstrap: { reps: 500, seed: 0 }, reduced: 'two steps only',
  figures: ['figures/ablation-curves.png'], curve: { every: 2, tasks: 20 },
};

describe('ablation tables', () => {
  it('mean and sample sd over seeds (kept for the tables that report sd)', () => {
    expect(stat([0.1, 0.2, 0.3])).toEqual({ mean: expect.closeTo(0.2, 12), sd: expect.closeTo(0.1, 12), n: 3 });
    expect(stat([]).n).toBe(0);
  });

  it('the ablation configurations; the KL run only when named', () => {
    expect(DEFAULT_CONFIG_IDS).toEqual(['base', 'real', 'frozen-simulator', 'per-role', 'envace', 'envace-pooled', 'envace-rollout-mean']);
    expect(ABLATION_CONFIGS.find((c) => c.id === 'envace-rollout-mean')).toMatchObject({ mode: 'rehearse', groups: 'role-wise', baseline: 'rollout-mean', klCoef: 0 });
    expect(ABLATION_CONFIGS.find((c) => c.id === 'envace-kl')).toMatchObject({ mode: 'rehearse', baseline: 'row-weighted', klCoef: 1e-4, optional: true });
    // The judge controls: each differs from its configuration in the reward rule alone, and only runs when named.
    for (const [id, of, reward] of [['real-checklist', 'real', 'checklist'], ['envace-strict', 'envace', 'strict-checklist'], ['frozen-strict', 'frozen-simulator', 'strict-checklist']] as const) {
      const c = ABLATION_CONFIGS.find((x) => x.id === id)!;
      const { id: _a, label: _b, paper: _c, optional, reward: r, ...rest } = c;
      const { id: _d, label: _e, paper: _f, optional: o2, reward: r2, ...restOf } = ABLATION_CONFIGS.find((x) => x.id === of)!;
      expect([optional, r, o2, r2], id).toEqual([true, reward, undefined, undefined]);
      expect(rest, id).toEqual(restOf);
    }
  });

  it('summarizes: intervals, paired differences to the base and between configurations, wall-clock', () => {
    // base solves 10/40; real solves the same 10 plus 10 more in every seed (+25 points on every seed: significant);
    // envace equals the base on seed 0 and 1, one task more on seed 2 (not significant).
    const runs = [run('base', 0, 10), ...[0, 1, 2].map((s) => run('real', s, 20)), run('envace', 0, 10), run('envace', 1, 10), run('envace', 2, 11)];
    const { rows, pairs } = summarize(runs, ABLATION_CONFIGS, { reps: 500 });
    expect(rows.map((r) => [r.config.id, r.runs, r.tasks])).toEqual([['base', 1, 40], ['real', 3, 40], ['envace', 3, 40]]);
    const real = rows[1];
    expect(real.success.mean).toBeCloseTo(0.5, 12);
    expect(real.vsBase).toMatchObject({ mean: expect.closeTo(0.25, 12), n: 120, significant: true });
    expect(real.vsBase!.lo).toBeGreaterThan(0.1);
    const env = rows[2];
    expect(env.vsBase!.mean).toBeCloseTo(1 / 120, 12);
    expect(env.vsBase!.significant).toBe(false);
    expect(rows[0].vsBase).toBeNull();
    expect(real.wallS).toEqual([{ seed: 0, s: 660 }, { seed: 1, s: 720 }, { seed: 2, s: 780 }]);
    expect(real.fidelityExact.mean).toBe(0.5);
    expect(real.spread.mean).toBe(0.5);
    // Key pairs first, in their expected direction (A − B), then the rest.
    expect(pairs.map((p) => `${p.a.id}-${p.b.id}`)).toEqual(['real-base', 'envace-base', 'real-envace']);
    expect(pairs.map((p) => p.expected)).toEqual([true, true, true]);
    expect(pairs[2].diff.mean).toBeCloseTo((10 + 10 + 9) / 120, 12);
    expect(verdict(pairs[0].diff)).toBe('reproduced');
    expect(verdict(pairs[1].diff)).toBe('not resolved');
    // A pair without an expectation says only which side is ahead.
    expect(verdict(pairs[0].diff, false)).toBe('A > B');
    expect(verdict({ ...pairs[0].diff, mean: -pairs[0].diff.mean }, false)).toBe('A < B');
    expect(verdict({ ...pairs[0].diff, mean: -pairs[0].diff.mean })).toBe('contradicted');

    const md = renderAblation({ rows, pairs }, meta);
    expect(md).toContain('> **Reduced budget.** two steps only');
    expect(md).toContain('World `mini`');
    expect(md).toMatch(/\| base policy \| 1 \| 25\.0 \[\d+\.\d, \d+\.\d\] \| – \| – \|/);
    expect(md).toMatch(/\| GRPO, real environment \| 3 \| 50\.0 \[[\d.]+, [\d.]+\] \| \+25\.0 \[\+[\d.]+, \+[\d.]+\] \| \*\*yes\*\* \|/);
    expect(md).toMatch(/\| EnvACE, role-wise \| 3 \| 25\.8 \[[\d.]+, [\d.]+\] \| \+0\.8 \[[-\d.]+, \+[\d.]+\] \| no \|/);
    expect(md).toContain('| GRPO, real environment − base policy | +25.0 [');
    expect(md).toMatch(/\| EnvACE, role-wise − base policy \| \+0\.8 \[.*\] \| no \| not resolved \| 120 \|/);
    expect(md).toContain('| configuration | seed 0 | seed 1 | seed 2 | mean | max |');
    expect(md).toContain('| GRPO, real environment | 11.0 | 12.0 | 13.0 | 12.0 | 13.0 |');
    expect(md).toContain('![learning curves](figures/ablation-curves.png)');
    // Tiers: tasks t0..t19 are tier 1; real solves t0..t19 in every seed.
    expect(md).toContain('| configuration | tier 1 | tier 2 |');
    expect(md).toContain('| GRPO, real environment | 100.0 (60) | 0.0 (60) |');
    expect(md).toContain('| base policy | 50.0 (20) | 0.0 (20) |');
    expect(md).toContain('1.3 M-parameter');
  });

  it('flags missing seeds', () => {
    const { rows, pairs } = summarize([run('base', 0, 5), run('real', 0, 6)], ABLATION_CONFIGS, { reps: 200 });
    expect(renderAblation({ rows, pairs }, meta)).toContain('| GRPO, real environment | 1 of 3 |');
  });

  it('replaces only the ablation section', () => {
    const doc = emptyResultsDoc().replace(`${TTS_START}${TTS_END}`, `${TTS_START}\nkeep me\n${TTS_END}`);
    const once = replaceSection(doc, ABLATION_START, ABLATION_END, 'table v1');
    const twice = replaceSection(once, ABLATION_START, ABLATION_END, 'table v2\n');
    expect(twice).toContain(`${ABLATION_START}\ntable v2\n${ABLATION_END}`);
    expect(twice).not.toContain('table v1');
    expect(twice).toContain(`${TTS_START}\nkeep me\n${TTS_END}`);
    expect(() => replaceSection('# no markers', ABLATION_START, ABLATION_END, 'x')).toThrow(/no <!-- ablation:start -->/);
  });
});
