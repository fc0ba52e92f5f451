// The page's view of the policy worker: one comlink proxy, what is loaded, what is running (with its
// progress and a cancel), and the latest results of each panel.
import * as Comlink from 'comlink';
import type {
  BudgetInfo, EnvInfo, WorldName, FolderInfo, GenView, GroupView, LoadInfo, MemoryNow, ModelChoice, PolicyApi, Progress, RolloutView, HeldOutEval, TrainPoint, TrainRequest, TrainStatus, TtsView,
} from '../worker-protocol';
import { addRun } from './runlog.svelte';
import { pendingRun } from './run-state';
import { clearWorldOwned } from './world';
import { settings } from './settings.svelte';
import { labRequestOf } from '../method/run-config';

const worker = new Worker(new URL('../../workers/policy.worker.ts', import.meta.url), { type: 'module', name: 'policy' });
const api = Comlink.wrap<PolicyApi>(worker);
// A shared flag lets cancel reach a worker that is busy in a CPU loop (no message can arrive then).
const cancelFlag = typeof SharedArrayBuffer !== 'undefined' && crossOriginIsolated ? new SharedArrayBuffer(4) : null;

export const lab = $state({
  env: null as EnvInfo | null,
  model: null as LoadInfo | null,
  loadError: '',
  /** Why the bundled model did not load (absent from this build, or an error), when it did not. */
  bundledError: '',
  busy: '' as string,
  progress: null as Progress | null,
  error: '',
  rollout: null as RolloutView | null,
  group: null as GroupView | null,
  folder: null as FolderInfo | null,
  pickedFiles: [] as File[],
  train: null as TrainStatus | null,
  training: false,
  tts: null as TtsView | null,
  /** Token budgets measured on the world's data under the loaded tokenizer. */
  budget: null as BudgetInfo | null,
  /** The choice the current model was loaded from (reloading on another backend reuses it). */
  choice: null as ModelChoice | null,
  /** "Try the policy": the loaded model's output for the prompt (it belongs to that model: a load clears it). */
  tried: null as GenView | null,
  /** The loaded policy's memory after the last operation (GPU buffers and their peak since the load, JS heap). */
  memory: null as MemoryNow | null,
});

/** The budgets a request will really use: the user's numbers, or the measured defaults (0). */
export function effectiveBudgets(): { act: number | null; rehearse: number | null } {
  return { act: settings.maxActTokens || lab.budget?.act || null, rehearse: settings.maxRehearseTokens || lab.budget?.rehearse || null };
}

// A worker that fails to start (a script error, an unsupported browser) would leave every call pending:
// say so instead of "Loading…" forever.
worker.addEventListener('error', (e) => {
  lab.loadError = `the policy worker failed: ${e.message || 'it could not start in this browser'}`;
  lab.error = lab.loadError;
});

const onProgress = Comlink.proxy((p: Progress) => {
  lab.progress = p;
});

/** Run one worker operation: the page stays live, shows progress, and can cancel it. */
export async function run<T>(label: string, fn: () => Promise<T>): Promise<T | undefined> {
  if (lab.busy) return undefined;
  lab.busy = label;
  lab.error = '';
  lab.progress = null;
  try {
    return await fn();
  } catch (e) {
    const err = e as Error;
    lab.error = err.name === 'AbortError' ? `${label}: cancelled` : `${label}: ${err.message}`;
    return undefined;
  } finally {
    // Memory as the operation left it, read before the lab says it is idle (so a reader of the idle lab sees it);
    // a worker that died or hangs gets 2 s, so the lab never stays busy waiting for a readout.
    lab.memory = await Promise.race([api.memory().catch(() => null), new Promise<null>((r) => setTimeout(() => r(null), 2000))]);
    lab.busy = '';
    lab.progress = null;
  }
}

export function cancel(): void {
  if (cancelFlag) Atomics.store(new Int32Array(cancelFlag), 0, 1);
  void api.cancel();
}

/**
 * The bundled policy the URL's model names: one of the world's lesson policies by name (?model=careless; the world's
 * list as the worker reported it), else the world's bundled policy.
 */
export function bundledChoice(world: WorldName, name = ''): ModelChoice {
  return name && lab.env?.world === world && lab.env.lessonPolicies.includes(name) ? { kind: 'bundled', world, policy: name } : { kind: 'bundled', world };
}

export async function start(): Promise<void> {
  await run('preparing the environment', async () => {
    lab.env = await api.init(cancelFlag, { world: settings.world });
    if (!settings.task || !lab.env.tasks.some((t) => t.id === settings.task)) settings.task = lab.env.tasks[0]?.id ?? '';
  });
  await refreshTraining();
  const m = settings.model;
  const choice: ModelChoice = m === 'random' ? { kind: 'random' } : m.startsWith('http') ? { kind: 'url', url: m } : bundledChoice(settings.world, m);
  await loadModel(choice);
  // The bundled model did not load (a build without models/default, a failed fetch): the lab still opens, on
  // the untrained random placeholder.
  if (!lab.model && choice.kind === 'bundled') {
    lab.bundledError = lab.loadError;
    await loadModel({ kind: 'random' });
  }
}

/**
 * One control for the world: the compact 'mini' world, the full retail one, or a task file of your own (over
 * the full retail world). The task lists, the stepper, the group view, training and private rehearsal all
 * use it; budgets are measured again for it.
 */
export async function switchWorld(world: WorldName, taskFile?: File): Promise<void> {
  const file = taskFile ? { name: taskFile.name, text: await taskFile.text() } : undefined;
  const env = await run(file ? `reading ${file.name}` : `switching to the ${world} world`, () => api.init(cancelFlag, { world, taskFile: file }));
  if (!env) return;
  lab.env = env;
  settings.world = env.world;
  // Everything measured in or made by the other world goes: its rollouts, its budgets (until measured again
  // here) and the other world's model output.
  resetForWorld();
  if (!env.tasks.some((t) => t.id === settings.task)) settings.task = env.tasks[0]?.id ?? '';
  // Each world has its own bundled policy (its tokenizer and its database); a user's own model stays.
  const reload = lab.choice?.kind === 'bundled' && lab.choice.world !== env.world;
  if (reload) await loadModel(bundledChoice(env.world, lab.choice?.kind === 'bundled' ? lab.choice.policy : undefined));
  // A load measures the budgets itself; without one (a user's model, or a failed load) they are measured here.
  if (!reload || lab.loadError) lab.budget = await api.budgets().catch(() => null);
}

/** What belongs to the world the lab served before a switch (the run itself stays, and says so). */
export function resetForWorld(): void {
  clearWorldOwned(lab);
}

export async function loadModel(choice: ModelChoice): Promise<void> {
  lab.loadError = '';
  const info = await run(`loading the model`, () =>
    api.load({ model: choice, format: choice.kind === 'random' ? 'f32' : settings.format, backend: settings.backend || undefined, loraRank: settings.rank }, onProgress),
  );
  if (info) {
    // The conversation policy was trained to talk with the scripted τ² user: its world is played with that user (set
    // with the model, before anything else is awaited, so no reader sees the policy without its user).
    if (choice.kind === 'bundled' && choice.policy && choice.policy === lab.env?.conversationPolicy) {
      settings.stepUser = 'scripted';
      settings.user = 'scripted';
    }
    lab.model = info;
    lab.choice = choice;
    lab.rollout = null;
    lab.group = null;
    lab.tried = null;
    lab.budget = await api.budgets().catch(() => null);
  } else lab.loadError = lab.error;
}

export async function inspect(files: File[]): Promise<void> {
  lab.pickedFiles = files;
  lab.folder = (await run('reading the folder', () => api.inspectFiles(files))) ?? null;
}

function rolloutReq() {
  return {
    taskId: settings.request.trim() ? null : settings.task,
    request: settings.request,
    mode: settings.stepMode,
    seed: settings.seed,
    actSource: settings.src,
    maxNewTokens: settings.maxActTokens,
    rehearseTokens: settings.maxRehearseTokens,
    rehearseDecoding: settings.rehearseDecoding,
    temperature: settings.temp,
    maxTurns: settings.maxTurns,
    user: settings.stepUser,
  };
}

export async function resetRollout(): Promise<void> {
  lab.rollout = (await run('starting a rollout', () => api.rolloutStart(rolloutReq()))) ?? null;
}

export async function step(): Promise<boolean> {
  if (!lab.rollout) await resetRollout();
  if (!lab.rollout || lab.rollout.done) return false;
  const v = await run('stepping', () => api.rolloutStep(onProgress));
  if (v) lab.rollout = v;
  if (v?.done) void addRun({ kind: 'stepper', taskId: v.taskId, mode: v.mode, rollouts: [v] });
  return !!v && !v.done;
}

export async function runGroup(): Promise<void> {
  const req = {
    taskId: settings.task,
    mode: settings.stepMode,
    seed: settings.seed,
    maxNewTokens: settings.maxActTokens,
    rehearseTokens: settings.maxRehearseTokens,
    rehearseDecoding: settings.rehearseDecoding,
    temperature: settings.temp,
    maxTurns: settings.maxTurns,
    k: settings.k,
  };
  const v = await run(`running ${settings.k} rollouts`, () => api.group(req, onProgress));
  if (v) {
    lab.group = v;
    void addRun({ kind: 'group', taskId: v.taskId, mode: v.mode, rollouts: v.rollouts });
  }
}

export async function tryGenerate(prompt: string, maxNew: number): Promise<void> {
  const v = await run('generating', () => api.generate(prompt, maxNew, settings.seed, onProgress));
  if (v) lab.tried = v;
}

export async function refreshTraining(): Promise<void> {
  lab.train = await api.trainStatus().catch(() => null);
}

const onPoint = Comlink.proxy((p: TrainPoint) => {
  if (!lab.train) return;
  lab.train.points = [...lab.train.points.filter((q) => q.step !== p.step), p];
  lab.train.step = p.step;
});

const onStart = Comlink.proxy((e: HeldOutEval) => {
  if (lab.train) lab.train.start = e;
});

/** Start or resume the run; `extend` adds that many steps to it first (a finished run goes on). */
export async function startTraining(extend = 0): Promise<void> {
  // Every lab row of the run settings' table by its one name ('auto' left out: the run derives it).
  const req = labRequestOf(settings as unknown as Record<string, unknown>) as TrainRequest;
  if (!lab.train) await refreshTraining();
  // A new run trains in the world and on the model the lab holds now (the worker saves the same two).
  if (lab.train && !lab.train.config && lab.env && lab.model) lab.train = pendingRun(lab.train, req, lab.env.world, lab.model.modelLabel);
  lab.training = true;
  try {
    if (extend > 0 && lab.train) lab.train = { ...lab.train, total: lab.train.total + extend };
    const st = await run('training', () => api.trainStart(req, onPoint, onProgress, extend, onStart));
    if (!st) await refreshTraining();
    if (st) lab.train = st;
  } finally {
    lab.training = false;
  }
}

export function pauseTraining(): void {
  void api.trainPause();
}

export async function exportTrainingLogs(): Promise<void> {
  const files = await run('reading the run logs', () => api.trainFiles());
  for (const f of files ?? []) download(f.name, new Blob([f.bytes as BlobPart]));
}

export async function resetTraining(): Promise<void> {
  await run('forgetting the run', () => api.trainReset());
  await refreshTraining();
}

export async function runTts(): Promise<void> {
  const req = { taskId: settings.task, mode: settings.ttsMode, n: settings.ttsN, seed: settings.seed, maxTurns: settings.maxTurns, maxNewTokens: settings.maxActTokens, rehearseTokens: settings.maxRehearseTokens, rehearseDecoding: settings.rehearseDecoding };
  const v = await run(`private rehearsal (${req.mode}, N = ${req.n})`, () => api.tts(req, onProgress));
  if (v) lab.tts = v;
}

export async function exportAdapter(): Promise<void> {
  const files = await run('exporting the adapter', () => api.exportAdapter());
  if (!files) return;
  for (const f of files) download(f.name, new Blob([f.bytes as BlobPart]));
}

export async function importAdapter(files: File[]): Promise<string> {
  const r = await run('importing the adapter', () => api.importAdapter(files));
  return r ? `adapter loaded: rank ${r.rank}, alpha ${r.alpha}, targets ${r.targets.join(', ')}` : '';
}

export function download(name: string, blob: Blob): void {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
