// The attention op's argument opener (src/engine/attention-args.ts), shared by the backends: the dimensions of
// a well-formed call, and a `shape` error naming the op for each way the arguments can disagree.
import { describe, expect, it } from 'vitest';
import type { DType, Tensor } from '../../src/engine/backend';
import { attentionDims } from '../../src/engine/attention-args';

const t = (shape: number[], dtype: DType = 'f32'): Tensor => ({ shape, dtype, backend: 'cpu-ref' });
const q = t([5, 4, 8]);
const cache = t([3, 16, 2, 8]);
const slot = t([5], 'i32');
const pos = t([5], 'i32');

describe('attentionDims', () => {
  it('reads T, Hq, D from q and S, maxT, Hkv from the caches', () => {
    expect(attentionDims('attention', q, cache, cache, slot, pos)).toEqual({ T: 5, Hq: 4, D: 8, S: 3, maxT: 16, Hkv: 2 });
    expect(attentionDims('attentionBackward', q, cache, cache, slot, pos, t([5, 4, 8]))).toEqual({ T: 5, Hq: 4, D: 8, S: 3, maxT: 16, Hkv: 2 });
  });

  const bad: [string, () => unknown][] = [
    ['q of rank 2', () => attentionDims('attention', t([5, 32]), cache, cache, slot, pos)],
    ['a head size unlike the cache', () => attentionDims('attention', t([5, 4, 4]), cache, cache, slot, pos)],
    ['Hq not a multiple of Hkv', () => attentionDims('attention', t([5, 3, 8]), cache, cache, slot, pos)],
    ['v cache unlike k cache', () => attentionDims('attention', q, cache, t([3, 8, 2, 8]), slot, pos)],
    ['f32 positions', () => attentionDims('attention', q, cache, cache, slot, t([5]))],
    ['a layout of another length', () => attentionDims('attention', q, cache, cache, t([4], 'i32'), pos)],
    ['dOut unlike q', () => attentionDims('attentionBackward', q, cache, cache, slot, pos, t([5, 4, 4]))],
  ];
  for (const [what, call] of bad) {
    it(`refuses ${what} with a shape error naming the op`, () => {
      expect(call).toThrow(expect.objectContaining({ code: 'shape', message: expect.stringMatching(/^\[shape\] attention(Backward)?: /) }));
    });
  }
});
