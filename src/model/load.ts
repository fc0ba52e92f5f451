// One call to get a usable policy out of a Hugging Face style folder: weights on a backend (quantized
// on load), the tokenizer, and the check that the two agree.
import type { Backend } from '../engine/backend';
import type { Qwen3Model } from './qwen3';
import type { ModelSource } from './source';
import { checkTokenizerFits, Tokenizer } from './tokenizer';
import { loadQwen3, type BuildOptions, type HostWeights } from './weights';

export interface LoadedPolicy {
  model: Qwen3Model;
  tokenizer: Tokenizer;
  host: HostWeights | null;
}

/** Tokenizer first: it is small, so a broken or missing tokenizer file fails before the weights load. */
export async function loadModel(src: ModelSource, backend: Backend, opts: BuildOptions): Promise<LoadedPolicy> {
  const tokenizer = await Tokenizer.load(src);
  const { model, host } = await loadQwen3(src, backend, opts);
  try {
    checkTokenizerFits(tokenizer, model.config.vocabSize);
  } catch (e) {
    model.free();
    throw e;
  }
  return { model, tokenizer, host };
}
