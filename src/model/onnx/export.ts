// Export a Qwen3 model to ONNX with standard ops, for onnxruntime-web: the independent oracle of our
// forward pass and the side-by-side speed baseline.
//
// The graph runs one sequence: input_ids (T) int64 plus, per layer, the past keys/values (Hkv,P,D)
// (P = 0 for a prefill); it returns logits (T,V) and the present keys/values (Hkv,P+T,D), so the same
// model serves prefill and KV-cached decode. RoPE uses cos/sin tables computed here in f64 (like the CPU
// reference); the causal mask is built from positions P..P+T-1.
//
// Weights: 'f32' exports every matrix dequantized to f32 (Gemm with transB, so W keeps HF's (N,K)
// layout). 'q4' keeps our q4 weights as com.microsoft MatMulNBits (bits 4, block 32, no zero-point
// input = zero point 8): its uint8 blob per row is exactly our u32 words' bytes (lowest nibble first),
// its scales our (N, K/32) scales, so ORT multiplies the very same quantized weights. A q4 embedding
// is gathered with com.microsoft GatherBlockQuantized (same bytes, default zero point 8) when its
// width is a multiple of 32, else from a dequantized f32 table. Under 'q4', q8 weights (the embedding and
// LM head a q4 model keeps at q8 by default) run as MatMulNBits / GatherBlockQuantized with bits 8: each
// value stored as q+128 (the default zero point for 8 bits), blocks of 32 along K sharing the row's scale,
// so ORT again multiplies the very same quantized values.
import { dequantize, Q4_GROUP, type QuantizedWeight } from '../../engine/quant';
import type { Qwen3Config } from '../config';
import type { HostWeight, HostWeights } from '../weights';
import { layerWeightName } from '../weights';
import { OnnxGraph } from './graph';

export interface ExportOptions {
  weights: 'f32' | 'q4';
  /** Rows of the RoPE tables = the longest sequence the graph accepts. Default: config.maxPositionEmbeddings. */
  maxPositions?: number;
  /** 'last': logits (1,V) of the last token only (what generation needs); default 'all' (T,V). */
  logits?: 'all' | 'last';
}

export const pastKey = (l: number) => `past_key.${l}`;
export const pastValue = (l: number) => `past_value.${l}`;
export const presentKey = (l: number) => `present_key.${l}`;
export const presentValue = (l: number) => `present_value.${l}`;

const dense = (w: HostWeight): Float32Array => (w.kind === 'f32' ? w.data : dequantize(w));
const i64 = (...v: number[]) => BigInt64Array.from(v.map(BigInt));

export function exportQwen3Onnx(c: Qwen3Config, host: HostWeights, opts: ExportOptions): Uint8Array {
  const g = new OnnxGraph(17, 'qwen3');
  const [d, Hq, Hkv, D, V] = [c.hiddenSize, c.numHeads, c.numKvHeads, c.headDim, c.vocabSize];
  const get = (name: string) => {
    const w = host.get(name);
    if (!w) throw new Error(`exportQwen3Onnx: no weight '${name}'`);
    return w;
  };
  const consts = new Map<string, string>();
  const constI64 = (...v: number[]) => {
    const key = `i64:${v.join(',')}`;
    if (!consts.has(key)) {
      const name = g.fresh('c_i64');
      g.addInitializer(name, i64(...v), [v.length]);
      consts.set(key, name);
    }
    return consts.get(key)!;
  };
  const scalarI64 = (v: number) => {
    const name = g.fresh('s_i64');
    g.addInitializer(name, i64(v), []);
    return name;
  };
  const scalarF32 = (v: number) => {
    const name = g.fresh('s_f32');
    g.addInitializer(name, new Float32Array([v]), []);
    return name;
  };

  /** x (T,K) -> (T,N) through weight `name` (N,K). */
  const linear = (x: string, name: string): string => {
    const w = get(name);
    if (opts.weights === 'q4' && w.kind !== 'f32') return matMulNBits(g, x, name, w);
    g.addInitializer(name, dense(w), [w.kind === 'f32' ? w.shape[0] : w.rows, w.kind === 'f32' ? w.shape[1] : w.cols]);
    return g.op('Gemm', [x, name], { transB: 1 });
  };
  const eps = scalarF32(c.rmsNormEps);
  /** x (...,C) * rsqrt(mean(x^2) + eps) * w */
  const rmsnorm = (x: string, wName: string): string => {
    const w = get(wName);
    g.addInitializer(wName, dense(w), [w.kind === 'f32' ? w.shape[0] : w.rows]);
    const ms = g.op('ReduceMean', [g.op('Mul', [x, x])], { axes: [-1], keepdims: 1 });
    const inv = g.op('Reciprocal', [g.op('Sqrt', [g.op('Add', [ms, eps])])]);
    return g.op('Mul', [g.op('Mul', [x, inv]), wName]);
  };

  // ---- inputs, positions, RoPE tables, mask ----
  g.addInput('input_ids', 'int64', ['T']);
  for (let l = 0; l < c.numLayers; l++) {
    g.addInput(pastKey(l), 'float32', [Hkv, 'P', D]);
    g.addInput(pastValue(l), 'float32', [Hkv, 'P', D]);
  }
  const zero = scalarI64(0);
  const one = scalarI64(1);
  const T = g.op('Gather', [g.op('Shape', ['input_ids']), zero], { axis: 0 }); // scalar
  const P = g.op('Gather', [g.op('Shape', [pastKey(0)]), one], { axis: 0 }); // scalar
  const S = g.op('Add', [P, T]);
  const pos = g.op('Range', [P, S, one]); // (T) absolute positions
  const maxPos = opts.maxPositions ?? c.maxPositionEmbeddings;
  const half = D / 2;
  const cosT = new Float32Array(maxPos * half);
  const sinT = new Float32Array(maxPos * half);
  for (let p = 0; p < maxPos; p++)
    for (let i = 0; i < half; i++) {
      const ang = p * Math.pow(c.ropeTheta, (-2 * i) / D);
      cosT[p * half + i] = Math.cos(ang);
      sinT[p * half + i] = Math.sin(ang);
    }
  g.addInitializer('rope_cos', cosT, [maxPos, half]);
  g.addInitializer('rope_sin', sinT, [maxPos, half]);
  const ax1 = constI64(1);
  const cos = g.op('Unsqueeze', [g.op('Gather', ['rope_cos', pos], { axis: 0 }), ax1]); // (T,1,D/2)
  const sin = g.op('Unsqueeze', [g.op('Gather', ['rope_sin', pos], { axis: 0 }), ax1]);
  const keyIdx = g.op('Range', [zero, S, one]); // (S)
  const future = g.op('Greater', [g.op('Unsqueeze', [keyIdx, constI64(0)]), g.op('Unsqueeze', [pos, ax1])]); // (T,S)
  const mask = g.op('Where', [future, scalarF32(-1e30), scalarF32(0)]); // (T,S)

  const [lo0, loEnd, hiEnd, lastAxis] = [constI64(0), constI64(half), constI64(D), constI64(-1)];
  /** x (T,H,D) -> rotate-half RoPE */
  const rope = (x: string): string => {
    const x1 = g.op('Slice', [x, lo0, loEnd, lastAxis]);
    const x2 = g.op('Slice', [x, loEnd, hiEnd, lastAxis]);
    const o1 = g.op('Sub', [g.op('Mul', [x1, cos]), g.op('Mul', [x2, sin])]);
    const o2 = g.op('Add', [g.op('Mul', [x2, cos]), g.op('Mul', [x1, sin])]);
    return g.op('Concat', [o1, o2], { axis: -1 });
  };

  // ---- the decoder ----
  const embed = get('model.embed_tokens.weight');
  let x: string; // (T,d)
  let embedF32 = false;
  if (opts.weights === 'q4' && embed.kind === 'q4' && embed.stride === embed.cols) {
    // The q4 table itself (no 600 MB f32 copy for a 0.6B model): GatherBlockQuantized dequantizes rows.
    const blocks = embed.stride / Q4_GROUP;
    g.addInitializer('embed.q4', new Uint8Array(embed.data.buffer, embed.data.byteOffset, embed.data.byteLength), [V, embed.stride / 2]);
    g.addInitializer('embed.scales', embed.scales, [V, blocks]);
    x = g.op('GatherBlockQuantized', ['embed.q4', 'input_ids', 'embed.scales'], { gather_axis: 0, quantize_axis: 1, block_size: Q4_GROUP, bits: 4 }, 'com.microsoft');
  } else if (opts.weights === 'q4' && embed.kind === 'q8' && embed.cols % Q4_GROUP === 0) {
    const b = q8Blocks(embed);
    g.addInitializer('embed.q8', b.bytes, [V, embed.cols]);
    g.addInitializer('embed.scales', b.scales, [V, b.blocks]);
    x = g.op('GatherBlockQuantized', ['embed.q8', 'input_ids', 'embed.scales'], { gather_axis: 0, quantize_axis: 1, block_size: Q4_GROUP, bits: 8 }, 'com.microsoft');
  } else {
    g.addInitializer('embed_f32', dense(embed), [V, d]);
    embedF32 = true;
    x = g.op('Gather', ['embed_f32', 'input_ids'], { axis: 0 });
  }
  const group = Hq / Hkv;
  const invSqrtD = scalarF32(1 / Math.sqrt(D));
  for (let l = 0; l < c.numLayers; l++) {
    const n = (k: Parameters<typeof layerWeightName>[1]) => layerWeightName(l, k);
    const xn = rmsnorm(x, n('inputNorm'));
    const q = g.op('Reshape', [linear(xn, n('q')), constI64(-1, Hq, D)]); // (T,Hq,D)
    const k = g.op('Reshape', [linear(xn, n('k')), constI64(-1, Hkv, D)]); // (T,Hkv,D)
    const v = g.op('Reshape', [linear(xn, n('v')), constI64(-1, Hkv, D)]);
    const qr = g.op('Transpose', [rope(rmsnorm(q, n('qNorm')))], { perm: [1, 0, 2] }); // (Hq,T,D)
    const kr = g.op('Transpose', [rope(rmsnorm(k, n('kNorm')))], { perm: [1, 0, 2] }); // (Hkv,T,D)
    const vt = g.op('Transpose', [v], { perm: [1, 0, 2] });
    g.addNode('Concat', [pastKey(l), kr], [presentKey(l)], { axis: 1 }); // (Hkv,S,D)
    g.addNode('Concat', [pastValue(l), vt], [presentValue(l)], { axis: 1 });
    g.addOutput(presentKey(l), 'float32', [Hkv, 'S', D]);
    g.addOutput(presentValue(l), 'float32', [Hkv, 'S', D]);
    // GQA: query head h reads kv head floor(h / group): repeat each kv head `group` times in place.
    const repeat = (t: string) => g.op('Reshape', [g.op('Expand', [g.op('Unsqueeze', [t, ax1]), constI64(1, group, 1, 1)]), constI64(Hq, -1, D)]);
    const kAll = repeat(presentKey(l)); // (Hq,S,D)
    const vAll = repeat(presentValue(l));
    const scores = g.op('Add', [g.op('Mul', [g.op('MatMul', [qr, g.op('Transpose', [kAll], { perm: [0, 2, 1] })]), invSqrtD]), mask]); // (Hq,T,S)
    const attn = g.op('MatMul', [g.op('Softmax', [scores], { axis: -1 }), vAll]); // (Hq,T,D)
    const merged = g.op('Reshape', [g.op('Transpose', [attn], { perm: [1, 0, 2] }), constI64(-1, Hq * D)]); // (T,Hq*D)
    x = g.op('Add', [x, linear(merged, n('o'))]);
    const hn = rmsnorm(x, n('postNorm'));
    const gate = linear(hn, n('gate'));
    const act = g.op('Mul', [g.op('Mul', [gate, g.op('Sigmoid', [gate])]), linear(hn, n('up'))]);
    x = g.op('Add', [x, linear(act, n('down'))]);
  }
  if (opts.logits === 'last') x = g.op('Slice', [x, constI64(-1), constI64(2 ** 53 - 1), constI64(0)]); // (1,d)
  const h = rmsnorm(x, 'model.norm.weight');
  const headName = c.tieWordEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight';
  const head = get(headName);
  let logits: string;
  if (opts.weights === 'q4' && head.kind !== 'f32') logits = matMulNBits(g, h, headName, head);
  else if (c.tieWordEmbeddings && embedF32) logits = g.op('Gemm', [h, 'embed_f32'], { transB: 1 });
  else logits = linear(h, headName);
  g.addNode('Identity', [logits], ['logits']);
  g.addOutput('logits', 'float32', [opts.logits === 'last' ? 1 : 'T', V]);
  return g.toBytes();
}

/** A q8 weight as 8-bit blocks of 32 along K: (N, ceil(K/32)*32) bytes q+128 (padding 128 = 0), scales (N, blocks). */
function q8Blocks(w: QuantizedWeight): { bytes: Uint8Array; scales: Float32Array; blocks: number } {
  const blocks = Math.ceil(w.cols / Q4_GROUP);
  const width = blocks * Q4_GROUP;
  const src = new Int8Array(w.data.buffer, w.data.byteOffset, w.data.byteLength);
  const bytes = new Uint8Array(w.rows * width).fill(128);
  const scales = new Float32Array(w.rows * blocks);
  for (let n = 0; n < w.rows; n++) {
    for (let k = 0; k < w.cols; k++) bytes[n * width + k] = src[n * w.stride + k] + 128;
    scales.fill(w.scales[n], n * blocks, (n + 1) * blocks);
  }
  return { bytes, scales, blocks };
}

/** x (T,K) -> (T,N) with a q4 or q8 weight, through com.microsoft MatMulNBits (bits 4 or 8). */
function matMulNBits(g: OnnxGraph, x: string, name: string, w: QuantizedWeight): string {
  if (w.kind === 'q8') {
    const b = q8Blocks(w);
    g.addInitializer(`${name}.q8`, b.bytes, [w.rows, b.blocks, Q4_GROUP]);
    g.addInitializer(`${name}.scales`, b.scales, [w.rows * b.blocks]);
    return g.op('MatMulNBits', [x, `${name}.q8`, `${name}.scales`], { K: w.cols, N: w.rows, bits: 8, block_size: Q4_GROUP, accuracy_level: 0 }, 'com.microsoft');
  }
  const blocks = w.stride / Q4_GROUP;
  const bytes = new Uint8Array(w.data.buffer, w.data.byteOffset, w.data.byteLength); // (N, blocks, 16)
  g.addInitializer(`${name}.q4`, bytes, [w.rows, blocks, Q4_GROUP / 2]);
  g.addInitializer(`${name}.scales`, w.scales, [w.rows * blocks]);
  // accuracy_level 0: A stays f32 (level 4 would quantize activations to int8).
  return g.op('MatMulNBits', [x, `${name}.q4`, `${name}.scales`], { K: w.cols, N: w.rows, bits: 4, block_size: Q4_GROUP, accuracy_level: 0 }, 'com.microsoft');
}
