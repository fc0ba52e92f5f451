// A lab model (weights, tokenizer, optional LoRA adapter) as the completion engine of the OpenAI-compatible
// endpoint (src/server/openai.ts): the same generate() the rollout loop decodes with.
import { generate, type Sampling } from '../model/generate';
import type { LoraAdapter } from '../model/lora';
import type { Qwen3Model } from '../model/qwen3';
import type { Tokenizer } from '../model/tokenizer';
import type { CompletionEngine } from './openai';

export function modelEngine(p: { model: Qwen3Model; tokenizer: Tokenizer; adapter: LoraAdapter | null }): CompletionEngine {
  return {
    contextLength: p.model.config.maxPositionEmbeddings,
    countTokens: (text) => p.tokenizer.encode(text).length,
    async complete(r) {
      const sampling: Sampling = { temperature: r.temperature, topP: r.topP, seed: r.seed };
      const [g] = await generate(p.model, p.tokenizer, [{ prompt: r.prompt, maxNewTokens: r.maxTokens, stop: r.stop, sampling }], { adapter: p.adapter });
      return { text: g.text, finishReason: g.finishReason, stopIndex: g.stopIndex, completionTokens: g.tokens.length };
    },
  };
}
