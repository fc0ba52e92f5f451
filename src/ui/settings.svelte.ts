// Shareable state: every setting a person would want to send to someone else lives in the URL query
// (TensorFlow Playground style). Values read from the URL are untrusted and clamped/validated here.
// A training run's settings are the rows of src/method/run-config.ts with a `lab` column: their names, URL keys,
// defaults and ranges come from there; this file declares only the page's own settings.
import { labDefault, RUN_SETTINGS, type LabRunValues, type LabSettingName, type RunSetting, type RunSettingsTable } from '../method/run-config';
import { LESSON_RANGE, LESSON_SIZE } from '../method/lesson-runs';
import { STEPPER_USERS, type ActSource, type BackendKind, type StepperUser, type WeightFormat, type WorldName } from '../worker-protocol';

/** The page's own settings (the stepper, test-time rehearsal, the model and the world), not a run's. */
export interface PageSettings {
  /** The world the lab serves: 'mini' (compact retail, the default) or 'retail' (the full database). */
  world: WorldName;
  task: string;
  request: string;
  /** The stepper's mode (a training run's is `mode`). */
  stepMode: 'rehearse' | 'real';
  src: ActSource;
  /** Who answers the stepper's agent: nobody (one message) or the domain's scripted τ² user (a conversation); a training run's is `user`. */
  stepUser: StepperUser;
  /** The stepper's sampling temperature. */
  temp: number;
  format: WeightFormat;
  backend: BackendKind | '';
  model: string;
  ttsMode: 'parallel' | 'sequential';
  ttsN: number;
  /** The world-rehearsal lesson's size (src/method/lesson-runs.ts): steps, held-out evaluation every N steps, held-out tasks. */
  lessonSteps: number;
  lessonEvalEvery: number;
  lessonEvalTasks: number;
}

export type Settings = PageSettings & LabRunValues;

const int = (v: string, lo: number, hi: number, d: number) => {
  const n = Number.parseInt(v, 10);
  return Number.isFinite(n) ? Math.min(hi, Math.max(lo, n)) : d;
};
const num = (v: string, lo: number, hi: number, d: number) => {
  const n = Number(v);
  return Number.isFinite(n) ? Math.min(hi, Math.max(lo, n)) : d;
};
const oneOf = <T extends string>(v: string, all: readonly T[], d: T): T => ((all as readonly string[]).includes(v) ? (v as T) : d);

interface PageSetting<K extends keyof PageSettings> {
  /** Its URL key, where it is not its name. */
  key?: string;
  default: PageSettings[K];
  parse: (v: string, d: PageSettings[K]) => PageSettings[K];
}

const PAGE: { [K in keyof PageSettings]: PageSetting<K> } = {
  world: { default: 'mini', parse: (v, d) => oneOf(v, ['mini', 'retail'] as const, d) },
  task: { default: '', parse: (v) => (/^[\w.-]{1,64}$/.test(v) ? v : '') },
  request: { default: '', parse: (v) => v.slice(0, 2000) },
  stepMode: { key: 'mode', default: 'rehearse', parse: (v, d) => oneOf(v, ['rehearse', 'real'] as const, d) },
  src: { default: 'policy', parse: (v, d) => oneOf(v, ['policy', 'expert-act', 'expert'] as const, d) },
  stepUser: { key: 'user', default: 'off', parse: (v, d) => oneOf(v, STEPPER_USERS, d) },
  temp: { default: 1, parse: (v, d) => num(v, 0, 2, d) },
  format: { default: 'f32', parse: (v, d) => oneOf(v, ['f32', 'q8', 'q4'] as const, d) },
  backend: { default: '', parse: (v) => oneOf(v, ['webgpu', 'cpu-fast', 'cpu-ref', ''] as const, '') },
  model: { default: '', parse: (v) => v.slice(0, 2000) },
  ttsMode: { default: 'parallel', parse: (v, d) => oneOf(v, ['parallel', 'sequential'] as const, d) },
  ttsN: { default: 1, parse: (v, d) => int(v, 0, 8, d) },
  lessonSteps: { key: 'lsteps', default: LESSON_SIZE.steps, parse: (v, d) => int(v, LESSON_RANGE.steps.min, LESSON_RANGE.steps.max, d) },
  lessonEvalEvery: { key: 'levery', default: LESSON_SIZE.evalEvery, parse: (v, d) => int(v, LESSON_RANGE.evalEvery.min, LESSON_RANGE.evalEvery.max, d) },
  lessonEvalTasks: { key: 'ltasks', default: LESSON_SIZE.evalTasks, parse: (v, d) => int(v, LESSON_RANGE.evalTasks.min, LESSON_RANGE.evalTasks.max, d) },
};
const PAGE_KEYS = Object.keys(PAGE) as (keyof PageSettings)[];
const pageKey = (k: keyof PageSettings) => PAGE[k].key ?? k;

/** A run setting's value from its URL text: clamped to the lab's range, one of its choices, or its default. */
function parseRun(row: RunSetting, v: string, d: unknown): unknown {
  const k = row.kind;
  const lo = row.lab?.min ?? (k.type === 'int' || k.type === 'number' ? k.min : 0);
  const hi = row.lab?.max ?? (k.type === 'int' ? k.max : k.type === 'number' ? (k.max ?? Number.MAX_VALUE) : 0);
  switch (k.type) {
    case 'int':
      return int(v, lo, hi, d as number);
    case 'number':
      return num(v, lo, hi, d as number);
    case 'bool':
      return v === 'true' ? true : v === 'false' ? false : d;
    case 'enum':
      return oneOf(v, row.fallback ? ['auto', ...k.values] : k.values, d as string);
    case 'list':
      return d;
  }
}

const labRows = (table: RunSettingsTable) => table.filter((r) => r.lab);

/** A numeric lab control's bounds, the ones the URL is clamped to (spread onto its <input>). */
export function labRange(name: LabSettingName): { min: number; max?: number } {
  const row = RUN_SETTINGS.find((r) => r.name === name) as RunSetting;
  const k = row.kind;
  if (k.type !== 'int' && k.type !== 'number') throw new Error(`${name} is not a number`);
  const max = row.lab?.max ?? k.max;
  return { min: row.lab?.min ?? k.min, ...(max !== undefined && max < Number.MAX_SAFE_INTEGER ? { max } : {}) };
}

/** The page's defaults and the lab's defaults of every run setting of `table`. */
export function defaultsOf(table: RunSettingsTable = RUN_SETTINGS): Settings {
  const s: Record<string, unknown> = {};
  for (const k of PAGE_KEYS) s[k] = PAGE[k].default;
  for (const row of labRows(table)) s[row.name] = labDefault(row);
  return s as unknown as Settings;
}

export const DEFAULTS: Settings = defaultsOf();

export function parseSettings(query: string, table: RunSettingsTable = RUN_SETTINGS): Settings {
  const q = new URLSearchParams(query);
  const s = defaultsOf(table) as unknown as Record<string, unknown>;
  for (const k of PAGE_KEYS) {
    const v = q.get(pageKey(k));
    if (v !== null) s[k] = (PAGE[k].parse as (v: string, d: unknown) => unknown)(v, s[k]);
  }
  for (const row of labRows(table)) {
    const v = q.get(row.lab!.key);
    if (v !== null) s[row.name] = parseRun(row, v, s[row.name]);
  }
  return s as unknown as Settings;
}

/** Only non-default values go in the URL, so a shared link stays short. */
export function settingsQuery(s: Settings, table: RunSettingsTable = RUN_SETTINGS): string {
  const d = defaultsOf(table) as unknown as Record<string, unknown>;
  const v = s as unknown as Record<string, unknown>;
  const q = new URLSearchParams();
  for (const k of PAGE_KEYS) if (v[k] !== d[k]) q.set(pageKey(k), String(v[k]));
  for (const row of labRows(table)) if (v[row.name] !== d[row.name]) q.set(row.lab!.key, String(v[row.name]));
  const str = q.toString();
  return str ? `?${str}` : '';
}

export const settings: Settings = $state(parseSettings(typeof location === 'undefined' ? '' : location.search));

/** Keep the URL in step with the settings (replaceState: no history entry per keystroke). */
export function syncUrl(): void {
  $effect(() => {
    const q = settingsQuery(settings);
    if (q !== location.search) history.replaceState(null, '', `${location.pathname}${q}${location.hash}`);
  });
}
