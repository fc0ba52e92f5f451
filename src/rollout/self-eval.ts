// Evaluations of an imagined attempt, for test-time private rehearsal. Two, kept apart:
//   - self: the policy itself, prompted to review its attempt (did it satisfy the request, what went wrong,
//     what to change). This is the paper's mechanism; a small policy's review can be weak or off-format, and
//     it is kept verbatim (whitespace-collapsed) so the lab shows exactly what the policy wrote.
//   - judge: the deterministic checklist judge (src/env/judge.ts) on the imagined trajectory. It reads the
//     task's checklist, which is derived from the reference actions: privileged information a deployed agent
//     would not have. It is always computed and shown; it enters the memory only when asked to
//     (PrivateRehearsalOptions.memoryEvaluation 'judge' | 'both').
import type { Step, Task } from '../env/domain';
import { canonicalJson } from '../env/json';
import { judge } from '../env/judge';
import { renderChat } from './chat';
import type { EndReason } from './episode';
import { describeSteps, type JudgeVerdict } from './rehearsal-memory';

export const SELF_EVAL_SYSTEM =
  'You review an attempt by a customer-service agent. The attempt was imagined: the tool results are the ' +
  "agent's own predictions, nothing was executed. Answer in at most three short sentences: did the attempt " +
  'satisfy the request, what went wrong, and what to change next time.';

export interface SelfEvalPromptOptions {
  maxResultChars?: number;
  maxReplyChars?: number;
  maxSteps?: number;
  enableThinking?: boolean;
}

/** The self-evaluation prompt (Qwen3 chat format, generation prompt open for the assistant's review). */
export function buildSelfEvalPrompt(task: Pick<Task, 'userMessages'>, steps: readonly Step[], end: EndReason, o: SelfEvalPromptOptions = {}): string {
  const lines = describeSteps(steps, { maxResultChars: o.maxResultChars ?? 160, maxReplyChars: o.maxReplyChars ?? 200, maxSteps: o.maxSteps ?? 8 });
  const user =
    `Request:\n${task.userMessages.join('\n')}\n\nAttempt (ended: ${end}):\n${lines.length ? lines.join('\n') : '(no steps)'}\n\n` +
    'Did it satisfy the request? What went wrong? What should change?';
  return renderChat([{ role: 'system', content: SELF_EVAL_SYSTEM }, { role: 'user', content: user }], { addGenerationPrompt: true, enableThinking: o.enableThinking ?? false });
}

/** The review as shown and stored: any think span dropped, whitespace collapsed. */
export function cleanEvaluation(text: string): string {
  return text.replace(/<think>[\s\S]*?<\/think>/g, '').replace(/\s+/g, ' ').trim();
}

/** The checklist judge on an imagined trajectory, with its unmet items spelled out for the memory and the UI. */
export function judgeVerdict(
  task: Pick<Task, 'checklist'>,
  steps: readonly Step[],
  opts: { isWrite(name: string): boolean; normaliseArgs?(name: string, args: Record<string, unknown>): Record<string, unknown> },
): JudgeVerdict {
  const r = judge(task.checklist, steps, opts);
  const unmet = r.items
    .filter((v) => !v.satisfied)
    .map((v) => (v.item.kind === 'call' ? `call ${v.item.name} ${canonicalJson(v.item.args)}` : v.item.kind === 'fact' ? `fact "${v.item.text}"` : 'a write the request did not ask for'));
  if (r.empty) unmet.unshift('an empty reply');
  return { reward: r.reward, unmet };
}
