// Loader for τ²-bench task files (the June 2025 release layout of tasks.json: a JSON array of task
// objects) and of the lab's own task files. Only what the lab uses is validated; other fields pass through
// untouched in `raw`. Bad files give a TaskFileError naming the task and the field: a wrong type, a
// checklist item the judge cannot read, arguments nested deeper than MAX_ARG_DEPTH (they would overflow the
// recursive code that compares them, after every rollout had run), or a duplicate task id.

import { z } from 'zod';
import type { ChecklistItem, Task, ToolCall, UserInstructions } from './domain';
import type { Environment } from './env';

export class TaskFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TaskFileError';
  }
}

/** Nesting depth of reference arguments (objects and arrays); real tool arguments are 2-3 deep. */
export const MAX_ARG_DEPTH = 32;

/** Depth of nested objects/arrays in `v`, counted without recursion, stopping past `limit`. */
export function jsonNestingDepth(v: unknown, limit = MAX_ARG_DEPTH): number {
  let max = 0;
  const stack: [unknown, number][] = [[v, 0]];
  while (stack.length) {
    const [x, d] = stack.pop()!;
    if (x === null || typeof x !== 'object') continue;
    const depth = d + 1;
    if (depth > max) max = depth;
    if (max > limit) return max;
    for (const c of Array.isArray(x) ? x : Object.values(x)) stack.push([c, depth]);
  }
  return max;
}

const Args = z.record(z.string(), z.unknown()).superRefine((a, ctx) => {
  const d = jsonNestingDepth(a);
  if (d > MAX_ARG_DEPTH) ctx.addIssue({ code: 'custom', message: `arguments are nested more than ${MAX_ARG_DEPTH} levels deep` });
});

const ActionSchema = z.object({
  action_id: z.string().optional(),
  name: z.string(),
  arguments: Args,
  info: z.unknown().optional(),
});

const TaskSchema = z.object({
  id: z.union([z.string(), z.number()]).transform(String),
  description: z.unknown().optional(),
  user_scenario: z.object({
    persona: z.unknown().optional(),
    instructions: z.union([
      z.string(),
      z.object({
        domain: z.string().optional(),
        reason_for_call: z.string().nullish(),
        known_info: z.string().nullish(),
        unknown_info: z.string().nullish(),
        task_instructions: z.string().nullish(),
      }),
    ]),
  }),
  initial_state: z.unknown().optional(),
  evaluation_criteria: z
    .object({
      actions: z.array(ActionSchema).nullish(),
      communicate_info: z.array(z.string()).nullish(),
      nl_assertions: z.array(z.string()).nullish(),
    })
    .nullish(),
});

export type Tau2TaskJson = z.infer<typeof TaskSchema>;

export interface Tau2Task extends Task {
  /** The user simulator's instructions, kept for display and for user simulation. */
  instructions: UserInstructions;
  raw: unknown;
}

/** Parses a tasks.json text (or already-parsed JSON) into tasks. */
export function loadTau2Tasks(input: string | unknown): Tau2Task[] {
  let json: unknown = input;
  if (typeof input === 'string') {
    try {
      json = JSON.parse(input);
    } catch (e) {
      throw new TaskFileError(`task file is not valid JSON: ${(e as Error).message}`);
    }
  }
  if (!Array.isArray(json)) throw new TaskFileError('task file must be a JSON array of task objects');
  return checkUniqueIds(
    json.map((raw, i) => {
      const r = TaskSchema.safeParse(raw);
      if (!r.success) throw issueError(raw, i, r.error.issues[0]);
      return fromJson(r.data, raw);
    }),
  );
}

function issueError(raw: unknown, i: number, iss: z.core.$ZodIssue): TaskFileError {
  const id = raw && typeof raw === 'object' && 'id' in raw ? String((raw as { id: unknown }).id) : `#${i}`;
  return new TaskFileError(`task ${id}: ${iss.path.join('.') || '(root)'}: ${iss.message}`);
}

function checkUniqueIds<T extends { id: string }>(tasks: T[]): T[] {
  const seen = new Map<string, number>();
  tasks.forEach((t, i) => {
    const j = seen.get(t.id);
    if (j !== undefined) throw new TaskFileError(`task ${t.id}: id: duplicate (tasks #${j} and #${i} share it)`);
    seen.set(t.id, i);
  });
  return tasks;
}

function fromJson(t: Tau2TaskJson, raw: unknown): Tau2Task {
  const ins = t.user_scenario.instructions;
  const instructions =
    typeof ins === 'string'
      ? { reasonForCall: ins, knownInfo: '', unknownInfo: '', taskInstructions: '' }
      : {
          reasonForCall: ins.reason_for_call ?? '',
          knownInfo: ins.known_info ?? '',
          unknownInfo: ins.unknown_info ?? '',
          taskInstructions: ins.task_instructions ?? '',
        };
  const referenceActions: ToolCall[] = (t.evaluation_criteria?.actions ?? []).map((a) => ({
    name: a.name,
    arguments: a.arguments,
  }));
  const facts = t.evaluation_criteria?.communicate_info ?? [];
  const opening = [instructions.knownInfo, instructions.reasonForCall].filter((s) => s).join(' ');
  return {
    id: t.id,
    userMessages: [opening],
    referenceActions,
    facts,
    checklist: [],
    instructions,
    raw,
  };
}

/**
 * A checklist for a task whose reference actions come from elsewhere (τ²-bench files): every reference
 * action that succeeds on a fresh database is a required call with all its arguments (failing ones are
 * lookups the agent is expected to try, not requirements), plus "no forbidden writes" and one item per fact.
 */
export function checklistFromReference(task: Task, fresh: () => Environment): ChecklistItem[] {
  const env = fresh();
  const items: ChecklistItem[] = [];
  for (const a of task.referenceActions) {
    const o = env.execute(a);
    // A reference write that fails is allowed but earns nothing (weight 0): the judge counts a write as made
    // whatever its observation says (rule J2), so without this item it would be a forbidden write.
    if (o.ok) items.push({ kind: 'call', name: a.name, args: a.arguments, weight: env.isWrite(a.name) ? 2 : 1 });
    else if (env.isWrite(a.name)) items.push({ kind: 'call', name: a.name, args: a.arguments, weight: 0 });
  }
  items.push({ kind: 'no_forbidden_writes', weight: 2 });
  for (const f of task.facts) items.push({ kind: 'fact', text: f, weight: 1 });
  return items;
}

const Weight = z.number().finite().min(0);

const ChecklistItemSchema = z.discriminatedUnion('kind', [
  z.looseObject({ kind: z.literal('call'), name: z.string().min(1), args: Args, weight: Weight }),
  z.looseObject({ kind: z.literal('no_forbidden_writes'), weight: Weight }),
  z.looseObject({ kind: z.literal('fact'), text: z.string(), weight: Weight }),
]);

const LabTaskSchema = z.looseObject({
  id: z.string().min(1),
  userMessages: z.array(z.string()),
  referenceActions: z.array(z.looseObject({ name: z.string(), arguments: Args })),
  facts: z.array(z.string()),
  checklist: z.array(ChecklistItemSchema),
  family: z.string().optional(),
  split: z.enum(['train', 'test']).optional(),
});

/**
 * Reads either a τ²-bench task file or a file of the lab's own tasks (as `npm run env -- generate` writes
 * them: objects with `referenceActions`), telling them apart by the first element.
 */
export function loadTaskFile(text: string): Task[] {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new TaskFileError(`task file is not valid JSON: ${(e as Error).message}`);
  }
  if (!Array.isArray(json)) throw new TaskFileError('task file must be a JSON array of task objects');
  if (json.length > 0 && json[0] !== null && typeof json[0] === 'object' && 'referenceActions' in json[0]) {
    return checkUniqueIds(
      json.map((raw, i) => {
        const r = LabTaskSchema.safeParse(raw);
        if (!r.success) throw issueError(raw, i, r.error.issues[0]);
        return raw as Task;
      }),
    );
  }
  return loadTau2Tasks(json);
}
