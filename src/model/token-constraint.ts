// A sequence's constraint on the tokens it may draw next (structured rehearsal's grammar, src/rollout/rehearse-constraint.ts),
// and how generate() applies one: masked logits on the backend before sampling, or the same rule on the host for a
// greedy choice among a draft's rows.
import type { Backend, Tensor } from '../engine/backend';

/**
 * Which tokens a sequence may draw next. The masked tokens' logits become -Infinity before sampling, so
 * greedy picks the best allowed token and sampling draws from the distribution renormalised over the
 * allowed ones; the reported log-probabilities stay the model's own (before the mask).
 */
export interface TokenConstraint {
  /** mask[id] = 1 where token id may come next (ids past the mask's length may not); null = any token. */
  allowed(): Uint8Array | null;
  /** The token that was drawn. */
  push(token: number): void;
}

/**
 * Greedy decoding's choice from one row of logits under a mask, on the host: the sampler's rule (src/engine/sampling.ts)
 * on the row masked as applyConstraints masks it: the first maximum among the allowed tokens (a NaN never wins), 0 when
 * none is above -Infinity.
 */
export function greedyChoice(row: Float32Array, mask: Uint8Array | null): number {
  let best = -Infinity;
  let arg = 0;
  for (let v = 0; v < row.length; v++) if ((!mask || (v < mask.length && mask[v])) && row[v] > best) ((best = row[v]), (arg = v));
  return arg;
}

/** logits (R,V) -> logits with -Infinity where a row's mask forbids a token; the same tensor when no row has one. */
export function applyConstraints(b: Backend, logits: Tensor, masks: readonly (Uint8Array | null)[]): Tensor {
  if (masks.every((m) => m === null)) return logits;
  const V = logits.shape[1];
  const bias = new Float32Array(masks.length * V);
  masks.forEach((m, r) => {
    if (m) for (let v = 0; v < V; v++) if (!(v < m.length && m[v])) bias[r * V + v] = -Infinity;
  });
  const t = b.tensor(bias, [masks.length, V]);
  const out = b.add(logits, t);
  b.free(t);
  return out;
}
