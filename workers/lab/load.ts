// Getting a policy onto a backend: pick the backend (WebGPU, else the CPU fast path, else the CPU
// reference), then load a Hugging Face folder (bundled, URL or picked files) or build the random-weight
// placeholder. Also: what a picked folder holds and how much memory it will take, before loading it;
// while loading, progress in bytes and tensors, and the memory it took (JS heap, GPU buffers).
import { createBackend } from '../../src/engine';
import type { Backend } from '../../src/engine/backend';
import { defaultEmbedFormat } from '../../src/engine/quant';
import { CONFIG_FILE, paramCount, parseQwen3Config } from '../../src/model/config';
import { createLoraAdapter, type LoraAdapter } from '../../src/model/lora';
import type { Qwen3Model } from '../../src/model/qwen3';
import { randomWeights } from '../../src/model/random';
import { parseSafetensors } from '../../src/model/safetensors';
import { FetchSource, FileMapSource, missing, readJson, type ModelSource } from '../../src/model/source';
import { checkTokenizerFits, Tokenizer } from '../../src/model/tokenizer';
import { buildQwen3, loadQwen3 } from '../../src/model/weights';
import { trackDeviceBytes, type DeviceBytes } from '../../src/train/measure';
import { loadedWeightBytes, minBindingBytes } from '../../src/train/memory';
import type { BackendKind, FolderInfo, LoadMemory, LoadRequest, MemoryNow, ModelCeiling, ProgressFn, WeightFormat } from '../../src/worker-protocol';
import type { Domain } from '../../src/env/domain';
import { bundledFolder, type WorldName } from '../../src/env/retail/worlds';
import { fileFingerprint, weightsFingerprint } from '../../src/rl/base-eval';
import { defaultLoraAlpha } from '../../src/rl/grpo-config';
import { placeholderTokenizer, randomConfig } from './placeholder';
import { readCeiling } from './ceiling';

export interface Policy {
  backend: Backend;
  backendKind: BackendKind;
  backendNote: string;
  model: Qwen3Model;
  tok: Tokenizer;
  adapter: LoraAdapter;
  label: string;
  /** What identifies the weights (src/rl/base-eval.ts weightsFingerprint): a base evaluation is reused only for the same. */
  weights: string;
  untrained: boolean;
}

/** A world's bundled policy, served next to the app (public/models -> models/). */
export const bundledModelUrl = (world: WorldName, policy?: string): string => new URL(`${import.meta.env.BASE_URL}models/${bundledFolder(world, policy)}/`, self.location.origin).href;

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

const MB = (b: number) => `${(b / 1e6).toLocaleString('en-US', { maximumFractionDigits: 0 })} MB`;

/** V8's JS heap in use, where the browser exposes it (Chromium's performance.memory); null elsewhere. */
export function jsHeapBytes(): number | null {
  const m = (self.performance as Performance & { memory?: { usedJSHeapSize: number } }).memory;
  return m && typeof m.usedJSHeapSize === 'number' ? m.usedJSHeapSize : null;
}

const trackers = new WeakMap<GPUDevice, DeviceBytes>();
/** Bytes of every GPU buffer a WebGPU backend's device holds (counted from its first call here); null for a CPU backend. */
export function gpuBytesOf(backend: Backend): DeviceBytes | null {
  const device = (backend as Backend & { ctx?: { device?: GPUDevice } }).ctx?.device;
  if (!device) return null;
  let t = trackers.get(device);
  if (!t) trackers.set(device, (t = trackDeviceBytes(device)));
  return t;
}

/** The memory of a policy on `backend`, now: JS heap, GPU buffers alive and their peak since its load. */
export function memoryNow(backend: Backend): MemoryNow {
  const gpu = gpuBytesOf(backend);
  return { jsHeap: jsHeapBytes(), gpuBytes: gpu?.live() ?? null, gpuPeak: gpu?.peak() ?? null };
}

/** Picked files, read in chunks (progress in bytes) into one buffer; otherwise as FileMapSource. */
class PickedFiles implements ModelSource {
  readonly label = 'the selected files';
  private readonly files = new Map<string, File>();
  constructor(
    files: Iterable<File>,
    private readonly onBytes: (name: string, done: number, total: number) => void,
  ) {
    for (const f of files) this.files.set(f.name.split('/').pop()!, f);
  }
  async has(name: string): Promise<boolean> {
    return this.files.has(name);
  }
  async read(name: string): Promise<Uint8Array> {
    const f = this.files.get(name);
    if (!f) throw missing(name, this);
    if (f.size < 16 << 20) return new FileMapSource([f]).read(f.name.split('/').pop()!);
    let out: Uint8Array;
    try {
      out = new Uint8Array(f.size);
    } catch (e) {
      throw new Error(`this browser could not allocate ${MB(f.size)} to read ${name} (${(e as Error).message}): close other tabs, or use a smaller model`);
    }
    const reader = f.stream().getReader();
    let at = 0;
    let told = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      out.set(value, at);
      at += value.length;
      if (at - told >= 32 << 20 || at === f.size) (this.onBytes(name, at, f.size), (told = at));
    }
    if (at !== f.size) throw new Error(`${name}: read ${at} bytes of ${f.size} (the file changed while it was read?)`);
    return out;
  }
}

/**
 * Refuses, before any weight is read, a model the WebGPU device cannot hold in one binding: weights are
 * split by rows across buffers, but one row of a weight, one row of logits, must fit.
 */
export function checkGpuLimits(c: Qwen3Model['config'], format: WeightFormat, backend: Backend): void {
  const ctx = (backend as Backend & { ctx?: { maxBindingBytes?: number } }).ctx;
  if (!ctx?.maxBindingBytes) return;
  const need = minBindingBytes(c, format);
  if (need > ctx.maxBindingBytes)
    throw new Error(
      `this WebGPU adapter's limits are too small for this model: it needs buffers of at least ${MB(need)} ` +
        `(one row of its largest ${format} weight or of its logits), the adapter binds at most ${MB(ctx.maxBindingBytes)} ` +
        `(maxStorageBufferBindingSize / maxBufferSize). Pick the CPU backend, or a smaller model.`,
    );
}

export async function loadPolicy(
  req: LoadRequest,
  backend: Backend,
  domain: Domain,
  onProgress?: ProgressFn,
): Promise<Omit<Policy, 'backend' | 'backendKind' | 'backendNote'> & { memory: LoadMemory; ceiling: ModelCeiling | null; ceilingProblem: string | null }> {
  const m = req.model;
  const gpu = gpuBytesOf(backend);
  gpu?.resetPeak();
  let heapPeak = jsHeapBytes();
  const sampleHeap = () => {
    const h = jsHeapBytes();
    if (h !== null) heapPeak = Math.max(heapPeak ?? 0, h);
  };
  const memory = (weightBytes: number): LoadMemory => (sampleHeap(), { jsHeapPeak: heapPeak, gpuBytes: gpu?.live() ?? null, gpuPeak: gpu?.peak() ?? null, weightBytes });
  if (m.kind === 'random') {
    const tok = placeholderTokenizer(domain);
    const config = randomConfig(tok.size);
    const { model } = await buildQwen3(backend, config, randomWeights(config, 1234, 'f32'), { format: 'f32' });
    const adapter = createLoraAdapter(backend, config, { name: 'default', rank: req.loraRank, alpha: defaultLoraAlpha(req.loraRank), seed: 1 });
    return { model, tok, adapter, label: 'random-weight Qwen3 placeholder (untrained)', weights: `random f32 weights, seed 1234, vocabulary ${tok.size}`, untrained: true, memory: memory(loadedWeightBytes(config, 'f32')), ceiling: null, ceilingProblem: null };
  }
  // Bytes of each tensor in its file (from the safetensors header), for progress in bytes.
  const prints: string[] = [];
  const fileBytes = new Map<string, number>();
  const src: ModelSource =
    m.kind === 'bundled'
      ? new ServedFolder(bundledModelUrl(m.world, m.policy))
      : m.kind === 'url'
        ? new ServedFolder(m.url)
        : new PickedFiles(m.files, (name, done, total) => {
            sampleHeap();
            onProgress?.({ phase: `reading ${name}: ${MB(done)} of ${MB(total)}`, done, total });
          });
  if (m.kind === 'bundled' && !(await usable(src))) throw new Error(`the bundled ${m.policy ? `${m.policy} policy` : 'model'} of the ${m.world} world is not present at ${bundledModelUrl(m.world, m.policy)} (no models/${bundledFolder(m.world, m.policy)}/config.json in this build)`);
  const config = parseQwen3Config(await readJson(src, CONFIG_FILE));
  checkGpuLimits(config, req.format, backend);
  const tok = await Tokenizer.load(src);
  const counting: ModelSource = {
    label: src.label,
    has: (n) => src.has(n),
    read: async (n) => {
      const bytes = await src.read(n);
      if (n.endsWith('.safetensors')) {
        for (const [name, t] of parseSafetensors(bytes, n).tensors) fileBytes.set(name, t.end - t.begin);
        prints.push(fileFingerprint(n, bytes.length, bytes));
      }
      return bytes;
    },
  };
  const embedFormat = defaultEmbedFormat(req.format);
  const totalBytes = () => [...fileBytes.values()].reduce((a, b) => a + b, 0);
  let bytesDone = 0;
  const { model } = await loadQwen3(counting, backend, {
    format: req.format,
    onWeight: (done, total, spec) => {
      sampleHeap();
      bytesDone += fileBytes.get(spec.name) ?? 0;
      const to = req.format === 'f32' ? 'converting to f32' : `quantizing to ${req.format}${embedFormat !== req.format ? ` (embedding ${embedFormat})` : ''}`;
      onProgress?.({ phase: `${to} and uploading: ${done} of ${total} tensors, ${MB(bytesDone)} of ${MB(totalBytes())}`, done, total });
    },
  });
  // Allocation failures (out of GPU memory) surface at the next sync: say what failed, in words.
  try {
    await backend.sync();
  } catch (e) {
    const need = loadedWeightBytes(config, req.format);
    throw new Error(`the ${req.format} weights (${MB(need)}) did not fit on this ${backend.name} device: ${(e as Error).message}. Pick q4, a smaller model, or the CPU backend.`);
  }
  checkTokenizerFits(tok, model.config.vocabSize);
  const adapter = createLoraAdapter(backend, model.config, { name: 'default', rank: req.loraRank, alpha: defaultLoraAlpha(req.loraRank), seed: 1 });
  const label = m.kind === 'bundled' ? `bundled ${m.world}${m.policy ? ` ${m.policy}` : ''} policy (models/${bundledFolder(m.world, m.policy)})` : m.kind === 'url' ? m.url : `picked folder (${m.files.length} files)`;
  // The folder's pass@k ceiling on the held-out tasks, when it has one (the lesson's plot draws it).
  const ceiling = await readCeiling(src);
  return { model, tok, adapter, label, weights: weightsFingerprint(prints, req.format), untrained: false, memory: memory(loadedWeightBytes(model.config, req.format)), ...ceiling };
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
