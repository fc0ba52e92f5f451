// research/scripts/average-weights.ts: the element-wise mean of the folders' tensors, refused for other tensors.
import { describe, expect, it } from 'vitest';
import { averageWeights } from '../../research/scripts/average-weights';
import { parseSafetensors, writeSafetensors } from '../../src/model/safetensors';

const file = (name: string, tensors: Record<string, number[]>, shape = [2, 2]) =>
  parseSafetensors(writeSafetensors(Object.fromEntries(Object.entries(tensors).map(([k, v]) => [k, { dtype: 'F32' as const, shape, data: new Float32Array(v) }]))), name);

describe('averageWeights', () => {
  it('is the element-wise mean of every tensor', () => {
    const out = averageWeights([file('a', { w: [1, 2, 3, 4], v: [0, 0, 0, 0] }), file('b', { w: [3, 2, 1, 0], v: [1, -1, 2, 6] }), file('c', { w: [2, 2, 2, 2], v: [2, 1, 1, 0] })]);
    expect([...out.w.data]).toEqual([2, 2, 2, 2]);
    expect([...out.v.data]).toEqual([1, 0, 1, 2]);
    expect(out.w.shape).toEqual([2, 2]);
  });

  it('refuses folders whose tensors differ in name or shape', () => {
    expect(() => averageWeights([file('a', { w: [1, 2, 3, 4] }), file('b', { u: [1, 2, 3, 4] })])).toThrow(/b holds other tensors than a/);
    expect(() => averageWeights([file('a', { w: [1, 2, 3, 4] }), file('b', { w: [1, 2, 3, 4] }, [4, 1])])).toThrow(/w: shape 4x1 in b, 2x2 in a/);
  });
});
