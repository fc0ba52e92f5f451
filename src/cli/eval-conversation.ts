// `npm run eval -- --user scripted [--samples N] [--max-user-turns N]`: the conversation flags of the eval CLI
// (issue 47), kept apart from eval.ts so that file's own flags and its one-message path stay as they are.
import type { Task } from '../env/domain';
import { conversationSummary, evaluateConversations, type ConversationReport } from '../eval/conversation-eval';
import type { EvalPolicy } from '../eval/evaluate';
import { DEFAULT_MAX_USER_TURNS, USER_KINDS, type ConversationOptions } from '../rollout/conversation';
import type { RolloutDomain, RolloutLimits } from '../rollout/rollout';
import { ArgError, enumFlag, intFlag, type FlagSpec } from './args';

/** Act turns of a conversation when --max-turns is not given: the paper's ≤ 30 turns (one-message episodes keep 12). */
export const CONVERSATION_MAX_TURNS = 30;

export const CONVERSATION_FLAGS: FlagSpec = {
  user: { type: 'string', arg: 'U', help: 'scripted: each task is a conversation with the domain\'s scripted τ² user (generated tasks only); the reply no longer ends the episode, and a write before the user\'s explicit yes fails the task', default: 'off: one-message episodes' },
  samples: { type: 'string', arg: 'N', help: 'with --user: conversations per task, 1..16, for pass^k (k = 1..N); N > 1 samples at temperature 1, N = 1 decodes greedily', default: '1' },
  'max-user-turns': { type: 'string', arg: 'N', help: 'with --user: user turns before an episode is cut off (reward 0), 1..100', default: String(DEFAULT_MAX_USER_TURNS) },
};

export interface ConversationEvalArgs {
  conversation: ConversationOptions;
  samples: number;
}

/** The conversation options of the command line, or null without --user (refusals are usage errors). */
export function conversationArgs(v: Record<string, string | boolean | undefined>, opts: { tts: boolean }): ConversationEvalArgs | null {
  if (v.user === undefined) {
    if (v.samples !== undefined || v['max-user-turns'] !== undefined) throw new ArgError('--samples and --max-user-turns need --user scripted');
    return null;
  }
  const user = enumFlag(v, 'user', USER_KINDS, 'scripted');
  if (opts.tts) throw new ArgError('--user does not combine with --tts (test-time rehearsal of conversations is not built yet)');
  return {
    conversation: { user, maxUserTurns: intFlag(v, 'max-user-turns', DEFAULT_MAX_USER_TURNS, 1, 100) },
    samples: intFlag(v, 'samples', 1, 1, 16),
  };
}

/**
 * The scripted user plays a generated task's structured intent. A task file's tasks have none (τ² files), or
 * carry one nothing has validated (a lab-format file is read loosely): only the generated splits are played.
 */
export function checkConversationTasks(tasks: readonly Task[], tasksArg: string): void {
  if ((tasksArg !== 'test' && tasksArg !== 'train') || tasks.some((t) => !('intent' in t))) throw new ArgError(`--user scripted plays the generated tasks of --tasks test|train, not ${tasksArg}: the scripted user needs each task's generated intent`);
}

export async function runConversationEval(
  policy: EvalPolicy, domain: RolloutDomain, tasks: readonly Task[], a: ConversationEvalArgs,
  o: { limits: RolloutLimits; seed: number; log: (s: string) => void },
): Promise<ConversationReport> {
  const report = await evaluateConversations(policy, domain, tasks, { limits: o.limits, seed: o.seed, conversation: a.conversation, samples: a.samples, kvReuse: true, log: o.log });
  for (const line of conversationSummary(report).split('\n')) o.log(line);
  return report;
}
