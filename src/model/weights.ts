// Host-side weights of a Qwen3 model, their Hugging Face names, and getting them onto a backend:
// from a Hugging Face folder (config.json + model.safetensors or a sharded index), quantized on load,
// one tensor at a time so a big checkpoint never sits in memory twice.
import type { Backend, Tensor } from '../engine/backend';
import { ModelFormatError } from '../engine/errors';
import { defaultEmbedFormat, dequantize, quantize, type QuantizedWeight } from '../engine/quant';
import { CONFIG_FILE, parseQwen3Config, type Qwen3Config } from './config';
import { Qwen3Model, type LayerWeights, type WeightFormat } from './qwen3';
import { parseSafetensors, writeSafetensors, type SafetensorsFile, type TensorToWrite } from './safetensors';
import { readJson, type ModelSource } from './source';

export interface DenseWeight {
  kind: 'f32';
  shape: number[];
  data: Float32Array;
}
export type HostWeight = DenseWeight | QuantizedWeight;
/** HF tensor name -> weight */
export type HostWeights = Map<string, HostWeight>;

export interface WeightSpec {
  name: string;
  shape: [number] | [number, number];
  /** Linear maps and the embedding are quantized; norms stay f32. */
  quantizable: boolean;
}

const LAYER_KEYS: Record<keyof LayerWeights, string> = {
  inputNorm: 'input_layernorm',
  q: 'self_attn.q_proj',
  k: 'self_attn.k_proj',
  v: 'self_attn.v_proj',
  o: 'self_attn.o_proj',
  qNorm: 'self_attn.q_norm',
  kNorm: 'self_attn.k_norm',
  postNorm: 'post_attention_layernorm',
  gate: 'mlp.gate_proj',
  up: 'mlp.up_proj',
  down: 'mlp.down_proj',
};

export function layerWeightName(l: number, key: keyof LayerWeights): string {
  return `model.layers.${l}.${LAYER_KEYS[key]}.weight`;
}

/** Every tensor a checkpoint of this config must hold, with its shape. */
export function weightSpecs(c: Qwen3Config): WeightSpec[] {
  return [...weightSpecIter(c)];
}

/** weightSpecs one at a time, in the same order. */
export function* weightSpecIter(c: Qwen3Config): Generator<WeightSpec> {
  const d = c.hiddenSize;
  const qd = c.numHeads * c.headDim;
  const kvd = c.numKvHeads * c.headDim;
  const f = c.intermediateSize;
  yield { name: 'model.embed_tokens.weight', shape: [c.vocabSize, d], quantizable: true };
  const layerShapes: Record<keyof LayerWeights, [number] | [number, number]> = {
    inputNorm: [d],
    q: [qd, d],
    k: [kvd, d],
    v: [kvd, d],
    o: [d, qd],
    qNorm: [c.headDim],
    kNorm: [c.headDim],
    postNorm: [d],
    gate: [f, d],
    up: [f, d],
    down: [d, f],
  };
  for (let l = 0; l < c.numLayers; l++)
    for (const key of Object.keys(LAYER_KEYS) as (keyof LayerWeights)[])
      yield { name: layerWeightName(l, key), shape: layerShapes[key], quantizable: layerShapes[key].length === 2 };
  yield { name: 'model.norm.weight', shape: [d], quantizable: false };
  if (!c.tieWordEmbeddings) yield { name: 'lm_head.weight', shape: [c.vocabSize, d], quantizable: true };
}

/** Quantize (if asked and allowed) and upload one weight. */
function upload(b: Backend, spec: WeightSpec, w: HostWeight, format: WeightFormat): { tensor: Tensor; host: HostWeight } {
  if (w.kind === 'f32') {
    if (spec.quantizable && format !== 'f32') {
      const q = quantize(w.data, spec.shape[0], spec.shape[1]!, format);
      return { tensor: b.uploadQuantized(q), host: q };
    }
    const t = b.tensor(w.data, spec.shape);
    // Weights are fixed unless a full-parameter run unfreezes them (src/train/params.ts): a backend may derive once.
    if (spec.shape.length === 2) b.freeze?.(t);
    return { tensor: t, host: w };
  }
  return { tensor: b.uploadQuantized(w), host: w };
}

export interface BuildOptions {
  format: WeightFormat;
  /** Format of the embedding and the LM head; default defaultEmbedFormat(format) (q8 under q4). */
  embedFormat?: WeightFormat;
  /** Keep the host copy of every weight (as uploaded: quantized where quantized), e.g. for ONNX export. */
  keepHost?: boolean;
  /** Called after each weight is uploaded: tensors done of total, and that weight's element count (progress). */
  onWeight?: (done: number, total: number, spec: WeightSpec) => void;
}

export interface LoadedModel {
  model: Qwen3Model;
  /** Present when keepHost was asked. */
  host: HostWeights | null;
}

/** Build a model from weights produced one by one by `next(spec)` (from files or a generator). */
export async function buildQwen3(
  b: Backend,
  c: Qwen3Config,
  next: (spec: WeightSpec) => HostWeight | Promise<HostWeight>,
  opts: BuildOptions,
): Promise<LoadedModel> {
  const tensors = new Map<string, Tensor>();
  const host: HostWeights | null = opts.keepHost ? new Map() : null;
  const embedFormat = opts.embedFormat ?? defaultEmbedFormat(opts.format);
  const total = opts.onWeight ? weightCount(c) : 0;
  for (const spec of weightSpecIter(c)) {
    const isTable = spec.name === 'model.embed_tokens.weight' || spec.name === 'lm_head.weight';
    const u = upload(b, spec, await next(spec), isTable ? embedFormat : opts.format);
    tensors.set(spec.name, u.tensor);
    host?.set(spec.name, u.host);
    opts.onWeight?.(tensors.size, total, spec);
  }
  const get = (n: string) => tensors.get(n)!;
  const layers: LayerWeights[] = [];
  for (let l = 0; l < c.numLayers; l++) {
    const lw = {} as LayerWeights;
    for (const key of Object.keys(LAYER_KEYS) as (keyof LayerWeights)[]) lw[key] = get(layerWeightName(l, key));
    layers.push(lw);
  }
  const embed = get('model.embed_tokens.weight');
  const weights = { embed, layers, finalNorm: get('model.norm.weight'), lmHead: c.tieWordEmbeddings ? embed : get('lm_head.weight') };
  return { model: new Qwen3Model(c, b, weights, opts.format), host };
}

export const WEIGHTS_FILE = 'model.safetensors';
export const INDEX_FILE = 'model.safetensors.index.json';

/** tensor name -> file, from a sharded index or the single model.safetensors. */
async function weightFiles(src: ModelSource): Promise<Map<string, string> | null> {
  if (!(await src.has(INDEX_FILE))) return null;
  const idx = (await readJson(src, INDEX_FILE)) as { weight_map?: unknown };
  const map = idx?.weight_map;
  if (typeof map !== 'object' || map === null || Object.values(map).some((f) => typeof f !== 'string' || f.includes('/')))
    throw new ModelFormatError(INDEX_FILE, 'weight_map must map tensor names to file names in the same folder');
  return new Map(Object.entries(map as Record<string, string>));
}

/** NaN and ±Inf values in `data` (count, and the index of the first). */
export function countNonFinite(data: Float32Array): { count: number; first: number } {
  let count = 0;
  let first = -1;
  for (let i = 0; i < data.length; i++) {
    // x - x is 0 for finite x and NaN for NaN and ±Inf: one test for both.
    if (data[i] - data[i] !== 0) {
      if (count === 0) first = i;
      count++;
    }
  }
  return { count, first };
}

/** Tensors a checkpoint of `c` holds, computed without listing them (a hostile layer count stays cheap). */
export function weightCount(c: Qwen3Config): number {
  return 2 + c.numLayers * Object.keys(LAYER_KEYS).length + (c.tieWordEmbeddings ? 0 : 1);
}

/** Load a Hugging Face style Qwen3 folder: config.json + model.safetensors (or sharded). */
export async function loadQwen3(src: ModelSource, b: Backend, opts: BuildOptions): Promise<LoadedModel> {
  const { config, weight } = await readQwen3(src);
  return buildQwen3(b, config, weight, opts);
}

/** A folder's weights on the host only (no backend): for tools that transform a checkpoint before using it. */
export async function readHostWeights(src: ModelSource): Promise<{ config: Qwen3Config; host: HostWeights }> {
  const { config, weight } = await readQwen3(src);
  const host: HostWeights = new Map();
  for (const spec of weightSpecIter(config)) host.set(spec.name, await weight(spec));
  return { config, host };
}

/**
 * A folder's parsed config and a reader that returns each weight (validated: shape and finite values) in
 * weight-spec order, each once.
 */
async function readQwen3(src: ModelSource): Promise<{ config: Qwen3Config; weight: (spec: WeightSpec) => Promise<HostWeight> }> {
  const config = parseQwen3Config(await readJson(src, CONFIG_FILE));
  const index = await weightFiles(src);
  // Shards are parsed lazily and dropped once every tensor they hold has been read.
  const open = new Map<string, SafetensorsFile>();
  const remaining = new Map<string, number>();
  const fileOf = (name: string) => (index ? index.get(name) : WEIGHTS_FILE);
  // Counted without listing every tensor: a hostile num_hidden_layers (1e9) must fail at the first
  // missing tensor, not exhaust memory building its list. An index names at most index.size tensors, so
  // walking it stops within index.size + 1 names.
  if (!index) remaining.set(WEIGHTS_FILE, weightCount(config));
  else {
    for (const s of weightSpecIter(config)) {
      const f = fileOf(s.name);
      if (f === undefined) throw new ModelFormatError(INDEX_FILE, `weight_map has no entry for tensor '${s.name}'`);
      remaining.set(f, (remaining.get(f) ?? 0) + 1);
    }
  }
  return {
    config,
    weight: async (spec) => {
      const file = fileOf(spec.name)!;
      let st = open.get(file);
      if (!st) {
        st = parseSafetensors(await src.read(file), file);
        open.set(file, st);
      }
      if (!st.has(spec.name)) throw new ModelFormatError(file, `tensor '${spec.name}' is missing`);
      const info = st.info(spec.name);
      if (info.shape.length !== spec.shape.length || info.shape.some((d, i) => d !== spec.shape[i]))
        throw new ModelFormatError(file, `tensor '${spec.name}' has shape [${info.shape}] but ${CONFIG_FILE} implies [${spec.shape}]`);
      const data = st.float32(spec.name);
      const bad = countNonFinite(data);
      if (bad.count) throw new ModelFormatError(file, `tensor '${spec.name}' holds ${bad.count} non-finite values (NaN or ±Inf; first at index ${bad.first}) of ${data.length}`);
      const left = remaining.get(file)! - 1;
      remaining.set(file, left);
      if (left === 0) open.delete(file);
      return { kind: 'f32', shape: [...spec.shape], data };
    },
  };
}

/** Host weights -> model.safetensors bytes (F32; quantized weights are dequantized). */
export function toSafetensors(c: Qwen3Config, host: HostWeights): Uint8Array {
  const out: Record<string, TensorToWrite> = {};
  for (const spec of weightSpecs(c)) {
    const w = host.get(spec.name);
    if (!w) throw new Error(`toSafetensors: no weight '${spec.name}'`);
    out[spec.name] = { dtype: 'F32', shape: spec.shape, data: w.kind === 'f32' ? w.data : dequantize(w) };
  }
  return writeSafetensors(out, { format: 'pt' });
}

/** A weight as f32 (N,K) or (C), dequantizing if needed. */
export function denseOf(w: HostWeight): Float32Array {
  return w.kind === 'f32' ? w.data : dequantize(w);
}
