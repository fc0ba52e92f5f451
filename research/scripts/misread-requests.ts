// Where a conversation policy loses the user's request (research/records/2026-12-06-restated-request): over the failed
// conversations of a retail eval, how many ask for the order of another kind of request than the task's (the expert's
// order questions, src/env/retail/expert-conversation.ts ORDER_QUESTIONS), and how many look up an order id the user
// had not said before the lookup. The first reason found in a conversation counts; the rest are "other".
//   npx tsx research/scripts/misread-requests.ts EVAL.json TRANSCRIPTS.jsonl
// EVAL.json is the eval's stdout (`conversation.perTask`, for the families); TRANSCRIPTS.jsonl its --transcripts.
import { readFileSync } from 'node:fs';
import type { Turn } from '../../src/env/domain';
import { ORDER_QUESTIONS } from '../../src/env/retail/expert-conversation';
import { conversationPerTask } from './conversation-eval-file';

interface Transcript {
  taskId: string;
  reward: number;
  turns: Turn[];
}

/** The order question a family's task may rightly ask; null where any may be right (several requests, another user's order). */
function rightKinds(family: string): string[] | null {
  if (family === 'multi' || family === 'unknown_order' || family === 'refuse_other_user') return null;
  if (family.startsWith('refuse_cancel')) return ['cancel'];
  if (family.startsWith('refuse_return')) return ['return'];
  return family in ORDER_QUESTIONS ? [family] : [];
}

export function misreading(t: Transcript, family: string): 'wrong order question' | 'unsaid order id' | 'other' {
  const right = rightKinds(family);
  let said = '';
  for (const turn of t.turns) {
    if (turn.kind === 'user') said += ' ' + turn.text.replace(/\D+/g, ' ');
    if (turn.kind === 'reply' && right !== null) {
      for (const [kind, phrase] of Object.entries(ORDER_QUESTIONS)) if (!right.includes(kind) && turn.text.includes(phrase)) return 'wrong order question';
    }
    if (turn.kind === 'call' && turn.call.name === 'get_order_details') {
      const digits = String(turn.call.arguments.order_id ?? '').replace(/\D/g, '');
      if (digits && !said.split(' ').includes(digits)) return 'unsaid order id';
    }
  }
  return 'other';
}

const [evalFile, transcriptFile] = process.argv.slice(2);
if (!evalFile || !transcriptFile) {
  console.error('usage: npx tsx research/scripts/misread-requests.ts EVAL.json TRANSCRIPTS.jsonl');
  process.exit(2);
}
const family = new Map(conversationPerTask(evalFile).map((p) => [p.taskId, p.family ?? '?']));
const counts = new Map<string, number>();
let failed = 0;
for (const line of readFileSync(transcriptFile, 'utf8').split('\n')) {
  if (!line.trim()) continue;
  const t = JSON.parse(line) as Transcript;
  if (t.reward > 0) continue;
  failed++;
  const why = misreading(t, family.get(t.taskId) ?? '?');
  counts.set(why, (counts.get(why) ?? 0) + 1);
}
console.log(`failed conversations: ${failed}`);
for (const why of ['wrong order question', 'unsaid order id', 'other']) console.log(`  ${why}: ${counts.get(why) ?? 0}`);
