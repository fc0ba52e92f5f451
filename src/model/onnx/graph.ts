// A small ONNX graph builder: enough of onnx.proto (ModelProto, GraphProto, NodeProto, TensorProto,
// ValueInfoProto, AttributeProto) to export our models and single-op benchmark graphs for
// onnxruntime-web. Field numbers follow onnx/onnx.proto (IR version 8).
//
// Usage:
//   const g = new OnnxGraph(17);                        // default-domain opset
//   g.addInput('x', 'float32', ['M', 64]);              // string dims are symbolic
//   g.addInitializer('w', wData, [64, 32]);             // Float32Array -> FLOAT, Uint8Array -> UINT8, ...
//   g.addNode('MatMul', ['x', 'w'], ['y']);
//   g.addOutput('y', 'float32', ['M', 32]);
//   const bytes = g.toBytes();                          // pass to ort.InferenceSession.create(bytes)
// Nodes of another domain (e.g. 'com.microsoft' MatMulNBits) register that domain's opset with
// `g.useDomain('com.microsoft', 1)` or implicitly (version 1) on first use.
import { ProtoWriter } from './protobuf';

export type OnnxElemType = 'float32' | 'uint8' | 'int8' | 'int32' | 'int64' | 'float16' | 'bool';

/** onnx.TensorProto.DataType */
const DATA_TYPE: Record<OnnxElemType, number> = {
  float32: 1,
  uint8: 2,
  int8: 3,
  int32: 6,
  int64: 7,
  bool: 9,
  float16: 10,
};

/** onnx.AttributeProto.AttributeType */
const ATTR = { FLOAT: 1, INT: 2, STRING: 3, TENSOR: 4, FLOATS: 6, INTS: 7, STRINGS: 8 } as const;

export type TensorData = Float32Array | Uint8Array | Int8Array | Int32Array | BigInt64Array | Uint16Array;

/** A constant tensor, usable as an initializer or a tensor-valued attribute (Constant's `value`). */
export interface OnnxTensor {
  data: TensorData;
  dims: readonly number[];
  /** Needed only where the array type is ambiguous: Uint16Array is always float16, Uint8Array uint8 unless 'bool'. */
  type?: OnnxElemType;
}

/**
 * Attribute values: number -> INT if integral (use {float: x} to force FLOAT), non-integral -> FLOAT,
 * string -> STRING, number[] -> INTS (or FLOATS if any is non-integral; {floats: [...]} forces it),
 * string[] -> STRINGS, {tensor} -> TENSOR.
 */
export type AttrValue =
  | number
  | bigint
  | string
  | readonly number[]
  | readonly string[]
  | { float: number }
  | { floats: readonly number[] }
  | { tensor: OnnxTensor };

export type Dim = number | string;

function elemTypeOf(t: OnnxTensor): OnnxElemType {
  if (t.type) return t.type;
  const d = t.data;
  if (d instanceof Float32Array) return 'float32';
  if (d instanceof Uint8Array) return 'uint8';
  if (d instanceof Int8Array) return 'int8';
  if (d instanceof Int32Array) return 'int32';
  if (d instanceof BigInt64Array) return 'int64';
  return 'float16';
}

function tensorProto(name: string, t: OnnxTensor): ProtoWriter {
  const count = t.dims.reduce((a, b) => a * b, 1);
  if (count !== t.data.length) throw new Error(`ONNX tensor ${name}: ${t.data.length} values for dims [${t.dims}]`);
  const w = new ProtoWriter();
  w.packedInts(1, t.dims); // dims
  w.int(2, DATA_TYPE[elemTypeOf(t)]); // data_type
  w.string(8, name); // name
  // raw_data is little-endian, which every JS engine we target uses for typed arrays.
  w.bytes(9, new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
  return w;
}

function valueInfo(name: string, type: OnnxElemType, dims: readonly Dim[]): ProtoWriter {
  const shape = new ProtoWriter();
  for (const d of dims) {
    const dim = new ProtoWriter();
    if (typeof d === 'number') dim.int(1, d); // dim_value
    else dim.string(2, d); // dim_param
    shape.message(1, dim);
  }
  const tensorType = new ProtoWriter().int(1, DATA_TYPE[type]).message(2, shape);
  const typeProto = new ProtoWriter().message(1, tensorType); // TypeProto.tensor_type
  return new ProtoWriter().string(1, name).message(2, typeProto);
}

function attribute(name: string, v: AttrValue): ProtoWriter {
  const a = new ProtoWriter().string(1, name);
  if (typeof v === 'bigint') return a.int(20, ATTR.INT).int(3, v);
  if (typeof v === 'number') {
    return Number.isInteger(v) ? a.int(20, ATTR.INT).int(3, v) : a.int(20, ATTR.FLOAT).float(2, v);
  }
  if (typeof v === 'string') return a.int(20, ATTR.STRING).string(4, v);
  if (Array.isArray(v)) {
    if (v.length > 0 && typeof v[0] === 'string') {
      a.int(20, ATTR.STRINGS);
      for (const s of v as string[]) a.string(9, s);
      return a;
    }
    const nums = v as number[];
    if (nums.every(Number.isInteger)) return a.int(20, ATTR.INTS).packedInts(8, nums);
    return a.int(20, ATTR.FLOATS).packedFloats(7, nums);
  }
  if ('float' in (v as object)) return a.int(20, ATTR.FLOAT).float(2, (v as { float: number }).float);
  if ('floats' in (v as object)) return a.int(20, ATTR.FLOATS).packedFloats(7, (v as { floats: number[] }).floats);
  return a.int(20, ATTR.TENSOR).message(5, tensorProto(name, (v as { tensor: OnnxTensor }).tensor));
}

export class OnnxGraph {
  private nodes: ProtoWriter[] = [];
  private inits: ProtoWriter[] = [];
  private inputs: ProtoWriter[] = [];
  private outputs: ProtoWriter[] = [];
  private domains = new Map<string, number>();
  private names = new Set<string>();
  private counter = 0;

  /** `opset`: version of the default ONNX domain (ai.onnx). */
  constructor(
    readonly opset = 17,
    readonly graphName = 'graph',
  ) {
    this.domains.set('', opset);
  }

  /** Declare the opset version of a non-default domain (e.g. 'com.microsoft', 1). */
  useDomain(domain: string, version: number): this {
    this.domains.set(domain, version);
    return this;
  }

  addInput(name: string, type: OnnxElemType, dims: readonly Dim[]): this {
    this.inputs.push(valueInfo(name, type, dims));
    return this;
  }

  addOutput(name: string, type: OnnxElemType, dims: readonly Dim[]): this {
    this.outputs.push(valueInfo(name, type, dims));
    return this;
  }

  /** A weight or constant. Float32Array -> FLOAT, Uint8Array -> UINT8, Int32Array -> INT32, BigInt64Array -> INT64, Uint16Array -> FLOAT16. */
  addInitializer(name: string, data: TensorData, dims: readonly number[], type?: OnnxElemType): this {
    this.inits.push(tensorProto(name, { data, dims, type }));
    return this;
  }

  /** A node. Empty-string inputs mark omitted optional inputs, as in ONNX. Returns the outputs. */
  addNode(op: string, inputs: readonly string[], outputs: readonly string[], attrs: Record<string, AttrValue> = {}, domain = ''): string[] {
    if (domain !== '' && !this.domains.has(domain)) this.domains.set(domain, 1);
    const n = new ProtoWriter();
    for (const i of inputs) n.string(1, i);
    for (const o of outputs) n.string(2, o);
    n.string(3, `${op}_${this.nodes.length}`);
    n.string(4, op);
    for (const [k, v] of Object.entries(attrs)) n.message(5, attribute(k, v));
    if (domain) n.string(7, domain);
    this.nodes.push(n);
    return [...outputs];
  }

  /** A fresh intermediate name with the given prefix (for builders that chain many nodes). */
  fresh(prefix: string): string {
    let name: string;
    do name = `${prefix}_${this.counter++}`;
    while (this.names.has(name));
    this.names.add(name);
    return name;
  }

  /** Convenience: one-output node with a fresh output name. */
  op(op: string, inputs: readonly string[], attrs: Record<string, AttrValue> = {}, domain = ''): string {
    return this.addNode(op, inputs, [this.fresh(op.toLowerCase())], attrs, domain)[0];
  }

  /** Serialize as an ONNX ModelProto. */
  toBytes(producer = 'envace-lab'): Uint8Array {
    const g = new ProtoWriter();
    for (const n of this.nodes) g.message(1, n);
    g.string(2, this.graphName);
    for (const t of this.inits) g.message(5, t);
    for (const i of this.inputs) g.message(11, i);
    for (const o of this.outputs) g.message(12, o);
    const m = new ProtoWriter();
    m.int(1, 8); // ir_version 8 (ONNX 1.10+), accepted by onnxruntime 1.30
    m.string(2, producer);
    m.message(7, g);
    for (const [domain, version] of this.domains) m.message(8, new ProtoWriter().string(1, domain).int(2, version));
    return m.finish();
  }
}
