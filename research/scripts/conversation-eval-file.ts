// The per-task results of a conversation evaluation as the eval CLI writes them (`npm run eval -- --user …` stdout:
// `conversation.perTask`, in task order), for the scripts that compare, slice or read them.
import { readFileSync } from 'node:fs';
import type { ConversationTaskResult } from '../../src/eval/conversation-eval';

export function conversationPerTask(file: string): ConversationTaskResult[] {
  const r = JSON.parse(readFileSync(file, 'utf8')) as { conversation?: { perTask?: ConversationTaskResult[] } };
  const rows = r.conversation?.perTask;
  if (!Array.isArray(rows) || rows.length === 0) throw new Error(`${file}: no conversation.perTask (an eval with --user)`);
  return rows;
}
