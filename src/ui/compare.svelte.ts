// Training runs kept for comparison (lesson step 4), in IndexedDB beside the rollout log so they survive a
// reload. Keeping copies the current run's settings and points; a comparison run resets the current run
// (its adapter starts again from the base policy, as every fresh GrpoRun does) and trains with the kept
// run's settings in another mode. The plots draw every record: kept runs plus the current one.
import type { TrainMode } from '../worker-protocol';
import { grpoSettingsOf, otherMode, runLabel, sameRun, type KeptRun, type RunRecordView } from './compare';
import { tx } from './idb';
import { lab, resetTraining, startTraining } from './lab.svelte';
import { settings } from './settings.svelte';

export const compare = $state({ kept: [] as KeptRun[], error: '' });

export async function loadKept(): Promise<void> {
  try {
    const all = (await tx('kept', 'readonly', (s) => s.getAll())) as KeptRun[];
    compare.kept = all.sort((a, b) => a.at.localeCompare(b.at));
  } catch (e) {
    compare.error = `browser storage unavailable: ${(e as Error).message}`;
  }
}

/** The current run as a record (null: no run with a step yet). */
export function currentRecord(): RunRecordView | null {
  const t = lab.train;
  if (!t?.config || !t.world || t.points.length === 0) return null;
  return { id: 'current', name: '', config: t.config, model: t.model, world: t.world, points: t.points, current: true };
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

export async function keepCurrent(name: string): Promise<void> {
  const cur = currentRecord();
  if (!cur || currentIsKept()) return;
  const last = cur.points[cur.points.length - 1].step;
  const rec: KeptRun = $state.snapshot({
    ...cur,
    current: false,
    id: crypto.randomUUID(),
    at: new Date().toISOString(),
    name: name.trim() || runLabel(cur.config, last),
  }) as KeptRun;
  compare.kept.push(rec);
  try {
    await tx('kept', 'readwrite', (s) => s.put(rec));
  } catch (e) {
    compare.error = `could not keep the run: ${(e as Error).message}`;
  }
}

export async function removeKept(id: string): Promise<void> {
  compare.kept = compare.kept.filter((k) => k.id !== id);
  await tx('kept', 'readwrite', (s) => s.delete(id)).catch(() => undefined);
}

/**
 * Train a comparison run: the kept run's settings (seed, steps, K, prompts, learning rate, rank, limits,
 * budgets, rehearsal decoding, held-out evaluation, grouping) in `mode`, from the base policy. The current run must be kept (or
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
  // The kept run's budgets were the measured ones when they equal today's measurement: keep "measured" (0).
  settings.maxNew = c.maxNewTokens === lab.budget?.act ? 0 : c.maxNewTokens;
  settings.reh = c.rehearseTokens === lab.budget?.rehearse ? 0 : c.rehearseTokens;
  // Runs kept before rehearsal decoding was a setting decoded free.
  settings.rdec = c.rehearseDecoding ?? 'free';
  Object.assign(settings, {
    tmode: mode, grouping: c.grouping, baseline: c.baseline, steps: k.points.length ? k.points[k.points.length - 1].step : c.steps,
    lr: c.lr, k: c.k, prompts: c.promptsPerStep, rank: c.rank, seed: c.seed, turns: c.maxTurns, evalEvery: c.evalEvery, evalTasks: c.evalTasks ?? 100,
    ...grpoSettingsOf(c),
  });
  await startTraining();
}

export { otherMode };
