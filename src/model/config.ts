// Qwen3 config.json: parsed, validated and turned into a plain typed object. Anything we cannot run
// is refused here with a ModelFormatError naming config.json, before any weight is read.
import { z } from 'zod';
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
}

const posInt = z.number().int().positive();

const schema = z.object({
  architectures: z.array(z.string()).min(1),
  hidden_size: posInt,
  intermediate_size: posInt,
  num_hidden_layers: posInt,
  num_attention_heads: posInt,
  num_key_value_heads: posInt.optional(),
  // Qwen3 configs always carry head_dim (it is not hidden/heads for every size); older ones may not.
  head_dim: posInt.optional(),
  rms_norm_eps: z.number().positive().max(1),
  rope_theta: z.number().positive().default(1_000_000),
  vocab_size: posInt,
  tie_word_embeddings: z.boolean().default(false),
  max_position_embeddings: posInt.default(40960),
  rope_scaling: z.unknown().optional(),
  hidden_act: z.string().optional(),
  attention_bias: z.boolean().optional(),
  use_sliding_window: z.boolean().optional(),
});

export const CONFIG_FILE = 'config.json';

/** Validate an already-parsed config.json object. */
export function parseQwen3Config(raw: unknown, file = CONFIG_FILE): Qwen3Config {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new ModelFormatError(file, 'expected a JSON object');
  const archs = (raw as { architectures?: unknown }).architectures;
  if (Array.isArray(archs) && !archs.includes('Qwen3ForCausalLM'))
    throw new ModelFormatError(file, `unsupported architecture ${JSON.stringify(archs)}; only Qwen3ForCausalLM is supported`);
  const r = schema.safeParse(raw);
  if (!r.success) {
    const issues = r.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
    throw new ModelFormatError(file, `invalid config: ${issues}`);
  }
  const c = r.data;
  if (!c.architectures.includes('Qwen3ForCausalLM'))
    throw new ModelFormatError(file, `unsupported architecture ${JSON.stringify(c.architectures)}; only Qwen3ForCausalLM is supported`);
  if (c.hidden_act !== undefined && c.hidden_act !== 'silu') throw new ModelFormatError(file, `unsupported hidden_act '${c.hidden_act}' (only silu)`);
  if (c.attention_bias) throw new ModelFormatError(file, 'attention_bias=true is not supported (Qwen3 has no attention bias)');
  if (c.rope_scaling !== undefined && c.rope_scaling !== null) throw new ModelFormatError(file, 'rope_scaling is not supported');
  if (c.use_sliding_window) throw new ModelFormatError(file, 'use_sliding_window=true is not supported (full attention only)');
  const numKvHeads = c.num_key_value_heads ?? c.num_attention_heads;
  if (c.num_attention_heads % numKvHeads !== 0)
    throw new ModelFormatError(file, `num_attention_heads (${c.num_attention_heads}) is not a multiple of num_key_value_heads (${numKvHeads})`);
  const headDim = c.head_dim ?? c.hidden_size / c.num_attention_heads;
  if (!Number.isInteger(headDim) || headDim % 2 !== 0) throw new ModelFormatError(file, `head_dim ${headDim} must be an even integer (RoPE rotates pairs)`);
  return {
    hiddenSize: c.hidden_size,
    intermediateSize: c.intermediate_size,
    numLayers: c.num_hidden_layers,
    numHeads: c.num_attention_heads,
    numKvHeads,
    headDim,
    rmsNormEps: c.rms_norm_eps,
    ropeTheta: c.rope_theta,
    vocabSize: c.vocab_size,
    tieWordEmbeddings: c.tie_word_embeddings,
    maxPositionEmbeddings: c.max_position_embeddings,
  };
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
    torch_dtype: 'float32',
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
