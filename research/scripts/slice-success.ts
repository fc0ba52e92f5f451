// Success of a conversation evaluation over a slice of its tasks (the eval CLI's JSON, `conversation.perTask`, in
// task order): how a candidate is chosen on validation tasks that are not the reported ones — e.g. tasks 101–200 of
// an eval run with `--count 200`, whose first 100 are the reported `--count 100` (the generator's split is a prefix).
//   npx tsx research/scripts/slice-success.ts EVAL.json FROM TO      (1-based, inclusive)
import { conversationPerTask } from './conversation-eval-file';

const [file, from, to] = process.argv.slice(2);
const lo = Number(from);
const hi = Number(to);
if (!file || !Number.isInteger(lo) || !Number.isInteger(hi) || lo < 1 || hi < lo) {
  console.error('usage: npx tsx research/scripts/slice-success.ts EVAL.json FROM TO   (1-based, inclusive)');
  process.exit(2);
}
const rows = conversationPerTask(file);
if (rows.length < hi) throw new Error(`${file}: ${rows.length} tasks, fewer than ${hi}`);
const slice = rows.slice(lo - 1, hi);
const success = slice.reduce((s, t) => s + t.successes / t.samples, 0) / slice.length;
console.log(`${file}: tasks ${lo}–${hi}: ${(100 * success).toFixed(1)} % of ${slice.length}`);
