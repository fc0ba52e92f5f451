// Rehearse rows whose target is the real observation: the simulator's supervised signal. Wherever the
// real environment answered a call (a real rollout of the same step), the call's Rehearse prompt is
// rebuilt exactly as a rehearsing rollout builds it (task grounding, the Act history before the turn, the
// call) and the real answer becomes the response. Nothing here is sampled, so each row carries the
// current policy's own log-probs as its "old" ones: with one update epoch the clipped ratio is 1 and a
// row with advantage c contributes c · ∇(−log p(real observation)) — a cross-entropy term with
// coefficient c inside the same GRPO loss (src/rl/grpo.ts supervised rows).
import type { Task } from '../env/domain';
import { logprobs } from '../model/score';
import type { LoraAdapter } from '../model/lora';
import type { Qwen3Model } from '../model/qwen3';
import type { Tokenizer } from '../model/tokenizer';
import { buildRehearsePrompt, rehearseTarget, type RehearsePromptOptions } from './rehearse-prompt';
import { referenceGrounding, type RolloutDomain, type RolloutRecord } from './rollout';
import { makeRow, type TrainingRow } from './rows';
import type { ObservationGrounding } from '../method/run-config';

export interface ObservationRowOptions {
  /** Responses are cut to the Rehearse budget, as a generation would be. */
  maxRehearseTokens: number;
  /** Rows whose prompt plus response would not fit are skipped. */
  maxContext: number;
  rehearsePrompt?: RehearsePromptOptions;
  enableThinking?: boolean;
  /**
   * 'with-call': the grounding exactly as rollouts build it, which holds the call's own reference result
   * whenever the call is a reference action, so the row teaches copying that example; 'without-call': that
   * example left out (as the pretraining rows and the strict fidelity measurement do), so the row teaches the
   * dynamics. Default 'with-call' (the first runs' rows).
   */
  grounding?: ObservationGrounding;
}

// The choices are the run settings' table's (src/method/run-config.ts), declared once there.
export { OBSERVATION_GROUNDINGS, type ObservationGrounding } from '../method/run-config';

/**
 * One Rehearse row per answered, well-formed call of the given rollouts (those that ran in the real
 * environment: their observations are real). `tasks` resolves each rollout's task (its grounding).
 */
export async function realObservationRows(
  model: Qwen3Model,
  tokenizer: Tokenizer,
  adapter: LoraAdapter | null,
  domain: RolloutDomain,
  rollouts: readonly RolloutRecord[],
  tasks: ReadonlyMap<string, Task>,
  o: ObservationRowOptions,
): Promise<TrainingRow[]> {
  const tools = domain.definitions();
  const pending: { r: RolloutRecord; turn: number; prompt: number[]; response: number[] }[] = [];
  const groundings = new Map<string, ReturnType<typeof referenceGrounding>>();
  for (const r of rollouts) {
    if (r.mode !== 'real') throw new Error(`realObservationRows: rollout ${r.rolloutId} is ${r.mode}, not real`);
    const task = tasks.get(r.taskId);
    if (!task) throw new Error(`realObservationRows: no task ${r.taskId}`);
    // The K rollouts of a task share its grounding: replay its reference actions once.
    let grounding = groundings.get(task.id);
    if (!grounding) groundings.set(task.id, (grounding = referenceGrounding(domain, task)));
    for (const t of r.log) {
      for (const slot of t.calls) {
        if (slot.call.name === '' || slot.obs === null) continue; // malformed blocks are answered without a simulator
        const text = buildRehearsePrompt(
          { tools, grounding, history: r.messages.slice(0, t.history), call: slot.call },
          { enableThinking: o.enableThinking, ...o.rehearsePrompt, ...(o.grounding === 'without-call' ? { excludeSameCall: true } : {}) },
        ).text;
        const prompt = tokenizer.encode(text);
        const response = tokenizer.encode(rehearseTarget(slot.obs)).slice(0, o.maxRehearseTokens);
        if (prompt.length + response.length > o.maxContext) continue;
        pending.push({ r, turn: t.turn, prompt, response });
      }
    }
  }
  if (pending.length === 0) return [];
  const lp = await logprobs(model, pending.map((p) => ({ tokens: [...p.prompt, ...p.response], start: p.prompt.length })), { adapter });
  return pending.map((p, i) =>
    makeRow({ role: 'rehearse', promptId: `real-obs:${p.r.promptId}`, rolloutId: p.r.rolloutId, turn: p.turn, promptTokens: p.prompt, generated: { tokens: p.response, logprobs: lp[i].map((x) => Math.min(0, x)) } }),
  );
}
