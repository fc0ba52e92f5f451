// Qwen3 config.json: parsed exactly as Hugging Face's Qwen3Config reads it (transformers v4 and v5
// layouts), bounded, and turned into a plain typed object. Anything we cannot run is refused here with a
// ModelFormatError naming config.json and the field, before any weight is read or any memory is sized
// from it.
//
// Every field read, with Hugging Face's default when the key is absent (QWEN3_CONFIG_FIELDS below is the
// same table as data; test/model/config.test.ts checks each default):
//
// | field                      | default (HF Qwen3Config)          | notes                                              |
// |----------------------------|-----------------------------------|----------------------------------------------------|
// | model_type                 | —                                 | 'qwen3' if present                                 |
// | architectures              | —                                 | must include Qwen3ForCausalLM if present; one of   |
// |                            |                                   | model_type / architectures must be present         |
// | vocab_size                 | 151936                            | ≤ 2^21                                             |
// | hidden_size                | 4096                              | ≤ 32768                                            |
// | intermediate_size          | 22016                             | ≤ 262144                                           |
// | num_hidden_layers          | 32                                | ≤ 512                                              |
// | num_attention_heads        | 32                                | ≤ 1024                                             |
// | num_key_value_heads        | 32 (null → num_attention_heads)   | divides num_attention_heads                        |
// | head_dim                   | 128 (not hidden/heads: the class  | even, ≤ 1024                                       |
// |                            | default wins over the modeling    |                                                    |
// |                            | code's getattr fallback)          |                                                    |
// | hidden_act                 | 'silu'                            | only silu                                          |
// | max_position_embeddings    | 32768                             | ≤ 2^20                                             |
// | rms_norm_eps               | 1e-6                              | in (0, 1]                                          |
// | tie_word_embeddings        | false                             |                                                    |
// | rope_theta                 | 10000 (v5: default_theta)         | rope_parameters.rope_theta wins over it (v5)       |
// | rope_parameters (v5) /     | null → {rope_type: 'default'}     | rope_scaling wins when both are set (v5's alias);  |
// |   rope_scaling (v4)        |                                   | rope_type (or legacy 'type') must be 'default';    |
// |                            |                                   | per-layer-type dicts are refused                   |
// | partial_rotary_factor      | 1 (top level or in rope_params)   | only 1                                             |
// | attention_bias             | false                             | only false                                         |
// | use_sliding_window         | false                             | sliding_window applies only when true              |
// | sliding_window             | 4096                              |                                                    |
// | max_window_layers          | 28                                | layers ≥ it slide when the window applies          |
// | layer_types                | derived from the three above      | any layer that really slides is refused            |
// | dtype / torch_dtype (v4)   | null                              | recorded only (weights are converted on load);     |
// |                            |                                   | dtype wins over torch_dtype                        |
//
// Also bounded: the parameter count (≤ 2^36) and the largest single tensor (≤ 2^31 elements), so a
// config like num_hidden_layers: 1e9 fails here in microseconds instead of after building a billion
// layer specs.
import { ModelFormatError } from '../engine/errors';

export interface Qwen3Config {
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  rmsNormEps: number;
  ropeTheta: number;
  vocabSize: number;
  tieWordEmbeddings: boolean;
  maxPositionEmbeddings: number;
  /** config.json's dtype (v5) or torch_dtype (v4), e.g. 'bfloat16'; informational. */
  dtype?: string;
}

export interface ConfigField {
  field: string;
  /** Hugging Face's default when the key is absent. */
  default: unknown;
  /** Largest value we accept (integer fields). */
  max?: number;
}

/** The table above as data. */
export const QWEN3_CONFIG_FIELDS: readonly ConfigField[] = [
  { field: 'vocab_size', default: 151936, max: 2 ** 21 },
  { field: 'hidden_size', default: 4096, max: 32768 },
  { field: 'intermediate_size', default: 22016, max: 262144 },
  { field: 'num_hidden_layers', default: 32, max: 512 },
  { field: 'num_attention_heads', default: 32, max: 1024 },
  { field: 'num_key_value_heads', default: 32, max: 1024 },
  { field: 'head_dim', default: 128, max: 1024 },
  { field: 'hidden_act', default: 'silu' },
  { field: 'max_position_embeddings', default: 32768, max: 2 ** 20 },
  { field: 'rms_norm_eps', default: 1e-6 },
  { field: 'tie_word_embeddings', default: false },
  { field: 'rope_theta', default: 10000 },
  { field: 'rope_parameters', default: null },
  { field: 'rope_scaling', default: null },
  { field: 'partial_rotary_factor', default: 1 },
  { field: 'attention_bias', default: false },
  { field: 'use_sliding_window', default: false },
  { field: 'sliding_window', default: 4096 },
  { field: 'max_window_layers', default: 28 },
  { field: 'layer_types', default: null },
  { field: 'dtype', default: null },
  { field: 'torch_dtype', default: null },
];

const DEFAULTS = Object.fromEntries(QWEN3_CONFIG_FIELDS.map((f) => [f.field, f.default])) as Record<string, unknown>;
const MAX = Object.fromEntries(QWEN3_CONFIG_FIELDS.filter((f) => f.max !== undefined).map((f) => [f.field, f.max!])) as Record<string, number>;
/** Largest parameter count and largest single tensor (elements) we accept. */
export const MAX_PARAMS = 2 ** 36;
export const MAX_TENSOR_ELEMENTS = 2 ** 31;

export const CONFIG_FILE = 'config.json';

const show = (v: unknown) => (typeof v === 'string' ? `'${v}'` : JSON.stringify(v));

/** Validate an already-parsed config.json object. */
export function parseQwen3Config(raw: unknown, file = CONFIG_FILE): Qwen3Config {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new ModelFormatError(file, 'expected a JSON object');
  const o = raw as Record<string, unknown>;
  const fail = (problem: string): never => {
    throw new ModelFormatError(file, problem);
  };
  const has = (k: string) => o[k] !== undefined;
  const get = (k: string) => (has(k) ? o[k] : DEFAULTS[k]);

  // Which model this is: HF's AutoConfig goes by model_type; architectures names the head class.
  const archs = o.architectures;
  if (archs !== undefined && archs !== null) {
    if (!Array.isArray(archs) || archs.some((a) => typeof a !== 'string')) fail('architectures: expected a list of class names');
    if (!(archs as string[]).includes('Qwen3ForCausalLM'))
      fail(`unsupported architecture ${JSON.stringify(archs)}; only Qwen3ForCausalLM is supported`);
  }
  if (o.model_type !== undefined && o.model_type !== 'qwen3') fail(`unsupported model_type ${show(o.model_type)}; only 'qwen3' is supported`);
  if ((archs === undefined || archs === null) && o.model_type === undefined) fail("neither model_type nor architectures is set; expected model_type 'qwen3'");

  // Sizes: integers, positive, bounded before anything is derived from them.
  const int = (k: string): number => {
    const v = get(k);
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) return fail(`${k}: expected a positive integer, got ${show(v)}`);
    if (MAX[k] !== undefined && v > MAX[k]) return fail(`${k} ${v} exceeds the limit ${MAX[k]}`);
    return v;
  };
  const bool = (k: string): boolean => {
    const v = get(k);
    if (typeof v !== 'boolean') return fail(`${k}: expected true or false, got ${show(v)}`);
    return v;
  };
  const vocabSize = int('vocab_size');
  const hiddenSize = int('hidden_size');
  const intermediateSize = int('intermediate_size');
  const numLayers = int('num_hidden_layers');
  const numHeads = int('num_attention_heads');
  // Qwen3Config: num_key_value_heads defaults to 32; only an explicit null means "= num_attention_heads".
  const numKvHeads = o.num_key_value_heads === null ? numHeads : int('num_key_value_heads');
  const headDim = int('head_dim');
  const maxPositionEmbeddings = int('max_position_embeddings');
  if (numHeads % numKvHeads !== 0) fail(`num_attention_heads (${numHeads}) is not a multiple of num_key_value_heads (${numKvHeads})`);
  if (headDim % 2 !== 0) fail(`head_dim ${headDim} must be an even integer (RoPE rotates pairs)`);

  const eps = get('rms_norm_eps');
  if (typeof eps !== 'number' || !(eps > 0 && eps <= 1)) fail(`rms_norm_eps: expected a number in (0, 1], got ${show(eps)}`);
  const act = get('hidden_act');
  if (act !== 'silu') fail(`unsupported hidden_act ${show(act)} (only silu)`);
  if (bool('attention_bias')) fail('attention_bias=true is not supported (Qwen3 has no attention bias)');
  const tieWordEmbeddings = bool('tie_word_embeddings');

  // RoPE, as v5's RotaryEmbeddingConfigMixin standardizes it (v4 configs read the same way):
  // rope_parameters = rope_scaling or rope_parameters or {}; rope_theta = rope_parameters.rope_theta, else
  // the top-level rope_theta, else 10000; rope_type = rope_type, else legacy 'type', else 'default'.
  const rs = o.rope_scaling ?? null;
  const rp = o.rope_parameters ?? null;
  const ropeKey = rs !== null ? 'rope_scaling' : 'rope_parameters';
  const rope = (rs !== null ? rs : rp) ?? {};
  if (typeof rope !== 'object' || Array.isArray(rope)) fail(`${ropeKey}: expected an object or null, got ${show(rope)}`);
  const ropeObj = rope as Record<string, unknown>;
  const layerTypeNames = ['full_attention', 'sliding_attention', 'chunked_attention', 'linear_attention'];
  const ropeKeys = Object.keys(ropeObj);
  if (ropeKeys.length > 0 && ropeKeys.every((k) => layerTypeNames.includes(k) || (Array.isArray(o.layer_types) && o.layer_types.includes(k))))
    fail(`per-layer-type RoPE parameters (${ropeKey} keyed by ${ropeKeys.join(', ')}) are not supported; one rope_type 'default' for every layer is`);
  const ropeType = ropeObj.rope_type ?? ropeObj.type ?? 'default';
  if (ropeType !== 'default')
    fail(`${ropeKey}.rope_type ${show(ropeType)} is not supported (only 'default' RoPE; no ${show(ropeType)} scaling is implemented)`);
  const theta = ropeObj.rope_theta ?? get('rope_theta');
  const thetaKey = ropeObj.rope_theta !== undefined && ropeObj.rope_theta !== null ? `${ropeKey}.rope_theta` : 'rope_theta';
  if (typeof theta !== 'number' || !(theta > 0) || !Number.isFinite(theta)) fail(`${thetaKey}: expected a positive number, got ${show(theta)}`);
  const prf = ropeObj.partial_rotary_factor ?? get('partial_rotary_factor');
  if (prf !== 1) fail(`partial_rotary_factor ${show(prf)} is not supported (RoPE over the whole head only)`);

  // Sliding windows, as Qwen3Config.__post_init__ derives them.
  const useSliding = bool('use_sliding_window');
  const window = useSliding ? get('sliding_window') : null;
  const maxWindowLayers = get('max_window_layers');
  let layerTypes: unknown = o.layer_types ?? null;
  if (layerTypes === null)
    layerTypes = Array.from({ length: numLayers }, (_, i) =>
      window !== null && typeof maxWindowLayers === 'number' && i >= maxWindowLayers ? 'sliding_attention' : 'full_attention',
    );
  if (!Array.isArray(layerTypes) || layerTypes.length !== numLayers)
    fail(`layer_types: expected a list of ${numLayers} entries (one per layer), got ${Array.isArray(layerTypes) ? `${layerTypes.length} entries` : show(layerTypes)}`);
  const lt = layerTypes as unknown[];
  const odd = lt.findIndex((t) => t !== 'full_attention' && t !== 'sliding_attention');
  if (odd >= 0) fail(`layer_types[${odd}] ${show(lt[odd])} is not supported (only full_attention)`);
  const sliding = lt.flatMap((t, i) => (t === 'sliding_attention' ? [i] : []));
  if (window !== null && sliding.length > 0)
    fail(
      `sliding-window attention (use_sliding_window: true, sliding_window: ${show(window)}, on ${sliding.length} of ${numLayers} layers from layer ${sliding[0]}) is not supported (full attention only)`,
    );

  const dt = o.dtype ?? o.torch_dtype ?? null;
  if (dt !== null && typeof dt !== 'string') fail(`${o.dtype != null ? 'dtype' : 'torch_dtype'}: expected a string, got ${show(dt)}`);

  const c: Qwen3Config = {
    hiddenSize,
    intermediateSize,
    numLayers,
    numHeads,
    numKvHeads,
    headDim,
    rmsNormEps: eps as number,
    ropeTheta: theta as number,
    vocabSize,
    tieWordEmbeddings,
    maxPositionEmbeddings,
    ...(dt !== null ? { dtype: dt as string } : {}),
  };
  checkSizes(c, file);
  return c;
}

/** Whole-model bounds: the parameter count and the largest single tensor. */
function checkSizes(c: Qwen3Config, file: string): void {
  const largest = Math.max(c.vocabSize * c.hiddenSize, c.intermediateSize * c.hiddenSize, c.numHeads * c.headDim * c.hiddenSize);
  if (largest > MAX_TENSOR_ELEMENTS) throw new ModelFormatError(file, `the largest weight would hold ${largest} elements, over the limit ${MAX_TENSOR_ELEMENTS}`);
  const n = paramCount(c);
  if (n > MAX_PARAMS) throw new ModelFormatError(file, `${n} parameters exceed the limit ${MAX_PARAMS}`);
}

/** Parse config.json text. */
export function parseQwen3ConfigText(text: string, file = CONFIG_FILE): Qwen3Config {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new ModelFormatError(file, `not valid JSON (${(e as Error).message})`);
  }
  return parseQwen3Config(raw, file);
}

/** The config.json a Hugging Face loader expects for this config (used by fixtures and exports). */
export function toHfConfig(c: Qwen3Config): Record<string, unknown> {
  return {
    architectures: ['Qwen3ForCausalLM'],
    model_type: 'qwen3',
    hidden_act: 'silu',
    attention_bias: false,
    hidden_size: c.hiddenSize,
    intermediate_size: c.intermediateSize,
    num_hidden_layers: c.numLayers,
    num_attention_heads: c.numHeads,
    num_key_value_heads: c.numKvHeads,
    head_dim: c.headDim,
    rms_norm_eps: c.rmsNormEps,
    rope_theta: c.ropeTheta,
    vocab_size: c.vocabSize,
    tie_word_embeddings: c.tieWordEmbeddings,
    max_position_embeddings: c.maxPositionEmbeddings,
    torch_dtype: c.dtype ?? 'float32',
  };
}

/** Parameter count (embedding counted once when tied). */
export function paramCount(c: Qwen3Config): number {
  const { hiddenSize: d, intermediateSize: f, numHeads: hq, numKvHeads: hkv, headDim: hd, vocabSize: v } = c;
  const attn = d * hq * hd * 2 + d * hkv * hd * 2 + 2 * hd;
  const mlp = 3 * d * f;
  const perLayer = attn + mlp + 2 * d;
  return v * d * (c.tieWordEmbeddings ? 1 : 2) + c.numLayers * perLayer + d;
}

/** Qwen3-0.6B's shape (its config.json), for benchmarks and test fixtures of that size. */
export const QWEN3_06B_SHAPE: Qwen3Config = {
  hiddenSize: 1024,
  intermediateSize: 3072,
  numLayers: 28,
  numHeads: 16,
  numKvHeads: 8,
  headDim: 128,
  rmsNormEps: 1e-6,
  ropeTheta: 1_000_000,
  vocabSize: 151936,
  tieWordEmbeddings: true,
  maxPositionEmbeddings: 40960,
};
