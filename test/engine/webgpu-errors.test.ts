// Typed errors of the WebGPU backend: lost device, GPU validation errors, out-of-memory classification,
// shape errors thrown before dispatch, no adapter.
import { describe, expect, it } from 'vitest';
import { EngineError } from '../../src/engine/errors';
import { createWebGpuBackend } from '../../src/engine/webgpu/backend';
import { toEngineError } from '../../src/engine/webgpu/context';
import { gpuAvailable } from '../helpers/gpu';
import { gpuBackend } from './webgpu-helpers';

const run = await gpuAvailable();
const code = (c: string) => expect.objectContaining({ name: 'EngineError', code: c });

describe.skipIf(!run)('WebGPU typed errors', () => {
  it('a destroyed device makes the next read reject, and later ops throw, with device-lost', async () => {
    const gpu = await gpuBackend();
    const a = gpu.tensor(Float32Array.from([1, 2, 3]), [3]);
    const b = gpu.add(a, a);
    gpu.ctx.device.destroy();
    await expect(gpu.read(b)).rejects.toEqual(code('device-lost'));
    expect(() => gpu.add(a, a)).toThrow(code('device-lost'));
    await expect(gpu.sync()).rejects.toEqual(code('device-lost'));
  });

  it('a GPU validation error surfaces from the next sync as EngineError validation, then clears', async () => {
    const gpu = await gpuBackend();
    const y = gpu.ctx.empty([4], 'f32');
    const bad = '@group(0) @binding(0) var<storage, read_write> y: array<f32>;\n@compute @workgroup_size(1) fn main() { let x: u32 = 1.5; y[0] = 1.0; }';
    gpu.ctx.dispatch({ code: bad }, [y.buf], [], [1]); // compiles on the GPU side: reported asynchronously
    await expect(gpu.sync()).rejects.toEqual(code('validation'));
    // a dispatch that passes the wrong number of buffers is refused on the host
    expect(() => gpu.ctx.dispatch({ code: bad }, [y.buf, y.buf], [], [1])).toThrow(code('validation'));
    const a = gpu.tensor(Float32Array.from([1, 2]), [2]);
    expect(Array.from(await gpu.read(gpu.add(a, a)))).toEqual([2, 4]);
    gpu.dispose();
  });

  it('an out-of-memory GPU error maps to EngineError out-of-memory; oversize buffers are refused up front', async () => {
    const e = toEngineError(new GPUOutOfMemoryError('no room'), 'allocating');
    expect(e).toEqual(code('out-of-memory'));
    expect(toEngineError(new GPUValidationError('bad'), 'x')).toEqual(code('validation'));
    const gpu = await gpuBackend();
    expect(() => gpu.ctx.alloc(gpu.ctx.maxBindingBytes + 4)).toThrow(EngineError);
    gpu.dispose();
  });

  it('shape errors are thrown before anything is dispatched', async () => {
    const gpu = await gpuBackend();
    const x = gpu.tensor(new Float32Array(6), [2, 3]);
    expect(() => gpu.rmsnorm(x, gpu.tensor(new Float32Array(2), [2]), 1e-6)).toThrow(code('shape'));
    expect(() => gpu.rope(x, gpu.zeros([2], 'i32'), 1e4)).toThrow(code('shape'));
    expect(() => gpu.tensor(new Float32Array(5), [2, 3])).toThrow(code('shape'));
    expect(() => gpu.write(x, new Float32Array(5))).toThrow(code('shape'));
    gpu.free(x);
    expect(() => gpu.scale(x, 2)).toThrow(code('shape'));
    await gpu.sync(); // nothing bad was recorded
    gpu.dispose();
  });
});

describe('WebGPU without an adapter', () => {
  it('rejects with no-adapter', async () => {
    const none = { requestAdapter: async () => null } as unknown as GPU;
    await expect(createWebGpuBackend({ gpu: none })).rejects.toEqual(code('no-adapter'));
  });
});
