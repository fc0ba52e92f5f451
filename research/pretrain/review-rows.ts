// Pretraining rows for test-time private rehearsal (src/eval/private-rehearsal.ts), so that the bundled
// policy has seen the two prompts that mechanism adds:
//   - review rows: the self-evaluation prompt (src/rollout/self-eval.ts) over an attempt at a task, and a
//     short review as the target. The review is written from the checklist judge's verdict and the
//     attempt's failed calls: privileged at data time, never at test time, where the policy sees only the
//     request and its own (imagined) attempt. It teaches the reviewer to say what the judge would.
//   - memory-conditioned Act rows (every other task): the expert's clean episode, its Act turns prompted with a rehearsal
//     memory (src/rollout/rehearsal-memory.ts, the same builder and the same placement, an extra user
//     message after the request) made of one flawed attempt and its review.
// Attempts are the expert's own episodes: with mistakes (failed calls it recovers from), cut short at a
// seeded point (unmet checklist items), or whole (satisfied). Real observations stand in for imagined ones.
import { judgeOptions } from '../../src/env/judge';
import { Rng } from '../../src/util/rng';
import type { Domain, Step, Task } from '../../src/env/domain';
import { rowsFromEpisode } from '../../src/env/rows';
import type { ToolDefinition } from '../../src/rollout/chat';
import type { EndReason } from '../../src/rollout/episode';
import { buildRehearsalMemory, clip, type JudgeVerdict } from '../../src/rollout/rehearsal-memory';
import { buildSelfEvalPrompt, judgeVerdict } from '../../src/rollout/self-eval';
import { END, rowToExample, type Example } from './data';

export interface ReviewRowOptions {
  /** Train-split tasks (the first this-many of the pretraining tasks) that give review + memory rows. */
  tasks: number;
  seed: number;
  /** Memory cap in policy tokens (private rehearsal's default: 256). */
  memoryTokens: number;
  /** Token counter of the policy's tokenizer (the memory bound is in its tokens). */
  countTokens(text: string): number;
}

export interface ReviewData {
  reviews: Example[];
  memoryActs: Example[];
  /** The attempt each review row reviews (same order as `reviews`), so its verdict can be checked. */
  attempts: { taskId: string; steps: Step[]; end: EndReason }[];
}

/** A review from the judge's verdict and the attempt's failed calls: at most three short sentences. */
export function writeReview(verdict: JudgeVerdict, steps: readonly Step[], end: EndReason): string {
  if (verdict.reward >= 1) return 'Yes, the request was satisfied. Nothing went wrong. Do the same again.';
  const failed = steps.flatMap((s) => (s.kind === 'call' && !s.observation.ok ? [s] : []));
  const wrong = failed.length
    ? `${failed[0].call.name || 'A call'} failed: ${clip(failed[0].observation.ok ? '' : failed[0].observation.error, 60)}.`
    : end === 'reply' ? 'It replied before finishing.' : `It stopped (${end}) before finishing.`;
  const next = verdict.unmet.find((u) => u.startsWith('call ')) ?? verdict.unmet[0];
  return `No, the request was not satisfied. ${wrong} Next time: ${next ? clip(next, 160) : 'finish the request'}.`;
}

/** An attempt the review sees: the expert's episode, cut short with probability 2/3 at a seeded step. */
function attemptOf(steps: readonly Step[], rng: Rng): { steps: Step[]; end: EndReason } {
  if (steps.length < 2 || rng.next() < 1 / 3) return { steps: [...steps], end: 'reply' };
  const cut = 1 + rng.int(steps.length - 1); // keep 1 .. n-1 steps
  return { steps: steps.slice(0, cut), end: 'max-turns' };
}

export function reviewRows<T extends Task>(domain: Domain<T>, tasks: readonly T[], o: ReviewRowOptions): ReviewData {
  const tools = domain.definitions() as unknown as ToolDefinition[];
  const probe = domain.createEnv();
  const opts = judgeOptions(probe, domain.normaliseArgs?.bind(domain));
  const reviews: Example[] = [];
  const memoryActs: Example[] = [];
  const attempts: ReviewData['attempts'] = [];
  tasks.slice(0, o.tasks).forEach((task, i) => {
    const rng = new Rng(o.seed * 104729 + i);
    // A flawed attempt (mistakes on) and a clean episode (none) of the same task.
    const flawed = domain.expert(task, domain.createEnv(), { mistakeRate: 0.5, seed: o.seed * 7919 + i + 1 }).steps;
    const clean = domain.expert(task, domain.createEnv(), { mistakeRate: 0, seed: o.seed * 7919 + i }).steps;
    const a = attemptOf(flawed, rng);
    const review = writeReview(judgeVerdict(task, a.steps, opts), a.steps, a.end);
    reviews.push({ role: 'review', taskId: task.id, prompt: buildSelfEvalPrompt(task, a.steps, a.end), response: review + END });
    attempts.push({ taskId: task.id, ...a });
    // Memory-conditioned episodes from every other task: they are long (memory + history), a third of the
    // Act rows otherwise.
    if (i % 2 === 1) return;
    const memory = buildRehearsalMemory([{ index: 0, steps: a.steps, end: a.end, selfEval: review, judge: null }], o.countTokens, { maxTokens: o.memoryTokens, evaluation: 'self' });
    if (memory.text === '') return;
    const conditioned = { ...task, userMessages: [...task.userMessages, memory.text] };
    for (const row of rowsFromEpisode(conditioned, clean)) if (row.role === 'act') memoryActs.push(rowToExample(row, domain.policy, tools));
  });
  return { reviews, memoryActs, attempts };
}
