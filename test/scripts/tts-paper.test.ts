// The private-rehearsal table's paper column: EnvACE's Table 3, τ²-Bench average (not its Overall, which
// averages in BFCL multi-turn), and nothing where the paper reports nothing for τ² (its N sweep is BFCL only).
import { describe, expect, it } from 'vitest';
import { paperFigure } from '../../research/scripts/tts-table';

describe('paper τ² figures of private rehearsal', () => {
  it('are Table 3 τ² Avg at N = 0 and N = 2, and absent elsewhere', () => {
    expect(paperFigure('envace', 'parallel', 0)).toBe('31.4');
    expect(paperFigure('base', 'parallel', 0)).toBe('–');
    expect(paperFigure('base', 'parallel', 2)).toBe('32.2');
    expect(paperFigure('envace', 'parallel', 2)).toBe('38.0 (+6.6)');
    expect(paperFigure('base', 'sequential', 2)).toBe('31.0');
    expect(paperFigure('envace', 'sequential', 2)).toBe('34.8 (+3.4)');
    for (const n of [1, 3]) for (const p of ['base', 'envace'] as const) expect(paperFigure(p, 'parallel', n)).toBe('–');
  });
});
