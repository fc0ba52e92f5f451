// A small version of `npm run bench -- serve`: concurrent episodes over loopback HTTP, every
// request answered, every episode released, the heap back near its baseline after each round (no growth
// over the rounds). The full 64 × 20 × 5 run, with its latency and throughput records, is the bench suite.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadRound, settledHeap } from '../../src/server/load';
import { startHarness, type Harness } from './helpers';

let h: Harness;
beforeAll(async () => {
  h = await startHarness('mini', { train: 40, test: 0 });
});
afterAll(async () => {
  await h.server.close(1000);
});

it('serves 24 concurrent episodes x 10 calls for 3 rounds without failures or a growing heap', async () => {
  await loadRound(h.server.url, h.train, 24, 10); // warm-up
  const base = settledHeap();
  const over: number[] = [];
  for (let r = 0; r < 3; r++) {
    const res = await loadRound(h.server.url, h.train, 24, 10);
    expect(res.failures).toBe(0);
    expect(res.calls).toBe(240);
    expect(res.p50Ms).toBeGreaterThan(0);
    expect(res.p99Ms).toBeGreaterThanOrEqual(res.p50Ms);
    expect(h.server.store.size).toBe(0);
    over.push((settledHeap() - base) / 2 ** 20);
  }
  // Each round creates 24 episodes with their own databases and conversations (several MiB if kept).
  for (const mb of over) expect(mb).toBeLessThan(4);
  expect(h.server.store.stats.created).toBe(4 * 24);
  expect(h.server.store.stats.released).toBe(4 * 24);
});
