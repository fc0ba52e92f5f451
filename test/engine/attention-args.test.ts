// The attention op's argument opener (src/engine/attention-args.ts), shared by the backends: the dimensions of
// a well-formed call, and a `shape` error naming the op for each way the arguments can disagree.
import { describe, expect, it } from 'vitest';
import type { DType, Tensor } from '../../src/engine/backend';
import { attentionDims } from '../../src/engine/attention-args';
import { createCpuFastBackend } from '../../src/engine/cpu/fast/backend';
import { CpuRefBackend } from '../../src/engine/cpu/ref';
import { CpuRefTrainOps } from '../../src/engine/cpu/train-ops';

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

// The CPU paths open their arguments with one function (src/engine/cpu/attention-args.ts): the reference and the
// fast path, forward and backward, refuse the same calls with the same message, an out-of-cache position included
// (which only a backend holding the values can see; the reference used to read past the cache instead).
describe('the CPU attention opener, on the reference and the fast path', () => {
  const ref = new CpuRefBackend();
  const refTrain = new CpuRefTrainOps(ref);
  it('refuses a shape mismatch or a position outside the cache identically in all four entries', async () => {
    const fast = await createCpuFastBackend({ threads: 1 });
    try {
      for (const b of [ref, fast]) {
        const train = b === ref ? refTrain : fast.train;
        const cache = b.zeros([1, 4, 1, 2]);
        const q = b.tensor(new Float32Array(2), [1, 1, 2]);
        const at = (p: number) => ({ slot: b.tensor(Int32Array.from([0]), [1]), pos: b.tensor(Int32Array.from([p]), [1]) });
        expect(() => b.attention(q, cache, cache, at(4))).toThrow('[shape] attention: slot 0 pos 4 outside cache (1,4)');
        expect(() => train.attentionBackward(q, q, cache, cache, at(4))).toThrow('[shape] attentionBackward: slot 0 pos 4 outside cache (1,4)');
        expect(() => b.attention(q, cache, b.zeros([1, 3, 1, 2]), at(0))).toThrow(/^\[shape\] attention: v cache/);
        expect(() => train.attentionBackward(b.tensor(new Float32Array(4), [1, 1, 4]), q, cache, cache, at(0))).toThrow(/^\[shape\] attentionBackward: dOut/);
        // In range, the opener lets the call through.
        expect(b.attention(q, cache, cache, at(3)).shape).toEqual([1, 1, 2]);
      }
    } finally {
      fast.dispose();
    }
  });
});
