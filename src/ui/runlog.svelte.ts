// The lab's run log: every finished rollout batch (group runs, finished stepper rollouts), kept in
// IndexedDB so it survives a reload, exportable and importable as JSONL. Imported lines are untrusted:
// each is validated with zod before it reaches the page, and rendered as text only.
import { z } from 'zod';
import type { RolloutView } from '../worker-protocol';
import { tx as idbTx } from './idb';

export interface RunRecord {
  id: string;
  at: string;
  kind: 'group' | 'stepper' | 'imported';
  taskId: string | null;
  mode: string;
  meanReward: number | null;
  fidelityF1: number | null;
  rollouts: RolloutView[];
}

const tx = <T>(mode: IDBTransactionMode, fn: (s: IDBObjectStore) => IDBRequest<T>) => idbTx<T>('runs', mode, fn);

export const runlog = $state({ runs: [] as RunRecord[], error: '' });

export async function loadRuns(): Promise<void> {
  try {
    const all = (await tx('readonly', (s) => s.getAll())) as RunRecord[];
    runlog.runs = all.sort((a, b) => a.at.localeCompare(b.at));
  } catch (e) {
    runlog.error = `browser storage unavailable: ${(e as Error).message}`;
  }
}

export async function addRun(r: Omit<RunRecord, 'id' | 'at' | 'meanReward' | 'fidelityF1'>): Promise<void> {
  const rewards = r.rollouts.flatMap((x) => (x.reward && x.reward.kind !== 'none' ? [x.reward.value] : []));
  const f1 = r.rollouts.flatMap((x) => (x.fidelity ? [x.fidelity.f1] : []));
  const mean = (a: number[]) => (a.length ? a.reduce((s, v) => s + v, 0) / a.length : null);
  const rec: RunRecord = { ...r, id: crypto.randomUUID(), at: new Date().toISOString(), meanReward: mean(rewards), fidelityF1: mean(f1) };
  // $state.snapshot: IndexedDB's structured clone cannot take Svelte's reactive proxies.
  const plain = $state.snapshot(rec) as RunRecord;
  runlog.runs.push(plain);
  try {
    await tx('readwrite', (s) => s.put(plain));
  } catch (e) {
    runlog.error = `could not save the run: ${(e as Error).message}`;
  }
}

export async function clearRuns(): Promise<void> {
  runlog.runs = [];
  await tx('readwrite', (s) => s.clear()).catch(() => undefined);
}

export function rolloutsJsonl(): string {
  return runlog.runs.flatMap((r) => r.rollouts.map((x) => JSON.stringify({ run: r.id, kind: r.kind, ...x }))).join('\n') + '\n';
}

const tokenLp = z.object({ text: z.string(), lp: z.number() });
const gen = z.object({ source: z.enum(['policy', 'expert']), prompt: z.string(), promptTokens: z.number(), text: z.string(), tokens: z.array(tokenLp), ms: z.number() });
const fidelity = z.object({ exact: z.boolean(), f1: z.number(), errorAgree: z.boolean() });
// The judged steps (RolloutView.steps): kept on import so that a re-exported rollout can still be judged again.
const observation = z.union([z.object({ ok: z.literal(true), name: z.string(), result: z.unknown() }), z.object({ ok: z.literal(false), name: z.string(), error: z.string(), code: z.string() })]);
const step = z.union([
  z.object({ kind: z.literal('call'), call: z.object({ name: z.string(), arguments: z.record(z.string(), z.unknown()) }), observation, turn: z.number() }),
  z.object({ kind: z.literal('reply'), text: z.string(), turn: z.number() }),
]);
// A conversation's user side (RolloutView.conversation): kept on import, so a re-imported conversation still reads as one.
const conversation = z.object({
  user: z.enum(['scripted']),
  greeting: z.string(),
  userTurns: z.array(z.object({ before: z.number(), text: z.string(), opening: z.boolean(), confirms: z.boolean() })),
  stop: z.string().nullable(),
  unconfirmed: z.array(z.object({ turn: z.number(), call: z.string(), why: z.string() })),
});
const rolloutSchema = z.object({
  taskId: z.string().nullable(),
  request: z.string(),
  mode: z.enum(['rehearse', 'real']),
  seed: z.number(),
  turns: z.array(
    z.object({
      index: z.number(),
      act: gen,
      reply: z.string().nullable(),
      calls: z.array(z.object({ call: z.string(), name: z.string(), rehearse: gen.nullable(), rehearsed: z.string().nullable(), rehearseError: z.string().nullable(), real: z.string(), fidelity: fidelity.nullable() })),
    }),
  ),
  steps: z.array(step).optional(),
  done: z.boolean(),
  endReason: z.string().nullable(),
  reward: z
    .object({ value: z.number(), kind: z.enum(['checklist judge', 'real environment', 'none']), items: z.array(z.object({ label: z.string(), satisfied: z.boolean() })), note: z.string() })
    .nullable(),
  fidelity: z.object({ steps: z.number(), exact: z.number(), f1: z.number(), errorAgree: z.number() }).nullable(),
  conversation: conversation.optional(),
});

/** Parse a rollouts JSONL file; bad lines are reported by number, good ones kept. */
export function parseRolloutsJsonl(text: string): { rollouts: RolloutView[]; errors: string[] } {
  const rollouts: RolloutView[] = [];
  const errors: string[] = [];
  text.split('\n').forEach((line, i) => {
    if (!line.trim()) return;
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch {
      errors.push(`line ${i + 1}: not JSON`);
      return;
    }
    const r = rolloutSchema.safeParse(v);
    if (r.success) rollouts.push(r.data as RolloutView);
    else errors.push(`line ${i + 1}: ${r.error.issues[0]?.path.join('.') ?? ''} ${r.error.issues[0]?.message ?? 'invalid'}`);
  });
  return { rollouts, errors };
}
