// The ablation table: statistics over seeds (hand-worked), aggregation per configuration, the rendered
// Markdown (paper figures beside ours, before → after fidelity, the reduced-budget label) and the marker
// section replacement that leaves the rest of docs/results.md alone.
import { describe, expect, it } from 'vitest';
import {
  ABLATION_END, ABLATION_START, aggregate, emptyResultsDoc, renderAblation, replaceSection, stat, TTS_END, TTS_START, type AblationMeta, type AblationRun,
} from '../../src/rl/grpo-ablation';

const run = (config: string, seed: number, success: number, exact: number): AblationRun => ({
  config, seed, steps: config === 'base' ? 0 : 4, success, meanReward: success, toolPrecision: 0.5, toolRecall: 0.25,
  fidelity: { exact, f1: exact, errorAgree: 1, invalid: 0, steps: 10 }, trainReward: config === 'base' ? null : { first: 0.1, last: 0.3 }, trainS: 10 * seed, evalS: 2,
});

const meta: AblationMeta = {
  date: '2026-11-29 08:00 UTC', model: 'models/default', modelParams: 1_312_128, backend: 'cpu-fast', machine: 'test machine', command: 'npm run ablation',
  budget: { steps: 4, seeds: 3, evalTasks: 20, trainTasks: 200, k: 4, prompts: 2, lr: 0.002, rank: 8, baseline: 'row-weighted' }, reduced: 'two steps only', measuredStepS: { rehearse: 12.5 },
};

describe('ablation table', () => {
  it('mean and sample sd over seeds', () => {
    expect(stat([0.1, 0.2, 0.3])).toEqual({ mean: expect.closeTo(0.2, 12), sd: expect.closeTo(0.1, 12), n: 3 });
    expect(stat([0.4])).toEqual({ mean: 0.4, sd: 0, n: 1 });
    expect(stat([NaN, 1, 3])).toEqual({ mean: 2, sd: Math.SQRT2, n: 2 });
    expect(stat([]).n).toBe(0);
  });

  it('aggregates per configuration in the canonical order and renders both figures', () => {
    const runs = [run('envace', 0, 0.3, 0.6), run('base', 0, 0.1, 0.4), run('envace', 1, 0.5, 0.8), run('envace', 2, 0.4, 0.7), run('real', 0, 0.2, 0.4)];
    const rows = aggregate(runs);
    expect(rows.map((r) => [r.config.id, r.runs])).toEqual([['base', 1], ['real', 1], ['envace', 3]]);
    const env = rows[2];
    expect(env.success.mean).toBeCloseTo(0.4, 12);
    expect(env.success.sd).toBeCloseTo(0.1, 12);
    const md = renderAblation(rows, meta);
    expect(md).toContain('> **Reduced budget.** two steps only');
    expect(md).toContain('| base policy | 1 | 10.0 | 0.100 | 50.0 | 25.0 | 40.0 / 40.0 / 100.0 | 0.0 | – | 0.0 | 2.0 | 30.0 | – |');
    expect(md).toContain(
      '| EnvACE, role-wise | 3 | 40.0 ± 10.0 | 0.400 ± 0.100 | 50.0 ± 0.0 | 25.0 ± 0.0 | 40.0 / 40.0 / 100.0 → 70.0 ± 10.0 / 70.0 ± 10.0 / 100.0 ± 0.0 | 0.0 → 0.0 ± 0.0 | 0.10 → 0.30 | 10.0 | 2.0 | 36.7 | 15.3 |',
    );
    expect(md).toContain('1.3 M-parameter');
    expect(md).toContain('rehearse 12.5');
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
