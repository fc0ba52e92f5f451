// Held-out evaluation of a policy with the project's own rollout loop (src/rollout/rollout.ts):
// - real: greedy episodes in the real environment on test-split tasks -> success rate (reward 1), mean
//   reward, format-valid Act turns, known tool names;
// - rehearsal: the task's reference calls are scripted as the Act turns and the policy rehearses every one
//   of them; each rehearsal is compared with the real environment's answer on the same state (fidelity),
//   and its parse rate is reported.
import type { Domain, Task } from '../../src/env/domain';
import { formatCall } from '../../src/env/toolcall';
import type { LoraAdapter } from '../../src/model/lora';
import type { Qwen3Model } from '../../src/model/qwen3';
import type { Tokenizer } from '../../src/model/tokenizer';
import type { FidelitySummary } from '../../src/rollout/fidelity';
import { runRollouts, type RolloutLimits } from '../../src/rollout/rollout';

export interface EvalReport {
  tasks: number;
  real: {
    successRate: number;
    meanReward: number;
    /** Act generations that were a parseable tool call or a plain reply. */
    formatValidRate: number;
    /** Tool calls naming a tool that exists. */
    knownToolRate: number;
    /** Tool calls that the environment executed without any error. */
    callOkRate: number;
    ends: Record<string, number>;
    meanTurns: number;
    wallS: number;
  };
  rehearsal: {
    calls: number;
    /** Rehearsals that parsed as one <execution_result> JSON block. */
    validRate: number;
    fidelity: FidelitySummary;
    wallS: number;
  };
  examples: { taskId: string; reward: number; steps: unknown[] }[];
}

export const EVAL_LIMITS: RolloutLimits = { maxTurns: 12, maxActTokens: 96, maxRehearseTokens: 640 };

export async function evaluatePolicy(
  policy: { model: Qwen3Model; tokenizer: Tokenizer; adapter?: LoraAdapter | null },
  domain: Domain,
  tasks: readonly Task[],
  opts: { seed: number; limits?: RolloutLimits; log?: (s: string) => void },
): Promise<EvalReport> {
  const limits = opts.limits ?? EVAL_LIMITS;
  const p = { model: policy.model, tokenizer: policy.tokenizer, adapter: policy.adapter ?? null };
  const log = opts.log ?? (() => {});

  const real = await runRollouts(p, domain, tasks, {
    mode: 'real',
    k: 1,
    seed: opts.seed,
    limits,
    temperature: 0,
    kvReuse: true,
    onProgress: (e) => log(`eval real: round ${e.round}, ${e.active} active`),
  });
  let acts = 0;
  let badFormat = 0;
  let calls = 0;
  let unknown = 0;
  let ok = 0;
  const ends: Record<string, number> = {};
  for (const r of real.rollouts) {
    ends[r.end] = (ends[r.end] ?? 0) + 1;
    for (const s of r.steps) {
      if (s.kind !== 'call') continue;
      calls++;
      if (!s.observation.ok && s.observation.code === 'parse') badFormat++;
      if (!s.observation.ok && s.observation.code === 'unknown_tool') unknown++;
      if (s.observation.ok) ok++;
    }
  }
  acts = real.stats.actGenerations;
  const n = real.rollouts.length;

  // Rehearsal on the reference calls: turn t plays reference action t, then a fixed reply ends the episode.
  const scripted = new Map(tasks.map((t) => [t.id, t.referenceActions]));
  const reh = await runRollouts(p, domain, tasks, {
    mode: 'rehearse',
    k: 1,
    seed: opts.seed + 1,
    limits,
    temperature: 0,
    kvReuse: true,
    actScript: (task, turn) => {
      const acts = scripted.get(task.id) ?? [];
      return turn < acts.length ? formatCall(acts[turn]) : 'Done.';
    },
    onProgress: (e) => log(`eval rehearse: round ${e.round}, ${e.active} active`),
  });
  const rehCalls = reh.rollouts.reduce((a, r) => a + r.fidelity.length, 0) + reh.rollouts.filter((r) => r.rehearseFailure).length;
  const invalid = reh.rollouts.filter((r) => r.rehearseFailure).length;

  return {
    tasks: n,
    real: {
      successRate: real.rollouts.filter((r) => r.reward >= 1).length / Math.max(1, n),
      meanReward: real.rollouts.reduce((a, r) => a + r.reward, 0) / Math.max(1, n),
      formatValidRate: acts ? 1 - badFormat / acts : NaN,
      knownToolRate: calls ? 1 - unknown / calls : NaN,
      callOkRate: calls ? ok / calls : NaN,
      ends,
      meanTurns: real.rollouts.reduce((a, r) => a + r.turns, 0) / Math.max(1, n),
      wallS: real.stats.wallMs / 1000,
    },
    rehearsal: {
      calls: rehCalls,
      validRate: rehCalls ? 1 - invalid / rehCalls : NaN,
      fidelity: reh.fidelity,
      wallS: reh.stats.wallMs / 1000,
    },
    examples: real.rollouts.slice(0, 3).map((r) => ({ taskId: r.taskId, reward: r.reward, steps: r.steps })),
  };
}
