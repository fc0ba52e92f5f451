// Reading a training run's adapters back for evaluation or export: a run folder (run.json names its last
// complete checkpoint, ckpt/<step>/ with adapter/ and, where the mode has a Rehearse adapter, adapter-rehearse/; see run.ts) or a
// bare PEFT adapter folder. Works over any RunStore (disk in Node, OPFS or memory in a browser).
import { z } from 'zod';
import type { Backend } from '../engine/backend';
import type { Qwen3Config } from '../model/config';
import type { LoraAdapter } from '../model/lora';
import { ADAPTER_CONFIG, ADAPTER_WEIGHTS, loadPeftAdapter } from '../model/peft';
import { MemorySource } from '../model/source';
import { hasRehearseAdapter, type RolloutMode } from '../method/modes';
import { configSchema } from './run-schema';
import type { GrpoRunConfig } from './run';
import type { RunStore } from './store';

export class CheckpointError extends Error {
  override readonly name = 'CheckpointError';
}

export interface RunInfo {
  config: GrpoRunConfig;
  /** Completed steps. */
  step: number;
  /** Folder of the last complete checkpoint, or null before the first one. */
  checkpoint: string | null;
}

const int = (min: number, max = Number.MAX_SAFE_INTEGER) => z.number().int().min(min).max(max);
const nonNeg = z.number().min(0).finite();

// run.json's config as the run settings' table records it (src/rl/run-schema.ts).
const ConfigSchema = configSchema() as unknown as z.ZodType<GrpoRunConfig>;

const RunStateSchema = z
  .looseObject({
    version: z.literal(1),
    config: ConfigSchema,
    step: int(0),
    rng: z.object({ seed: int(0, 0xffffffff), step: int(0) }),
    checkpoint: z.string().regex(/^ckpt\/\d+$/, 'must name a checkpoint folder ckpt/<step>').nullable(),
    familyStats: z.record(z.string(), z.object({ episodes: int(0), reward: nonNeg })).optional(),
  })
  .refine((r) => r.step <= r.config.steps, { message: 'is past config.steps', path: ['step'] });

export type RunStateJson = z.infer<typeof RunStateSchema>;

/** Parses run.json, naming the file and the first bad field. */
export function parseRunState(bytes: Uint8Array, file = 'run.json'): RunStateJson {
  let raw: unknown;
  try {
    raw = JSON.parse(new TextDecoder().decode(bytes));
  } catch (e) {
    throw new CheckpointError(`${file} is not valid JSON (${(e as Error).message})`);
  }
  if (!raw || typeof raw !== 'object' || (raw as { version?: unknown }).version !== 1)
    throw new CheckpointError(`${file} is not a GRPO run state (expected version 1 with config and step)`);
  const r = RunStateSchema.safeParse(raw);
  if (!r.success) {
    const iss = r.error.issues[0];
    const path = iss.path.join('.');
    const got = path ? JSON.stringify(iss.path.reduce<unknown>((x, k) => (x as Record<PropertyKey, unknown>)?.[k as PropertyKey], raw)) : '';
    throw new CheckpointError(`${file}: ${path || '(root)'}: ${iss.message}${got !== undefined && path ? ` (got ${got})` : ''}`);
  }
  // The checked object as written (zod's copy reorders keys, and run.json is rewritten from it on resume).
  return raw as RunStateJson;
}

/** run.json of a run, or null when the store holds no run. */
export async function readRunInfo(store: RunStore): Promise<RunInfo | null> {
  const bytes = await store.read('run.json');
  if (!bytes) return null;
  const r = parseRunState(bytes, storeFile(store, 'run.json'));
  return { config: r.config as GrpoRunConfig, step: r.step, checkpoint: r.checkpoint };
}

/** A run file's name as a user can find it (the folder's path when the store has one). */
export function storeFile(store: RunStore, name: string): string {
  const root = (store as { root?: unknown }).root;
  return typeof root === 'string' ? `${root}/${name}` : name;
}

async function peftFrom(store: RunStore, dir: string): Promise<MemorySource | null> {
  const files = new Map<string, Uint8Array>();
  for (const f of [ADAPTER_CONFIG, ADAPTER_WEIGHTS]) {
    const b = await store.read(dir ? `${dir}/${f}` : f);
    if (!b) return null;
    files.set(f, b);
  }
  return new MemorySource(files);
}

export interface LoadedAdapters {
  /** Acts (in rehearse mode: the shared adapter that plays both roles). */
  act: LoraAdapter;
  /** Runs of a mode with a Rehearse adapter only. */
  rehearse: LoraAdapter | null;
  /** The run's mode and step, when the store was a run folder. */
  mode: RolloutMode | null;
  step: number | null;
}

/**
 * The adapters of the store's last checkpoint if it holds a run, else the store's own PEFT files.
 * Refuses a run with no checkpoint yet and a folder that is neither.
 */
export async function loadAdapters(store: RunStore, backend: Backend, c: Qwen3Config): Promise<LoadedAdapters> {
  const info = await readRunInfo(store);
  if (info) {
    if (!info.checkpoint) throw new CheckpointError('the run has no checkpoint yet');
    const act = await peftFrom(store, `${info.checkpoint}/adapter`);
    if (!act) throw new CheckpointError(`checkpoint ${info.checkpoint} has no adapter/ folder`);
    const actAdapter = await loadPeftAdapter(backend, c, act, 'act');
    let rehearse: LoraAdapter | null = null;
    if (hasRehearseAdapter(info.config.mode)) {
      const src = await peftFrom(store, `${info.checkpoint}/adapter-rehearse`);
      if (!src) {
        actAdapter.free(backend);
        throw new CheckpointError(`${info.config.mode} checkpoint ${info.checkpoint} has no adapter-rehearse/ folder`);
      }
      rehearse = await loadPeftAdapter(backend, c, src, 'rehearse');
    }
    return { act: actAdapter, rehearse, mode: info.config.mode, step: info.step };
  }
  const src = await peftFrom(store, '');
  if (!src) throw new CheckpointError(`neither a run folder (run.json) nor a PEFT adapter (${ADAPTER_CONFIG} + ${ADAPTER_WEIGHTS})`);
  return { act: await loadPeftAdapter(backend, c, src, 'act'), rehearse: null, mode: null, step: null };
}
