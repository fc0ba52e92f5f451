// The world-rehearsal lesson (the Training dashboard's one-click lesson; the lesson strip's step 3): two GRPO runs
// from the base policy, one after the other, with the same seed, steps, held-out tasks and limits, at the same small
// budget of real episodes:
// (a) real-only GRPO: 1 prompt × K 4 per step, every episode in the real environment (research's `real-q`);
// (b) world rehearsal: 4 prompts × K 4 per step, 1 of them in the real environment (scored by the verifier), the other
//     3 rehearsed by the policy (scored by the checklist judge, all or nothing) with recall of the training task's
//     reference observations (research's `dyna-q-recall`, the best rehearsed configuration at this budget in
//     docs/results.md, "Real-interaction budget").
// The two configurations are declared here once, as the lab settings that make them what they are (the research
// configurations' own values: test/ui/lesson-runs.test.ts holds them equal to research/ablation/grpo-ablation.ts; the
// learning rate is the lesson's own, below the research runs' 1e-3, see LESSON_LR);
// src/ui/lesson-run.svelte.ts runs them with the lab's own run, keep and compare machinery. Pure.
import { realEpisodesPerStep } from './modes';
import { labDefault, RUN_SETTINGS, setting, type LabRunValues, type LabSettingName } from './run-config';

export type LessonRole = 'real-only' | 'rehearsed';

/** The settings that make a lesson run the configuration it is. */
export type LessonRunValues = Pick<LabRunValues, 'mode' | 'promptsPerStep' | 'k' | 'realPrompts' | 'reward' | 'rehearsalRecall' | 'lr'>;

export interface LessonRunSpec {
  role: LessonRole;
  /** The research configuration it is (research/ablation/grpo-ablation.ts ABLATION_CONFIGS). */
  research: string;
  /** Its short name (legend, kept run). */
  name: string;
  values: LessonRunValues;
}

/**
 * Both lesson runs' AdamW learning rate: a third of the lab's default (1e-3, the research ablations'). From the bundled
 * 8-layer policy (59 % held-out, pass@8 65 %) 40 steps at 1e-3 moved both runs below the base on every seed measured
 * (research/records/2026-12-05-lesson-g8, -lesson-speed: world rehearsal 52.7-57.3 %, real-only 54.0-57.0 %), and so
 * did real-only GRPO at 1e-3 in the G8 budget experiment (-3.3 points over ten seeds); the lesson's runs take smaller
 * steps. Measured at this rate on fresh seeds: research/records/2026-12-05-lesson-lr.
 */
export const LESSON_LR = 3e-4;

export const LESSON_RUNS: readonly [LessonRunSpec, LessonRunSpec] = [
  {
    role: 'real-only', research: 'real-q', name: 'real-only GRPO',
    values: { mode: 'real', promptsPerStep: 1, k: 4, realPrompts: 0, reward: 'auto', rehearsalRecall: 'none', lr: LESSON_LR },
  },
  {
    role: 'rehearsed', research: 'dyna-q-recall', name: 'world rehearsal',
    values: { mode: 'rehearse', promptsPerStep: 4, k: 4, realPrompts: 1, reward: 'strict-checklist', rehearsalRecall: 'reference', lr: LESSON_LR },
  },
];

/** The lesson's size, the same for both runs. */
export interface LessonSize {
  steps: number;
  evalEvery: number;
  evalTasks: number;
}

/** At its defaults: research's 40 steps (160 real episodes per run), held-out evaluation of the lab's default size every 10 steps. */
export const LESSON_SIZE: LessonSize = { steps: 40, evalEvery: 10, evalTasks: labDefault(setting('evalTasks')) as number };
/**
 * Held-out tasks of each evaluation's fidelity check in both lesson runs (the first of the evaluation's tasks; all
 * when the evaluation has no more). The check rehearses every reference call of a task (~3.3 a task on the mini
 * world, prompts of ~250 tokens), so on all 100 tasks it took 63 % of an evaluation (49 s at one thread, 31 s of it the
 * check, measured 2026-12-06) and evaluations half the lesson (research/records/2026-12-05-lesson-lr); 50 tasks are
 * ~160 rehearsals, the same ones at every step, so the curve's steps are compared on the same calls.
 */
export const LESSON_FIDELITY_TASKS = 50;

/** The lesson's controls' bounds (the URL is clamped to them). */
export const LESSON_RANGE: { readonly [K in keyof LessonSize]: { readonly min: number; readonly max: number } } = {
  steps: { min: 1, max: 400 },
  evalEvery: { min: 1, max: 400 },
  evalTasks: { min: 1, max: 500 },
};

/**
 * What a lesson run takes from the lab's current settings: the seed (the stepper's Seed) and the limits (turns and
 * token budgets, measured on the world by default), so the lesson runs where the lab runs.
 */
export const FROM_LAB = ['seed', 'maxTurns', 'maxActTokens', 'maxRehearseTokens'] as const satisfies readonly LabSettingName[];

/**
 * Every lab setting of one lesson run: the lab's defaults (rank, grouping, decoding…), then the lab's
 * seed and limits, the lesson's size, the run's own configuration; the starting policy's evaluation is reused when
 * this browser measured it (the second run reuses the first run's).
 */
export function lessonValues(spec: LessonRunSpec, size: LessonSize, lab: Readonly<Record<string, unknown>>): Record<LabSettingName, unknown> {
  const out: Record<string, unknown> = {};
  for (const row of RUN_SETTINGS) if ('lab' in row) out[row.name] = labDefault(row);
  for (const k of FROM_LAB) out[k] = lab[k];
  Object.assign(out, size, spec.values, { baseEval: 'reuse', evalFidelityTasks: size.evalTasks > LESSON_FIDELITY_TASKS ? LESSON_FIDELITY_TASKS : 0 });
  return out as Record<LabSettingName, unknown>;
}

/** Real and rehearsed episodes of a lesson run over `steps`. */
export function episodesOf(v: Pick<LessonRunValues, 'mode' | 'promptsPerStep' | 'k' | 'realPrompts'>, steps: number): { real: number; rehearsed: number } {
  const real = steps * realEpisodesPerStep(v);
  return { real, rehearsed: steps * v.promptsPerStep * v.k - real };
}

/** A lesson run's name (its kept run's, the legend's): what it is and what it spent. */
export function lessonRunName(spec: LessonRunSpec, steps: number): string {
  const e = episodesOf(spec.values, steps);
  return `lesson: ${spec.name}, ${e.real} real${e.rehearsed ? ` + ${e.rehearsed} rehearsed` : ''} episodes`;
}

/**
 * The lesson at its defaults, timed in headless Chromium by the opt-in test/e2e/world-rehearsal-lesson.test.ts
 * (LAB_WORLD_LESSON=1; its record: research/records/2026-12-06-lesson-together/world-rehearsal-lesson.json).
 */
export const MEASURED: { minutes: number; machine: string; date: string; policy: string; lr: number; fidelityTasks: number | 'all' } | null = {
  minutes: 11.2,
  lr: 3e-4,
  fidelityTasks: 50,
  policy: 'the bundled 8-layer mini policy',
  machine: "this repository's 2-core test machine, on the CPU fast path, with little else running (load average 1.9 to 2.2)",
  date: '2026-12-06',
};
