// The random placeholder policy, the model panel's untrained choice and the lab's fallback when the bundled
// model does not load: a Qwen3-shaped random-weight model with a domain tokenizer. The UI says it is untrained
// wherever it shows its output.
import type { Domain } from '../../src/env/domain';
import type { Qwen3Config } from '../../src/model/config';
import { Tokenizer } from '../../src/model/tokenizer';
import { trainBpe } from '../../src/model/bpe';
import { SPECIAL_STRINGS, toTokenizerConfig, toTokenizerJson } from '../../src/model/hf-tokenizer';
import { buildActPrompt } from '../../src/rollout/act-prompt';
import { buildRehearsePrompt } from '../../src/rollout/rehearse-prompt';

/**
 * A domain BPE (the same trainer and file format the bundled policy's tokenizer comes from,
 * src/model/bpe.ts), trained in about a second on the expert's Act and Rehearse rows of a few training tasks.
 * Like the bundled tokenizer it compresses the constant tool block into a few tokens: an Act prompt is
 * ~300 tokens instead of ~9,600 bytes, which is what makes rollouts and training steps of the placeholder
 * fast enough to demonstrate, and its 2,048-token vocabulary keeps sampling cheap on slow adapters.
 */
export function placeholderTokenizer(domain: Domain): Tokenizer {
  const texts: string[] = [];
  const tools = domain.definitions() as unknown as Record<string, unknown>[];
  for (const task of domain.tasks.generate({ split: 'train', count: 8, seed: 0 }))
    for (const r of domain.expert(task, domain.createEnv()).rows)
      texts.push(
        r.role === 'act'
          ? buildActPrompt(domain.policy, tools, r.messages) + r.target
          : buildRehearsePrompt({ tools, grounding: r.grounding, history: r.messages, call: r.call }).text + r.target,
      );
  const bpe = trainBpe(texts, { vocabSize: 2048, specials: SPECIAL_STRINGS });
  return Tokenizer.fromJSON(toTokenizerJson(bpe), toTokenizerConfig(bpe, '', 32768));
}

/** The placeholder's shape: Qwen3, tiny, with the domain BPE's vocabulary. */
export function randomConfig(vocab: number): Qwen3Config {
  return {
    hiddenSize: 32,
    intermediateSize: 64,
    numLayers: 2,
    numHeads: 2,
    numKvHeads: 1,
    headDim: 16,
    rmsNormEps: 1e-6,
    ropeTheta: 1_000_000,
    vocabSize: vocab,
    tieWordEmbeddings: true,
    maxPositionEmbeddings: 4096,
  };
}
