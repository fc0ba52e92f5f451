// Plot tick labels (src/ui/format.ts): distinct and readable at every magnitude.
import { describe, expect, it } from 'vitest';
import { tickLabels } from '../../src/ui/format';

describe('tick labels', () => {
  it('small magnitudes get the decimals their spacing needs (never all "0")', () => {
    expect(tickLabels([0, 0.0002, 0.0004, 0.0006])).toEqual(['0', '2.0e-4', '4.0e-4', '6.0e-4']);
    expect(tickLabels([-0.02, -0.01, 0, 0.01])).toEqual(['-0.02', '-0.01', '0', '0.01']);
    expect(tickLabels([0.1, 0.2, 0.3])).toEqual(['0.1', '0.2', '0.3']);
    expect(tickLabels([0.9995, 1, 1.0005])).toEqual(['0.9995', '1.0000', '1.0005']);
    // A spacing of a quarter needs two decimals: with one, 0.25 and 0.75 read 0.3 and 0.8 (a rate axis of [0, 1] did).
    expect(tickLabels([0, 0.25, 0.5, 0.75, 1])).toEqual(['0', '0.25', '0.50', '0.75', '1.00']);
    expect(tickLabels([0, 2500, 5000, 7500, 10000])).toEqual(['0', '2.5k', '5.0k', '7.5k', '10.0k']);
  });
  it('ordinary and large magnitudes', () => {
    expect(tickLabels([0, 5, 10])).toEqual(['0', '5', '10']);
    expect(tickLabels([0, 5000, 10000, 15000])).toEqual(['0', '5k', '10k', '15k']);
    expect(tickLabels([1_000_000, 1_500_000, 2_000_000])).toEqual(['1.0M', '1.5M', '2.0M']);
    expect(tickLabels([0, 2e8, 4e8])).toEqual(['0', '2.0e8', '4.0e8']);
  });
  it('every label of an axis is distinct', () => {
    for (const ticks of [[1e-7, 2e-7, 3e-7], [0.00011, 0.00012, 0.00013], [123456, 123457, 123458]]) {
      const l = tickLabels(ticks);
      expect(new Set(l).size).toBe(l.length);
    }
  });
});
