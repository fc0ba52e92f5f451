// Quantization schemes: logit error of each against f32 on the same weights and tokens (not speed).
//
// For the bundled model (models/default, a real prompt through its tokenizer) and a random-weight model
// shaped like Qwen3-0.6B (random token ids), every scheme is loaded through the engine's own path
// (buildQwen3: quantize on load, fused-dequantization matmuls on cpu-fast) and its logits at every prompt
// position are compared with the f32 model's:
//   logit_rel_l2  = ||logits - logits_f32|| / ||logits_f32|| over all positions
//   argmax_agree  = fraction of positions whose argmax equals f32's
//   weight_bytes  = bytes of every weight as loaded (quantized data + scales, f32 norms)
// Schemes: q8; q4 with the embedding and LM head at q4 (the old scheme), at q8 (the default) and at f32;
// and, simulated (weights quantized and dequantized in JS, then run in f32), asymmetric q4 (scale + min,
// codes 0..15, groups of 32) with the embedding/head at q8 — to decide by numbers whether to build it.
import os from 'node:os';
import { join } from 'node:path';
import { createBackend } from '../../src/engine/index';
import type { Backend } from '../../src/engine/backend';
import { CpuRefBackend } from '../../src/engine/cpu/ref';
import { quantize, dequantize, quantizedBytes, Q4_GROUP } from '../../src/engine/quant';
import { paramCount, type Qwen3Config } from '../../src/model/config';
import { buildQwen3, loadQwen3, weightSpecs, type HostWeight, type HostWeights, type WeightSpec } from '../../src/model/weights';
import { randomWeights } from '../../src/model/random';
import { forward, KvCache, type Qwen3Model, type WeightFormat } from '../../src/model/qwen3';
import { DirSource } from '../../src/model/source-node';
import { Tokenizer } from '../../src/model/tokenizer';
import { Rng } from '../../src/util/rng';
import type { BenchContext, BenchSuite } from '../lib';

import { QWEN3_06B_SHAPE } from '../../src/model/config';
export { QWEN3_06B_SHAPE };

interface Scheme {
  name: string;
  format: WeightFormat;
  embedFormat?: WeightFormat;
  /** Simulated: every quantizable weight replaced by this function's f32 result, run as f32. */
  simulate?: (spec: WeightSpec, w: Float32Array) => Float32Array;
}

const isTable = (spec: WeightSpec) => spec.name === 'model.embed_tokens.weight' || spec.name === 'lm_head.weight';

/** Asymmetric int4 (scale + min per group of 32, codes 0..15), quantized then dequantized. */
export function asymQ4RoundTrip(w: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(w.length);
  for (let n = 0; n < rows; n++)
    for (let k0 = 0; k0 < cols; k0 += Q4_GROUP) {
      const k1 = Math.min(cols, k0 + Q4_GROUP);
      let lo = Infinity;
      let hi = -Infinity;
      for (let k = k0; k < k1; k++) ((lo = Math.min(lo, w[n * cols + k])), (hi = Math.max(hi, w[n * cols + k])));
      const s = (hi - lo) / 15;
      for (let k = k0; k < k1; k++) {
        const q = s > 0 ? Math.max(0, Math.min(15, Math.round((w[n * cols + k] - lo) / s))) : 0;
        out[n * cols + k] = q * s + lo;
      }
    }
  return out;
}

const SCHEMES: Scheme[] = [
  { name: 'q8', format: 'q8', embedFormat: 'q8' },
  { name: 'q4, embedding+head q4 (old default)', format: 'q4', embedFormat: 'q4' },
  { name: 'q4, embedding+head q8 (default)', format: 'q4' },
  { name: 'q4, embedding+head f32', format: 'q4', embedFormat: 'f32' },
  {
    name: 'q4 asymmetric (simulated), embedding+head q8',
    format: 'f32',
    simulate: (spec, w) => {
      const [N, K] = spec.shape as [number, number];
      return isTable(spec) ? dequantize(quantize(w, N, K, 'q8')) : asymQ4RoundTrip(w, N, K);
    },
  },
];

function relL2(a: Float32Array, b: Float32Array): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < a.length; i++) ((num += (a[i] - b[i]) ** 2), (den += b[i] ** 2));
  return Math.sqrt(num / den);
}

function argmaxAgree(a: Float32Array, b: Float32Array, V: number): number {
  let same = 0;
  const T = a.length / V;
  const am = (x: Float32Array, t: number) => {
    let best = 0;
    for (let i = 1; i < V; i++) if (x[t * V + i] > x[t * V + best]) best = i;
    return best;
  };
  for (let t = 0; t < T; t++) if (am(a, t) === am(b, t)) same++;
  return same / T;
}

async function logits(model: Qwen3Model, ids: Int32Array): Promise<Float32Array> {
  const cache = new KvCache(model, 1, ids.length);
  const r = forward(model, cache, { ids, slot: new Int32Array(ids.length), pos: Int32Array.from(ids, (_, i) => i) });
  const out = (await model.backend.read(r.logits)) as Float32Array;
  model.backend.free(r.logits);
  cache.free();
  return out;
}

function hostBytes(w: HostWeight): number {
  return w.kind === 'f32' ? w.data.byteLength : quantizedBytes(w);
}

/** Measure every scheme on one model; `host` holds f32 weights. */
async function measure(ctx: BenchContext, name: string, c: Qwen3Config, host: HostWeights, ids: Int32Array, make: () => Promise<Backend>, threads: number): Promise<void> {
  let ref: Float32Array;
  {
    const b = await make();
    const { model } = await buildQwen3(b, c, (spec) => host.get(spec.name)!, { format: 'f32' });
    ref = await logits(model, ids);
    model.free();
    b.dispose();
  }
  const shape = `tokens=${ids.length}`;
  for (const s of SCHEMES) {
    const t0 = performance.now();
    const b = await make();
    try {
      const next = s.simulate
        ? (spec: WeightSpec): HostWeight => {
            const w = host.get(spec.name) as { kind: 'f32'; shape: number[]; data: Float32Array };
            return spec.quantizable ? { kind: 'f32', shape: w.shape, data: s.simulate!(spec, w.data) } : w;
          }
        : (spec: WeightSpec) => host.get(spec.name)!;
      const { model, host: loaded } = await buildQwen3(b, c, next, { format: s.format, embedFormat: s.embedFormat, keepHost: !s.simulate });
      const out = await logits(model, ids);
      model.free();
      const e = relL2(out, ref);
      const agree = argmaxAgree(out, ref, c.vocabSize);
      ctx.record({ case: s.name, backend: 'cpu-fast', metric: 'logit_rel_l2', value: e, unit: 'ratio', threads, shape, model: name });
      ctx.record({ case: s.name, backend: 'cpu-fast', metric: 'argmax_agree', value: agree, unit: 'fraction', threads, shape, model: name });
      if (loaded) {
        const bytes = [...loaded.values()].reduce((a, w) => a + hostBytes(w), 0);
        ctx.record({ case: s.name, backend: 'cpu-fast', metric: 'weight_bytes', value: bytes, unit: 'B', threads, shape, model: name });
      }
      ctx.log(
        `${name} ${s.name}: logits rel. L2 error ${e.toExponential(3)}, argmax ${Math.round(agree * ids.length)}/${ids.length} (${((performance.now() - t0) / 1000).toFixed(1)} s)`,
      );
    } finally {
      b.dispose();
    }
  }
}

const suite: BenchSuite = {
  name: 'quant',
  async run(ctx) {
    const threads = Number(process.env.BENCH_THREADS ?? Math.min(os.cpus().length, 4));
    const make = () => createBackend('cpu-fast', { threads });
    const only = process.env.BENCH_MODELS?.split(',').filter(Boolean);
    const want = (n: string) => !only || only.some((o) => n.includes(o));

    if (want('bundled')) {
      const dir = join(import.meta.dirname, '../../models/default');
      const src = new DirSource(dir);
      const { model, host } = await loadQwen3(src, new CpuRefBackend(), { format: 'f32', keepHost: true });
      model.free();
      const tok = await Tokenizer.load(src);
      // A user turn as the policy sees it: ids, an email, a product — the values the model must copy.
      const text =
        "<|im_start|>user\nHi! I'd like to return the water bottle and the desk lamp from order #W2378156. My email is yusuf.rossi9620@example.com and my zip code is 19122. Please refund to my original credit card.<|im_end|>\n<|im_start|>assistant\n";
      const ids = Int32Array.from(tok.encode(text));
      ctx.log(`bundled: ${(paramCount(model.config) / 1e6).toFixed(2)}M parameters, ${ids.length} prompt tokens`);
      await measure(ctx, 'bundled', model.config, host!, ids, make, threads);
    }

    if (want('0.6b')) {
      const c = QWEN3_06B_SHAPE;
      const name = 'qwen3-0.6b-shape-random';
      ctx.log(`${name}: ${(paramCount(c) / 1e6).toFixed(0)}M parameters; generating f32 weights`);
      const t0 = performance.now();
      const gen = randomWeights(c, 1, 'f32', { dist: 'uniform' });
      const host: HostWeights = new Map(weightSpecs(c).map((spec) => [spec.name, gen(spec)]));
      ctx.log(`${name}: weights ready in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
      const r = new Rng(5);
      const ids = Int32Array.from({ length: ctx.quick ? 8 : 16 }, () => r.int(c.vocabSize));
      await measure(ctx, name, c, host, ids, make, threads);
    }
  },
};

export default suite;
