// The environment server under load: 64 concurrent episodes × 20 calls over loopback HTTP, five
// rounds; per-call p50/p99 latency, throughput, and the heap after each round against the baseline taken
// after a warm-up round (a leak shows as growth over the rounds); then expired-episode reclamation.
// The client runs in a worker thread (its own event loop and heap): the heap measured is the server's alone.
// Then the cost of persistence: rounds against a server journaling under --state (fdatasync'ed JSONL) and one in
// memory only, alternated in the same process, with the journaled / in-memory ratio of each figure.
import { median, type BenchSuite } from '../lib';
import { loadWorldDomain } from '../../src/env/retail/node';
import { taskSet } from '../../src/server/episodes';
import { startServer } from '../../src/server/http';
import { loadRound, settledHeap } from '../../src/server/load';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const suite: BenchSuite = {
  name: 'serve',
  async run(ctx) {
    const world = 'mini';
    const domain = loadWorldDomain(world);
    const tasks = domain.tasks.generate({ split: 'train', count: 200, seed: 0 });
    const episodes = ctx.quick ? 16 : 64;
    const calls = ctx.quick ? 10 : 20;
    const rounds = 5;
    const server = await startServer({ domain, world, tasks: taskSet(tasks), port: 0, log: () => {}, ttlMs: 60_000 });
    const shape = `${episodes} episodes x ${calls} calls`;
    const model = `world ${world}`;
    try {
      await loadRound(server.url, tasks, episodes, calls); // warm-up
      const base = settledHeap();
      ctx.log(`baseline heap ${(base / 2 ** 20).toFixed(1)} MiB`);
      let last = base;
      for (let r = 0; r < rounds; r++) {
        const res = await loadRound(server.url, tasks, episodes, calls);
        last = settledHeap();
        ctx.log(`round ${r + 1}: p50 ${res.p50Ms.toFixed(2)} ms, p99 ${res.p99Ms.toFixed(2)} ms, ${res.callsPerS.toFixed(0)} calls/s, ${res.failures} failures, live ${server.store.size}, heap ${((last - base) / 2 ** 20).toFixed(2)} MiB over baseline`);
        if (res.failures > 0 || server.store.size !== 0) throw new Error(`round ${r + 1}: ${res.failures} failed requests, ${server.store.size} live episodes after release`);
        const rec = (metric: string, value: number, unit: string) => ctx.record({ case: `http-calls round ${r + 1}`, backend: 'node', metric, value, unit, threads: 1, shape, model });
        rec('p50_latency_ms', res.p50Ms, 'ms');
        rec('p99_latency_ms', res.p99Ms, 'ms');
        rec('calls_per_s', res.callsPerS, 'calls/s');
        rec('heap_over_baseline_mb', (last - base) / 2 ** 20, 'MiB');
      }
      ctx.record({ case: 'http-calls', backend: 'node', metric: 'heap_baseline_mb', value: base / 2 ** 20, unit: 'MiB', threads: 1, shape, model });
      // Expired episodes are reclaimed: create a round's worth without releasing them, let them expire.
      const s2 = await startServer({ domain, world, tasks: taskSet(tasks), port: 0, log: () => {}, ttlMs: 300 });
      try {
        await Promise.all(Array.from({ length: episodes }, (_, e) => fetch(`${s2.url}/episodes`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ task_id: tasks[e].id }) }).then((r) => r.arrayBuffer())));
        const before = s2.store.size;
        if (before !== episodes) throw new Error(`expiry: ${before} of ${episodes} episodes were created`);
        const t0 = performance.now();
        while (s2.store.size > 0 && performance.now() - t0 < 10_000) await new Promise((r) => setTimeout(r, 50));
        ctx.log(`expiry: ${before} idle episodes, ${s2.store.size} left after ${((performance.now() - t0) / 1000).toFixed(2)} s (ttl 0.3 s)`);
        if (s2.store.size !== 0) throw new Error('expired episodes were not reclaimed');
        ctx.record({ case: 'expiry', backend: 'node', metric: 'reclaimed_episodes', value: s2.store.stats.expired, unit: 'episodes', threads: 1, shape: `${episodes} idle, ttl 0.3 s`, model });
      } finally {
        await s2.close(1000);
      }
    } finally {
      await server.close(1000);
    }
    // The cost of persistence, side by side: the same load on a journaling server and an in-memory one, alternated.
    const dir = mkdtempSync(join(tmpdir(), 'envace-bench-state-'));
    const mem = await startServer({ domain, world, tasks: taskSet(tasks), port: 0, log: () => {}, ttlMs: 60_000 });
    const jour = await startServer({ domain, world, tasks: taskSet(tasks), port: 0, log: () => {}, ttlMs: 60_000, stateDir: dir });
    try {
      await loadRound(mem.url, tasks, episodes, calls);
      await loadRound(jour.url, tasks, episodes, calls);
      const runs = { memory: [] as { p50: number; cps: number }[], journal: [] as { p50: number; cps: number }[] };
      for (let r = 0; r < 3; r++) {
        for (const [kind, s] of [['memory', mem], ['journal', jour]] as const) {
          const res = await loadRound(s.url, tasks, episodes, calls);
          if (res.failures > 0) throw new Error(`persistence ${kind} round ${r + 1}: ${res.failures} failed requests`);
          runs[kind].push({ p50: res.p50Ms, cps: res.callsPerS });
        }
      }
      const fig = (kind: 'memory' | 'journal') => ({ p50: median(runs[kind].map((x) => x.p50)), cps: median(runs[kind].map((x) => x.cps)) });
      const m = fig('memory');
      const j = fig('journal');
      ctx.log(`persistence: in memory p50 ${m.p50.toFixed(2)} ms, ${m.cps.toFixed(0)} calls/s; journaled p50 ${j.p50.toFixed(2)} ms, ${j.cps.toFixed(0)} calls/s (${(j.cps / m.cps).toFixed(2)}x the calls/s)`);
      for (const [label, f] of [['in memory', m], ['--state journal', j]] as const) {
        ctx.record({ case: `persistence: ${label}`, backend: 'node', metric: 'p50_latency_ms', value: f.p50, unit: 'ms', threads: 1, shape: `${shape}, median of 3 alternated rounds`, model });
        ctx.record({ case: `persistence: ${label}`, backend: 'node', metric: 'calls_per_s', value: f.cps, unit: 'calls/s', threads: 1, shape: `${shape}, median of 3 alternated rounds`, model });
      }
      ctx.record({ case: 'persistence: journaled / in memory', backend: 'node', metric: 'calls_per_s_ratio', value: j.cps / m.cps, unit: 'x', threads: 1, shape, model });
    } finally {
      await mem.close(1000);
      await jour.close(1000);
      rmSync(dir, { recursive: true, force: true });
    }
  },
};
export default suite;
