// A bounded load generator for the environment server (loopback only; it stops by itself): N concurrent
// episodes, each created, driven through M calls (its task's reference actions, cycled) and released.
// Used by `npm run bench -- serve` (64 × 20, five rounds) and, smaller, by test/server/load.test.ts.
// Latency is per call as the client sees it; throughput counts calls over the round's wall time.
import { runInNewContext } from 'node:vm';
import { setFlagsFromString } from 'node:v8';
import { Worker } from 'node:worker_threads';
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

// The client runs in a worker thread: its own event loop (as a trainer's client would be) and its own V8
// heap, so the heap measured in the server's thread is the server's alone. Plain JS (no build step needed).
const CLIENT = `
const { parentPort, workerData } = require('node:worker_threads');
const { base, plan } = workerData;
async function post(url, body) {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, json: await res.json() };
}
(async () => {
  const lat = [];
  let failures = 0;
  const t0 = performance.now();
  await Promise.all(plan.map(async ({ taskId, calls }) => {
    const created = await post(base + '/episodes', { task_id: taskId });
    if (created.status !== 201) { failures++; return; }
    const id = created.json.episode_id;
    for (const c of calls) {
      const c0 = performance.now();
      const r = await post(base + '/episodes/' + id + '/calls', c);
      lat.push(performance.now() - c0);
      if (r.status !== 200) failures++;
    }
    const d = await fetch(base + '/episodes/' + id, { method: 'DELETE' });
    await d.arrayBuffer();
    if (d.status !== 200) failures++;
  }));
  parentPort.postMessage({ lat, failures, wallMs: performance.now() - t0 });
})().catch((e) => parentPort.postMessage({ error: String(e && e.stack || e) }));
`;

export async function loadRound(base: string, tasks: readonly Task[], episodes: number, callsPerEpisode: number): Promise<LoadRound> {
  const plan = Array.from({ length: episodes }, (_, e) => {
    const task = tasks[e % tasks.length];
    const actions = task.referenceActions.length > 0 ? task.referenceActions : [{ name: 'list_all_product_types', arguments: {} }];
    return { taskId: task.id, calls: Array.from({ length: callsPerEpisode }, (_, i) => actions[i % actions.length]) };
  });
  const worker = new Worker(CLIENT, { eval: true, workerData: { base, plan } });
  const msg = await new Promise<{ lat: number[]; failures: number; wallMs: number; error?: string }>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  await worker.terminate();
  if (msg.error) throw new Error(`load client: ${msg.error}`);
  const lat = msg.lat.sort((a, b) => a - b);
  const wallS = msg.wallMs / 1000;
  return { episodes, calls: lat.length, p50Ms: pct(lat, 50), p99Ms: pct(lat, 99), callsPerS: lat.length / wallS, wallS, failures: msg.failures };
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
