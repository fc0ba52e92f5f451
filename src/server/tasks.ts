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
 * What of a task's reference actions does not resolve in `domain`: tools it lacks, lookups (find_user_id_by_*)
 * that find no user, user and order ids it does not hold. Tasks name missing things on purpose (a wrong email
 * tried first, an order number the user misremembers), so this alone does not make a task wrong for a world:
 * checkTaskWorld compares with the other worlds.
 */
export function unresolvedReferences(domain: Domain, task: Task): string[] {
  const env = domain.createEnv();
  const out = new Set<string>();
  for (const a of task.referenceActions) {
    if (!env.tool(a.name)) out.add(`tool ${a.name}`);
    else if (a.name.startsWith('find_user_id_by_') && !env.execute(a).ok) out.add(`the user of ${a.name}(${JSON.stringify(a.arguments)})`);
    const { user_id: user, order_id: order } = a.arguments;
    if (typeof user === 'string' && !env.store.get('users', user)) out.add(`user ${user}`);
    if (typeof order === 'string' && !env.store.get('orders', order)) out.add(`order ${order}`);
  }
  return [...out];
}

/**
 * Refuses (TaskSetError, a usage error) a task set served on a world that lacks what its tasks name while
 * another world has it: a τ² task file on the compact world, whose first call would answer "User not
 * found". The message names the world that resolves them. Things no world has (deliberate misspellings) pass.
 */
export function checkTaskWorld(tasks: readonly Task[], world: WorldName, domain: Domain = loadWorldDomain(world), source = 'the tasks'): void {
  const here = tasks.map((t) => ({ t, refs: unresolvedReferences(domain, t) })).filter((x) => x.refs.length > 0);
  if (here.length === 0) return;
  const others = WORLD_NAMES.filter((w) => w !== world).map((w) => ({ w, d: loadWorldDomain(w) }));
  const bad: { t: Task; wrong: string[]; holders: WorldName[] }[] = [];
  for (const { t, refs } of here) {
    const elsewhere = others.map((o) => ({ w: o.w, missing: new Set(unresolvedReferences(o.d, t)) }));
    const wrong = refs.filter((r) => r.startsWith('tool ') || elsewhere.some((e) => !e.missing.has(r)));
    if (wrong.length > 0) bad.push({ t, wrong, holders: elsewhere.filter((e) => wrong.every((r) => !e.missing.has(r))).map((e) => e.w) });
  }
  if (bad.length === 0) return;
  const holder = others.map((o) => o.w).find((w) => bad.every((b) => b.holders.includes(w)));
  const first = bad[0];
  throw new TaskSetError(
    `${source}: ${bad.length} of ${tasks.length} tasks name users or orders that world '${world}' does not have (task ${JSON.stringify(first.t.id)}: ${first.wrong.slice(0, 3).join(', ')}); ` +
      (holder ? `they are tasks of world '${holder}': pass --world ${holder}` : 'no world has them all'),
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
