// LoRA adapters on the seven linear maps of every layer (q, k, v, o, gate, up, down):
//   y = x W^T + (alpha/r) * (x A^T) B^T,   A (r,K) random, B (N,r) zero.
// B starts at zero, so a fresh adapter changes nothing, bit for bit: (x A^T) B^T is exactly 0 and
// y + 0 = y. Several named adapters can live next to one base model (e.g. one per role in the
// per-role mode); passing `null` where an adapter is accepted runs the base model (the reference
// policy of the KL term).
import type { Backend, Tensor } from '../engine/backend';
import { Rng } from '../util/rng';
import type { Qwen3Config } from './config';

export const LORA_TARGETS = ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] as const;
export type LoraTarget = (typeof LORA_TARGETS)[number];

/** The HF module name of each target (PEFT's target_modules). */
export const LORA_MODULE: Record<LoraTarget, string> = {
  q: 'self_attn.q_proj',
  k: 'self_attn.k_proj',
  v: 'self_attn.v_proj',
  o: 'self_attn.o_proj',
  gate: 'mlp.gate_proj',
  up: 'mlp.up_proj',
  down: 'mlp.down_proj',
};

export interface LoraPair {
  /** (r,K) */
  A: Tensor;
  /** (N,r) */
  B: Tensor;
}

export interface LoraOptions {
  name: string;
  rank: number;
  alpha: number;
  targets?: readonly LoraTarget[];
  seed: number;
}

/** (N,K) of each target's base weight. */
export function targetShape(c: Qwen3Config, t: LoraTarget): [number, number] {
  const d = c.hiddenSize;
  const q = c.numHeads * c.headDim;
  const kv = c.numKvHeads * c.headDim;
  const f = c.intermediateSize;
  switch (t) {
    case 'q':
      return [q, d];
    case 'k':
    case 'v':
      return [kv, d];
    case 'o':
      return [d, q];
    case 'gate':
    case 'up':
      return [f, d];
    case 'down':
      return [d, f];
  }
}

export class LoraAdapter {
  readonly scaling: number;
  constructor(
    readonly name: string,
    readonly rank: number,
    readonly alpha: number,
    readonly targets: readonly LoraTarget[],
    /** layers[l][target] */
    readonly layers: Partial<Record<LoraTarget, LoraPair>>[],
  ) {
    this.scaling = alpha / rank;
  }

  pair(layer: number, t: LoraTarget): LoraPair | undefined {
    return this.layers[layer]?.[t];
  }

  /** Every parameter tensor with its PEFT name, A before B. */
  *parameters(): Generator<[string, Tensor]> {
    for (let l = 0; l < this.layers.length; l++)
      for (const t of this.targets) {
        const p = this.layers[l][t];
        if (!p) continue;
        const base = `base_model.model.model.layers.${l}.${LORA_MODULE[t]}`;
        yield [`${base}.lora_A.weight`, p.A];
        yield [`${base}.lora_B.weight`, p.B];
      }
  }

  free(backend: Backend): void {
    for (const [, t] of this.parameters()) backend.free(t);
  }
}

/**
 * A fresh adapter. A ~ U(-1/sqrt(K), 1/sqrt(K)) (what PyTorch's kaiming_uniform_(a=sqrt(5)) gives,
 * PEFT's default), drawn from one seeded stream in a fixed order (layer, target, row, col); B = 0.
 */
export function createLoraAdapter(backend: Backend, c: Qwen3Config, o: LoraOptions): LoraAdapter {
  if (!(Number.isInteger(o.rank) && o.rank > 0)) throw new Error(`LoRA rank must be a positive integer, got ${o.rank}`);
  const targets = o.targets ?? LORA_TARGETS;
  const rng = new Rng(o.seed);
  const layers: Partial<Record<LoraTarget, LoraPair>>[] = [];
  for (let l = 0; l < c.numLayers; l++) {
    const slot: Partial<Record<LoraTarget, LoraPair>> = {};
    for (const t of targets) {
      const [N, K] = targetShape(c, t);
      const bound = 1 / Math.sqrt(K);
      const a = new Float32Array(o.rank * K);
      for (let i = 0; i < a.length; i++) a[i] = (2 * rng.next() - 1) * bound;
      slot[t] = { A: backend.tensor(a, [o.rank, K]), B: backend.zeros([N, o.rank]) };
    }
    layers.push(slot);
  }
  return new LoraAdapter(o.name, o.rank, o.alpha, targets, layers);
}

/**
 * Fold an adapter into f32 copies of the base weights: W' = W + (alpha/r) B A, so the merged model
 * alone computes what base + adapter computes (e.g. for an ONNX export). `weights` gives each
 * target's (N,K) base weight, dequantized; returns the merged (N,K) weights by HF name.
 */
export async function mergeLora(
  backend: Backend,
  adapter: LoraAdapter,
  weight: (layer: number, t: LoraTarget) => Float32Array,
  c: Qwen3Config,
): Promise<Map<string, Float32Array>> {
  const out = new Map<string, Float32Array>();
  for (let l = 0; l < adapter.layers.length; l++)
    for (const t of adapter.targets) {
      const p = adapter.pair(l, t);
      if (!p) continue;
      const [N, K] = targetShape(c, t);
      const r = adapter.rank;
      const A = (await backend.read(p.A)) as Float32Array; // (r,K)
      const B = (await backend.read(p.B)) as Float32Array; // (N,r)
      const W = Float32Array.from(weight(l, t)); // (N,K)
      for (let n = 0; n < N; n++)
        for (let k = 0; k < K; k++) {
          let acc = 0;
          for (let j = 0; j < r; j++) acc += B[n * r + j] * A[j * K + k];
          W[n * K + k] += adapter.scaling * acc;
        }
      out.set(`model.layers.${l}.${LORA_MODULE[t]}.weight`, W);
    }
  return out;
}
