// Shared by the server tests: a real server on a loopback port over a real world, a tiny JSON client.
import type { Domain, Task } from '../../src/env/domain';
import { loadWorldDomain } from '../../src/env/retail/node';
import type { WorldName } from '../../src/env/retail/index';
import { taskSet } from '../../src/server/episodes';
import { startServer, type RunningServer, type ServeOptions } from '../../src/server/http';

export interface Harness {
  server: RunningServer;
  domain: Domain;
  train: Task[];
  test: Task[];
  logs: Record<string, unknown>[];
}

export async function startHarness(world: WorldName, counts: { train: number; test: number }, opts: Partial<ServeOptions> = {}): Promise<Harness> {
  const domain = loadWorldDomain(world);
  const train = domain.tasks.generate({ split: 'train', count: counts.train, seed: 0 });
  const test = counts.test > 0 ? domain.tasks.generate({ split: 'test', count: counts.test, seed: 1 }) : [];
  const logs: Record<string, unknown>[] = [];
  const server = await startServer({ domain, world, tasks: taskSet([...train, ...test]), host: '127.0.0.1', port: 0, log: (r) => logs.push(r), ...opts });
  return { server, domain, train, test, logs };
}

export async function api(base: string, method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(base + path, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : null };
}
