// Training runs kept for comparison (lesson step 4), in IndexedDB beside the rollout log so they survive a
// reload. Keeping copies the current run's settings and points; a comparison run resets the current run
// (its adapter starts again from the base policy, as every fresh GrpoRun does) and trains with the kept
// run's settings in another mode. The plots draw every record: kept runs plus the current one.
import type { TrainMode } from '../worker-protocol';
import { labDefault, RUN_SETTINGS } from '../method/run-config';
import { otherMode, runLabel, sameRun, savedRequest, type KeptRun, type LessonTag, type RunRecordView } from './compare';
import { tx } from './idb';
import { lab, resetTraining, startTraining } from './lab.svelte';
import { settings } from './settings.svelte';

export const compare = $state({ kept: [] as KeptRun[], error: '' });

export async function loadKept(): Promise<void> {
  try {
    const all = (await tx('kept', 'readonly', (s) => s.getAll())) as KeptRun[];
    // Kept by any version: their requests read by the settings' one names.
    compare.kept = all.map((r) => ({ ...r, config: savedRequest(r.config) })).sort((a, b) => a.at.localeCompare(b.at));
  } catch (e) {
    compare.error = `browser storage unavailable: ${(e as Error).message}`;
  }
}

/** The current run as a record (null: no run with a step yet). */
export function currentRecord(): RunRecordView | null {
  const t = lab.train;
  if (!t?.config || !t.world || t.points.length === 0) return null;
  return { id: 'current', name: '', config: t.config, model: t.model, world: t.world, points: t.points, current: true, start: t.start };
}

/** Every record the comparison draws: the kept runs, then the current run unless it is one of them. */
export function compareRecords(): RunRecordView[] {
  const cur = currentRecord();
  const kept = compare.kept as RunRecordView[];
  return cur && !kept.some((k) => sameRun(k, cur)) ? [...kept, cur] : [...kept];
}

export function currentIsKept(): boolean {
  const cur = currentRecord();
  return !!cur && compare.kept.some((k) => sameRun(k, cur));
}

/**
 * Keep the current run under `name` (its settings' label when blank); `lesson` tags it as a world-rehearsal lesson's
 * run. A run kept already is not kept twice: a lesson's tag then goes on the kept copy (a lesson run again with the
 * same seed repeats its runs exactly). The kept record's id, or null when there is no run to keep.
 */
export async function keepCurrent(name: string, lesson?: LessonTag): Promise<string | null> {
  const cur = currentRecord();
  if (!cur) return null;
  const same = compare.kept.find((k) => sameRun(k, cur));
  if (same && !lesson) return same.id;
  const last = cur.points[cur.points.length - 1].step;
  const rec: KeptRun = same
    ? { ...$state.snapshot(same), name: name.trim() || same.name, lesson }
    : ($state.snapshot({
        ...cur,
        current: false,
        id: crypto.randomUUID(),
        at: new Date().toISOString(),
        name: name.trim() || runLabel(cur.config, last),
        ...(lesson ? { lesson } : {}),
      }) as KeptRun);
  compare.kept = same ? compare.kept.map((k) => (k.id === rec.id ? rec : k)) : [...compare.kept, rec];
  try {
    await tx('kept', 'readwrite', (s) => s.put(rec));
  } catch (e) {
    compare.error = `could not keep the run: ${(e as Error).message}`;
  }
  return rec.id;
}

export async function removeKept(id: string): Promise<void> {
  compare.kept = compare.kept.filter((k) => k.id !== id);
  await tx('kept', 'readwrite', (s) => s.delete(id)).catch(() => undefined);
}

/**
 * Train a comparison run: the kept run's settings (every lab setting of the run settings' table) in `mode`, from
 * the base policy. The current run must be kept (or
 * empty) first: it is reset.
 */
export async function startComparison(fromId: string, mode: TrainMode): Promise<void> {
  const k = compare.kept.find((r) => r.id === fromId);
  if (!k) return;
  compare.error = '';
  if (lab.env && k.world !== lab.env.world) return void (compare.error = `the kept run trained in the ${k.world} world: switch to it first`);
  if (lab.model && k.model !== lab.model.modelLabel) return void (compare.error = `the kept run trained “${k.model}”, not the loaded model: load it first`);
  if (currentRecord() && !currentIsKept()) return void (compare.error = 'keep (or reset) the current run first: a comparison run replaces it');
  const c = k.config;
  if (lab.train?.config) await resetTraining();
  // Every lab setting of the kept run (src/method/run-config.ts), in `mode`, for as many steps as it reached.
  for (const row of RUN_SETTINGS) if ('lab' in row) (settings as unknown as Record<string, unknown>)[row.name] = (c as unknown as Record<string, unknown>)[row.name] ?? labDefault(row);
  settings.mode = mode;
  settings.steps = k.points.length ? k.points[k.points.length - 1].step : c.steps;
  // The kept run's budgets were the measured ones when they equal today's measurement: keep "measured" (0).
  if (c.maxActTokens === lab.budget?.act) settings.maxActTokens = 0;
  if (c.maxRehearseTokens === lab.budget?.rehearse) settings.maxRehearseTokens = 0;
  await startTraining();
}

export { otherMode };
