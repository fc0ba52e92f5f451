// npm run signal -- [--world mini|retail] [--model DIR] [--count N] [--k K] [--modes real,rehearse] [--split train|test] [--out FILE] (--help lists every flag)
// How much a GRPO step can learn from: K rollouts of each of N *training* prompts at temperature T (the
// sampling a training step uses), and the share of prompts whose K rewards are not all identical — GRPO's
// advantages are zero on every other prompt, so this share is the fraction of a step that carries signal.
// Reported per rollout mode (real environment: τ²'s 0/1 reward; rehearse: the checklist judge's partial
// credit), with a 95 % Wilson interval. Progress on stderr, the JSON result on stdout (and --out).
// --split test samples the held-out tasks instead (`npm run eval`'s set is --task-seed 1): their pass@K bounds
// what sharpening the policy toward its own best samples could add on them.
import { writeFile } from 'node:fs/promises';
import { WORLD_NAMES } from '../../src/env/retail/index';
import { loadWorldDomain } from '../../src/env/retail/node';
import {
  ArgError, checkOutput, enumFlag, HELP_FLAG, helpText, intFlag, isEntry, numFlag, openBackend, openModel, parseFlags, processIo, progress, runCli, strFlag, THREADS_FLAG, threadsFlag, WORLD_FLAG, WRITE_COMMITTED_FLAG, type CliIo, type FlagSpec,
} from '../../src/cli/args';
import { DEFAULT_LIMITS } from '../../src/rl/grpo-config';
import { tokenBudgets } from '../../src/rollout/budget';
import { isRolloutMode, ROLLOUT_MODES, type RolloutMode } from '../../src/method/modes';
import { runRollouts } from '../../src/rollout/rollout';
import { recordPath } from '../../src/util/record-path';
import type { Qwen3Config } from '../../src/model/config';
import { kvCacheBytes } from '../../src/train/memory';

export const SIGNAL_USAGE = 'usage: npm run signal -- [--world mini|retail] [--model DIR] [--count N] [--k K] [--modes real,rehearse] [--split train|test] [--out FILE] [...]';

export const SIGNAL_FLAGS: FlagSpec = {
  world: WORLD_FLAG,
  model: { type: 'string', arg: 'DIR', help: "model folder (config.json, model.safetensors, tokenizer)", default: "the world's bundled policy" },
  count: { type: 'string', arg: 'N', help: 'prompts (tasks) to sample, 1..100000', default: '100' },
  k: { type: 'string', arg: 'K', help: 'rollouts per prompt, 2..64', default: '4' },
  modes: { type: 'string', arg: 'M,...', help: 'rollout modes to measure, comma-separated: real (τ²\'s 0/1 reward), rehearse (the checklist judge), per-role, frozen-simulator', default: 'real,rehearse' },
  temperature: { type: 'string', arg: 'T', help: 'sampling temperature, > 0 (a training step samples at 1)', default: '1' },
  seed: { type: 'string', arg: 'S', help: 'sampling seed, 0..2^32-1', default: '0' },
  split: { type: 'string', arg: 'S', help: 'train (the prompts a GRPO step draws from) or test (held-out: pass@K bounds what sharpening can add)', default: 'train' },
  'task-seed': { type: 'string', arg: 'S', help: "task generator seed (npm run eval's held-out set is 1)", default: '7' },
  threads: THREADS_FLAG,
  'max-concurrent': { type: 'string', arg: 'N', help: 'decode at most N sequences at once, without KV reuse (large K × count)', default: 'one cache slot per episode, or as many as 3.25 GiB of KV cache hold' },
  out: { type: 'string', arg: 'FILE', help: 'also write the JSON result here', default: 'stdout only' },
  'write-committed': WRITE_COMMITTED_FLAG,
  help: HELP_FLAG,
};

/** KV-cache bytes the episodes may take at once (of the CPU fast path's 4 GiB of WebAssembly memory). */
const KV_BUDGET_BYTES = 3.25 * 2 ** 30;
/**
 * Where `episodes` KV-cache slots (f32 keys and values of every layer over the whole context) would pass
 * KV_BUDGET_BYTES: how many fit at once, and the bytes all would take; null where all fit.
 */
export function episodesThatFit(c: Pick<Qwen3Config, 'numLayers' | 'numKvHeads' | 'headDim' | 'maxPositionEmbeddings'>, episodes: number): { slots: number; bytes: number } | null {
  const slotBytes = kvCacheBytes(c, 1, c.maxPositionEmbeddings);
  return episodes * slotBytes <= KV_BUDGET_BYTES ? null : { slots: Math.max(1, Math.floor(KV_BUDGET_BYTES / slotBytes)), bytes: episodes * slotBytes };
}

const SIGNAL_NOTES = 'Progress on stderr, the JSON result on stdout. exit status: 0 ok, 1 failure, 2 usage error, 74 I/O error (the message names the file).';

/** 95 % Wilson score interval of a proportion. */
export function wilson(successes: number, n: number, z = 1.96): [number, number] {
  if (n === 0) return [NaN, NaN];
  const p = successes / n;
  const d = 1 + (z * z) / n;
  const c = (p + (z * z) / (2 * n)) / d;
  const h = (z * Math.sqrt((p * (1 - p)) / n + (z * z) / (4 * n * n))) / d;
  return [Math.max(0, c - h), Math.min(1, c + h)];
}

export async function signalCli(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  return runCli(io, SIGNAL_USAGE, () => main(argv, io));
}

async function main(argv: readonly string[], io: CliIo): Promise<void> {
  const values = parseFlags(argv, SIGNAL_FLAGS);
  if (values.help) return void io.out(helpText(SIGNAL_USAGE, SIGNAL_FLAGS, SIGNAL_NOTES));
  const world = enumFlag(values, 'world', WORLD_NAMES, 'mini');
  const count = intFlag(values, 'count', 100, 1, 100_000);
  const k = intFlag(values, 'k', 4, 2, 64);
  const seed = intFlag(values, 'seed', 0, 0, 2 ** 32 - 1);
  const temperature = numFlag(values, 'temperature', 1, 0);
  const modes = strFlag(values, 'modes', 'real,rehearse')!.split(',').map((m) => m.trim()) as RolloutMode[];
  for (const m of modes) if (!isRolloutMode(m)) throw new ArgError(`--modes: unknown mode ${JSON.stringify(m)} (one of ${ROLLOUT_MODES.join(', ')})`);
  const split = enumFlag(values, 'split', ['train', 'test'] as const, 'train');
  const taskSeed = intFlag(values, 'task-seed', 7, 0, 2 ** 32 - 1);
  const threads = threadsFlag(values);
  let maxConcurrent = values['max-concurrent'] === undefined ? undefined : intFlag(values, 'max-concurrent', 1, 1);
  const outNamed = strFlag(values, 'out');
  // A committed record (docs/…, models/…) is rewritten only with --write-committed.
  const out = outNamed === undefined ? undefined : checkOutput(outNamed, '--out', values);
  const log = progress(io, 'signal');

  const domain = loadWorldDomain(world);
  const tasks = domain.tasks.generate({ split, count, seed: taskSeed });
  const backend = await openBackend('cpu-fast', threads);
  const policy = await openModel(strFlag(values, 'model'), backend, { world });
  // The budgets the lab and `npm run eval` use: measured on the world's real turns and observations.
  const measured = tokenBudgets(domain, policy.tokenizer);
  const limits = { ...DEFAULT_LIMITS, maxActTokens: Math.max(DEFAULT_LIMITS.maxActTokens, measured.act), maxRehearseTokens: measured.rehearse };
  // One KV-cache slot per episode (f32 keys and values of every layer over the whole context) must fit the CPU fast
  // path's 4 GiB of WebAssembly memory beside the weights: where count × K slots would not, decode fewer at once.
  const fit = maxConcurrent === undefined ? episodesThatFit(policy.model.config, count * k) : null;
  if (fit) {
    maxConcurrent = fit.slots;
    log(`${count * k} episodes' KV caches (${(fit.bytes / 2 ** 30).toFixed(1)} GiB) do not fit: ${fit.slots} at once, without KV reuse (--max-concurrent)`);
  }
  const result: Record<string, unknown> = { world, model: recordPath(policy.dir), split, taskSeed, prompts: count, k, temperature, seed, limits };
  try {
    for (const mode of modes) {
      const t0 = performance.now();
      const batch = await runRollouts({ model: policy.model, tokenizer: policy.tokenizer, adapter: null }, domain, tasks, {
        mode, k, seed, limits, temperature,
        ...(maxConcurrent !== undefined ? { kvReuse: false, maxConcurrent } : { kvReuse: true }),
        onProgress: (e) => e.phase === 'act' && log(`${mode}: round ${e.round}, ${e.active} episodes active`),
      });
      const byPrompt = new Map<string, number[]>();
      for (const r of batch.rollouts) byPrompt.set(r.promptId, [...(byPrompt.get(r.promptId) ?? []), r.reward]);
      const mixed = [...byPrompt.values()].filter((rs) => rs.some((x) => x !== rs[0])).length;
      const rewards = batch.rollouts.map((r) => r.reward);
      const solved = [...byPrompt.values()].filter((rs) => rs.some((x) => x === 1)).length;
      // Per task family: where the samples succeed that greedy decoding may miss (what sharpening can reach).
      const familyOf = new Map(tasks.map((t) => [t.id, t.family ?? 'other']));
      const byFamily: Record<string, { tasks: number; successRate: number; passAtK: number }> = {};
      for (const r of batch.rollouts) {
        const f = (byFamily[familyOf.get(r.taskId) ?? 'other'] ??= { tasks: 0, successRate: 0, passAtK: 0 });
        f.successRate += r.reward === 1 ? 1 / k : 0;
      }
      const taskOf = new Map(batch.rollouts.map((r) => [r.promptId, r.taskId]));
      for (const [pid, rs] of byPrompt) {
        const f = byFamily[familyOf.get(taskOf.get(pid)!) ?? 'other'];
        f.tasks++;
        f.passAtK += rs.some((x) => x === 1) ? 1 : 0;
      }
      for (const f of Object.values(byFamily)) {
        f.successRate /= f.tasks;
        f.passAtK /= f.tasks;
      }
      const m = {
        mixedShare: mixed / byPrompt.size,
        mixedCi95: wilson(mixed, byPrompt.size),
        meanReward: rewards.reduce((a, x) => a + x, 0) / rewards.length,
        successRate: rewards.filter((x) => x === 1).length / rewards.length,
        passAtK: solved / byPrompt.size,
        byFamily,
        wallS: (performance.now() - t0) / 1000,
      };
      log(`${mode}: ${mixed}/${byPrompt.size} prompts with mixed rewards (${(100 * m.mixedShare).toFixed(1)} %), mean reward ${m.meanReward.toFixed(3)}, success ${(100 * m.successRate).toFixed(1)} %, pass@${k} ${(100 * m.passAtK).toFixed(1)} %`);
      result[mode] = m;
    }
  } finally {
    policy.model.free();
    backend.dispose();
  }
  const text = JSON.stringify(result, null, 1) + '\n';
  if (out) await writeFile(out, text);
  io.out(text);
}

if (isEntry(import.meta.url)) process.exitCode = await signalCli(process.argv.slice(2));
