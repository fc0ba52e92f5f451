// KV-cache write and grouped-query causal attention vs the CPU reference: several slots of different
// lengths (one longer than the 64-key chunk), mixed in one flat batch; and prefill followed by decode
// steps equal to recomputing everything at once.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Backend, Tensor } from '../../src/engine/backend';
import type { WebGpuBackend } from '../../src/engine/webgpu/backend';
import { attentionParts } from '../../src/engine/webgpu/kernels/attention';
import { gpuAvailable } from '../helpers/gpu';
import { cpu, expectClose, gpuBackend, randn } from './webgpu-helpers';

const run = await gpuAvailable();
const [S, MAXT, HQ, HKV, D] = [3, 80, 6, 2, 33];
const LENS = [5, 70, 1]; // tokens per slot; 70 spans two 64-key chunks

/** Tokens of every slot, interleaved: (slot, pos) for positions [from, to) of each slot. */
function layoutOf(from: (s: number) => number, to: (s: number) => number) {
  const slot: number[] = [];
  const pos: number[] = [];
  for (let p = 0; p < MAXT; p++)
    for (let s = 0; s < S; s++)
      if (p >= from(s) && p < to(s)) {
        slot.push(s);
        pos.push(p);
      }
  return { slot: Int32Array.from(slot), pos: Int32Array.from(pos) };
}

// Per (slot, pos) deterministic q/k/v rows so any batching sees the same data.
const rowOf = (kind: number, s: number, p: number, width: number) => randn(width, kind * 100000 + s * 1000 + p);
function qkv(slot: Int32Array, pos: Int32Array) {
  const q = new Float32Array(slot.length * HQ * D);
  const k = new Float32Array(slot.length * HKV * D);
  const v = new Float32Array(slot.length * HKV * D);
  for (let t = 0; t < slot.length; t++) {
    q.set(rowOf(1, slot[t], pos[t], HQ * D), t * HQ * D);
    k.set(rowOf(2, slot[t], pos[t], HKV * D), t * HKV * D);
    v.set(rowOf(3, slot[t], pos[t], HKV * D), t * HKV * D);
  }
  return { q, k, v };
}

/** kvWrite + attention for one batch; returns the output (T,Hq,D). */
async function step(b: Backend, kc: Tensor, vc: Tensor, slot: Int32Array, pos: Int32Array): Promise<Float32Array> {
  const { q, k, v } = qkv(slot, pos);
  const T = slot.length;
  const layout = { slot: b.tensor(slot, [T]), pos: b.tensor(pos, [T]) };
  b.kvWrite(kc, vc, b.tensor(k, [T, HKV, D]), b.tensor(v, [T, HKV, D]), layout);
  return (await b.read(b.attention(b.tensor(q, [T, HQ, D]), kc, vc, layout))) as Float32Array;
}

type Batch = { slot: number[]; pos: number[] };
/** Fresh (s, maxT, hkv, d) caches; kvWrite + attention for each batch in turn; the outputs (T,hq,d). */
async function runBatches(b: Backend, [s, maxT, hq, hkv, d]: number[], batches: Batch[]): Promise<Float32Array[]> {
  const rows = (kind: number, slot: number[], pos: number[], w: number) => {
    const out = new Float32Array(slot.length * w);
    slot.forEach((sl, t) => out.set(randn(w, kind * 100000 + sl * 1000 + pos[t]), t * w));
    return out;
  };
  const kc = b.zeros([s, maxT, hkv, d]);
  const vc = b.zeros([s, maxT, hkv, d]);
  const outs: Float32Array[] = [];
  for (const { slot, pos } of batches) {
    const T = slot.length;
    const layout = { slot: b.tensor(Int32Array.from(slot), [T]), pos: b.tensor(Int32Array.from(pos), [T]) };
    b.kvWrite(kc, vc, b.tensor(rows(2, slot, pos, hkv * d), [T, hkv, d]), b.tensor(rows(3, slot, pos, hkv * d), [T, hkv, d]), layout);
    outs.push((await b.read(b.attention(b.tensor(rows(1, slot, pos, hq * d), [T, hq, d]), kc, vc, layout))) as Float32Array);
  }
  return outs;
}

describe.skipIf(!run)('WebGPU KV cache and attention', () => {
  let gpu: WebGpuBackend;
  beforeAll(async () => {
    gpu = await gpuBackend();
  });
  afterAll(() => gpu?.dispose());

  it('kvWrite fills the same cache cells as the CPU (exact copies)', async () => {
    const { slot, pos } = layoutOf(() => 0, (s) => LENS[s]);
    const caches = (b: Backend) => [b.zeros([S, MAXT, HKV, D]), b.zeros([S, MAXT, HKV, D])] as const;
    const [ck, cv] = caches(cpu);
    const [gk, gv] = caches(gpu);
    await step(cpu, ck, cv, slot, pos);
    await step(gpu, gk, gv, slot, pos);
    expectClose(await gpu.read(gk), await cpu.read(ck), 0, 0, 'k cache');
    expectClose(await gpu.read(gv), await cpu.read(cv), 0, 0, 'v cache');
  });

  it('attention over mixed slots equals the CPU (f32 online softmax vs f64: 2e-5 abs on outputs ~N(0,1))', async () => {
    const { slot, pos } = layoutOf(() => 0, (s) => LENS[s]);
    const want = await step(cpu, cpu.zeros([S, MAXT, HKV, D]), cpu.zeros([S, MAXT, HKV, D]), slot, pos);
    const got = await step(gpu, gpu.zeros([S, MAXT, HKV, D]), gpu.zeros([S, MAXT, HKV, D]), slot, pos);
    expectClose(got, want, 2e-5, 1e-5, 'attention');
  });

  it('attention with one key returns v exactly up to rounding (softmax of one score is 1)', async () => {
    const slot = Int32Array.from([2]);
    const pos = Int32Array.from([0]);
    const out = await step(gpu, gpu.zeros([S, MAXT, HKV, D]), gpu.zeros([S, MAXT, HKV, D]), slot, pos);
    const { v } = qkv(slot, pos);
    const want = new Float32Array(HQ * D);
    for (let h = 0; h < HQ; h++) want.set(v.subarray(Math.floor(h / (HQ / HKV)) * D, Math.floor(h / (HQ / HKV)) * D + D), h * D);
    expectClose(out, want, 1e-6, 1e-6, 'one key');
  });

  it('prefill then 3 batched decode steps equal full recomputation (same kernel: bit-exact) and the CPU', async () => {
    const DEC = 3;
    const kc = gpu.zeros([S, MAXT, HKV, D]);
    const vc = gpu.zeros([S, MAXT, HKV, D]);
    // slots shorter than DEC start decoding at position 0: prefill covers max(0, len - DEC) tokens
    const preLen = (s: number) => Math.max(0, LENS[s] - DEC);
    const prefill = layoutOf(() => 0, preLen);
    expect(prefill.slot.length).toBeGreaterThan(0);
    await step(gpu, kc, vc, prefill.slot, prefill.pos);
    const decoded = new Map<string, Float32Array>();
    for (let i = 0; i < DEC; i++) {
      const slot: number[] = [];
      const pos: number[] = [];
      for (let s = 0; s < S; s++) if (preLen(s) + i < LENS[s]) (slot.push(s), pos.push(preLen(s) + i));
      const out = await step(gpu, kc, vc, Int32Array.from(slot), Int32Array.from(pos));
      slot.forEach((s, t) => decoded.set(`${s}/${pos[t]}`, out.subarray(t * HQ * D, (t + 1) * HQ * D)));
    }
    const full = layoutOf(() => 0, (s) => LENS[s]);
    const all = await step(gpu, gpu.zeros([S, MAXT, HKV, D]), gpu.zeros([S, MAXT, HKV, D]), full.slot, full.pos);
    const ref = await step(cpu, cpu.zeros([S, MAXT, HKV, D]), cpu.zeros([S, MAXT, HKV, D]), full.slot, full.pos);
    let checked = 0;
    for (let t = 0; t < full.slot.length; t++) {
      const d = decoded.get(`${full.slot[t]}/${full.pos[t]}`);
      if (!d) continue;
      checked++;
      expectClose(d, all.subarray(t * HQ * D, (t + 1) * HQ * D), 0, 0, `decode vs full, token ${t}`);
      expectClose(d, ref.subarray(t * HQ * D, (t + 1) * HQ * D), 2e-5, 1e-5, `decode vs CPU, token ${t}`);
    }
    expect(checked).toBe(LENS.reduce((a, l) => a + Math.min(l, DEC), 0));
  });

  it('long contexts with few tokens in flight use the split (flash-decoding) kernel: equal to the CPU and to one-pass', async () => {
    const [s, maxT, hq, hkv, d] = [2, 300, 4, 2, 16]; // maxT > 256: two key partitions
    const lens = [100, 290];
    expect(attentionParts(2, hq, maxT), 'decode takes the split path').toBeGreaterThan(1);
    expect(attentionParts(lens[0] + lens[1], hq, maxT), 'prefill takes the one-pass path').toBe(1);
    const run = (b: Backend, batches: Batch[]) => runBatches(b, [s, maxT, hq, hkv, d], batches);
    const all = { slot: [...Array(lens[0]).fill(0), ...Array(lens[1]).fill(1)], pos: [...Array(lens[0]).keys(), ...Array(lens[1]).keys()] };
    const prefill = { slot: [...Array(lens[0] - 1).fill(0), ...Array(lens[1] - 1).fill(1)], pos: [...Array(lens[0] - 1).keys(), ...Array(lens[1] - 1).keys()] };
    const decode = { slot: [0, 1], pos: [lens[0] - 1, lens[1] - 1] };
    const [, dec] = await run(gpu, [prefill, decode]);
    const [full] = await run(gpu, [all]);
    const [ref] = await run(cpu, [all]);
    const last = (x: Float32Array) => Float32Array.from([...x.subarray((lens[0] - 1) * hq * d, lens[0] * hq * d), ...x.subarray((all.slot.length - 1) * hq * d)]);
    // split vs one-pass: the same online softmax merged in a different order, f32: 1e-6 abs on outputs ~N(0,1)/sqrt(keys)
    expectClose(dec, last(full), 1e-6, 1e-5, 'split decode vs one-pass full');
    expectClose(dec, last(ref), 2e-5, 1e-5, 'split decode vs CPU');
    expectClose(full, ref, 2e-5, 1e-5, 'one-pass full vs CPU');
  });

  it('heads wider than 64 take the workgroup kernels (one-pass and split): equal to the CPU', async () => {
    // Head sizes <= 64 run one thread per (token, head); the other tests all use those, so this covers the rest.
    const [s, maxT, hq, hkv, d] = [2, 300, 2, 1, 80];
    const lens = [40, 290];
    const run = (b: Backend, batches: Batch[]) => runBatches(b, [s, maxT, hq, hkv, d], batches);
    const prefill = { slot: [...Array(lens[0] - 1).fill(0), ...Array(lens[1] - 1).fill(1)], pos: [...Array(lens[0] - 1).keys(), ...Array(lens[1] - 1).keys()] };
    const decode = { slot: [0, 1], pos: [lens[0] - 1, lens[1] - 1] };
    expect(attentionParts(2, hq, maxT), 'decode takes the split path').toBeGreaterThan(1);
    const [gp, gd] = await run(gpu, [prefill, decode]);
    const [cp, cd] = await run(cpu, [prefill, decode]);
    expectClose(gp, cp, 2e-5, 1e-5, 'prefill (one pass), D = 80');
    expectClose(gd, cd, 2e-5, 1e-5, 'decode (split), D = 80');
  });

  it('a KV cache sharded by slots (tiny maxBufferBytes) gives exactly the unsharded results', async () => {
    const small = await gpuBackend({ maxBufferBytes: 512 }); // (3 slots, 8 pos, 1 head, D 8): 256 B per slot
    try {
      const shape = [3, 8, 1, 8];
      const slot = Int32Array.from([0, 1, 2, 2, 1, 2]);
      const pos = Int32Array.from([0, 0, 0, 1, 1, 2]);
      const q = randn(6 * 2 * 8, 1);
      const k = randn(6 * 8, 2);
      const v = randn(6 * 8, 3);
      const outs: Float32Array[] = [];
      for (const b of [gpu, small]) {
        const kc = b.zeros(shape);
        const vc = b.zeros(shape);
        const layout = { slot: b.tensor(slot, [6]), pos: b.tensor(pos, [6]) };
        b.kvWrite(kc, vc, b.tensor(k, [6, 1, 8]), b.tensor(v, [6, 1, 8]), layout);
        outs.push((await b.read(b.attention(b.tensor(q, [6, 2, 8]), kc, vc, layout))) as Float32Array);
        if (b === small) {
          expect((kc as unknown as { parts: unknown[] }).parts.length).toBe(2);
          const ref = cpu.zeros(shape);
          cpu.kvWrite(ref, cpu.zeros(shape), cpu.tensor(k, [6, 1, 8]), cpu.tensor(v, [6, 1, 8]), { slot: cpu.tensor(slot, [6]), pos: cpu.tensor(pos, [6]) });
          expectClose(await b.read(kc), await cpu.read(ref), 0, 0, 'sharded k cache');
        }
      }
      expectClose(outs[1], outs[0], 0, 0, 'sharded attention');
    } finally {
      small.dispose();
    }
  });

  it('attention rejects an incompatible head layout', () => {
    const q = gpu.zeros([1, 5, D]); // 5 query heads cannot share 2 kv heads
    const c = gpu.zeros([S, MAXT, HKV, D]);
    const l = { slot: gpu.zeros([1], 'i32'), pos: gpu.zeros([1], 'i32') };
    expect(() => gpu.attention(q, c, c, l)).toThrow(expect.objectContaining({ code: 'shape' }));
  });
});
