// Hand-worked checks of the CPU reference backend: it is the oracle of every other backend, so it needs
// its own checks against values computed by hand.
import { describe, expect, it } from 'vitest';
import { CpuRefBackend } from '../../src/engine/cpu/ref';
import { Q4_GROUP, dequantize, quantize } from '../../src/engine/quant';
import { Rng } from '../../src/util/rng';
import { sampleRow } from '../../src/engine/sampling';

const b = new CpuRefBackend();
const f = (a: number[]) => Float32Array.from(a);
const i32 = (a: number[]) => Int32Array.from(a);
const read = async (t: ReturnType<typeof b.tensor>) => Array.from(await b.read(t));
const close = (got: number[], want: number[], tol = 1e-6) => {
  expect(got.length).toBe(want.length);
  got.forEach((g, i) => expect(Math.abs(g - want[i]), `element ${i}: ${g} vs ${want[i]}`).toBeLessThanOrEqual(tol));
};

describe('CPU reference, by hand', () => {
  it('rmsnorm: [3,4] has rms sqrt(12.5)', async () => {
    const y = b.rmsnorm(b.tensor(f([3, 4]), [1, 2]), b.tensor(f([1, 2]), [2]), 0);
    const rms = Math.sqrt(12.5);
    close(await read(y), [3 / rms, (4 / rms) * 2]);
  });

  it('rope: position 0 is the identity; position 1 rotates pairs (i, i+D/2) by theta^(-2i/D) and keeps the norm', async () => {
    const x = b.tensor(f([1, 2, 3, 4]), [1, 1, 4]);
    close(await read(b.rope(x, b.tensor(i32([0]), [1]), 10000)), [1, 2, 3, 4]);
    const y = await read(b.rope(x, b.tensor(i32([1]), [1]), 10000));
    const [a0, a1] = [1, 10000 ** (-2 / 4)]; // angles of pair (0,2) and pair (1,3)
    close(y, [
      1 * Math.cos(a0) - 3 * Math.sin(a0),
      2 * Math.cos(a1) - 4 * Math.sin(a1),
      3 * Math.cos(a0) + 1 * Math.sin(a0),
      4 * Math.cos(a1) + 2 * Math.sin(a1),
    ]);
    const norm = (v: number[]) => Math.hypot(...v);
    const big = await read(b.rope(x, b.tensor(i32([12345]), [1]), 10000));
    expect(Math.abs(norm(big) - norm([1, 2, 3, 4]))).toBeLessThan(1e-5);
  });

  it('matmul: y = x W^T with W in (N,K) layout', async () => {
    const y = b.matmul(b.tensor(f([1, 2]), [1, 2]), b.tensor(f([1, 0, 0, 1, 1, 1]), [3, 2]));
    close(await read(y), [1, 2, 3]);
  });

  const layout = (slot: number[], pos: number[]) => ({ slot: b.tensor(i32(slot), [slot.length]), pos: b.tensor(i32(pos), [pos.length]) });

  it('attention with one key returns v; it never sees later positions (causal)', async () => {
    const kc = b.zeros([1, 3, 1, 2]);
    const vc = b.zeros([1, 3, 1, 2]);
    b.kvWrite(kc, vc, b.tensor(f([1, 0, 5, 5, 9, 9]), [3, 1, 2]), b.tensor(f([7, -3, 100, 100, 200, 200]), [3, 1, 2]), layout([0, 0, 0], [0, 1, 2]));
    const q = b.tensor(f([0.3, 0.4, 1, 1]), [1, 2, 2]);
    close(await read(b.attention(q, kc, vc, layout([0], [0]))), [7, -3, 7, -3]);
  });

  it('GQA: query heads 0,1 read kv head 0 and heads 2,3 kv head 1; zero q averages the values', async () => {
    // cache (1 slot, 2 positions, 2 kv heads, D=1): kv head 0 keys 0.5,2 values 1,3; kv head 1 keys -1,4 values 10,30
    const kc = b.tensor(f([0.5, -1, 2, 4]), [1, 2, 2, 1]);
    const vc = b.tensor(f([1, 10, 3, 30]), [1, 2, 2, 1]);
    const y = await read(b.attention(b.zeros([1, 4, 1]), kc, vc, layout([0], [1])));
    close(y, [2, 2, 20, 20]);
    // q = 1 on head 2: weights softmax([-1, 4]) over kv head 1's keys (scale 1/sqrt(1))
    const w = 1 / (1 + Math.exp(5));
    const y2 = await read(b.attention(b.tensor(f([0, 0, 1, 0]), [1, 4, 1]), kc, vc, layout([0], [1])));
    close(y2, [2, 2, w * 10 + (1 - w) * 30, 20], 1e-5);
  });

  it('logSoftmax rows exponentiate to probabilities that sum to 1', async () => {
    const r = new Rng(3);
    const x = Float32Array.from({ length: 3 * 50 }, () => r.normal() * 5);
    const y = await read(b.logSoftmax(b.tensor(x, [3, 50])));
    for (let row = 0; row < 3; row++) {
      const s = y.slice(row * 50, row * 50 + 50).reduce((a, v) => a + Math.exp(v), 0);
      expect(Math.abs(s - 1)).toBeLessThan(1e-6);
    }
    close(await read(b.logSoftmax(b.tensor(f([0, Math.log(3)]), [1, 2]))), [Math.log(0.25), Math.log(0.75)]);
  });

  it('q8 error <= row scale / 2 and q4 error <= group scale / 2; values on the grid are exact', () => {
    const r = new Rng(11);
    const [n, k] = [5, 70]; // 70: q4 pads the last group of 32
    const w = Float32Array.from({ length: n * k }, () => r.normal());
    const q8 = quantize(w, n, k, 'q8');
    const d8 = dequantize(q8);
    const q4 = quantize(w, n, k, 'q4');
    const d4 = dequantize(q4);
    const groups = q4.stride / Q4_GROUP;
    for (let row = 0; row < n; row++)
      for (let c = 0; c < k; c++) {
        const x = w[row * k + c];
        expect(Math.abs(d8[row * k + c] - x)).toBeLessThanOrEqual(q8.scales[row] / 2 + 1e-7);
        expect(Math.abs(d4[row * k + c] - x)).toBeLessThanOrEqual(q4.scales[row * groups + Math.floor(c / Q4_GROUP)] / 2 + 1e-7);
      }
    // a row whose values are multiples of absmax/127 survives q8 unchanged
    const exact = Float32Array.from([127, -64, 0, 1].map((v) => v / 127));
    expect(Array.from(dequantize(quantize(exact, 1, 4, 'q8')))).toEqual(Array.from(exact).map((v) => Math.fround(v)));
  });

  it('sampling rule: greedy ties take the lowest index; top-p keeps the fewest top tokens reaching the mass', () => {
    expect(sampleRow([1, 5, 5, 2], { temperature: 0, topP: 1, seed: 0, step: 0 }).token).toBe(1);
    const logits = [0.5, 0.3, 0.2].map(Math.log);
    const seen = new Set<number>();
    for (let s = 0; s < 200; s++) seen.add(sampleRow(logits, { temperature: 1, topP: 0.6, seed: 1, step: s }).token);
    expect(seen).toEqual(new Set([0, 1])); // 0.5 < 0.6 <= 0.5 + 0.3
    const lp = sampleRow(logits, { temperature: 1, topP: 0.6, seed: 1, step: 0 });
    expect(Math.abs(lp.logprob - Math.log([0.5, 0.3][lp.token]))).toBeLessThan(1e-9); // before renormalisation
  });
});
