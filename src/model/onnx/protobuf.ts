// A minimal protobuf *writer*: just the wire types ONNX's ModelProto needs (varint, 32-bit float,
// length-delimited). Hand-written because the exporter runs in the browser too and needs nothing else
// from a protobuf library; ORT parsing what we write is the test that it is right.
//
// Wire format facts: a field is `(fieldNumber << 3) | wireType` as a varint, then the payload.
// Wire types: 0 varint, 2 length-delimited (bytes, strings, sub-messages, packed repeated), 5 fixed32.

const WIRE_VARINT = 0;
const WIRE_LEN = 2;
const WIRE_FIXED32 = 5;

const utf8 = new TextEncoder();

/** Builds one message. Nested messages are written by a separate ProtoWriter and embedded as bytes. */
export class ProtoWriter {
  private chunks: Uint8Array[] = [];
  private scratch: number[] = [];
  private length = 0;

  private flushScratch(): void {
    if (this.scratch.length === 0) return;
    this.chunks.push(Uint8Array.from(this.scratch));
    this.length += this.scratch.length;
    this.scratch = [];
  }

  /** Unsigned or non-negative varint; negative int64 values are written as 10-byte two's complement. */
  private varint(v: number | bigint): void {
    let x = BigInt.asUintN(64, BigInt(v));
    if (x < 0x80n && typeof v === 'number') {
      this.scratch.push(Number(x));
      return;
    }
    while (x >= 0x80n) {
      this.scratch.push(Number(x & 0x7fn) | 0x80);
      x >>= 7n;
    }
    this.scratch.push(Number(x));
  }

  private tag(field: number, wire: number): void {
    this.varint((field << 3) | wire);
  }

  int(field: number, v: number | bigint): this {
    this.tag(field, WIRE_VARINT);
    this.varint(v);
    return this;
  }

  float(field: number, v: number): this {
    this.tag(field, WIRE_FIXED32);
    const b = new Uint8Array(4);
    new DataView(b.buffer).setFloat32(0, v, true);
    this.scratch.push(...b);
    return this;
  }

  bytes(field: number, b: Uint8Array): this {
    this.tag(field, WIRE_LEN);
    this.varint(b.length);
    this.flushScratch();
    if (b.length > 0) {
      this.chunks.push(b);
      this.length += b.length;
    }
    return this;
  }

  string(field: number, s: string): this {
    return this.bytes(field, utf8.encode(s));
  }

  /** Embeds a sub-message without copying its payload (large initializers are only copied once, in finish). */
  message(field: number, m: ProtoWriter): this {
    m.flushScratch();
    this.tag(field, WIRE_LEN);
    this.varint(m.length);
    this.flushScratch();
    for (const c of m.chunks) this.chunks.push(c);
    this.length += m.length;
    return this;
  }

  get byteLength(): number {
    return this.length + this.scratch.length;
  }

  /** Packed repeated int64/int32 (proto3 default for repeated scalars). */
  packedInts(field: number, vs: readonly (number | bigint)[]): this {
    const inner = new ProtoWriter();
    for (const v of vs) inner.varint(v);
    return this.bytes(field, inner.finish());
  }

  /** Packed repeated float. */
  packedFloats(field: number, vs: readonly number[]): this {
    const b = new Uint8Array(vs.length * 4);
    const dv = new DataView(b.buffer);
    vs.forEach((v, i) => dv.setFloat32(i * 4, v, true));
    return this.bytes(field, b);
  }

  finish(): Uint8Array {
    this.flushScratch();
    if (this.chunks.length === 1) return this.chunks[0];
    const out = new Uint8Array(this.length);
    let o = 0;
    for (const c of this.chunks) {
      out.set(c, o);
      o += c.length;
    }
    this.chunks = [out];
    return out;
  }
}
