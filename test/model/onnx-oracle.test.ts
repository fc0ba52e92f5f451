// The independent oracle: our CPU reference forward equals onnxruntime-web (wasm) running the same
// model exported to ONNX, for prefill and KV-cached decode, f32 and q4 (MatMulNBits) weights.
import { describe, expect, it } from 'vitest';
import * as ort from 'onnxruntime-web';
import { CpuRefBackend } from '../../src/engine/cpu/ref';
import { buildQwen3 } from '../../src/model/weights';
import { randomWeights } from '../../src/model/random';
import { forward, KvCache } from '../../src/model/qwen3';
import { exportQwen3Onnx, pastKey, pastValue, presentKey, presentValue } from '../../src/model/onnx/export';
import { tinyConfig } from '../fixtures/tiny-model';
import type { Qwen3Config } from '../../src/model/config';
import { Rng } from '../../src/util/rng';
import { createLoraAdapter, LORA_MODULE, mergeLora } from '../../src/model/lora';
import { denseOf } from '../../src/model/weights';

ort.env.wasm.numThreads = 1;

function relErr(a: Float32Array, b: Float32Array): number {
  expect(a.length).toBe(b.length);
  let num = 0;
  let den = 0;
  for (let i = 0; i < a.length; i++) ((num += (a[i] - b[i]) ** 2), (den += b[i] ** 2));
  return Math.sqrt(num / den);
}

async function check(c: Qwen3Config, format: 'f32' | 'q4', seed: number) {
  const { model, host } = await buildQwen3(new CpuRefBackend(), c, randomWeights(c, seed, 'f32'), { format, keepHost: true });
  const r = new Rng(seed + 1);
  const ids = Int32Array.from({ length: 9 }, () => r.int(c.vocabSize));
  const T = ids.length;
  const cpu = forward(model, new KvCache(model, 1, 16), { ids, slot: new Int32Array(T), pos: Int32Array.from(ids, (_, i) => i) });
  const want = (await model.backend.read(cpu.logits)) as Float32Array;

  const onnx = exportQwen3Onnx(c, host!, { weights: format });
  const nbits = new TextDecoder('latin1').decode(onnx).split('MatMulNBits').length - 1;
  // q4: every linear map and lm_head run as MatMulNBits (op_type and node name each spell it once).
  expect(nbits).toBe(format === 'q4' ? 2 * (7 * c.numLayers + 1) : 0);
  // ...and the q4 embedding table is gathered as is (GatherBlockQuantized, default zero point 8).
  expect(new TextDecoder('latin1').decode(onnx).includes('GatherBlockQuantized')).toBe(format === 'q4');
  const session = await ort.InferenceSession.create(onnx);
  const feeds = (part: Int32Array, past: (l: number, kind: 'k' | 'v') => ort.Tensor) => {
    const f: Record<string, ort.Tensor> = { input_ids: new ort.Tensor('int64', BigInt64Array.from(part, (v) => BigInt(v)), [part.length]) };
    for (let l = 0; l < c.numLayers; l++) ((f[pastKey(l)] = past(l, 'k')), (f[pastValue(l)] = past(l, 'v')));
    return f;
  };
  const empty = () => new ort.Tensor('float32', new Float32Array(0), [c.numKvHeads, 0, c.headDim]);
  // Full prefill.
  const full = await session.run(feeds(ids, empty));
  const e = relErr(full.logits.data as Float32Array, want);
  // Prefill 5 tokens, then decode the remaining 4 one at a time through present -> past.
  let out = await session.run(feeds(ids.subarray(0, 5), empty));
  const rows: Float32Array[] = [out.logits.data as Float32Array];
  for (let t = 5; t < T; t++) {
    const prev = out;
    out = await session.run(feeds(ids.subarray(t, t + 1), (l, kind) => prev[kind === 'k' ? presentKey(l) : presentValue(l)]));
    rows.push(out.logits.data as Float32Array);
  }
  const stitched = new Float32Array(want.length);
  let o = 0;
  for (const row of rows) (stitched.set(row, o), (o += row.length));
  const eDecode = relErr(stitched, want);
  // The 'last' variant returns the last row only, the same values.
  const last = await ort.InferenceSession.create(exportQwen3Onnx(c, host!, { weights: format, logits: 'last', maxPositions: 16 }));
  const lastRow = (await last.run(feeds(ids, empty))).logits;
  expect(lastRow.dims).toEqual([1, c.vocabSize]);
  expect(relErr(lastRow.data as Float32Array, want.subarray((T - 1) * c.vocabSize))).toBeLessThanOrEqual(1e-4);
  await last.release();
  await session.release();
  return { e, eDecode };
}

describe('ONNX oracle (onnxruntime-web wasm)', () => {
  it('f32: CPU reference logits equal ORT on the exported model (relative error <= 1e-4), prefill and decode', async () => {
    const { e, eDecode } = await check(tinyConfig(), 'f32', 31);
    console.log(`ORT vs CPU ref, tiny f32: prefill rel err ${e.toExponential(2)}, decode ${eDecode.toExponential(2)}`);
    expect(e).toBeLessThanOrEqual(1e-4);
    expect(eDecode).toBeLessThanOrEqual(1e-4);
  });

  it('q4 through MatMulNBits (same quantized weights) and an untied lm_head, GQA group 3, K not a multiple of 32', async () => {
    const c = tinyConfig({ tieWordEmbeddings: false, numHeads: 6, numKvHeads: 2, intermediateSize: 40 });
    const { e, eDecode } = await check(c, 'q4', 32);
    console.log(`ORT vs CPU ref, tiny q4: prefill rel err ${e.toExponential(2)}, decode ${eDecode.toExponential(2)}`);
    expect(e).toBeLessThanOrEqual(1e-4);
    expect(eDecode).toBeLessThanOrEqual(1e-4);
  });
});

describe('ONNX export with a LoRA adapter merged', () => {
  it('the merged export equals the CPU reference running base + adapter', async () => {
    const c = tinyConfig();
    const { model, host } = await buildQwen3(new CpuRefBackend(), c, randomWeights(c, 51, 'f32'), { format: 'f32', keepHost: true });
    const adapter = createLoraAdapter(model.backend, c, { name: 'act', rank: 4, alpha: 8, seed: 2 });
    const r = new Rng(3);
    for (const [n, t] of adapter.parameters()) if (n.includes('lora_B')) model.backend.write(t, Float32Array.from({ length: t.shape[0] * t.shape[1] }, () => 0.1 * r.normal()));
    const merged = await mergeLora(model.backend, adapter, (l, t) => denseOf(host!.get(`model.layers.${l}.${LORA_MODULE[t]}.weight`)!), c);
    expect(merged.size).toBe(7 * c.numLayers);
    const mergedHost = new Map(host!);
    for (const [name, data] of merged) mergedHost.set(name, { kind: 'f32', shape: [...(host!.get(name) as { shape: number[] }).shape], data });
    const ids = Int32Array.from({ length: 6 }, () => r.int(c.vocabSize));
    const cpu = forward(model, new KvCache(model, 1, 8), { ids, slot: new Int32Array(6), pos: Int32Array.from(ids, (_, i) => i) }, { adapter });
    const want = (await model.backend.read(cpu.logits)) as Float32Array;
    const base = forward(model, new KvCache(model, 1, 8), { ids, slot: new Int32Array(6), pos: Int32Array.from(ids, (_, i) => i) });
    expect(relErr((await model.backend.read(base.logits)) as Float32Array, want)).toBeGreaterThan(1e-3);
    const session = await ort.InferenceSession.create(exportQwen3Onnx(c, mergedHost, { weights: 'f32', maxPositions: 8 }));
    const f: Record<string, ort.Tensor> = { input_ids: new ort.Tensor('int64', BigInt64Array.from(ids, (v) => BigInt(v)), [6]) };
    for (let l = 0; l < c.numLayers; l++)
      for (const n of [pastKey(l), pastValue(l)]) f[n] = new ort.Tensor('float32', new Float32Array(0), [c.numKvHeads, 0, c.headDim]);
    const got = (await session.run(f)).logits.data as Float32Array;
    const e = relErr(got, want);
    console.log(`ORT (merged LoRA) vs CPU ref (base + adapter): rel err ${e.toExponential(2)}`);
    expect(e).toBeLessThanOrEqual(1e-4);
    await session.release();
  });
});
