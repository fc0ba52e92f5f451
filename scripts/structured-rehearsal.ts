// Measures structured rehearsal decoding (src/rollout/rehearse-constraint.ts) against free decoding on the
// held-out reference calls, grounded as rollouts ground them (the probe's and `npm run eval`'s grounded
// measurement), and sweeps its two settings: the loop guard's n-gram and the margin of the string limits over
// the longest real string of each tool. Greedy, so every variant decodes the same prompts.
// --check-only measures just free decoding and the defaults (e.g. on another task seed: a check of settings
// that were chosen on the default held-out tasks).
//   node --import tsx scripts/structured-rehearsal.ts [--model models/retail] [--world retail] [--task-seed S] [--check-only] [--out FILE]
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { openBackend } from '../src/cli/args';
import { HELD_OUT_TASK_SEED } from '../src/env/domain';
import { WORLD_NAMES, type WorldName } from '../src/env/retail/index';
import { loadWorldDomain } from '../src/env/retail/node';
import { DirSource } from '../src/model/source-node';
import { Tokenizer } from '../src/model/tokenizer';
import { loadQwen3 } from '../src/model/weights';
import { classifyStep } from '../src/pretrain/rehearsal-probe';
import { observationStringLimits, tokenBudgets } from '../src/rollout/budget';
import { evalRehearsalFidelity } from '../src/rollout/fidelity-eval';
import { REHEARSE_NGRAM, STRING_MARGIN, type RehearseConstraintOptions } from '../src/rollout/rehearse-constraint';

const { values } = parseArgs({ options: { model: { type: 'string', default: 'models/retail' }, world: { type: 'string', default: 'retail' }, count: { type: 'string', default: '100' }, 'task-seed': { type: 'string', default: String(HELD_OUT_TASK_SEED) }, 'check-only': { type: 'boolean', default: false }, threads: { type: 'string', default: '2' }, out: { type: 'string' } } });
if (!(WORLD_NAMES as readonly string[]).includes(values.world!)) throw new Error(`--world must be one of ${WORLD_NAMES.join(', ')}`);
const domain = loadWorldDomain(values.world as WorldName);
const b = await openBackend('cpu-fast', Number(values.threads));
const src = new DirSource(values.model!);
const { model } = await loadQwen3(src, b, { format: 'f32' });
const tok = await Tokenizer.load(src);
const tasks = domain.tasks.generate({ split: 'test', count: Number(values.count), seed: Number(values['task-seed']) });
const maxRehearseTokens = tokenBudgets(domain, tok).rehearse;
const longest = observationStringLimits(domain, { tasks: 1000 });
const limits = (margin: number) => Object.fromEntries(Object.entries(longest).map(([tool, n]) => [tool, Math.ceil(n * margin)]));

type Variant = { label: string; ngram: number | null; margin: number | null };
const sweep: Variant[] = [
  { label: 'free', ngram: null, margin: null },
  { label: 'grammar only', ngram: 0, margin: null },
  ...[8, 12, 16, 24, 32].map((n) => ({ label: `guard n ${n}, margin ${STRING_MARGIN}`, ngram: n, margin: STRING_MARGIN })),
  ...[null, 1, 2].map((m) => ({ label: `guard n ${REHEARSE_NGRAM}, ${m === null ? 'no string limit' : `margin ${m}`}`, ngram: REHEARSE_NGRAM, margin: m })),
];
const defaults: Variant = { label: `guard n ${REHEARSE_NGRAM}, margin ${STRING_MARGIN}`, ngram: REHEARSE_NGRAM, margin: STRING_MARGIN };
const variants = values['check-only'] ? [sweep[0], defaults] : sweep;
const results = [];
for (const v of variants) {
  const t0 = performance.now();
  const constraint: RehearseConstraintOptions | undefined = v.ngram === null ? undefined : { ngram: v.ngram, maxStringChars: v.margin === null ? undefined : limits(v.margin) };
  const r = await evalRehearsalFidelity(model, tok, null, domain, tasks, { maxRehearseTokens, rehearsePrompt: { excludeSameCall: false, decoding: v.ngram === null ? 'free' : 'structured' }, keepPromptText: true, constraint });
  const calls = r.steps.map((s) => classifyStep(s, s.promptText ?? ''));
  const failures: Record<string, number> = {};
  for (const s of r.steps) if (s.failure) failures[s.failure] = (failures[s.failure] ?? 0) + 1;
  const row = {
    ...v,
    calls: calls.length,
    parsed: calls.filter((c) => c.parsed).length,
    exact: calls.filter((c) => c.exact).length,
    loops: calls.filter((c) => c.loop).length,
    f1: r.summary.f1,
    failures,
    wallS: (performance.now() - t0) / 1000,
  };
  console.log(JSON.stringify(row));
  results.push(row);
}
const record = {
  command: `node --import tsx scripts/structured-rehearsal.ts --model ${values.model} --world ${values.world} --count ${values.count} --task-seed ${values['task-seed']}${values['check-only'] ? ' --check-only' : ''}`,
  taskSeed: Number(values['task-seed']),
  model: values.model,
  heldOutTasks: tasks.length,
  maxRehearseTokens,
  longestRealString: longest,
  defaults: { ngram: REHEARSE_NGRAM, margin: STRING_MARGIN },
  results,
};
if (values.out) writeFileSync(values.out, JSON.stringify(record, null, 1) + '\n');
b.dispose();
