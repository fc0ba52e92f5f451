// What a training run updates: a list of named f32 parameters, each with its gradient and AdamW
// moments. LoRA mode: the A/B matrices of one adapter (the base stays frozen, in any format).
// Full-parameter mode: every weight of an f32 model (the tied embedding appears once).
import type { Backend, Tensor } from '../engine/backend';
import { EngineError } from '../engine/errors';
import type { LoraAdapter } from '../model/lora';
import type { LayerWeights, Qwen3Model } from '../model/qwen3';
import { layerWeightName, type HostWeights } from '../model/weights';

export interface Param {
  /** PEFT / Hugging Face name (used for reports and optimizer-state files). */
  name: string;
  param: Tensor;
  grad: Tensor;
  m: Tensor;
  v: Tensor;
}

export class ParamSet {
  /** weight tensor -> its gradient; frozen weights are absent. */
  readonly gradOf = new Map<Tensor, Tensor>();
  constructor(
    readonly backend: Backend,
    readonly params: Param[],
  ) {
    for (const p of params) this.gradOf.set(p.param, p.grad);
  }

  grad(w: Tensor): Tensor | null {
    return this.gradOf.get(w) ?? null;
  }

  get count(): number {
    return this.params.reduce((a, p) => a + p.param.shape.reduce((x, y) => x * y, 1), 0);
  }

  free(): void {
    for (const p of this.params) for (const t of [p.grad, p.m, p.v]) this.backend.free(t);
  }
}

function makeParam(b: Backend, name: string, param: Tensor): Param {
  if (param.dtype !== 'f32') throw new EngineError('unsupported', `parameter ${name} is ${param.dtype}; only f32 weights can be trained`);
  // A model's weights are uploaded frozen (src/model/weights.ts); a trained one changes every step.
  b.unfreeze?.(param);
  return { name, param, grad: b.zeros(param.shape), m: b.zeros(param.shape), v: b.zeros(param.shape) };
}

/** The A/B matrices of an adapter, in PEFT naming. */
export function loraParams(b: Backend, adapter: LoraAdapter): ParamSet {
  return new ParamSet(b, [...adapter.parameters()].map(([name, t]) => makeParam(b, name, t)));
}

/** Every weight of an f32 model. A quantized model cannot be trained in full (its weights are not f32). */
export function fullParams(model: Qwen3Model): ParamSet {
  const b = model.backend;
  if (model.format !== 'f32') throw new EngineError('unsupported', `full-parameter training needs an f32 model (this one is ${model.format}); use LoRA`);
  const w = model.weights;
  const ps: Param[] = [makeParam(b, 'model.embed_tokens.weight', w.embed)];
  w.layers.forEach((lw, l) => {
    for (const key of Object.keys(lw) as (keyof LayerWeights)[]) ps.push(makeParam(b, layerWeightName(l, key), lw[key]));
  });
  ps.push(makeParam(b, 'model.norm.weight', w.finalNorm));
  if (w.lmHead !== w.embed) ps.push(makeParam(b, 'lm_head.weight', w.lmHead));
  return new ParamSet(b, ps);
}

/** The parameters' current values as host f32 arrays under their names (full mode: a whole HF checkpoint). */
export async function hostWeights(ps: ParamSet): Promise<HostWeights> {
  const out: HostWeights = new Map();
  for (const p of ps.params) out.set(p.name, { kind: 'f32', shape: [...p.param.shape], data: Float32Array.from((await ps.backend.read(p.param)) as Float32Array) });
  return out;
}
