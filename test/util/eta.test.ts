// The time left of a batch whose items finish at different rounds (src/util/eta.ts), and the CLI's progress
// meter (src/cli/args.ts meter): what a student reads during the eval CLI's long phases (issue 48).
import { describe, expect, it } from 'vitest';
import { meter } from '../../src/cli/args';
import { formatLeft, RoundEta } from '../../src/util/eta';
import { captureIo } from '../helpers/cli';

describe('RoundEta', () => {
  it('says nothing before a round has been timed', () => {
    const e = new RoundEta(10, 12);
    expect(e.leftMs(0)).toBeUndefined();
    e.round(0, 10, 0);
    expect(e.leftMs(5)).toBeUndefined();
  });

  it('before any item finishes, bounds the time by the round cap', () => {
    const e = new RoundEta(10, 12);
    e.round(0, 10, 0);
    e.round(1, 10, 1000); // 10 item-rounds in 1 s: 100 ms each; none finished
    // 10 items × (12 − 1) rounds at most × 100 ms
    expect(e.leftMs(1000)).toBeCloseTo(11_000);
    expect(e.finished).toBe(0);
  });

  it('uses the finishing rate seen so far, and counts down within a round', () => {
    const e = new RoundEta(100, 12);
    e.round(0, 100, 0);
    e.round(1, 100, 1000);
    e.round(2, 100, 2000);
    e.round(3, 50, 3000); // 300 item-rounds in 3 s (10 ms each); 50 finished: 6 item-rounds per finish
    expect(e.finished).toBe(50);
    expect(e.leftMs(3000)).toBeCloseTo(10 * 50 * 6);
    expect(e.leftMs(4000)).toBeCloseTo(10 * 50 * 6 - 1000);
    expect(e.leftMs(1e9)).toBe(0);
  });

  it('comes near the truth for a batch that costs per item-round and halves every round', () => {
    // 64 items; a round costs 5 ms per item still going; half of those still going finish each round.
    const roundsOf = (n: number) => { const ts = [0]; for (let a = n; a > 0; a = Math.floor(a / 2)) ts.push(ts[ts.length - 1] + 5 * a); return ts; };
    const t = roundsOf(64); // t[r]: when round r starts; the last entry: when the batch ends
    const e = new RoundEta(64, 20);
    for (let r = 0, a = 64; r <= 3; r++, a = Math.floor(a / 2)) e.round(r, a, t[r]);
    const truth = t[t.length - 1] - t[3];
    // Geometric finishing at rate 1/2 is what the estimate assumes: within a third of the truth at round 3.
    expect(Math.abs(e.leftMs(t[3])! - truth) / truth).toBeLessThan(1 / 3);
  });

  it('is 0 when every item has finished', () => {
    const e = new RoundEta(3, 5);
    e.round(0, 3, 0);
    e.round(1, 0, 10);
    expect(e.leftMs(10)).toBe(0);
    expect(e.finished).toBe(3);
  });
});

describe('formatLeft', () => {
  it('seconds under 90 s, minutes above', () => {
    expect(formatLeft(0)).toBe('about 1 s left');
    expect(formatLeft(42_400)).toBe('about 42 s left');
    expect(formatLeft(180_000)).toBe('about 3 min left');
  });
});

describe('meter', () => {
  it('without a terminal: plain lines, at the start, at most every everyMs, and the last one', () => {
    const io = captureIo();
    let t = 0;
    const m = meter(io, 'eval', { everyMs: 1000, now: () => t });
    m.update('episodes', 0, 10);
    t = 200;
    m.update('episodes', 3, 10, 5000); // too soon: dropped
    t = 1500;
    m.update('episodes', 5, 10, 4000);
    t = 1600;
    m.update('episodes', 10, 10, 0); // the last line always comes
    m.update('episodes', 10, 10, 0); // and only once
    const lines = io.stderr().trimEnd().split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(/^\[eval \d\d:\d\d:\d\d\] episodes: 0 of 10 \(estimating the time left\)$/);
    expect(lines[1]).toMatch(/episodes: 5 of 10 \(about 4 s left\)$/);
    expect(lines[2]).toMatch(/episodes: 10 of 10 \(done\)$/);
    expect(io.stdout()).toBe('');
  });

  it('a new phase prints at once', () => {
    const io = captureIo();
    const m = meter(io, 'eval', { everyMs: 60_000, now: () => 0 });
    m.update('episodes', 1, 10);
    m.update('fidelity', 0, 30);
    expect(io.stderr().trimEnd().split('\n')).toHaveLength(2);
  });

  it('on a terminal: one bar redrawn in place, ended with a newline', () => {
    const io = { ...captureIo(), tty: true };
    let t = 0;
    const m = meter(io, 'eval', { now: () => t });
    m.update('fidelity', 0, 4);
    t = 500;
    m.update('fidelity', 2, 4, 3000);
    t = 1000;
    m.update('fidelity', 4, 4, 0);
    const out = io.stderr();
    expect(out.startsWith('\r')).toBe(true);
    expect(out.split('\n')).toHaveLength(2); // one line, ended once
    expect(out).toContain('[############............] 2/4 · about 3 s left');
    expect(out).toMatch(/\[#{24}\] 4\/4 · done\s*\n$/);
  });
});
