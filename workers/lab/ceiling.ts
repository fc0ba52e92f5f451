// The loaded policy's pass@k ceiling (src/worker-protocol.ts ModelCeiling), read from ceiling.json in its folder when
// the folder has one; `npm run signal` writes it (research/scripts/signal.ts: its JSON, with result.real.passAtK).
// A file that is not that measurement of the lab's held-out tasks is refused with the reason, never half-read:
// the lab draws the ceiling only from a number that was measured on its held-out tasks.
import type { ModelSource } from '../../src/model/source';
import type { ModelCeiling } from '../../src/worker-protocol';

export const CEILING_FILE = 'ceiling.json';
/** The lab's held-out draw (src/rl/grpo-config.ts splitTasks: the test split, task seed 1). */
const HELD_OUT = { split: 'test', taskSeed: 1 } as const;

const isObj = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);
const isInt = (x: unknown, min: number): x is number => typeof x === 'number' && Number.isInteger(x) && x >= min;

/** ceiling.json's measurement, or the reason it is not one of the lab's held-out tasks (a string). */
export function parseCeiling(json: unknown): ModelCeiling | string {
  if (!isObj(json)) return 'it is not a JSON object';
  const real = json.real;
  if (!isObj(real)) return 'it has no "real" result (run npm run signal with --modes real)';
  const p = real.passAtK;
  if (typeof p !== 'number' || !Number.isFinite(p) || p < 0 || p > 1) return `its real.passAtK is not a rate in [0, 1] (${JSON.stringify(p)})`;
  if (json.split !== HELD_OUT.split) return `it was measured on the ${JSON.stringify(json.split)} split, not the held-out tasks (--split test)`;
  if (json.taskSeed !== HELD_OUT.taskSeed) return `it was measured on another draw of held-out tasks (task seed ${JSON.stringify(json.taskSeed)}; the lab's is ${HELD_OUT.taskSeed})`;
  if (!isInt(json.k, 2)) return `its k is not an integer >= 2 (${JSON.stringify(json.k)})`;
  if (!isInt(json.prompts, 1)) return `its task count (prompts) is not a positive integer (${JSON.stringify(json.prompts)})`;
  if (typeof json.world !== 'string' || !json.world) return 'it does not name its world';
  const t = json.temperature;
  if (typeof t !== 'number' || !Number.isFinite(t) || t <= 0) return `its temperature is not a number > 0 (${JSON.stringify(t)})`;
  return { passAtK: p, k: json.k, tasks: json.prompts, world: json.world, temperature: t };
}

/** The folder's ceiling, or why its ceiling.json is refused; both null when the folder has none. */
export async function readCeiling(src: ModelSource): Promise<{ ceiling: ModelCeiling | null; ceilingProblem: string | null }> {
  let text: string;
  try {
    if (!(await src.has(CEILING_FILE))) return { ceiling: null, ceilingProblem: null };
    text = new TextDecoder().decode(await src.read(CEILING_FILE));
  } catch (e) {
    return { ceiling: null, ceilingProblem: `${CEILING_FILE} could not be read: ${(e as Error).message}` };
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { ceiling: null, ceilingProblem: `${CEILING_FILE} is not JSON` };
  }
  const c = parseCeiling(json);
  return typeof c === 'string' ? { ceiling: null, ceilingProblem: `${CEILING_FILE} is not used: ${c}` } : { ceiling: c, ceilingProblem: null };
}
