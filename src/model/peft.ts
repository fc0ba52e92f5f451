// LoRA adapters in PEFT's on-disk layout, so an adapter trained here opens in the Python ecosystem
// (peft.PeftModel.from_pretrained) and one trained there loads here:
//   adapter_config.json        {"peft_type": "LORA", "r", "lora_alpha", "target_modules", ...}
//   adapter_model.safetensors  base_model.model.model.layers.N.<module>.lora_{A,B}.weight, F32
// Bytes in, bytes out: the same functions serve Node (DirSource / writeFile) and the browser
// (FileMapSource / OPFS). Values are stored as F32, so a save/load round trip is bit-exact.
import type { Backend } from '../engine/backend';
import { ModelFormatError } from '../engine/errors';
import type { Qwen3Config } from './config';
import { LORA_MODULE, LORA_TARGETS, LoraAdapter, targetShape, type LoraPair, type LoraTarget } from './lora';
import { parseSafetensors, writeSafetensors, type TensorToWrite } from './safetensors';
import { countNonFinite } from './weights';
import { readJson, type ModelSource } from './source';

export const ADAPTER_CONFIG = 'adapter_config.json';
export const ADAPTER_WEIGHTS = 'adapter_model.safetensors';

/** adapter_config.json fields this engine does not implement; set to anything but null/empty/false, they are refused. */
export const UNSUPPORTED_FIELDS = ['layers_to_transform', 'layers_pattern', 'exclude_modules', 'modules_to_save', 'layer_replication', 'target_parameters', 'trainable_token_indices', 'lora_bias', 'use_qalora'] as const;

/** PEFT's target_modules entry of each target: the last part of the module path (q_proj, ...). */
const shortName = (t: LoraTarget) => LORA_MODULE[t].split('.').pop()!;

export interface PeftSaveOptions {
  /** Written as base_model_name_or_path (PEFT uses it to find the base model). */
  baseModel?: string;
}

/** The two files of an adapter, by name. Reads the adapter tensors back from the backend. */
export async function adapterToPeftFiles(backend: Backend, a: LoraAdapter, o: PeftSaveOptions = {}): Promise<Map<string, Uint8Array>> {
  const config = {
    peft_type: 'LORA',
    task_type: 'CAUSAL_LM',
    base_model_name_or_path: o.baseModel ?? null,
    r: a.rank,
    lora_alpha: a.alpha,
    lora_dropout: 0,
    target_modules: a.targets.map(shortName),
    bias: 'none',
    fan_in_fan_out: false,
    use_rslora: false,
    use_dora: false,
    init_lora_weights: true,
    inference_mode: true,
    modules_to_save: null,
    layers_to_transform: null,
    rank_pattern: {},
    alpha_pattern: {},
  };
  const tensors: Record<string, TensorToWrite> = {};
  for (const [name, t] of a.parameters()) {
    const data = await backend.read(t);
    if (!(data instanceof Float32Array)) throw new Error(`adapter tensor ${name} is not f32`);
    tensors[name] = { dtype: 'F32', shape: [...t.shape], data };
  }
  return new Map([
    [ADAPTER_CONFIG, new TextEncoder().encode(JSON.stringify(config, null, 2) + '\n')],
    [ADAPTER_WEIGHTS, writeSafetensors(tensors, { format: 'pt', adapter_name: a.name })],
  ]);
}

/**
 * Load a PEFT LoRA adapter for a Qwen3 model of config `c`. Refuses (ModelFormatError naming the file)
 * anything this engine would run differently from PEFT: rsLoRA or DoRA, per-module rank/alpha
 * patterns, biases, unknown target modules, tensors with the wrong shape, missing or extra tensors.
 */
export async function loadPeftAdapter(backend: Backend, c: Qwen3Config, source: ModelSource, name = 'adapter'): Promise<LoraAdapter> {
  const raw = (await readJson(source, ADAPTER_CONFIG)) as Record<string, unknown>;
  const bad = (why: string): never => {
    throw new ModelFormatError(ADAPTER_CONFIG, why);
  };
  if (typeof raw !== 'object' || raw === null) bad('expected a JSON object');
  if (raw.peft_type !== 'LORA') bad(`peft_type is ${JSON.stringify(raw.peft_type)}, expected "LORA"`);
  const r = raw.r;
  const alpha = raw.lora_alpha;
  if (typeof r !== 'number' || !Number.isInteger(r) || r <= 0) bad(`r must be a positive integer (got ${JSON.stringify(r)})`);
  if (typeof alpha !== 'number' || !(alpha > 0)) bad(`lora_alpha must be a positive number (got ${JSON.stringify(alpha)})`);
  if (raw.use_rslora === true) bad('use_rslora=true is not supported (scaling alpha/sqrt(r))');
  if (raw.use_dora === true) bad('use_dora=true is not supported');
  if (raw.bias !== undefined && raw.bias !== 'none') bad(`bias=${JSON.stringify(raw.bias)} is not supported (only "none")`);
  if (raw.fan_in_fan_out === true) bad('fan_in_fan_out=true is not supported');
  for (const k of ['rank_pattern', 'alpha_pattern'] as const)
    if (raw[k] && typeof raw[k] === 'object' && Object.keys(raw[k] as object).length) bad(`${k} is not supported`);
  // Fields that would make PEFT apply the adapter differently (to fewer layers or modules, or to extra
  // parameters); ignoring them would run an adapter on every layer that was trained on a few.
  for (const k of UNSUPPORTED_FIELDS) {
    const x = raw[k];
    const set = x !== undefined && x !== null && x !== false && !(Array.isArray(x) && x.length === 0) && !(typeof x === 'object' && !Array.isArray(x) && Object.keys(x as object).length === 0) && x !== '';
    if (set) bad(`${k}=${JSON.stringify(x)} is not supported (this engine applies the adapter to every layer's target modules)`);
  }
  const tm = raw.target_modules;
  const names: string[] = typeof tm === 'string' ? [tm] : Array.isArray(tm) ? tm.map(String) : bad('target_modules must be a list of module names');
  const targets: LoraTarget[] = [];
  for (const n of names) {
    const t = LORA_TARGETS.find((x) => shortName(x) === n || LORA_MODULE[x] === n);
    if (!t) bad(`target module '${n}' is not one of ${LORA_TARGETS.map(shortName).join(', ')}`);
    else if (!targets.includes(t)) targets.push(t);
  }
  // Keep the model's canonical order so parameters() enumerates the same way after a round trip.
  targets.sort((x, y) => LORA_TARGETS.indexOf(x) - LORA_TARGETS.indexOf(y));

  const st = parseSafetensors(await source.read(ADAPTER_WEIGHTS), ADAPTER_WEIGHTS);
  const seen = new Set<string>();
  const tensor = (tname: string, shape: [number, number]) => {
    const info = st.info(tname);
    if (info.shape.length !== 2 || info.shape[0] !== shape[0] || info.shape[1] !== shape[1])
      throw new ModelFormatError(ADAPTER_WEIGHTS, `tensor '${tname}' has shape [${info.shape}], expected [${shape}]`);
    seen.add(tname);
    const data = st.float32(tname);
    const bad = countNonFinite(data);
    if (bad.count) throw new ModelFormatError(ADAPTER_WEIGHTS, `tensor '${tname}' holds ${bad.count} non-finite values (NaN or ±Inf; first at index ${bad.first})`);
    return backend.tensor(data, shape);
  };
  const layers: Partial<Record<LoraTarget, LoraPair>>[] = [];
  for (let l = 0; l < c.numLayers; l++) {
    const slot: Partial<Record<LoraTarget, LoraPair>> = {};
    for (const t of targets) {
      const [N, K] = targetShape(c, t);
      const base = `base_model.model.model.layers.${l}.${LORA_MODULE[t]}`;
      slot[t] = { A: tensor(`${base}.lora_A.weight`, [r as number, K]), B: tensor(`${base}.lora_B.weight`, [N, r as number]) };
    }
    layers.push(slot);
  }
  const extra = [...st.tensors.keys()].filter((k) => !seen.has(k));
  if (extra.length) throw new ModelFormatError(ADAPTER_WEIGHTS, `unexpected tensors for this model: ${extra.slice(0, 3).join(', ')}${extra.length > 3 ? ', ...' : ''}`);
  return new LoraAdapter(name, r as number, alpha as number, targets, layers);
}
