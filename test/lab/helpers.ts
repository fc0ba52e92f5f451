// Shared fixtures of the lab tests: a tiny random-weight model on the CPU backend and a compact view of
// the retail domain (a one-line policy, two tool schemas: the tiny model's tokenizer is byte-level, so
// every character of a prompt is a token). Calls still run against the whole retail environment.
import type { Backend } from '../../src/engine/backend';
import { createBackend } from '../../src/engine/index';
import { Rng } from '../../src/util/rng';
import { retailDomain } from '../../src/env/retail';
import { loadRetailBase } from '../../src/env/retail/node';
import { createLoraAdapter, type LoraAdapter } from '../../src/model/lora';
import type { Qwen3Model } from '../../src/model/qwen3';
import { MemorySource } from '../../src/model/source';
import { Tokenizer } from '../../src/model/tokenizer';
import { loadQwen3 } from '../../src/model/weights';
import type { LabDomain } from '../../workers/lab/episode';
import { tinyConfig, tinyModelFiles } from '../fixtures/tiny-model';

export const retail = retailDomain(loadRetailBase());
const keep = new Set(['find_user_id_by_email', 'get_order_details']);
export const domain: LabDomain = {
  ...retail,
  policy: 'You are a retail agent. Use the tools.',
  definitions: () => retail.definitions().filter((t) => keep.has(t.function.name)),
};

export interface Tiny {
  backend: Backend;
  model: Qwen3Model;
  tok: Tokenizer;
  /** A trained-looking adapter (random B; a fresh adapter has B = 0 and changes nothing). */
  adapter: LoraAdapter;
}

export async function loadTiny(maxPositionEmbeddings = 8192): Promise<Tiny> {
  const backend = await createBackend('cpu-fast', { threads: 1 });
  const src = new MemorySource(await tinyModelFiles(tinyConfig({ maxPositionEmbeddings }), 5));
  const model = (await loadQwen3(src, backend, { format: 'f32' })).model;
  const tok = await Tokenizer.load(src);
  const adapter = createLoraAdapter(backend, model.config, { name: 'policy', rank: 2, alpha: 4, seed: 3 });
  const rng = new Rng(4);
  for (const [name, t] of adapter.parameters()) {
    if (!name.endsWith('lora_B.weight')) continue;
    backend.write(t, Float32Array.from({ length: t.shape.reduce((x, y) => x * y, 1) }, () => 0.5 * rng.normal()));
  }
  return { backend, model, tok, adapter };
}
