import { describe, expect, it } from 'vitest';
import { paramCount, parseQwen3Config, parseQwen3ConfigText, toHfConfig } from '../../src/model/config';
import { ModelFormatError } from '../../src/engine/errors';

// Qwen3-0.6B's config.json as published (values only; the loader must accept it as is).
const QWEN3_06B = {
  architectures: ['Qwen3ForCausalLM'],
  attention_bias: false,
  attention_dropout: 0.0,
  bos_token_id: 151643,
  eos_token_id: 151645,
  head_dim: 128,
  hidden_act: 'silu',
  hidden_size: 1024,
  initializer_range: 0.02,
  intermediate_size: 3072,
  max_position_embeddings: 40960,
  max_window_layers: 28,
  model_type: 'qwen3',
  num_attention_heads: 16,
  num_hidden_layers: 28,
  num_key_value_heads: 8,
  rms_norm_eps: 1e-6,
  rope_scaling: null,
  rope_theta: 1000000,
  sliding_window: null,
  tie_word_embeddings: true,
  torch_dtype: 'bfloat16',
  transformers_version: '4.51.0',
  use_cache: true,
  use_sliding_window: false,
  vocab_size: 151936,
};

function err(fn: () => unknown): ModelFormatError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ModelFormatError);
    return e as ModelFormatError;
  }
  throw new Error('expected a ModelFormatError');
}

describe('Qwen3 config.json', () => {
  it('accepts the real Qwen3-0.6B config and counts its parameters', () => {
    const c = parseQwen3Config(QWEN3_06B);
    expect(c).toEqual({
      hiddenSize: 1024,
      intermediateSize: 3072,
      numLayers: 28,
      numHeads: 16,
      numKvHeads: 8,
      headDim: 128,
      rmsNormEps: 1e-6,
      ropeTheta: 1000000,
      vocabSize: 151936,
      tieWordEmbeddings: true,
      maxPositionEmbeddings: 40960,
    });
    // Qwen3-0.6B: 0.6B parameters in total (0.44B without embeddings).
    expect(paramCount(c) / 1e9).toBeCloseTo(0.596, 3);
    expect(parseQwen3Config(toHfConfig(c))).toEqual(c);
  });

  it('refuses what it cannot run, naming config.json and the field', () => {
    const cases: [unknown, RegExp][] = [
      [{ ...QWEN3_06B, architectures: ['Qwen2ForCausalLM'] }, /unsupported architecture \["Qwen2ForCausalLM"\]/],
      [{ ...QWEN3_06B, hidden_size: -4 }, /hidden_size/],
      [{ ...QWEN3_06B, vocab_size: undefined }, /vocab_size/],
      [{ ...QWEN3_06B, num_key_value_heads: 5 }, /not a multiple of num_key_value_heads \(5\)/],
      [{ ...QWEN3_06B, head_dim: 127 }, /head_dim 127 must be an even integer/],
      [{ ...QWEN3_06B, hidden_act: 'gelu' }, /hidden_act 'gelu'/],
      [{ ...QWEN3_06B, rope_scaling: { type: 'yarn', factor: 4 } }, /rope_scaling/],
      [{ ...QWEN3_06B, use_sliding_window: true }, /use_sliding_window/],
      [[1, 2], /expected a JSON object/],
    ];
    for (const [raw, problem] of cases) {
      const e = err(() => parseQwen3Config(raw));
      expect(e.file).toBe('config.json');
      expect(e.problem).toMatch(problem);
    }
    expect(err(() => parseQwen3ConfigText('{"hidden_size": ')).message).toMatch(/^config\.json: not valid JSON/);
  });
});
