// The world-rehearsal lesson's one click (src/method/lesson-runs.ts declares its two runs): with the lab's own machinery,
// the run the lab holds is kept (a lesson run replaces it), then for each of the two runs: reset, the run's settings
// into the lab's settings, Start (src/ui/lab.svelte.ts startTraining, which evaluates the starting policy first, reused
// by the second run), and Keep, tagged as this lesson's run (src/ui/compare.svelte.ts). The plot reads the kept runs.
import { compare, currentIsKept, currentRecord, keepCurrent } from './compare.svelte';
import type { LessonTag } from './compare';
import { lab, resetTraining, startTraining } from './lab.svelte';
import { LESSON_RUNS, lessonRunName, lessonValues, type LessonSize } from '../method/lesson-runs';
import { settings } from './settings.svelte';

export const lesson = $state({
  /** The lesson going (null: none): its tag and the name of the run training now. */
  active: null as { tag: LessonTag; name: string } | null,
  /** Which of the two runs is training (1 or 2; 0: none). */
  run: 0,
  error: '',
  /** Wall-clock of the last lesson that ran to its end in this page, with its size. */
  took: null as { ms: number; size: LessonSize } | null,
});

/** The lesson's size as the lab's settings hold it (its controls, or ?lsteps=&levery=&ltasks= in the URL). */
export const lessonSize = (): LessonSize => ({ steps: settings.lessonSteps, evalEvery: settings.lessonEvalEvery, evalTasks: settings.lessonEvalTasks });

export async function runLesson(): Promise<void> {
  if (lesson.active || !lab.model || lab.busy || lab.training) return;
  const size = lessonSize();
  const tag = { id: new Date().toISOString(), role: LESSON_RUNS[0].role };
  lesson.error = '';
  lesson.took = null;
  const t0 = performance.now();
  try {
    // The run the lab holds is replaced by the lesson's: keep it first (under its settings' name).
    if (currentRecord() && !currentIsKept()) await keepCurrent('');
    for (const [i, spec] of LESSON_RUNS.entries()) {
      const name = lessonRunName(spec, size.steps);
      lesson.active = { tag: { ...tag, role: spec.role }, name };
      lesson.run = i + 1;
      if (lab.train?.config) await resetTraining();
      const values = lessonValues(spec, size, settings as unknown as Record<string, unknown>);
      Object.assign(settings, values);
      await startTraining();
      const t = lab.train;
      if (!t?.config || t.step < size.steps) {
        lesson.error = `The lesson stopped in its run ${i + 1} (${spec.name}) at step ${t?.step ?? 0} of ${size.steps}${lab.error ? `: ${lab.error}` : ''}. Press the lesson's button to start it again.`;
        return;
      }
      await keepCurrent(name, lesson.active.tag);
      if (compare.error) {
        lesson.error = `The lesson could not keep its run ${i + 1}: ${compare.error}`;
        return;
      }
    }
    lesson.took = { ms: performance.now() - t0, size };
  } finally {
    lesson.active = null;
    lesson.run = 0;
  }
}
