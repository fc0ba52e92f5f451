// Log-probs of GRPO sequences under a given policy, for the batch fields the loss head needs:
// oldLogp (the sampling policy, when the sampler did not keep them) and refLogp (the KL reference; with
// LoRA the reference policy is the same base model with the adapter switched off: adapter = null).
import type { LoraAdapter } from '../model/lora';
import { logprobs } from '../model/score';
import type { Qwen3Model } from '../model/qwen3';
import type { TrainSequence } from './batch';

/** Per-token log p(tokens[i] | tokens[<i]) under (model, adapter); entry 0 is 0 (nothing predicts it). */
export async function sequenceLogprobs(model: Qwen3Model, seqs: readonly TrainSequence[], adapter: LoraAdapter | null): Promise<Float32Array[]> {
  const lp = await logprobs(model, seqs.map((s) => ({ tokens: Array.from(s.tokens), start: 1 })), { adapter });
  return lp.map((row) => Float32Array.of(0, ...row));
}

/** The sequences with refLogp filled from the reference policy (adapter null = adapter off). */
export async function withReferenceLogprobs(model: Qwen3Model, seqs: readonly TrainSequence[], reference: LoraAdapter | null = null): Promise<TrainSequence[]> {
  const lp = await sequenceLogprobs(model, seqs, reference);
  return seqs.map((s, i) => ({ ...s, refLogp: lp[i] }));
}
