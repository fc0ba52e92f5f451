// A bounded load generator for the environment server (loopback only; it stops by itself): N concurrent
// episodes, each created, driven through M calls (its task's reference actions, cycled) and released.
// Used by `npm run bench -- serve` (64 × 20, five rounds) and, smaller, by test/server/load.test.ts.
import { runInNewContext } from 'node:vm';
import { setFlagsFromString } from 'node:v8';
import type { Task } from '../env/domain';

export interface LoadRound {
  episodes: number;
  calls: number;
  /** Per-call latency percentiles (ms), over every call of the round. */
  p50Ms: number;
  p99Ms: number;
  /** Calls per second over the round's wall time (episode creation and release included in the time). */
  callsPerS: number;
  wallS: number;
  /** Requests that did not answer 2xx. */
  failures: number;
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];

async function post(url: string, body: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, json: await res.json() };
}

export async function loadRound(base: string, tasks: readonly Task[], episodes: number, callsPerEpisode: number): Promise<LoadRound> {
  const lat: number[] = [];
  let failures = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: episodes }, async (_, e) => {
      const task = tasks[e % tasks.length];
      const created = await post(`${base}/episodes`, { task_id: task.id });
      if (created.status !== 201) {
        failures++;
        return;
      }
      const id = created.json.episode_id as string;
      const actions = task.referenceActions.length > 0 ? task.referenceActions : [{ name: 'list_all_product_types', arguments: {} }];
      for (let i = 0; i < callsPerEpisode; i++) {
        const a = actions[i % actions.length];
        const c0 = performance.now();
        const r = await post(`${base}/episodes/${id}/calls`, a);
        lat.push(performance.now() - c0);
        if (r.status !== 200) failures++;
      }
      const d = await fetch(`${base}/episodes/${id}`, { method: 'DELETE' });
      await d.arrayBuffer();
      if (d.status !== 200) failures++;
    }),
  );
  const wallS = (performance.now() - t0) / 1000;
  lat.sort((a, b) => a - b);
  return { episodes, calls: lat.length, p50Ms: pct(lat, 50), p99Ms: pct(lat, 99), callsPerS: lat.length / wallS, wallS, failures };
}

let gcFn: (() => void) | null = null;
/** Heap in use after full garbage collections (exposes gc at run time when the process was started without it). */
export function settledHeap(): number {
  if (!gcFn) {
    const g = (globalThis as { gc?: () => void }).gc;
    if (g) gcFn = g;
    else {
      setFlagsFromString('--expose-gc');
      gcFn = runInNewContext('gc') as () => void;
    }
  }
  for (let i = 0; i < 4; i++) gcFn();
  return process.memoryUsage().heapUsed;
}
