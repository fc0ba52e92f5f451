// What a kernel call is made of: the kernel, its bindings and uniforms, and the small pure helpers
// around them (binding layout from WGSL declarations, uniform packing, grids, GPU error mapping).
// Re-exported by ./context, which is what kernel files import.
import { EngineError } from '../errors';

export type Uniform = number | { f32: number } | { i32: number };

/** A compute kernel: WGSL source and entry point. The pipeline is compiled once per (code, entry). */
export interface Kernel {
  code: string;
  entry?: string;
}

/** A binding of part of a buffer (offset and size in bytes). */
export interface BufferSlice {
  buffer: GPUBuffer;
  offset: number;
  size: number;
}

export type Binding = GPUBuffer | BufferSlice;

export interface Compiled {
  pipeline: GPUComputePipeline;
  layout: GPUBindGroupLayout;
  kinds: GPUBufferBindingType[];
  id: number;
}

/**
 * Binding types of a kernel, by binding number, from its `@group(0) @binding(i) var<...>` declarations
 * (uniform | storage, read | storage, read_write). Bindings must be numbered 0..n-1 without gaps.
 */
export function bindingKinds(code: string): GPUBufferBindingType[] {
  const kinds: GPUBufferBindingType[] = [];
  const re = /@group\(0\)\s*@binding\((\d+)\)\s*var\s*<\s*(uniform|storage)\s*(?:,\s*(read_write|read)\s*)?>/g;
  for (const m of code.matchAll(re)) {
    const type: GPUBufferBindingType = m[2] === 'uniform' ? 'uniform' : m[3] === 'read_write' ? 'storage' : 'read-only-storage';
    kinds[Number(m[1])] = type;
  }
  for (let i = 0; i < kinds.length; i++)
    if (!kinds[i]) throw new EngineError('validation', `kernel bindings must be numbered 0..n-1 without gaps (binding ${i} missing)`);
  return kinds;
}

export function packUniforms(uniforms: readonly Uniform[]): ArrayBuffer {
  const u = new ArrayBuffer(uniforms.length * 4);
  const dv = new DataView(u);
  uniforms.forEach((v, i) => {
    if (typeof v === 'number') dv.setUint32(i * 4, v >>> 0, true);
    else if ('f32' in v) dv.setFloat32(i * 4, v.f32, true);
    else dv.setInt32(i * 4, v.i32, true);
  });
  return u;
}

/** Grid for `n` threads in workgroups of `wg`, folded into y when x would pass 65535. */
export function grid1d(n: number, wg: number): [number, number, number] {
  const groups = Math.max(1, Math.ceil(n / wg));
  if (groups <= 65535) return [groups, 1, 1];
  const y = Math.ceil(groups / 65535);
  return [Math.ceil(groups / y), y, 1];
}

/** Maps a GPUError (from an error scope or an uncapturederror event) to a typed EngineError. */
export function toEngineError(e: GPUError, where: string): EngineError {
  const oomClass = (globalThis as { GPUOutOfMemoryError?: new (m: string) => GPUError }).GPUOutOfMemoryError;
  if ((oomClass && e instanceof oomClass) || (e.constructor?.name ?? '').includes('OutOfMemory')) return new EngineError('out-of-memory', `${where}: ${e.message}`);
  return new EngineError('validation', `${where}: ${e.message}`);
}

