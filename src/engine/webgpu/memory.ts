// Host <-> GPU transfers and row sharding of big tensors.
import { EngineError, assertShape } from '../errors';
import { Q4_GROUP, type QuantizedWeight } from '../quant';
import type { GpuContext } from './context';
import { type GpuPart, GpuTensor } from './tensor';

const numel = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);

/** Split `rows` rows of `rowBytes` each into shards of at most `max` bytes. */
export function shardRows(rows: number, rowBytes: number, max: number, what: string): { row0: number; rows: number }[] {
  const per = Math.floor(max / Math.max(rowBytes, 1));
  if (per < 1) throw new EngineError('unsupported', `${what}: one row of ${rowBytes} bytes exceeds the ${max}-byte buffer limit`);
  const out: { row0: number; rows: number }[] = [];
  for (let r = 0; r < Math.max(rows, 1); r += per) out.push({ row0: r, rows: Math.min(per, Math.max(rows, 1) - r) });
  return out;
}

// data laid out (rows, ...) -> tensor; shards by the first axis when bigger than maxBufferBytes
export function uploadDense(ctx: GpuContext, data: Float32Array | Int32Array, shape: readonly number[]): GpuTensor {
  assertShape(data.length === numel(shape), `tensor: ${data.length} values for shape (${shape})`);
  assertShape(shape.every((d) => Number.isInteger(d) && d >= 0), `tensor: bad shape (${shape})`);
  const rows = shape.length > 0 ? shape[0] : 1;
  const rowElems = rows > 0 ? data.length / rows : 0;
  const parts: GpuPart[] = shardRows(rows, rowElems * 4, ctx.maxBufferBytes, `tensor (${shape})`).map((s) => {
    const buf = ctx.alloc(Math.max(4, s.rows * rowElems * 4));
    const slice = data.subarray(s.row0 * rowElems, (s.row0 + s.rows) * rowElems);
    if (slice.length > 0) ctx.upload(buf, slice, 0, true);
    return { ...s, data: buf };
  });
  return new GpuTensor(ctx, [...shape], data instanceof Float32Array ? 'f32' : 'i32', parts);
}

export function zerosTensor(ctx: GpuContext, shape: readonly number[], dtype: 'f32' | 'i32'): GpuTensor {
  assertShape(shape.every((d) => Number.isInteger(d) && d >= 0), `zeros: bad shape (${shape})`);
  const n = numel(shape);
  const rows = shape.length > 0 ? shape[0] : 1;
  const rowElems = rows > 0 ? n / rows : 0;
  const parts: GpuPart[] = shardRows(rows, rowElems * 4, ctx.maxBufferBytes, `zeros (${shape})`).map((s) => {
    const data = ctx.alloc(Math.max(4, s.rows * rowElems * 4));
    ctx.commandEncoder().clearBuffer(data); // recorded in order with the dispatches around it
    return { ...s, data };
  });
  return new GpuTensor(ctx, [...shape], dtype, parts);
}

/** Words of packed data and scales per row of a quantized weight. */
export function quantRowWords(kind: 'q8' | 'q4', stride: number): { data: number; scales: number } {
  return kind === 'q8' ? { data: stride / 4, scales: 1 } : { data: stride / 8, scales: stride / Q4_GROUP };
}

export function uploadQuantized(ctx: GpuContext, q: QuantizedWeight): GpuTensor {
  const w = quantRowWords(q.kind, q.stride);
  assertShape(
    q.data.length === q.rows * w.data && q.scales.length === q.rows * w.scales,
    `uploadQuantized: ${q.kind} (${q.rows},${q.cols}) stride ${q.stride} has ${q.data.length} words / ${q.scales.length} scales`,
  );
  const parts: GpuPart[] = shardRows(q.rows, w.data * 4, ctx.maxBufferBytes, `${q.kind} weight (${q.rows},${q.cols})`).map((s) => {
    const data = ctx.alloc(Math.max(4, s.rows * w.data * 4));
    const scales = ctx.alloc(Math.max(4, s.rows * w.scales * 4));
    ctx.upload(data, q.data.subarray(s.row0 * w.data, (s.row0 + s.rows) * w.data), 0, true);
    ctx.upload(scales, q.scales.subarray(s.row0 * w.scales, (s.row0 + s.rows) * w.scales), 0, true);
    return { ...s, data, scales };
  });
  return new GpuTensor(ctx, [q.rows, q.cols], q.kind, parts, { stride: q.stride });
}

export async function readTensor(t: GpuTensor): Promise<Float32Array | Int32Array> {
  assertShape(t.dtype === 'f32' || t.dtype === 'i32', `read: ${t.dtype} tensors are not readable; keep the host copy`);
  const n = t.size;
  const rowElems = t.parts.length > 0 && (t.shape[0] ?? 1) > 0 ? n / (t.shape.length > 0 ? t.shape[0] : 1) : 0;
  const bytes = await t.ctx.readBuffers(t.parts.map((p) => ({ buffer: p.data, offset: 0, bytes: p.rows * rowElems * 4 })));
  const copy = bytes.slice(0, n * 4).buffer;
  return t.dtype === 'f32' ? new Float32Array(copy) : new Int32Array(copy);
}

export function writeTensor(t: GpuTensor, data: Float32Array | Int32Array): void {
  assertShape(t.dtype === 'f32' || t.dtype === 'i32', `write: cannot write a ${t.dtype} tensor`);
  assertShape(data.length === t.size, `write: ${data.length} values for a tensor of shape (${t.shape})`);
  const rowElems = t.size / (t.shape.length > 0 ? t.shape[0] : 1);
  for (const p of t.parts) {
    const slice = data.subarray(p.row0 * rowElems, (p.row0 + p.rows) * rowElems);
    if (slice.length > 0) t.ctx.upload(p.data, slice, 0, false);
  }
}
