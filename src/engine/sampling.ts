// The sampling rule, written once on the host for the CPU backends; the WGSL sampler implements the
// same rule (src/engine/webgpu). Given one row of logits:
//  - temperature 0: argmax (lowest index on ties); logprob = log_softmax(logits)[token].
//  - else p = softmax(logits / t). Nucleus: tau = the smallest probability among the fewest
//    highest-probability tokens whose mass reaches topP; keep every token with p >= tau.
//    u = uniform(seed, step); walk the kept tokens in index order and take the first whose running
//    mass exceeds u * keptMass. logprob = log p[token] (before the nucleus renormalisation).
import { uniform } from '../util/rng';
import type { SampleParams } from './backend';

/** log_softmax(row / t) at any index (t = temperature, 1 when greedy), and the argmax (lowest index on ties). */
function logSoftmax(row: ArrayLike<number>, temperature: number): { logp: (i: number) => number; arg: number } {
  const t = temperature > 0 ? temperature : 1;
  let max = -Infinity;
  let arg = 0;
  for (let i = 0; i < row.length; i++) if (row[i] > max) ((max = row[i]), (arg = i));
  let sum = 0;
  for (let i = 0; i < row.length; i++) sum += Math.exp((row[i] - max) / t);
  const logZ = Math.log(sum);
  return { logp: (i) => (row[i] - max) / t - logZ, arg };
}

export function sampleRow(row: ArrayLike<number>, p: SampleParams): { token: number; logprob: number } {
  const V = row.length;
  const { logp, arg } = logSoftmax(row, p.temperature);
  if (p.temperature <= 0) return { token: arg, logprob: logp(arg) };

  const probs = new Float64Array(V);
  for (let i = 0; i < V; i++) probs[i] = Math.exp(logp(i));
  let tau = 0;
  if (p.topP < 1) {
    const sorted = Float64Array.from(probs).sort().reverse();
    let cum = 0;
    for (let i = 0; i < V; i++) {
      cum += sorted[i];
      tau = sorted[i];
      if (cum >= p.topP) break;
    }
  }
  let kept = 0;
  for (let i = 0; i < V; i++) if (probs[i] >= tau) kept += probs[i];
  const target = uniform(p.seed, p.step) * kept;
  let cum = 0;
  let token = -1;
  for (let i = 0; i < V; i++) {
    if (probs[i] < tau) continue;
    cum += probs[i];
    token = i;
    if (cum > target) break;
  }
  return { token, logprob: logp(token) };
}

/** log p(token) under softmax(row / t), t = temperature (1 when greedy): the logprob sampleRow reports. */
export function tokenLogprob(row: ArrayLike<number>, token: number, temperature: number): number {
  return logSoftmax(row, temperature).logp(token);
}
