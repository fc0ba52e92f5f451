// safetensors reader and writer (https://huggingface.co/docs/safetensors): an 8-byte little-endian
// header length N, N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]}, __metadata__?},
// then the data section; offsets are relative to the start of the data section.
//
// The reader trusts nothing: every way a header can lie is refused with a ModelFormatError naming the
// file, before any tensor is touched.
import { ModelFormatError } from '../engine/errors';

export type SafeDType = 'F64' | 'F32' | 'F16' | 'BF16' | 'I64' | 'I32' | 'I16' | 'I8' | 'U8' | 'BOOL';

const DTYPE_BYTES: Record<SafeDType, number> = { F64: 8, F32: 4, F16: 2, BF16: 2, I64: 8, I32: 4, I16: 2, I8: 1, U8: 1, BOOL: 1 };

export interface TensorInfo {
  name: string;
  dtype: SafeDType;
  shape: number[];
  /** Absolute byte range in the file. */
  begin: number;
  end: number;
}

/** A parsed safetensors file; tensor bytes are views into the original buffer. */
export class SafetensorsFile {
  constructor(
    readonly file: string,
    readonly bytes: Uint8Array,
    readonly tensors: ReadonlyMap<string, TensorInfo>,
    readonly metadata: Record<string, string>,
  ) {}

  has(name: string): boolean {
    return this.tensors.has(name);
  }

  info(name: string): TensorInfo {
    const t = this.tensors.get(name);
    if (!t) throw new ModelFormatError(this.file, `tensor '${name}' is missing`);
    return t;
  }

  /** F32, F16 and BF16 tensors as f32 (a copy). */
  float32(name: string): Float32Array {
    const t = this.info(name);
    const raw = this.bytes.subarray(t.begin, t.end);
    // Copy first: the data may not be aligned for a typed-array view. A TypedArray constructor copies into
    // a buffer of its own (Node's Buffer.slice would return a view whose .buffer is the whole pool).
    const buf = new Uint8Array(raw).buffer;
    if (t.dtype === 'F32') return new Float32Array(buf);
    if (t.dtype === 'BF16') {
      const h = new Uint16Array(buf);
      const out = new Uint32Array(h.length);
      for (let i = 0; i < h.length; i++) out[i] = h[i] << 16;
      return new Float32Array(out.buffer);
    }
    if (t.dtype === 'F16') {
      const h = new Uint16Array(buf);
      const out = new Float32Array(h.length);
      for (let i = 0; i < h.length; i++) out[i] = f16ToF32(h[i]);
      return out;
    }
    throw new ModelFormatError(this.file, `tensor '${name}' has dtype ${t.dtype}; weights must be F32, F16 or BF16`);
  }

  int32(name: string): Int32Array {
    const t = this.info(name);
    if (t.dtype !== 'I32') throw new ModelFormatError(this.file, `tensor '${name}' has dtype ${t.dtype}, expected I32`);
    return new Int32Array(new Uint8Array(this.bytes.subarray(t.begin, t.end)).buffer);
  }
}

export function f16ToF32(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

// Headers of real checkpoints are a few hundred KB; refuse absurd lengths before decoding them.
const MAX_HEADER = 100 * 1024 * 1024;

export function parseSafetensors(bytes: Uint8Array, file: string): SafetensorsFile {
  if (bytes.length < 8) throw new ModelFormatError(file, `file is ${bytes.length} bytes, too short for the 8-byte header length`);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const n = Number(dv.getBigUint64(0, true));
  if (n > bytes.length - 8) throw new ModelFormatError(file, `header length ${n} goes beyond the end of the file (${bytes.length} bytes): truncated or not a safetensors file`);
  if (n > MAX_HEADER) throw new ModelFormatError(file, `header length ${n} is implausibly large`);
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(8, 8 + n)));
  } catch (e) {
    throw new ModelFormatError(file, `header is not valid JSON (${(e as Error).message})`);
  }
  if (typeof header !== 'object' || header === null || Array.isArray(header)) throw new ModelFormatError(file, 'header is not a JSON object');
  const dataStart = 8 + n;
  const dataLen = bytes.length - dataStart;
  const tensors = new Map<string, TensorInfo>();
  let metadata: Record<string, string> = {};
  for (const [name, v] of Object.entries(header as Record<string, unknown>)) {
    if (name === '__metadata__') {
      if (typeof v !== 'object' || v === null || Object.values(v).some((x) => typeof x !== 'string'))
        throw new ModelFormatError(file, '__metadata__ must map strings to strings');
      metadata = v as Record<string, string>;
      continue;
    }
    const e = v as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    if (typeof e !== 'object' || e === null) throw new ModelFormatError(file, `tensor '${name}': entry is not an object`);
    if (typeof e.dtype !== 'string' || !(e.dtype in DTYPE_BYTES)) throw new ModelFormatError(file, `tensor '${name}': unknown dtype ${JSON.stringify(e.dtype)}`);
    const dtype = e.dtype as SafeDType;
    if (!Array.isArray(e.shape) || !e.shape.every((d) => Number.isSafeInteger(d) && d >= 0))
      throw new ModelFormatError(file, `tensor '${name}': shape ${JSON.stringify(e.shape)} is not a list of non-negative integers`);
    const off = e.data_offsets;
    if (!Array.isArray(off) || off.length !== 2 || !off.every((d) => Number.isSafeInteger(d) && d >= 0) || off[0] > off[1])
      throw new ModelFormatError(file, `tensor '${name}': data_offsets ${JSON.stringify(off)} must be [begin, end] with 0 <= begin <= end`);
    const [b, en] = off as [number, number];
    if (en > dataLen)
      throw new ModelFormatError(file, `tensor '${name}': data_offsets [${b}, ${en}] out of range: the data section has only ${dataLen} bytes (truncated file or lying header)`);
    const shape = e.shape as number[];
    const want = shape.reduce((a, d) => a * d, 1) * DTYPE_BYTES[dtype];
    if (want !== en - b)
      throw new ModelFormatError(file, `tensor '${name}': shape [${shape}] of ${dtype} needs ${want} bytes but data_offsets span ${en - b}`);
    tensors.set(name, { name, dtype, shape, begin: dataStart + b, end: dataStart + en });
  }
  const sorted = [...tensors.values()].filter((t) => t.end > t.begin).sort((a, b) => a.begin - b.begin);
  for (let i = 1; i < sorted.length; i++)
    if (sorted[i].begin < sorted[i - 1].end)
      throw new ModelFormatError(file, `tensors '${sorted[i - 1].name}' and '${sorted[i].name}' have overlapping data_offsets`);
  return new SafetensorsFile(file, bytes, tensors, metadata);
}

export interface TensorToWrite {
  dtype: 'F32' | 'I32' | 'BF16' | 'F16' | 'U8';
  shape: readonly number[];
  data: Float32Array | Int32Array | Uint16Array | Uint8Array;
}

/** Serialize tensors (in the order given) into a safetensors file. */
export function writeSafetensors(tensors: Record<string, TensorToWrite>, metadata?: Record<string, string>): Uint8Array {
  const header: Record<string, unknown> = {};
  if (metadata) header.__metadata__ = metadata;
  let offset = 0;
  const entries = Object.entries(tensors);
  for (const [name, t] of entries) {
    const count = t.shape.reduce((a, d) => a * d, 1);
    if (count * DTYPE_BYTES[t.dtype] !== t.data.byteLength) throw new Error(`writeSafetensors: '${name}' has ${t.data.byteLength} bytes for ${t.dtype} [${t.shape}]`);
    header[name] = { dtype: t.dtype, shape: [...t.shape], data_offsets: [offset, offset + t.data.byteLength] };
    offset += t.data.byteLength;
  }
  let json = JSON.stringify(header);
  // Pad with spaces so the data section starts 8-byte aligned, as the reference writer does.
  json += ' '.repeat((8 - ((new TextEncoder().encode(json).length + 8) % 8)) % 8);
  const hb = new TextEncoder().encode(json);
  const out = new Uint8Array(8 + hb.length + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(hb.length), true);
  out.set(hb, 8);
  let o = 8 + hb.length;
  for (const [, t] of entries) {
    out.set(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength), o);
    o += t.data.byteLength;
  }
  return out;
}
