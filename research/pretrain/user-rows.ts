// Pretraining data for the user role (issue 47, "the policy plays the user"): the conversation expert talks
// with the scripted user on train-split tasks (src/env/retail/expert-conversation.ts), and every user turn
// of those conversations becomes a row (src/env/conversation-rows.ts userRowsFromConversation): the user-role
// prompt of the task's τ² instructions and what the user had seen so far, rendered exactly as the model user
// renders it at run time (src/rollout/user-prompt.ts), and the scripted user's turn as the response (its
// stop token included, so the model learns when to end). The same conversations give their Act and Rehearse
// rows (rowsFromConversation), so a stage can teach both sides of a conversation from one draw.
//
// The user profile seed varies per task (seed-derived), so the rows cover the scripted user's variations (a
// wrong zip first, a change of mind, two requests at once) under instructions that say so.
import { deriveSeed } from '../../src/util/rng';
import type { Domain, Row } from '../../src/env/domain';
import { rowsFromConversation, userRowsFromConversation, type UserRow } from '../../src/env/conversation-rows';
import { runRetailExpertConversation } from '../../src/env/retail/expert-conversation';
import type { RetailTask } from '../../src/env/retail/intent';
import { renderUserPrompt, userSystemMessage } from '../../src/rollout/user-prompt';
import type { ToolDefinition } from '../../src/rollout/chat';
import type { RehearsePromptOptions } from '../../src/rollout/rehearse-prompt';
import { END, rowToExample, type Example } from './data';

export interface ConversationDataOptions {
  split: 'train' | 'test';
  tasks: number;
  seed: number;
  /** The expert's recoverable-mistake rate (default 0). */
  mistakeRate?: number;
}

/** The conversations' rows: each task's user rows, and the agent's Act and Rehearse rows of the same conversation. */
export function conversationRows(domain: Domain, o: ConversationDataOptions): { user: UserRow[]; agent: Row[]; tasks: number } {
  if (!domain.userInstructions) throw new Error(`domain ${domain.name} has no user instructions`);
  const tasks = domain.tasks.generate({ split: o.split, count: o.tasks, seed: o.seed }) as RetailTask[];
  const user: UserRow[] = [];
  const agent: Row[] = [];
  tasks.forEach((task, i) => {
    const userSeed = deriveSeed(o.seed, i, 1);
    const conv = runRetailExpertConversation(task, domain.createEnv(), { seed: deriveSeed(o.seed, i, 2), userSeed, mistakeRate: o.mistakeRate ?? 0 });
    user.push(...userRowsFromConversation(task.id, conv.turns, domain.userInstructions!(task, { seed: userSeed })!));
    agent.push(...rowsFromConversation(task.id, conv.turns));
  });
  return { user, agent, tasks: tasks.length };
}

/** A user row as a training pair: the prompt the model user is given at run time, the turn as the response. */
export function userRowToExample(row: UserRow): Example {
  return { role: 'user', taskId: row.taskId, prompt: renderUserPrompt([{ role: 'system', content: userSystemMessage(row.instructions) }, ...row.messages]), response: row.target + END };
}

/**
 * The agent's side of the conversations as training pairs (--conversation-tasks): every Act and Rehearse row
 * of the conversation expert's conversations on `tasks` train tasks, rendered with the rollout prompts
 * (rowToExample), so an Act row's prompt is the bytes a conversation rollout shows the policy at that turn.
 */
export function conversationAgentExamples(domain: Domain, o: Omit<ConversationDataOptions, 'split'>, tools: readonly ToolDefinition[], rehearsePrompt: RehearsePromptOptions = {}): Example[] {
  return conversationRows(domain, { ...o, split: 'train' }).agent.map((r) => rowToExample(r, domain.policy, tools, rehearsePrompt));
}
