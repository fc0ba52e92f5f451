// Reading a training run's adapters back for evaluation or export: a run folder (run.json names its last
// complete checkpoint, ckpt/<step>/ with adapter/ and, for per-role, adapter-rehearse/; see run.ts) or a
// bare PEFT adapter folder. Works over any RunStore (disk in Node, OPFS or memory in a browser).
import type { Backend } from '../engine/backend';
import type { Qwen3Config } from '../model/config';
import type { LoraAdapter } from '../model/lora';
import { ADAPTER_CONFIG, ADAPTER_WEIGHTS, loadPeftAdapter } from '../model/peft';
import { MemorySource } from '../model/source';
import type { RolloutMode } from '../rollout/episode';
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

/** run.json of a run, or null when the store holds no run. */
export async function readRunInfo(store: RunStore): Promise<RunInfo | null> {
  const bytes = await store.read('run.json');
  if (!bytes) return null;
  let raw: unknown;
  try {
    raw = JSON.parse(new TextDecoder().decode(bytes));
  } catch (e) {
    throw new CheckpointError(`run.json is not valid JSON (${(e as Error).message})`);
  }
  const r = raw as Partial<RunInfo> & { version?: unknown };
  if (r?.version !== 1 || typeof r.step !== 'number' || typeof r.config !== 'object' || r.config === null)
    throw new CheckpointError('run.json is not a GRPO run state (expected version 1 with config and step)');
  return { config: r.config, step: r.step, checkpoint: typeof r.checkpoint === 'string' ? r.checkpoint : null };
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
  /** per-role runs only. */
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
    if (info.config.mode === 'per-role') {
      const src = await peftFrom(store, `${info.checkpoint}/adapter-rehearse`);
      if (!src) {
        actAdapter.free(backend);
        throw new CheckpointError(`per-role checkpoint ${info.checkpoint} has no adapter-rehearse/ folder`);
      }
      rehearse = await loadPeftAdapter(backend, c, src, 'rehearse');
    }
    return { act: actAdapter, rehearse, mode: info.config.mode, step: info.step };
  }
  const src = await peftFrom(store, '');
  if (!src) throw new CheckpointError(`neither a run folder (run.json) nor a PEFT adapter (${ADAPTER_CONFIG} + ${ADAPTER_WEIGHTS})`);
  return { act: await loadPeftAdapter(backend, c, src, 'act'), rehearse: null, mode: null, step: null };
}
