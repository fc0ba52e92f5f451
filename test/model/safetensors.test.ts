import { describe, expect, it } from 'vitest';
import { parseSafetensors, writeSafetensors } from '../../src/model/safetensors';
import { ModelFormatError } from '../../src/engine/errors';

/** A file with the given header object and `dataBytes` zero bytes of data. */
function withHeader(header: unknown, dataBytes: number, headerLen?: number): Uint8Array {
  const hb = new TextEncoder().encode(typeof header === 'string' ? header : JSON.stringify(header));
  const out = new Uint8Array(8 + hb.length + dataBytes);
  new DataView(out.buffer).setBigUint64(0, BigInt(headerLen ?? hb.length), true);
  out.set(hb, 8);
  return out;
}

function expectFormatError(fn: () => unknown, problem: RegExp) {
  let err: unknown;
  try {
    fn();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(ModelFormatError);
  expect((err as ModelFormatError).file).toBe('model.safetensors');
  expect((err as ModelFormatError).message).toMatch(/^model\.safetensors: /);
  expect((err as ModelFormatError).problem).toMatch(problem);
}

describe('safetensors', () => {
  it('round-trips F32, I32, BF16 and F16 tensors with metadata', () => {
    const a = Float32Array.from({ length: 6 }, (_, i) => i * 0.25 - 1);
    const ids = Int32Array.from([3, -7, 11]);
    // bf16 of 1.5 = 0x3fc0, -2 = 0xc000; f16 of 0.5 = 0x3800, -65504 = 0xfbff
    const bf = Uint16Array.from([0x3fc0, 0xc000]);
    const hf = Uint16Array.from([0x3800, 0xfbff, 0x0001]);
    const bytes = writeSafetensors(
      { a: { dtype: 'F32', shape: [2, 3], data: a }, ids: { dtype: 'I32', shape: [3], data: ids }, bf: { dtype: 'BF16', shape: [2], data: bf }, hf: { dtype: 'F16', shape: [3], data: hf } },
      { format: 'pt' },
    );
    // The data section starts 8-byte aligned.
    const n = Number(new DataView(bytes.buffer).getBigUint64(0, true));
    expect((8 + n) % 8).toBe(0);
    const f = parseSafetensors(bytes, 'model.safetensors');
    expect(f.metadata).toEqual({ format: 'pt' });
    expect(f.info('a').shape).toEqual([2, 3]);
    expect(f.float32('a')).toEqual(a);
    expect(f.int32('ids')).toEqual(ids);
    expect(Array.from(f.float32('bf'))).toEqual([1.5, -2]);
    expect(Array.from(f.float32('hf'))).toEqual([0.5, -65504, 2 ** -24]);
  });

  it('reads a Node Buffer (a view into a shared pool, as readFileSync gives) like a plain array', () => {
    const a = Float32Array.from({ length: 5 }, (_, i) => i - 2);
    const ids = Int32Array.from([1, 2, 3]);
    const bytes = writeSafetensors({ a: { dtype: 'F32', shape: [5], data: a }, ids: { dtype: 'I32', shape: [3], data: ids } });
    // Buffer.from(array) of a small size lands at an offset inside Node's 8 KiB allocation pool.
    const pooled = Buffer.from(Array.from(bytes));
    const f = parseSafetensors(pooled, 'model.safetensors');
    expect(f.float32('a')).toEqual(a);
    expect(f.int32('ids')).toEqual(ids);
  });

  it('refuses a file too short for the header length', () => {
    expectFormatError(() => parseSafetensors(new Uint8Array(5), 'model.safetensors'), /too short/);
  });

  it('refuses a header length beyond the end of the file (truncated header)', () => {
    const full = withHeader({ a: { dtype: 'F32', shape: [1], data_offsets: [0, 4] } }, 4);
    expectFormatError(() => parseSafetensors(full.subarray(0, 20), 'model.safetensors'), /header length \d+ goes beyond the end of the file/);
  });

  it('refuses a header that is not JSON', () => {
    expectFormatError(() => parseSafetensors(withHeader('{"a": {', 0), 'model.safetensors'), /header is not valid JSON/);
  });

  it('refuses an unknown dtype', () => {
    expectFormatError(() => parseSafetensors(withHeader({ a: { dtype: 'Q7', shape: [1], data_offsets: [0, 4] } }, 4), 'model.safetensors'), /'a': unknown dtype "Q7"/);
  });

  it('refuses shape x dtype disagreeing with the byte range', () => {
    expectFormatError(
      () => parseSafetensors(withHeader({ a: { dtype: 'F32', shape: [2, 3], data_offsets: [0, 20] } }, 24), 'model.safetensors'),
      /shape \[2,3\] of F32 needs 24 bytes but data_offsets span 20/,
    );
  });

  it('refuses offsets beyond the data section (lying header or truncated data)', () => {
    expectFormatError(() => parseSafetensors(withHeader({ a: { dtype: 'F32', shape: [4], data_offsets: [0, 16] } }, 8), 'model.safetensors'), /out of range: the data section has only 8 bytes/);
  });

  it('refuses overlapping tensors', () => {
    const h = { a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] }, b: { dtype: 'F32', shape: [2], data_offsets: [4, 12] } };
    expectFormatError(() => parseSafetensors(withHeader(h, 12), 'model.safetensors'), /'a' and 'b' have overlapping data_offsets/);
  });

  it('refuses malformed entries', () => {
    expectFormatError(() => parseSafetensors(withHeader({ a: { dtype: 'F32', shape: [-1], data_offsets: [0, 4] } }, 4), 'model.safetensors'), /shape/);
    expectFormatError(() => parseSafetensors(withHeader({ a: { dtype: 'F32', shape: [1], data_offsets: [4, 0] } }, 4), 'model.safetensors'), /data_offsets/);
    expectFormatError(() => parseSafetensors(withHeader([1, 2], 0), 'model.safetensors'), /not a JSON object/);
  });

  it('refuses reading an integer tensor as weights', () => {
    const f = parseSafetensors(writeSafetensors({ ids: { dtype: 'I32', shape: [1], data: Int32Array.from([1]) } }), 'model.safetensors');
    expectFormatError(() => f.float32('ids'), /dtype I32; weights must be F32, F16 or BF16/);
    expectFormatError(() => f.float32('nope'), /'nope' is missing/);
  });
});
