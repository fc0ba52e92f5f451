// How long one Role-Wise GRPO step of the bundled policy takes on a backend (for the model card): the
// real GrpoRun (src/rl/run.ts) in rehearse mode, LoRA rank 8, P prompts x K rollouts, in memory; the
// first step is timed whole and split into its rollout and update parts from the run's own metrics.
import type { Task } from '../../src/env/domain';
import type { Qwen3Model } from '../../src/model/qwen3';
import type { Tokenizer } from '../../src/model/tokenizer';
import { GrpoRun } from '../../src/rl/run';
import { MemoryStore } from '../../src/rl/store';
import type { RolloutDomain } from '../../src/rollout/rollout';
import { EVAL_LIMITS } from './evaluate';

export interface GrpoTiming {
  backend: string;
  promptsPerStep: number;
  k: number;
  stepSeconds: number;
  generatedTokens: number;
  trainedRows: number;
  trainedTokens: number;
}

export async function timeGrpoStep(model: Qwen3Model, tokenizer: Tokenizer, domain: RolloutDomain, tasks: readonly Task[], o: { promptsPerStep: number; k: number; seed: number }): Promise<GrpoTiming> {
  const run = await GrpoRun.open(model, tokenizer, domain, { train: tasks }, new MemoryStore(), {
    mode: 'rehearse',
    steps: 1,
    promptsPerStep: o.promptsPerStep,
    k: o.k,
    seed: o.seed,
    limits: EVAL_LIMITS,
    kvReuse: true,
    lora: { rank: 8, alpha: 16 },
    lr: 1e-4,
    checkpointEvery: 1000,
  });
  const t0 = performance.now();
  const m = await run.trainStep();
  const stepSeconds = (performance.now() - t0) / 1000;
  return {
    backend: model.backend.name,
    promptsPerStep: o.promptsPerStep,
    k: o.k,
    stepSeconds,
    generatedTokens: m.rollouts.tokens.generated,
    trainedRows: m.updates.reduce((a, u) => a + u.rows, 0),
    trainedTokens: m.updates.reduce((a, u) => a + u.tokens, 0),
  };
}
