// npm run signal -- [--world mini|retail] [--model DIR] [--count N] [--k K] [--modes real,rehearse]
//                   [--temperature T] [--seed S] [--split train|test] [--task-seed S] [--threads T] [--out FILE]
// How much a GRPO step can learn from: K rollouts of each of N *training* prompts at temperature T (the
// sampling a training step uses), and the share of prompts whose K rewards are not all identical — GRPO's
// advantages are zero on every other prompt, so this share is the fraction of a step that carries signal.
// Reported per rollout mode (real environment: τ²'s 0/1 reward; rehearse: the checklist judge's partial
// credit), with a 95 % Wilson interval. Progress on stderr, the JSON result on stdout (and --out).
// --split test samples the held-out tasks instead (`npm run eval`'s set is --task-seed 1): their pass@K bounds
// what sharpening the policy toward its own best samples could add on them.
import { writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { isWorldName, WORLD_NAMES } from '../src/env/retail/index';
import { loadWorldDomain } from '../src/env/retail/node';
import { openBackend, openModel } from '../src/cli/args';
import { DEFAULT_LIMITS } from '../src/rl/grpo-config';
import { tokenBudgets } from '../src/rollout/budget';
import { isRolloutMode, type RolloutMode } from '../src/method/modes';
import { runRollouts } from '../src/rollout/rollout';

/** 95 % Wilson score interval of a proportion. */
export function wilson(successes: number, n: number, z = 1.96): [number, number] {
  if (n === 0) return [NaN, NaN];
  const p = successes / n;
  const d = 1 + (z * z) / n;
  const c = (p + (z * z) / (2 * n)) / d;
  const h = (z * Math.sqrt((p * (1 - p)) / n + (z * z) / (4 * n * n))) / d;
  return [Math.max(0, c - h), Math.min(1, c + h)];
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      world: { type: 'string', default: 'mini' }, model: { type: 'string' }, count: { type: 'string', default: '100' },
      k: { type: 'string', default: '4' }, modes: { type: 'string', default: 'real,rehearse' }, temperature: { type: 'string', default: '1' },
      seed: { type: 'string', default: '0' }, split: { type: 'string', default: 'train' }, 'task-seed': { type: 'string', default: '7' }, threads: { type: 'string' }, out: { type: 'string' },
      // Large K × count: decode at most this many sequences at once (no KV reuse) instead of one cache slot per episode.
      'max-concurrent': { type: 'string' },
    },
    strict: true,
  });
  if (!isWorldName(values.world)) throw new Error(`--world must be one of ${WORLD_NAMES.join(', ')}`);
  const int = (name: string, v: string | undefined, min: number) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be an integer >= ${min}, got ${JSON.stringify(v)}`);
    return n;
  };
  const count = int('count', values.count, 1);
  const k = int('k', values.k, 2);
  const seed = int('seed', values.seed, 0);
  const temperature = Number(values.temperature);
  if (!(temperature > 0)) throw new Error('--temperature must be > 0');
  const modes = values.modes!.split(',') as RolloutMode[];
  for (const m of modes) if (!isRolloutMode(m)) throw new Error(`--modes: unknown mode ${m}`);
  const log = (s: string) => process.stderr.write(`[signal ${new Date().toISOString().slice(11, 19)}] ${s}\n`);

  const domain = loadWorldDomain(values.world);
  const split = values.split;
  if (split !== 'train' && split !== 'test') throw new Error(`--split must be train or test, got ${JSON.stringify(split)}`);
  const taskSeed = int('task-seed', values['task-seed'], 0);
  const tasks = domain.tasks.generate({ split, count, seed: taskSeed });
  const backend = await openBackend('cpu-fast', values.threads ? int('threads', values.threads, 1) : undefined);
  const policy = await openModel(values.model, backend, { world: values.world });
  // The budgets the lab and `npm run eval` use: measured on the world's real turns and observations.
  const measured = tokenBudgets(domain, policy.tokenizer);
  const limits = { ...DEFAULT_LIMITS, maxActTokens: Math.max(DEFAULT_LIMITS.maxActTokens, measured.act), maxRehearseTokens: measured.rehearse };
  const result: Record<string, unknown> = { world: values.world, model: policy.dir, split, taskSeed, prompts: count, k, temperature, seed, limits };
  try {
    for (const mode of modes) {
      const t0 = performance.now();
      const batch = await runRollouts({ model: policy.model, tokenizer: policy.tokenizer, adapter: null }, domain, tasks, {
        mode, k, seed, limits, temperature,
        ...(values['max-concurrent'] ? { kvReuse: false, maxConcurrent: int('max-concurrent', values['max-concurrent'], 1) } : { kvReuse: true }),
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
  if (values.out) await writeFile(values.out, text);
  process.stdout.write(text);
}

main().catch((e: unknown) => {
  process.stderr.write(`signal failed: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
