// PEFT adapters on disk in Node (the browser uses adapterToPeftFiles / loadPeftAdapter with bytes or
// picked files directly; this file is kept apart so the browser bundle never imports node:fs).
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Backend } from '../engine/backend';
import type { Qwen3Config } from '../model/config';
import type { LoraAdapter } from '../model/lora';
import { adapterToPeftFiles, loadPeftAdapter, type PeftSaveOptions } from '../model/peft';
import { DirSource } from '../model/source-node';

/** Write adapter_config.json and adapter_model.safetensors into `dir` (created if needed). */
export async function savePeftAdapter(backend: Backend, adapter: LoraAdapter, dir: string, o: PeftSaveOptions = {}): Promise<void> {
  await mkdir(dir, { recursive: true });
  for (const [name, bytes] of await adapterToPeftFiles(backend, adapter, o)) await writeFile(join(dir, name), bytes);
}

/** Load a PEFT LoRA adapter folder for a model of config `c`. */
export function loadPeftAdapterDir(backend: Backend, c: Qwen3Config, dir: string, name = 'adapter'): Promise<LoraAdapter> {
  return loadPeftAdapter(backend, c, new DirSource(dir), name);
}
