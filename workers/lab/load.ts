// Getting a policy onto a backend: pick the backend (WebGPU, else the CPU fast path, else the CPU
// reference), then load a Hugging Face folder (bundled, URL or picked files) or build the random-weight
// placeholder. Also: what a picked folder holds and how much memory it will take, before loading it.
import { createBackend } from '../../src/engine';
import type { Backend } from '../../src/engine/backend';
import { CONFIG_FILE, paramCount, parseQwen3Config } from '../../src/model/config';
import { createLoraAdapter, type LoraAdapter } from '../../src/model/lora';
import type { Qwen3Model } from '../../src/model/qwen3';
import { randomWeights } from '../../src/model/random';
import { FetchSource, FileMapSource, readJson, type ModelSource } from '../../src/model/source';
import { checkTokenizerFits, Tokenizer } from '../../src/model/tokenizer';
import { buildQwen3, loadQwen3 } from '../../src/model/weights';
import type { BackendKind, FolderInfo, LoadRequest, WeightFormat } from '../../src/worker-protocol';
import type { Domain } from '../../src/env/domain';
import { defaultLoraAlpha } from '../../src/rl/grpo-config';
import { placeholderTokenizer, randomConfig } from './placeholder';

export interface Policy {
  backend: Backend;
  backendKind: BackendKind;
  backendNote: string;
  model: Qwen3Model;
  tok: Tokenizer;
  adapter: LoraAdapter;
  label: string;
  untrained: boolean;
}

/** Served next to the app (public/models -> models/). */
export const BUNDLED_MODEL_URL = new URL(`${import.meta.env.BASE_URL}models/default/`, self.location.origin).href;

/** The browser's WebGPU adapter as it describes itself, and whether it is a software (fallback) one. */
export async function webGpuAdapter(): Promise<{ description: string; software: boolean } | null> {
  const gpu = (self.navigator as Navigator & { gpu?: GPU }).gpu;
  if (!gpu) return null;
  const a = await gpu.requestAdapter({ powerPreference: 'high-performance' }).catch(() => null);
  if (!a) return null;
  const info = (a.info ?? {}) as GPUAdapterInfo & { isFallbackAdapter?: boolean };
  const description = [info.vendor, info.architecture, info.device, info.description].filter(Boolean).join(' ') || 'unnamed adapter';
  const fallback = info.isFallbackAdapter === true || (a as GPUAdapter & { isFallbackAdapter?: boolean }).isFallbackAdapter === true;
  // SwiftShader (Chromium's), llvmpipe/lavapipe (Mesa), WARP / Basic Render (Windows): CPUs posing as GPUs.
  const software = fallback || /swiftshader|llvmpipe|lavapipe|software|basic render|warp/i.test(description);
  return { description, software };
}

export async function pickBackend(forced?: BackendKind, order: BackendKind[] = ['webgpu', 'cpu-fast', 'cpu-ref']): Promise<{ backend: Backend; kind: BackendKind; note: string }> {
  const gpu = (self.navigator as Navigator & { gpu?: GPU }).gpu;
  const tries: BackendKind[] = forced ? [forced] : order;
  const why: string[] = [];
  for (const kind of tries) {
    try {
      if (kind === 'webgpu' && !gpu) throw new Error('this browser has no navigator.gpu');
      const backend = await createBackend(kind, kind === 'webgpu' ? { gpu } : kind === 'cpu-fast' ? { threads: Math.min(4, self.navigator.hardwareConcurrency || 1) } : {});
      const note = forced ? `${kind}, chosen by you (the Backend control or ?backend= in the URL)` : why.length ? `${kind}, because ${why.join('; ')}` : kind;
      return { backend, kind, note };
    } catch (e) {
      why.push(`${kind} is unavailable (${(e as Error).message})`);
    }
  }
  throw new Error(`no backend could start: ${why.join('; ')}`);
}

/**
 * A model folder served over HTTP next to the app. Static servers with a single-page-app fallback (vite
 * preview and dev do this) answer a missing file with index.html and status 200, so an HTML answer to a
 * model file means "absent" here (no model file is HTML).
 */
class ServedFolder extends FetchSource {
  constructor(private readonly baseUrl: string) {
    super(baseUrl);
  }
  override async has(name: string): Promise<boolean> {
    const r = await fetch(`${this.baseUrl.replace(/\/+$/, '')}/${name}`, { method: 'HEAD' });
    return r.ok && !(r.headers.get('content-type') ?? '').includes('text/html');
  }
}

/** A source whose config.json really is a JSON file (a dev server answers unknown paths with index.html). */
async function usable(src: ModelSource): Promise<boolean> {
  try {
    await readJson(src, CONFIG_FILE);
    return true;
  } catch {
    return false;
  }
}

export async function loadPolicy(req: LoadRequest, backend: Backend, domain: Domain): Promise<Omit<Policy, 'backend' | 'backendKind' | 'backendNote'>> {
  const m = req.model;
  if (m.kind === 'random') {
    const tok = placeholderTokenizer(domain);
    const config = randomConfig(tok.size);
    const { model } = await buildQwen3(backend, config, randomWeights(config, 1234, 'f32'), { format: 'f32' });
    const adapter = createLoraAdapter(backend, config, { name: 'default', rank: req.loraRank, alpha: defaultLoraAlpha(req.loraRank), seed: 1 });
    return { model, tok, adapter, label: 'random-weight Qwen3 placeholder (untrained)', untrained: true };
  }
  const src: ModelSource = m.kind === 'bundled' ? new ServedFolder(BUNDLED_MODEL_URL) : m.kind === 'url' ? new ServedFolder(m.url) : new FileMapSource(m.files);
  if (m.kind === 'bundled' && !(await usable(src))) throw new Error(`the bundled model is not present at ${BUNDLED_MODEL_URL} (no models/default/config.json in this build)`);
  const tok = await Tokenizer.load(src);
  const { model } = await loadQwen3(src, backend, { format: req.format });
  checkTokenizerFits(tok, model.config.vocabSize);
  const adapter = createLoraAdapter(backend, model.config, { name: 'default', rank: req.loraRank, alpha: defaultLoraAlpha(req.loraRank), seed: 1 });
  const label = m.kind === 'bundled' ? 'bundled model (models/default)' : m.kind === 'url' ? m.url : `picked folder (${m.files.length} files)`;
  return { model, tok, adapter, label, untrained: false };
}

const BYTES_PER_PARAM: Record<WeightFormat, number> = { f32: 4, q8: 1 + 4 / 1024, q4: 0.5 + 4 / 32 };

/** Sizes, parameter count and memory per format of a picked folder; problems are listed, not thrown. */
export async function inspectFolder(files: File[]): Promise<FolderInfo> {
  const problems: string[] = [];
  const list = files.map((f) => ({ name: f.name.split('/').pop()!, bytes: f.size }));
  const names = new Set(list.map((f) => f.name));
  for (const need of [CONFIG_FILE, 'tokenizer.json', 'tokenizer_config.json'])
    if (!names.has(need)) problems.push(`${need} is missing`);
  if (!names.has('model.safetensors') && !names.has('model.safetensors.index.json')) problems.push('no model.safetensors (nor a sharded index)');
  let params: number | null = null;
  let memoryBytes: FolderInfo['memoryBytes'] = null;
  if (names.has(CONFIG_FILE)) {
    try {
      const c = parseQwen3Config(await readJson(new FileMapSource(files), CONFIG_FILE));
      params = paramCount(c);
      const p = params;
      memoryBytes = { f32: p * BYTES_PER_PARAM.f32, q8: p * BYTES_PER_PARAM.q8, q4: p * BYTES_PER_PARAM.q4 };
    } catch (e) {
      problems.push((e as Error).message);
    }
  }
  return { files: list, totalBytes: list.reduce((a, f) => a + f.bytes, 0), params, memoryBytes, problems };
}
