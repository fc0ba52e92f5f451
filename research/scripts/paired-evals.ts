// Paired comparison of two conversation evaluations on the same tasks (the eval CLI's JSON, `conversation.perTask`):
// success per task (successes / samples), the difference a − b with its paired bootstrap 95 % interval
// (research/ablation/stats.ts), and the tasks one solved and the other not.
//   npx tsx research/scripts/paired-evals.ts A.json B.json
import { pairedBootstrap, type Obs } from '../ablation/stats';
import { conversationPerTask } from './conversation-eval-file';

const perTask = (file: string): Obs[] => conversationPerTask(file).map((t) => ({ seed: 0, task: t.taskId, value: t.successes / t.samples }));

const [fa, fb] = process.argv.slice(2);
if (!fa || !fb) {
  console.error('usage: npx tsx research/scripts/paired-evals.ts A.json B.json');
  process.exit(2);
}
const a = perTask(fa);
const b = perTask(fb);
const bv = new Map(b.map((o) => [o.task, o.value]));
const shared = a.filter((o) => bv.has(o.task));
if (shared.length !== a.length || shared.length !== b.length) throw new Error(`the two evaluations hold different tasks (${a.length} and ${b.length}, ${shared.length} shared)`);
const d = pairedBootstrap(a, b);
const mean = (xs: Obs[]) => xs.reduce((s, o) => s + o.value, 0) / xs.length;
const pct = (x: number) => (100 * x).toFixed(1);
console.log(`${fa}: ${pct(mean(a))} %  ${fb}: ${pct(mean(b))} %  over ${shared.length} tasks`);
console.log(`a − b: ${pct(d.mean)} points, paired 95 % interval ${pct(d.lo)} to ${pct(d.hi)}${d.significant ? ' (excludes 0)' : ''}`);
console.log(`solved by a only: ${shared.filter((o) => o.value > bv.get(o.task)!).length}; by b only: ${shared.filter((o) => o.value < bv.get(o.task)!).length}`);
