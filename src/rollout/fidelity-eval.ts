// Rehearsal fidelity on reference trajectories: for every call of every task's reference actions, the
// Rehearse role predicts the observation from the real history before that call (teacher forcing), and the
// prediction is compared with what the real environment answered. Unlike the fidelity logged during
// rollouts, every policy is measured on the same calls and the same histories, so "before vs after
// training" and "model A vs model B" compare like with like. All prompts decode in one batched generate().
//
// Scoring: an unparseable rehearsal agrees with nothing (exact 0, F1 0, no error agreement) and is also
// counted in `invalid`; by default examples of the very call being simulated are left out of the grounding,
// so a faithful answer has to come from the learned dynamics rather than from copying.
import type { Observation, Task, ToolCall } from '../env/domain';
import { formatCall, serializeObservation } from '../env/toolcall';
import { generate } from '../model/generate';
import type { LoraAdapter } from '../model/lora';
import type { Qwen3Model } from '../model/qwen3';
import type { Tokenizer } from '../model/tokenizer';
import { REHEARSE_STOP } from './act-prompt';
import type { ChatMessage } from './chat';
import { compareObservations, summarizeFidelity, type FidelitySummary, type StepFidelity } from './fidelity';
import { buildRehearsePrompt, parseExecutionResult, type RehearseParseFailure, type RehearsePromptOptions } from './rehearse-prompt';
import { referenceGrounding, type RolloutDomain } from './rollout';

export interface FidelityEvalOptions {
  maxRehearseTokens: number;
  rehearsePrompt?: RehearsePromptOptions;
  /** Default 0 (greedy): the policy's most likely rehearsal. */
  temperature?: number;
  seed?: number;
  enableThinking?: boolean;
  /** Prompts whose length plus maxRehearseTokens exceed this are skipped (counted in `skipped`). */
  maxContext?: number;
  maxConcurrent?: number;
  maxBatchTokens?: number;
  signal?: AbortSignal;
}

export interface FidelityEvalStep {
  taskId: string;
  index: number;
  call: ToolCall;
  real: Observation;
  rehearsed: Observation | null;
  failure: RehearseParseFailure | null;
  /** The generated text as decoded (what a failure was made of), and its length in tokens. */
  text: string;
  tokens: number;
  fidelity: StepFidelity;
}

export interface FidelityEvalResult {
  steps: FidelityEvalStep[];
  /** Over all evaluated steps, invalid rehearsals scored as total disagreement. */
  summary: FidelitySummary;
  /** Fraction of rehearsals that did not parse. */
  invalid: number;
  skipped: number;
}

const DISAGREE = (real: Observation): StepFidelity => ({ exact: false, f1: 0, errorAgree: false, rehearsedError: false, realError: !real.ok });

export async function evalRehearsalFidelity(
  model: Qwen3Model,
  tok: Tokenizer,
  adapter: LoraAdapter | null,
  domain: RolloutDomain,
  tasks: readonly Task[],
  opts: FidelityEvalOptions,
): Promise<FidelityEvalResult> {
  const tools = domain.definitions();
  const maxContext = Math.min(opts.maxContext ?? Infinity, model.config.maxPositionEmbeddings);
  const items: { taskId: string; index: number; call: ToolCall; real: Observation; prompt: number[] }[] = [];
  let skipped = 0;
  for (const task of tasks) {
    const env = domain.createEnv();
    const grounding = referenceGrounding(domain, task);
    const history: ChatMessage[] = task.userMessages.map((content) => ({ role: 'user', content }));
    task.referenceActions.forEach((call, index) => {
      const { text } = buildRehearsePrompt(
        { tools, grounding, history, call },
        { enableThinking: opts.enableThinking, excludeSameCall: true, ...opts.rehearsePrompt },
      );
      const real = env.execute(call);
      const prompt = tok.encode(text);
      if (prompt.length + opts.maxRehearseTokens > maxContext) skipped++;
      else items.push({ taskId: task.id, index, call, real, prompt });
      history.push({ role: 'assistant', content: formatCall(call) }, { role: 'tool', content: serializeObservation(real) });
    });
  }
  const out =
    items.length === 0
      ? []
      : await generate(
          model,
          tok,
          items.map((it, i) => ({
            prompt: it.prompt,
            maxNewTokens: opts.maxRehearseTokens,
            stop: [REHEARSE_STOP],
            sampling: { temperature: opts.temperature ?? 0, topP: 1, seed: ((opts.seed ?? 0) * 1_000_003 + i) >>> 0 },
          })),
          { adapter, maxConcurrent: opts.maxConcurrent, maxBatchTokens: opts.maxBatchTokens, signal: opts.signal },
        );
  const steps: FidelityEvalStep[] = items.map((it, i) => {
    const r = out[i];
    const parsed = parseExecutionResult(r.finishReason === 'stop' ? r.text + REHEARSE_STOP : r.text, it.call.name);
    const base = { taskId: it.taskId, index: it.index, call: it.call, real: it.real, text: r.text, tokens: r.tokens.length };
    if (!parsed.ok) return { ...base, rehearsed: null, failure: parsed.error.code, fidelity: DISAGREE(it.real) };
    return { ...base, rehearsed: parsed.observation, failure: null, fidelity: compareObservations(parsed.observation, it.real) };
  });
  return {
    steps,
    summary: summarizeFidelity(steps.map((s) => s.fidelity)),
    invalid: steps.length === 0 ? NaN : steps.filter((s) => s.failure !== null).length / steps.length,
    skipped,
  };
}
