// Measurement, not a feature: can a decoding guard close the gap to 95 % of rehearsals that parse?
// Most rehearsals that do not parse are loops (a long record copied over and over until the budget runs out),
// so this decodes the held-out reference calls of `npm run pretrain -- --probe-rehearsal` greedily with a
// no-repeat-n-gram ban (a token that would complete an n-gram the rehearsal already wrote is excluded), for
// several n, and counts what parses. It wraps the CPU backend's sampler, so it runs on cpu-fast only.
// It also reports how long a token n-gram repeats inside the real observations themselves: a ban shorter than
// that would forbid correct output.
//   node --import tsx research/scripts/no-repeat-rehearsal.ts [--model models/retail] [--world retail] [--n 0,16,24] [--out FILE] (--help lists every flag)
import { writeFileSync } from 'node:fs';
import {
  ArgError, checkOutput, enumFlag, HELP_FLAG, helpText, isEntry, openBackend, openModel, parseFlags, processIo, runCli, strFlag, THREADS_FLAG, threadsFlag, WORLD_FLAG, WRITE_COMMITTED_FLAG, type CliIo, type FlagSpec, type FlagValues,
} from '../../src/cli/args';
import { CpuTensor } from '../../src/engine/cpu/tensor';
import { HELD_OUT_TASK_SEED } from '../../src/env/domain';
import { WORLD_NAMES, type WorldName } from '../../src/env/retail/index';
import { loadWorldDomain } from '../../src/env/retail/node';
import { formatObservation } from '../../src/env/toolcall';
import { classifyStep } from '../pretrain/rehearsal-probe';
import { tokenBudgets } from '../../src/rollout/budget';
import { evalRehearsalFidelity, type FidelityEvalStep } from '../../src/rollout/fidelity-eval';
import { recordCommand, recordPath } from '../../src/util/record-path';

/** Longest token n-gram that occurs twice in `t` (0: none of length 2). */
function longestRepeat(t: readonly number[]): number {
  let best = 0;
  for (let n = 2; n <= t.length; n++) {
    const seen = new Set<string>();
    let rep = false;
    for (let i = 0; i + n <= t.length && !rep; i++) {
      const k = t.slice(i, i + n).join(',');
      rep = seen.has(k);
      seen.add(k);
    }
    if (!rep) break;
    best = n;
  }
  return best;
}

export const NO_REPEAT_REHEARSAL_USAGE = 'usage: node --import tsx research/scripts/no-repeat-rehearsal.ts [--model models/retail] [--world mini|retail] [--n 0,16,24] [--threads T] [--out FILE]';

/** The policy, world and threads of both rehearsal-decoding measurements (this one and structured-rehearsal.ts). */
export const REHEARSAL_MODEL_FLAGS: FlagSpec = {
  model: { type: 'string', arg: 'DIR', help: 'model folder (config.json, model.safetensors, tokenizer)', default: 'models/retail' },
  world: { ...WORLD_FLAG, default: 'retail' },
  threads: { ...THREADS_FLAG, default: '2' },
};

/** Of a fidelity evaluation's rehearsals (kept prompt texts): how many parsed, were exact, looped, and why the rest failed. */
export function countRehearsals(steps: readonly FidelityEvalStep[]): { calls: number; parsed: number; exact: number; loops: number; failures: Record<string, number> } {
  const calls = steps.map((s) => classifyStep(s, s.promptText ?? ''));
  const failures: Record<string, number> = {};
  for (const s of steps) if (s.failure) failures[s.failure] = (failures[s.failure] ?? 0) + 1;
  return { calls: calls.length, parsed: calls.filter((c) => c.parsed).length, exact: calls.filter((c) => c.exact).length, loops: calls.filter((c) => c.loop).length, failures };
}

/** REHEARSAL_MODEL_FLAGS' values, checked (a bad one is an ArgError). */
export function rehearsalModelFlags(values: FlagValues): { modelDir: string; world: WorldName; threads: number } {
  return { modelDir: strFlag(values, 'model', 'models/retail')!, world: enumFlag(values, 'world', WORLD_NAMES, 'retail'), threads: threadsFlag(values) ?? 2 };
}

export const NO_REPEAT_REHEARSAL_FLAGS: FlagSpec = {
  ...REHEARSAL_MODEL_FLAGS,
  n: { type: 'string', arg: 'N,...', help: 'n-gram sizes of the no-repeat ban, comma-separated, each 0 (no ban) or >= 2', default: '0,16,24' },
  out: { type: 'string', arg: 'FILE', help: 'write the JSON record (command, settings, results) here; stdout gets one line per n, then the real observations', default: 'none' },
  'write-committed': WRITE_COMMITTED_FLAG,
  help: HELP_FLAG,
};

export async function noRepeatRehearsalCli(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  return runCli(io, NO_REPEAT_REHEARSAL_USAGE, () => main(argv, io));
}

async function main(argv: readonly string[], io: CliIo): Promise<void> {
  const values = parseFlags(argv, NO_REPEAT_REHEARSAL_FLAGS);
  if (values.help) return void io.out(helpText(NO_REPEAT_REHEARSAL_USAGE, NO_REPEAT_REHEARSAL_FLAGS));
  const { modelDir, world, threads } = rehearsalModelFlags(values);
  const nList = strFlag(values, 'n', '0,16,24')!;
  const Ns = nList.split(',').map((s) => {
    if (!/^\d+$/.test(s) || s === '1') throw new ArgError(`--n wants n-gram sizes >= 2 (0 = no ban), comma-separated, got ${JSON.stringify(s)}`);
    return Number(s);
  });
  const outFileNamed = strFlag(values, 'out');
  // A committed record (docs/…, models/…) is rewritten only with --write-committed.
  const outFile = outFileNamed === undefined ? undefined : checkOutput(outFileNamed, '--out', values);
  const domain = loadWorldDomain(world);
  const b = await openBackend('cpu-fast', threads);
  try {
    const { model, tokenizer: tok } = await openModel(modelDir, b);
    const repeats: number[] = [];
    for (const task of domain.tasks.generate({ split: 'train', count: 400, seed: 3 }))
      for (const s of domain.expert(task, domain.createEnv()).steps) if (s.kind === 'call') repeats.push(longestRepeat(tok.encode(formatObservation(s.observation))));
    repeats.sort((a, c) => a - c);

    const tasks = domain.tasks.generate({ split: 'test', count: 100, seed: HELD_OUT_TASK_SEED });
    const maxRehearseTokens = tokenBudgets(domain, tok).rehearse;
    const sample = b.sample.bind(b);
    const results = [];
    for (const N of Ns) {
      // Sequences are told apart by their sampling seed (the fidelity evaluation gives each call its own).
      const written = new Map<number, number[]>();
      b.sample = (logits, params) => {
        if (N === 0) return sample(logits, params);
        const xs = Float32Array.from((logits as CpuTensor).f32);
        const V = logits.shape[1];
        params.forEach((p, r) => {
          if (p.step === 0) written.set(p.seed, []);
          const h = written.get(p.seed)!;
          // Every earlier occurrence of the last N - 1 tokens bans the token that followed it.
          for (let j = 0; j + N - 1 < h.length; j++) {
            let same = true;
            for (let q = 0; q < N - 1 && same; q++) same = h[j + q] === h[h.length - N + 1 + q];
            if (same) xs[r * V + h[j + N - 1]] = -Infinity;
          }
        });
        const out = sample(new CpuTensor(logits.shape, 'f32', xs), params);
        const picked = (out.tokens as CpuTensor).data as Int32Array;
        params.forEach((p, r) => written.get(p.seed)!.push(picked[r]));
        return out;
      };
      const r = await evalRehearsalFidelity(model, tok, null, domain, tasks, { maxRehearseTokens, rehearsePrompt: { excludeSameCall: false }, keepPromptText: true });
      const row = { ngram: N, ...countRehearsals(r.steps) };
      io.out(JSON.stringify(row) + '\n');
      results.push(row);
    }
    b.sample = sample;
    const record = {
      command: recordCommand(`node --import tsx research/scripts/no-repeat-rehearsal.ts --model ${modelDir} --world ${world} --n ${nList}`),
      model: recordPath(modelDir),
      heldOutTasks: tasks.length,
      maxRehearseTokens,
      realObservations: { count: repeats.length, longestRepeatedNgram: { p50: repeats[repeats.length >> 1], p99: repeats[Math.floor(repeats.length * 0.99)], max: repeats[repeats.length - 1] } },
      results,
    };
    io.out(JSON.stringify(record.realObservations) + '\n');
    if (outFile) writeFileSync(outFile, JSON.stringify(record, null, 1) + '\n');
  } finally {
    b.dispose();
  }
}

if (isEntry(import.meta.url)) process.exitCode = await noRepeatRehearsalCli(process.argv.slice(2));
