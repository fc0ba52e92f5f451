// Task sets as the other CLIs take them (--tasks train|test|FILE.json): generated splits of the world, or a
// task file (lab JSON or τ²-bench tasks; a task without a split counts as train).
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { Domain, Task } from '../env/domain';
import { loadTaskFile } from '../env/tau2';

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
  return tasks;
}
