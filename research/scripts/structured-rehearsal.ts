// Measures structured rehearsal decoding (src/rollout/rehearse-constraint.ts) against free decoding on the
// held-out reference calls, grounded as rollouts ground them (the probe's and `npm run eval`'s grounded
// measurement), and sweeps its two settings: the loop guard's n-gram and the margin of the string limits over
// the longest real string of each tool. Greedy, so every variant decodes the same prompts.
// --check-only measures just free decoding and the defaults (e.g. on another task seed: a check of settings
// that were chosen on the default held-out tasks).
//   node --import tsx research/scripts/structured-rehearsal.ts [--model models/retail] [--world retail] [--task-seed S] [--check-only] [--out FILE] (--help lists every flag)
import { writeFileSync } from 'node:fs';
import { checkOutput, HELP_FLAG, helpText, intFlag, isEntry, openBackend, openModel, parseFlags, processIo, runCli, strFlag, WRITE_COMMITTED_FLAG, type CliIo, type FlagSpec } from '../../src/cli/args';
import { HELD_OUT_TASK_SEED } from '../../src/env/domain';
import { loadWorldDomain } from '../../src/env/retail/node';
import { observationStringLimits, tokenBudgets } from '../../src/rollout/budget';
import { evalRehearsalFidelity } from '../../src/rollout/fidelity-eval';
import { REHEARSE_NGRAM, STRING_MARGIN, type RehearseConstraintOptions } from '../../src/rollout/rehearse-constraint';
import { countRehearsals, REHEARSAL_MODEL_FLAGS, rehearsalModelFlags } from './no-repeat-rehearsal';
import { recordCommand, recordPath } from '../../src/util/record-path';

export const STRUCTURED_REHEARSAL_USAGE = 'usage: node --import tsx research/scripts/structured-rehearsal.ts [--model models/retail] [--world mini|retail] [--count N] [--task-seed S] [--check-only] [--threads T] [--out FILE]';

export const STRUCTURED_REHEARSAL_FLAGS: FlagSpec = {
  ...REHEARSAL_MODEL_FLAGS,
  count: { type: 'string', arg: 'N', help: 'held-out tasks whose reference calls are rehearsed, 1..100000', default: '100' },
  'task-seed': { type: 'string', arg: 'S', help: 'seed of the held-out task split, 0..2^32-1', default: `${HELD_OUT_TASK_SEED} (the held-out tasks of npm run eval)` },
  'check-only': { type: 'boolean', help: 'measure only free decoding and the defaults, not the whole sweep' },
  out: { type: 'string', arg: 'FILE', help: 'write the JSON record (command, settings, results) here; stdout gets one line per variant', default: 'none' },
  'write-committed': WRITE_COMMITTED_FLAG,
  help: HELP_FLAG,
};

type Variant = { label: string; ngram: number | null; margin: number | null };

export async function structuredRehearsalCli(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  return runCli(io, STRUCTURED_REHEARSAL_USAGE, () => main(argv, io));
}

async function main(argv: readonly string[], io: CliIo): Promise<void> {
  const values = parseFlags(argv, STRUCTURED_REHEARSAL_FLAGS);
  if (values.help) return void io.out(helpText(STRUCTURED_REHEARSAL_USAGE, STRUCTURED_REHEARSAL_FLAGS));
  const { modelDir, world, threads } = rehearsalModelFlags(values);
  const count = intFlag(values, 'count', 100, 1, 100_000);
  const taskSeed = intFlag(values, 'task-seed', HELD_OUT_TASK_SEED, 0, 0xffffffff);
  const checkOnly = values['check-only'] === true;
  const outFileNamed = strFlag(values, 'out');
  // A committed record (docs/…, models/…) is rewritten only with --write-committed.
  const outFile = outFileNamed === undefined ? undefined : checkOutput(outFileNamed, '--out', values);
  const domain = loadWorldDomain(world);
  const b = await openBackend('cpu-fast', threads);
  try {
    const { model, tokenizer: tok } = await openModel(modelDir, b);
    const tasks = domain.tasks.generate({ split: 'test', count, seed: taskSeed });
    const maxRehearseTokens = tokenBudgets(domain, tok).rehearse;
    const longest = observationStringLimits(domain, { tasks: 1000 });
    const limits = (margin: number) => Object.fromEntries(Object.entries(longest).map(([tool, n]) => [tool, Math.ceil(n * margin)]));

    const sweep: Variant[] = [
      { label: 'free', ngram: null, margin: null },
      { label: 'grammar only', ngram: 0, margin: null },
      ...[8, 12, 16, 24, 32].map((n) => ({ label: `guard n ${n}, margin ${STRING_MARGIN}`, ngram: n, margin: STRING_MARGIN })),
      ...[null, 1, 2].map((m) => ({ label: `guard n ${REHEARSE_NGRAM}, ${m === null ? 'no string limit' : `margin ${m}`}`, ngram: REHEARSE_NGRAM, margin: m })),
    ];
    const defaults: Variant = { label: `guard n ${REHEARSE_NGRAM}, margin ${STRING_MARGIN}`, ngram: REHEARSE_NGRAM, margin: STRING_MARGIN };
    const variants = checkOnly ? [sweep[0], defaults] : sweep;
    const results = [];
    for (const v of variants) {
      const t0 = performance.now();
      const constraint: RehearseConstraintOptions | undefined = v.ngram === null ? undefined : { ngram: v.ngram, maxStringChars: v.margin === null ? undefined : limits(v.margin) };
      const r = await evalRehearsalFidelity(model, tok, null, domain, tasks, { maxRehearseTokens, rehearsePrompt: { excludeSameCall: false, decoding: v.ngram === null ? 'free' : 'structured' }, keepPromptText: true, constraint });
      const { failures, ...counts } = countRehearsals(r.steps);
      const row = { ...v, ...counts, f1: r.summary.f1, failures, wallS: (performance.now() - t0) / 1000 };
      io.out(JSON.stringify(row) + '\n');
      results.push(row);
    }
    const record = {
      command: recordCommand(`node --import tsx research/scripts/structured-rehearsal.ts --model ${modelDir} --world ${world} --count ${values.count ?? '100'} --task-seed ${values['task-seed'] ?? String(HELD_OUT_TASK_SEED)}${checkOnly ? ' --check-only' : ''}`),
      taskSeed,
      model: recordPath(modelDir),
      heldOutTasks: tasks.length,
      maxRehearseTokens,
      longestRealString: longest,
      defaults: { ngram: REHEARSE_NGRAM, margin: STRING_MARGIN },
      results,
    };
    if (outFile) writeFileSync(outFile, JSON.stringify(record, null, 1) + '\n');
  } finally {
    b.dispose();
  }
}

if (isEntry(import.meta.url)) process.exitCode = await structuredRehearsalCli(process.argv.slice(2));
