// The world-rehearsal lesson's one click (src/method/lesson-runs.ts declares its two runs): with the lab's own machinery,
// the run the lab holds is kept (a lesson run replaces it), then for each of the two runs: reset, the run's settings
// into the lab's settings, Start (src/ui/lab.svelte.ts startTraining, which evaluates the starting policy first, reused
// by the second run), and Keep, tagged as this lesson's run (src/ui/compare.svelte.ts). The plot reads the kept runs.
// A lesson stopped in a run (Pause, a lost device) waits, paused, for its Resume: the run goes on from its last step
// (startTraining resumes the lab's run) and the lesson from that run; its button still starts it again from the base.
import { compare, currentIsKept, currentRecord, keepCurrent } from './compare.svelte';
import type { LessonTag } from './compare';
import { lab, resetTraining, startTraining } from './lab.svelte';
import { LESSON_RUNS, lessonRunName, lessonValues, type LessonSize } from '../method/lesson-runs';
import { settings } from './settings.svelte';

/** A lesson stopped inside one of its runs, which Resume continues. */
export interface PausedLesson {
  tag: LessonTag;
  name: string;
  /** Index of the run it stopped in (0 or 1). */
  run: number;
  step: number;
  size: LessonSize;
  /** Lesson time spent before the stop. */
  ms: number;
  /** The stopped run's saved settings: Resume refuses when the lab holds another run by then. */
  config: string;
}

export const lesson = $state({
  /** The lesson going (null: none): its tag and the name of the run training now. */
  active: null as { tag: LessonTag; name: string } | null,
  /** Which of the two runs is training (1 or 2; 0: none). */
  run: 0,
  /** The lesson stopped in a run, waiting for Resume (null: none). */
  paused: null as PausedLesson | null,
  error: '',
  /** Wall-clock of the last lesson that ran to its end in this page, with its size. */
  took: null as { ms: number; size: LessonSize } | null,
});

/** The lesson's size as the lab's settings hold it (its controls, or ?lsteps=&levery=&ltasks= in the URL). */
export const lessonSize = (): LessonSize => ({ steps: settings.lessonSteps, evalEvery: settings.lessonEvalEvery, evalTasks: settings.lessonEvalTasks });

const canStart = () => !lesson.active && !!lab.model && !lab.busy && !lab.training;

/** Start the lesson from the base policy (a paused one is dropped). */
export async function runLesson(): Promise<void> {
  if (!canStart()) return;
  lesson.paused = null;
  // The run the lab holds is replaced by the lesson's: keep it first (under its settings' name).
  if (currentRecord() && !currentIsKept()) await keepCurrent('');
  await drive({ tag: { id: new Date().toISOString(), role: LESSON_RUNS[0].role }, run: 0, size: lessonSize(), ms: 0, resume: false });
}

/** Whether the lab still holds the paused lesson's run, as it was (null: it can be resumed). */
export function resumeProblem(p: PausedLesson): string | null {
  const t = lab.train;
  if (!t?.config || JSON.stringify(t.config) !== p.config) return 'the lab no longer holds the lesson\'s run (it was reset or replaced)';
  if (t.step < p.step) return 'the lesson\'s run went back to an earlier step';
  return null;
}

/** Continue the paused lesson: its run from its last step, then the rest of the lesson. */
export async function resumeLesson(): Promise<void> {
  const p = lesson.paused;
  if (!p || !canStart()) return;
  const problem = resumeProblem(p);
  if (problem) {
    lesson.error = `The lesson cannot resume: ${problem}. Press the lesson's button to start it again from the base policy.`;
    lesson.paused = null;
    return;
  }
  lesson.paused = null;
  await drive({ tag: p.tag, run: p.run, size: p.size, ms: p.ms, resume: true });
}

/** The lesson from run `from` on; `resume`: that run is the lab's current one, stopped, and goes on from its step. */
async function drive(o: { tag: LessonTag; run: number; size: LessonSize; ms: number; resume: boolean }): Promise<void> {
  const { size } = o;
  lesson.error = '';
  lesson.took = null;
  const t0 = performance.now() - o.ms;
  try {
    for (let i = o.run; i < LESSON_RUNS.length; i++) {
      const spec = LESSON_RUNS[i];
      const name = lessonRunName(spec, size.steps);
      lesson.active = { tag: { ...o.tag, role: spec.role }, name };
      lesson.run = i + 1;
      const resuming = o.resume && i === o.run;
      // A resumed run keeps the settings it was saved with (workers/lab/training.ts), whatever the controls say now.
      if (!resuming) {
        if (lab.train?.config) await resetTraining();
        Object.assign(settings, lessonValues(spec, size, settings as unknown as Record<string, unknown>));
      }
      await startTraining();
      const t = lab.train;
      if (!t?.config || t.step < size.steps) {
        const at = t?.step ?? 0;
        if (t?.config) lesson.paused = { tag: lesson.active.tag, name, run: i, step: at, size, ms: performance.now() - t0, config: JSON.stringify(t.config) };
        lesson.error = `The lesson stopped in its run ${i + 1} (${spec.name}) at step ${at} of ${size.steps}${lab.error ? `: ${lab.error}` : ''}. ${lesson.paused ? 'Resume continues it from there; the' : 'The'} lesson's button starts it again from the base policy.`;
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
