// The training run as the page shows it, with one source of truth for what belongs to the run: its settings, the
// model and the world it trains in come from the worker's saved run (TrainStatus) or, between Start and the
// worker's first answer, from the request the page just sent. Pure, so the unit tests and the page share it.
import type { TrainRequest, TrainStatus } from '../worker-protocol';

/**
 * The run as it is about to start: the request's settings and steps, in the world and on the model it is started
 * in. Without the world here a fresh run in the mini world read as "trains in the retail world" until its first
 * step came back (the worker's status of no run used to default to retail).
 */
export function pendingRun(prev: TrainStatus | null, req: TrainRequest, world: string, model: string): TrainStatus {
  return { start: null, step: 0, running: false, points: [], ...prev, config: req, total: req.steps, world, model };
}

/** What the lab holds now: the world it serves and the loaded model's label (null: none yet). */
export interface LabNow {
  world: string | null;
  model: string | null;
}

/**
 * Warnings about the saved run that are true now: it trains in another world, or was trained on another model.
 * Nothing is said while either side is unknown (no run, no world served yet, no model loaded).
 */
export function runWarnings(t: TrainStatus | null, now: LabNow): string[] {
  if (!t?.config) return [];
  const out: string[] = [];
  if (t.model && now.model && t.model !== now.model) out.push(`The saved run was trained on “${t.model}”; reset it to train the loaded model.`);
  if (t.world && now.world && t.world !== now.world) out.push(`The saved run trains in the ${t.world} world; switch back to it, or reset the run.`);
  return out;
}
