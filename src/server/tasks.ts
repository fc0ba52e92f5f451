// Task sets as the other CLIs take them (--tasks train|test|FILE.json): generated splits of the world, or a
// task file (lab JSON or τ²-bench tasks; a task without a split counts as train).
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { Domain, Task } from '../env/domain';
import { loadTaskFile } from '../env/tau2';
import { WORLD_NAMES, type WorldName } from '../env/retail/index';
import { loadWorldDomain } from '../env/retail/node';

/** A --tasks value that names neither a split nor a usable task file: a usage error to the CLIs. */
export class TaskSetError extends Error {
  override readonly name = 'TaskSetError';
}

export interface TaskOptions {
  /** 'both' (the server's default): the train and the test split. */
  tasks: 'train' | 'test' | 'both' | string;
  /** Tasks per generated split. */
  count: number;
  /** Generator seed of the train split; the test split uses seed + 1 (as the trainer's held-out set does with seed 0). */
  seed: number;
  /** The world the domain is: a task file is checked against it (checkTaskWorld). */
  world?: WorldName;
}

/**
 * What a task names that `domain`'s database lacks: the users and orders its reference actions name by id,
 * and the users its lookups (find_user_id_by_*) find by email or name and zip. Generated tasks always pass;
 * a τ² task file served on the compact world does not, and its first call would answer "User not found".
 */
export function missingReferences(domain: Domain, task: Task): string[] {
  const env = domain.createEnv();
  const missing: string[] = [];
  for (const a of task.referenceActions) {
    const args = a.arguments;
    if (typeof args.user_id === 'string' && !env.store.get('users', args.user_id)) missing.push(`user ${args.user_id}`);
    if (typeof args.order_id === 'string' && !env.store.get('orders', args.order_id)) missing.push(`order ${args.order_id}`);
    if (a.name.startsWith('find_user_id_by_') && !env.execute(a).ok) missing.push(`the user of ${a.name}(${JSON.stringify(args)})`);
  }
  return [...new Set(missing)];
}

/**
 * Refuses a task set that names users or orders `world` does not hold (a usage error, TaskSetError), naming the
 * world that holds them all when there is one.
 */
export function checkTaskWorld(tasks: readonly Task[], world: WorldName, domain: Domain = loadWorldDomain(world), source = 'the tasks'): void {
  const bad = tasks.map((t) => ({ t, m: missingReferences(domain, t) })).filter((x) => x.m.length > 0);
  if (bad.length === 0) return;
  const holder = WORLD_NAMES.find((w) => {
    if (w === world) return false;
    const d = loadWorldDomain(w);
    return tasks.every((t) => missingReferences(d, t).length === 0);
  });
  const first = bad[0];
  throw new TaskSetError(
    `${source}: ${bad.length} of ${tasks.length} tasks name users or orders that world '${world}' does not have (task ${JSON.stringify(first.t.id)}: ${first.m.slice(0, 3).join(', ')}); ` +
      (holder ? `they are tasks of world '${holder}': pass --world ${holder}` : 'no world holds them all'),
  );
}

export async function loadTasks(domain: Domain, o: TaskOptions): Promise<Task[]> {
  const gen = (split: 'train' | 'test') => domain.tasks.generate({ split, count: o.count, seed: split === 'train' ? o.seed : o.seed + 1 });
  if (o.tasks === 'both') return [...gen('train'), ...gen('test')];
  if (o.tasks === 'train' || o.tasks === 'test') return gen(o.tasks);
  const text = await readFile(resolve(o.tasks), 'utf8').catch((e: Error) => {
    throw new TaskSetError(`--tasks ${o.tasks}: not train, test or a readable task file (${e.message})`);
  });
  const tasks = loadTaskFile(text);
  if (tasks.length === 0) throw new TaskSetError(`--tasks ${o.tasks}: no tasks`);
  if (o.world) checkTaskWorld(tasks, o.world, domain, `--tasks ${o.tasks}`);
  return tasks;
}
