// Rehearsal fidelity on reference trajectories: for every call of every task's reference actions, the
// Rehearse role predicts the observation from the real history before that call (teacher forcing), and the
// prediction is compared with what the real environment answered. Unlike the fidelity logged during
// rollouts, every policy is measured on the same calls and the same histories, so "before vs after
// training" and "model A vs model B" compare like with like. All prompts decode in one batched generate().
//
// Scoring: an unparseable rehearsal agrees with nothing (exact 0, F1 0, no error agreement) and is also
// counted in `invalid`; by default examples of the very call being simulated are left out of the grounding,
// so a faithful answer has to come from the learned dynamics rather than from copying
// (evalRehearsalFidelityVariants measures several grounding variants of the same calls in one pass).
import type { Observation, Task, ToolCall } from '../env/domain';
import { formatCall, serializeObservation } from '../env/toolcall';
import { generate, type GenerateRequest } from '../model/generate';
import type { LoraAdapter } from '../model/lora';
import type { Qwen3Model } from '../model/qwen3';
import type { Tokenizer } from '../model/tokenizer';
import { REHEARSE_STOP } from './act-prompt';
import type { ChatMessage } from './chat';
import { compareObservations, summarizeFidelity, type FidelitySummary, type StepFidelity } from './fidelity';
import { rehearseConstraintFor, type RehearseConstraintOptions } from './rehearse-constraint';
import { buildRehearsePrompt, parseExecutionResult, rehearseTarget, type RehearseParseFailure, type RehearsePromptOptions } from './rehearse-prompt';
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
  /** After every decoded token of the batch: rehearsals finished of all to decode (a long phase shows how far it is). */
  onStep?: (done: number, total: number) => void;
  /** Keep each step's Rehearse prompt text (what a failure analysis compares the output with); default off. */
  keepPromptText?: boolean;
  /** Settings of structured decoding other than the defaults (to measure them: research/scripts/structured-rehearsal.ts). */
  constraint?: RehearseConstraintOptions;
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
  /** The Rehearse prompt as rendered, when keepPromptText was asked. */
  promptText?: string;
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
  const [r] = await evalRehearsalFidelityVariants(model, tok, adapter, domain, tasks, opts, [opts.rehearsePrompt ?? {}]);
  return r;
}

/**
 * The same reference calls measured under several Rehearse-prompt variants (e.g. with and without the call's
 * own example in the grounding), one result per variant, each equal to evalRehearsalFidelity with that variant.
 * All prompts decode in one batched generate(); under greedy decoding a prompt that two variants share (the
 * call's own example did not fit the grounding anyway) is decoded once.
 */
export async function evalRehearsalFidelityVariants(
  model: Qwen3Model,
  tok: Tokenizer,
  adapter: LoraAdapter | null,
  domain: RolloutDomain,
  tasks: readonly Task[],
  opts: FidelityEvalOptions,
  variants: readonly RehearsePromptOptions[],
): Promise<FidelityEvalResult[]> {
  const tools = domain.definitions();
  const maxContext = Math.min(opts.maxContext ?? Infinity, model.config.maxPositionEmbeddings);
  const temperature = opts.temperature ?? 0;
  type Item = { taskId: string; index: number; call: ToolCall; real: Observation; out: number; promptText?: string };
  const requests: GenerateRequest[] = [];
  const byPrompt = new Map<string, number>();
  const perVariant = variants.map(() => ({ items: [] as Item[], skipped: 0 }));
  for (const task of tasks) {
    // The real history and grounding are the same in every variant: replayed once per task.
    const env = domain.createEnv();
    const grounding = referenceGrounding(domain, task);
    const history: ChatMessage[] = task.userMessages.map((content) => ({ role: 'user', content }));
    task.referenceActions.forEach((call, index) => {
      const real = env.execute(call);
      let draft: number[] | undefined;
      variants.forEach((variant, v) => {
        const mine = perVariant[v];
        const { text } = buildRehearsePrompt({ tools, grounding, history, call }, { enableThinking: opts.enableThinking, excludeSameCall: true, ...variant });
        const prompt = tok.encode(text);
        if (prompt.length + opts.maxRehearseTokens > maxContext) {
          mine.skipped++;
          return;
        }
        const key = temperature === 0 ? `${variant.decoding ?? 'structured'}:${prompt.join(',')}` : null;
        let out = key === null ? undefined : byPrompt.get(key);
        if (out === undefined) {
          out = requests.length;
          requests.push({
            prompt,
            maxNewTokens: opts.maxRehearseTokens,
            stop: [REHEARSE_STOP],
            constraint: rehearseConstraintFor(variant.decoding, domain, tok, prompt, call.name, opts.constraint),
            // The seed of the item's place in its own variant: each variant samples as it would alone.
            sampling: { temperature, topP: 1, seed: ((opts.seed ?? 0) * 1_000_003 + mine.items.length) >>> 0 },
            // Greedy: the real observation is the draft, checked in prefill forwards instead of decoded token by token
            // (a faithful rehearsal costs one pass; the others decode on from where they leave it).
            ...(temperature === 0 ? { draft: (draft ??= tok.encode(rehearseTarget(real))) } : {}),
          });
          if (key !== null) byPrompt.set(key, out);
        }
        mine.items.push({ taskId: task.id, index, call, real, out, ...(opts.keepPromptText ? { promptText: text } : {}) });
      });
      history.push({ role: 'assistant', content: formatCall(call) }, { role: 'tool', content: serializeObservation(real) });
    });
  }
  const out = requests.length === 0 ? [] : await generate(model, tok, requests, { adapter, maxConcurrent: opts.maxConcurrent, maxBatchTokens: opts.maxBatchTokens, signal: opts.signal, onStep: opts.onStep });
  return perVariant.map(({ items, skipped }) => {
    const steps: FidelityEvalStep[] = items.map((it) => {
      const r = out[it.out];
      const parsed = parseExecutionResult(r.finishReason === 'stop' ? r.text + REHEARSE_STOP : r.text, it.call.name);
      const base = { taskId: it.taskId, index: it.index, call: it.call, real: it.real, text: r.text, tokens: r.tokens.length, ...(it.promptText !== undefined ? { promptText: it.promptText } : {}) };
      if (!parsed.ok) return { ...base, rehearsed: null, failure: parsed.error.code, fidelity: DISAGREE(it.real) };
      return { ...base, rehearsed: parsed.observation, failure: null, fidelity: compareObservations(parsed.observation, it.real) };
    });
    return {
      steps,
      summary: summarizeFidelity(steps.map((s) => s.fidelity)),
      invalid: steps.length === 0 ? NaN : steps.filter((s) => s.failure !== null).length / steps.length,
      skipped,
    };
  });
}
