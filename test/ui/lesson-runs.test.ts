// The world-rehearsal lesson's two runs (src/method/lesson-runs.ts): they are the research configurations whose results
// docs/results.md reports ("Real-interaction budget": real-q and dyna-q-recall), they spend the same real episodes,
// and a lesson run's lab settings are the lab's defaults, its seed and limits, the lesson's size and the run's own.
import { describe, expect, it } from 'vitest';
import { ABLATION_CONFIGS } from '../../research/ablation/grpo-ablation';
import { labDefault, labRequestOf, RUN_SETTINGS, setting } from '../../src/method/run-config';
import { grpoRunConfig } from '../../src/rl/grpo-config';
import { episodesOf, LESSON_LR, LESSON_RUNS, LESSON_SIZE, lessonRunName, lessonValues } from '../../src/method/lesson-runs';
import { DEFAULTS } from '../../src/ui/settings.svelte';

// research/scripts/ablation.ts's budget of those rows (research/records/2026-12-04-budget/run.sh): 40 steps, 4 prompts, K 4.
const BUDGET = { steps: 40, prompts: 4, k: 4 };
const lab = DEFAULTS as unknown as Record<string, unknown>;

describe('the lesson runs', () => {
  it('are research configurations real-q and dyna-q-recall, setting for setting', () => {
    for (const spec of LESSON_RUNS) {
      const c = ABLATION_CONFIGS.find((x) => x.id === spec.research)!;
      expect(c, spec.research).toBeDefined();
      const v = lessonValues(spec, LESSON_SIZE, lab);
      expect(v.mode).toBe(c.mode);
      expect(v.promptsPerStep).toBe(c.promptsPerStep ?? BUDGET.prompts);
      expect(v.k).toBe(BUDGET.k);
      expect(v.realPrompts).toBe(c.realPrompts ?? 0);
      expect(v.rehearsalRecall).toBe(c.rehearsalRecall ?? 'none');
      // 'auto' is the mode's own reward, what a configuration without one runs with.
      expect(v.reward === 'auto' ? undefined : v.reward).toBe(c.reward);
      expect([v.groups, v.baseline]).toEqual([c.groups, c.baseline]);
      // The ablation's shared training settings are the lab's defaults, but for the lesson's own smaller learning rate.
      expect(v.rank).toBe(8);
      expect(labDefault(setting('lr'))).toBe(1e-3);
      expect(v.lr).toBe(LESSON_LR);
      expect(LESSON_LR).toBeLessThan(1e-3);
      // The lesson at its defaults is the ablation's length.
      expect(v.steps).toBe(BUDGET.steps);
    }
  });

  it('spend the same real episodes: 160 each at 40 steps, the rehearsed run 480 rehearsed ones besides', () => {
    const [real, reh] = LESSON_RUNS.map((s) => episodesOf(s.values, LESSON_SIZE.steps));
    expect(real).toEqual({ real: 160, rehearsed: 0 });
    expect(reh).toEqual({ real: 160, rehearsed: 480 });
    for (const steps of [1, 2, 7]) expect(episodesOf(LESSON_RUNS[0].values, steps).real).toBe(episodesOf(LESSON_RUNS[1].values, steps).real);
    expect(LESSON_RUNS.map((s) => lessonRunName(s, 40))).toEqual(['lesson: real-only GRPO, 160 real episodes', 'lesson: world rehearsal, 160 real + 480 rehearsed episodes']);
  });

  it("take the lab's defaults for the rest, its seed and limits, and the lesson's size, whatever else the lab's settings hold", () => {
    const tweaked = { ...lab, seed: 7, maxTurns: 3, maxActTokens: 24, maxRehearseTokens: 48, lr: 0.5, topP: 0.3, steps: 900, evalTasks: 3, baseEval: 'skip', mode: 'per-role' };
    const size = { steps: 2, evalEvery: 1, evalTasks: 3 };
    for (const spec of LESSON_RUNS) {
      const v = lessonValues(spec, size, tweaked);
      expect(v).toMatchObject({ seed: 7, maxTurns: 3, maxActTokens: 24, maxRehearseTokens: 48, ...size, ...spec.values, baseEval: 'reuse' });
      expect(v.lr).toBe(LESSON_LR);
      expect(v.topP).toBe(labDefault(setting('topP')));
      // Every lab setting, and nothing else.
      expect(Object.keys(v).sort()).toEqual(RUN_SETTINGS.filter((r) => 'lab' in r).map((r) => r.name).sort());
    }
  });

  it("each run's settings become its run configuration by the page's path (its request), within what a run accepts (src/rl/run.ts checkConfig)", () => {
    const configs = LESSON_RUNS.map((spec) => grpoRunConfig({ ...(labRequestOf(lessonValues(spec, LESSON_SIZE, lab)) as Parameters<typeof grpoRunConfig>[0]), maxActTokens: 96, maxRehearseTokens: 640, checkpointEvery: 1 }));
    // Real-only: no real-prompt budget or recall recorded (a real-mode run refuses either).
    expect([configs[0].mode, configs[0].realPrompts, configs[0].rehearsalRecall, configs[0].reward]).toEqual(['real', undefined, undefined, undefined]);
    // Rehearsed: 1 real prompt of 4 per step, recall, the strict judge for the rehearsed ones.
    expect([configs[1].mode, configs[1].promptsPerStep, configs[1].realPrompts, configs[1].rehearsalRecall, configs[1].reward]).toEqual(['rehearse', 4, 1, 'reference', 'strict-checklist']);
    expect(configs.map((c) => [c.steps, c.k, c.seed, c.evalEvery, c.lr])).toEqual([[40, 4, 1, 10, 3e-4], [40, 4, 1, 10, 3e-4]]);
  });
});
