// The lab tests' fixtures, from the shared ones (test/fixtures): the tiny random-weight model with a
// trained-looking adapter, and the retail domain with two tool schemas.
import type { Backend } from '../../src/engine/backend';
import { Rng } from '../../src/util/rng';
import { createLoraAdapter, type LoraAdapter } from '../../src/model/lora';
import type { Qwen3Model } from '../../src/model/qwen3';
import type { Tokenizer } from '../../src/model/tokenizer';
import type { LabDomain } from '../../workers/lab/episode';
import { compactRetail } from '../fixtures/domains';
import { loadTinyPolicy } from '../fixtures/tiny-model';

export { retail } from '../fixtures/domains';
export const domain: LabDomain = compactRetail(['find_user_id_by_email', 'get_order_details']);

export interface Tiny {
  backend: Backend;
  model: Qwen3Model;
  tok: Tokenizer;
  /** A trained-looking adapter (random B; a fresh adapter has B = 0 and changes nothing). */
  adapter: LoraAdapter;
}

export async function loadTiny(maxPositionEmbeddings = 8192): Promise<Tiny> {
  const { backend, model, tok } = await loadTinyPolicy(5, maxPositionEmbeddings);
  const adapter = createLoraAdapter(backend, model.config, { name: 'policy', rank: 2, alpha: 4, seed: 3 });
  const rng = new Rng(4);
  for (const [name, t] of adapter.parameters()) {
    if (!name.endsWith('lora_B.weight')) continue;
    backend.write(t, Float32Array.from({ length: t.shape.reduce((x, y) => x * y, 1) }, () => 0.5 * rng.normal()));
  }
  return { backend, model, tok, adapter };
}
