import { describe, expect, it } from 'vitest';
import { paramCount, parseQwen3Config, parseQwen3ConfigText, QWEN3_CONFIG_FIELDS, toHfConfig, type Qwen3Config } from '../../src/model/config';
import { CpuRefBackend } from '../../src/engine/cpu/ref';
import { MemorySource } from '../../src/model/source';
import { loadQwen3 } from '../../src/model/weights';
import { forward, KvCache } from '../../src/model/qwen3';
import { tinyConfig, tinyModelFiles } from '../fixtures/tiny-model';
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

function err(fn: () => unknown, what: unknown = ''): ModelFormatError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ModelFormatError);
    return e as ModelFormatError;
  }
  throw new Error(`expected a ModelFormatError ${what}`);
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
      dtype: 'bfloat16',
    });
    // Qwen3-0.6B: 0.6B parameters in total (0.44B without embeddings).
    expect(paramCount(c) / 1e9).toBeCloseTo(0.596, 3);
    expect(parseQwen3Config(toHfConfig(c))).toEqual(c);
  });

  it('refuses what it cannot run, naming config.json and the field', () => {
    const cases: [unknown, RegExp][] = [
      [{ ...QWEN3_06B, architectures: ['Qwen2ForCausalLM'] }, /unsupported architecture \["Qwen2ForCausalLM"\]/],
      [{ ...QWEN3_06B, hidden_size: -4 }, /hidden_size/],
      [{ ...QWEN3_06B, vocab_size: 'x' }, /vocab_size: expected a positive integer, got 'x'/],
      [{ ...QWEN3_06B, num_key_value_heads: 5 }, /not a multiple of num_key_value_heads \(5\)/],
      [{ ...QWEN3_06B, head_dim: 127 }, /head_dim 127 must be an even integer/],
      [{ ...QWEN3_06B, hidden_act: 'gelu' }, /hidden_act 'gelu'/],
      [{ ...QWEN3_06B, rope_scaling: { type: 'yarn', factor: 4 } }, /rope_scaling\.rope_type 'yarn' is not supported/],
      [{ ...QWEN3_06B, use_sliding_window: true, sliding_window: 4096, max_window_layers: 20 }, /sliding-window attention \(use_sliding_window: true, sliding_window: 4096, on 8 of 28 layers from layer 20\)/],
      [[1, 2], /expected a JSON object/],
    ];
    for (const [raw, problem] of cases) {
      const e = err(() => parseQwen3Config(raw));
      expect(e.file).toBe('config.json');
      expect(e.problem).toMatch(problem);
    }
    expect(err(() => parseQwen3ConfigText('{"hidden_size": ')).message).toMatch(/^config\.json: not valid JSON/);
  });

  it('reads every field of the table with Hugging Face\'s default when the key is absent', () => {
    // A config with only the model type: every size is Qwen3Config's class default.
    expect(parseQwen3Config({ model_type: 'qwen3' })).toEqual({
      vocabSize: 151936,
      hiddenSize: 4096,
      intermediateSize: 22016,
      numLayers: 32,
      numHeads: 32,
      numKvHeads: 32,
      headDim: 128,
      rmsNormEps: 1e-6,
      ropeTheta: 10000,
      tieWordEmbeddings: false,
      maxPositionEmbeddings: 32768,
    });
    // Each field on its own: drop it from the real 0.6B config and read the default back.
    const read: Record<string, (c: Qwen3Config) => unknown> = {
      vocab_size: (c) => c.vocabSize,
      hidden_size: (c) => c.hiddenSize,
      intermediate_size: (c) => c.intermediateSize,
      num_hidden_layers: (c) => c.numLayers,
      num_attention_heads: (c) => c.numHeads,
      num_key_value_heads: (c) => c.numKvHeads,
      head_dim: (c) => c.headDim,
      max_position_embeddings: (c) => c.maxPositionEmbeddings,
      rms_norm_eps: (c) => c.rmsNormEps,
      tie_word_embeddings: (c) => c.tieWordEmbeddings,
      rope_theta: (c) => c.ropeTheta,
    };
    const base = { ...QWEN3_06B, num_attention_heads: 32, num_key_value_heads: 8, head_dim: 64 } as Record<string, unknown>;
    for (const f of QWEN3_CONFIG_FIELDS) {
      const without = { ...base };
      delete without[f.field];
      const c = parseQwen3Config(without);
      if (read[f.field]) expect([f.field, read[f.field](c)]).toEqual([f.field, f.default]);
      else expect([f.field, { ...c, dtype: 0 }]).toEqual([f.field, { ...parseQwen3Config(base), dtype: 0 }]); // fields that refuse or inform: absent = their default
    }
    // num_key_value_heads: null (not absent) means "as many as the query heads".
    expect(parseQwen3Config({ ...QWEN3_06B, num_key_value_heads: null }).numKvHeads).toBe(16);
    // dtype (v5) wins over torch_dtype (v4); either is recorded.
    expect(parseQwen3Config({ ...QWEN3_06B, torch_dtype: undefined, dtype: 'float16' }).dtype).toBe('float16');
    expect(parseQwen3Config({ ...QWEN3_06B, dtype: 'float32' }).dtype).toBe('float32');
    expect(parseQwen3Config({ ...QWEN3_06B, torch_dtype: undefined }).dtype).toBeUndefined();
  });

  it('reads RoPE as transformers v4 and v5 do: rope_parameters.rope_theta, else rope_theta, else 10000', () => {
    const { rope_theta: _, rope_scaling: __, ...noTheta } = QWEN3_06B;
    expect(parseQwen3Config(noTheta).ropeTheta).toBe(10000);
    expect(parseQwen3Config({ ...noTheta, rope_parameters: { rope_type: 'default', rope_theta: 1e6 } }).ropeTheta).toBe(1e6);
    expect(parseQwen3Config({ ...noTheta, rope_parameters: { rope_type: 'default' } }).ropeTheta).toBe(10000);
    expect(parseQwen3Config({ ...noTheta, rope_theta: 5e5, rope_parameters: { rope_type: 'default' } }).ropeTheta).toBe(5e5);
    expect(parseQwen3Config({ ...noTheta, rope_theta: 5e5, rope_parameters: { rope_type: 'default', rope_theta: 2e4 } }).ropeTheta).toBe(2e4);
    // the legacy 'type' key, and a v4 rope_scaling block of type default
    expect(parseQwen3Config({ ...noTheta, rope_scaling: { type: 'default' }, rope_theta: 3e4 }).ropeTheta).toBe(3e4);
    const refused: [unknown, RegExp][] = [
      [{ ...noTheta, rope_parameters: { rope_type: 'yarn', factor: 4, rope_theta: 1e6 } }, /rope_parameters\.rope_type 'yarn' is not supported/],
      [{ ...noTheta, rope_scaling: { rope_type: 'linear', factor: 2 } }, /rope_scaling\.rope_type 'linear' is not supported/],
      [{ ...noTheta, rope_parameters: { type: 'dynamic', factor: 2 } }, /rope_type 'dynamic' is not supported/],
      [{ ...noTheta, rope_parameters: { rope_type: 'llama3' } }, /'llama3'/],
      [
        { ...noTheta, rope_parameters: { full_attention: { rope_type: 'default', rope_theta: 1e6 }, sliding_attention: { rope_type: 'default', rope_theta: 1e4 } } },
        /per-layer-type RoPE parameters \(rope_parameters keyed by full_attention, sliding_attention\) are not supported/,
      ],
      [{ ...noTheta, partial_rotary_factor: 0.5 }, /partial_rotary_factor 0\.5 is not supported/],
      [{ ...noTheta, rope_parameters: { rope_type: 'default', partial_rotary_factor: 0.25 } }, /partial_rotary_factor 0\.25/],
      [{ ...noTheta, rope_theta: -1 }, /rope_theta: expected a positive number, got -1/],
      [{ ...noTheta, layer_types: Array(28).fill('chunked_attention') }, /layer_types\[0\] 'chunked_attention' is not supported/],
      [{ ...noTheta, layer_types: ['full_attention'] }, /layer_types: expected a list of 28 entries/],
      [
        { ...noTheta, use_sliding_window: true, sliding_window: 4096, layer_types: [...Array(27).fill('full_attention'), 'sliding_attention'] },
        /sliding-window attention \(use_sliding_window: true, sliding_window: 4096, on 1 of 28 layers from layer 27\)/,
      ],
      [{ ...noTheta, model_type: 'llama' }, /unsupported model_type 'llama'/],
      [{ hidden_size: 64 }, /neither model_type nor architectures/],
    ];
    for (const [raw, problem] of refused) {
      const e = err(() => parseQwen3Config(raw), problem);
      expect(e.file).toBe('config.json');
      expect(e.problem).toMatch(problem);
    }
    // Sliding layers without a window (use_sliding_window false) run full attention in HF, and here.
    expect(parseQwen3Config({ ...noTheta, layer_types: Array(28).fill('sliding_attention') }).numLayers).toBe(28);
  });

  it('bounds every size before anything is allocated, naming the field, the value and the limit', () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ num_hidden_layers: 1e9 }, /^num_hidden_layers 1000000000 exceeds the limit 512$/],
      [{ max_position_embeddings: 1e12 }, /^max_position_embeddings 1000000000000 exceeds the limit 1048576$/],
      [{ hidden_size: 1e6 }, /^hidden_size 1000000 exceeds the limit 32768$/],
      [{ vocab_size: 2 ** 30 }, /^vocab_size 1073741824 exceeds the limit 2097152$/],
      [{ intermediate_size: 1e7 }, /^intermediate_size 10000000 exceeds the limit 262144$/],
      [{ num_attention_heads: 4096, num_key_value_heads: 4096 }, /^num_attention_heads 4096 exceeds the limit 1024$/],
      [{ head_dim: 4096 }, /^head_dim 4096 exceeds the limit 1024$/],
      [{ num_hidden_layers: 1.5 }, /^num_hidden_layers: expected a positive integer, got 1\.5$/],
      [{ vocab_size: 2 ** 21, hidden_size: 32768 }, /^the largest weight would hold 68719476736 elements, over the limit 2147483648$/],
      [{ num_hidden_layers: 512, hidden_size: 16384, intermediate_size: 65536, vocab_size: 1000 }, /^\d+ parameters exceed the limit 68719476736$/],
    ];
    for (const [over, problem] of cases) {
      const t0 = performance.now();
      const e = err(() => parseQwen3Config({ ...QWEN3_06B, ...over }));
      expect(performance.now() - t0).toBeLessThan(1000);
      expect(e.file).toBe('config.json');
      expect(e.problem).toMatch(problem);
    }
  });

  it('a v5 config (rope_parameters, no rope_theta) and one with no rope_theta give the logits of a v4 config with rope_theta 10000', async () => {
    const cfg = tinyConfig({ ropeTheta: 10000 });
    const files = await tinyModelFiles(cfg, 7);
    const v4 = { ...toHfConfig(cfg), rope_theta: 10000 };
    const { rope_theta: _, ...none } = v4;
    const v5 = { ...none, dtype: 'float32', torch_dtype: undefined, rope_parameters: { rope_type: 'default' } };
    const ids = Int32Array.from([5, 77, 200, 12, 9, 260, 41, 8]);
    const logitsOf = async (config: object) => {
      const f = new Map(files);
      f.set('config.json', new TextEncoder().encode(JSON.stringify(config)));
      const b = new CpuRefBackend();
      const { model } = await loadQwen3(new MemorySource(f), b, { format: 'f32' });
      const cache = new KvCache(model, 1, 16);
      const r = forward(model, cache, { ids, slot: new Int32Array(ids.length), pos: Int32Array.from(ids, (_, i) => i) });
      return (await b.read(r.logits)) as Float32Array;
    };
    expect(parseQwen3Config(v5).ropeTheta).toBe(10000);
    expect(parseQwen3Config(none).ropeTheta).toBe(10000);
    const ref = await logitsOf(v4);
    expect(await logitsOf(v5)).toEqual(ref);
    expect(await logitsOf(none)).toEqual(ref);
    // and θ matters: the same weights at the old default (1e6) give other logits
    const at1e6 = await logitsOf({ ...v4, rope_theta: 1e6 });
    expect(Math.max(...at1e6.map((x, i) => Math.abs(x - ref[i])))).toBeGreaterThan(1e-3);
  });
});

