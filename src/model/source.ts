// Where model files come from. A Hugging Face style folder is a set of named files; the loader only
// asks for names, so the same code loads from disk (Node, see source-node.ts), from a URL (fetch) or
// from files the user picked in the browser.
import { ModelFormatError } from '../engine/errors';

export interface ModelSource {
  /** For messages: where the files come from. */
  readonly label: string;
  has(name: string): Promise<boolean>;
  /** The file's bytes; a missing file is a ModelFormatError naming it. */
  read(name: string): Promise<Uint8Array>;
}

export function missing(name: string, source: ModelSource): ModelFormatError {
  return new ModelFormatError(name, `file is missing from ${source.label}`);
}

/** Read a UTF-8 JSON file from a source; missing or malformed -> ModelFormatError naming the file. */
export async function readJson(source: ModelSource, name: string): Promise<unknown> {
  const bytes = await source.read(name);
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new ModelFormatError(name, 'not valid UTF-8 text');
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new ModelFormatError(name, `not valid JSON (${(e as Error).message})`);
  }
}

/** Files under a base URL (`${base}/${name}`), e.g. a model folder served next to the app. */
export class FetchSource implements ModelSource {
  readonly label: string;
  constructor(
    private readonly base: string,
    private readonly fetchFn: typeof fetch = (...a) => fetch(...a),
  ) {
    this.label = base;
  }
  private url(name: string): string {
    return `${this.base.replace(/\/+$/, '')}/${name}`;
  }
  async has(name: string): Promise<boolean> {
    const r = await this.fetchFn(this.url(name), { method: 'HEAD' });
    return r.ok;
  }
  async read(name: string): Promise<Uint8Array> {
    let r: Response;
    try {
      r = await this.fetchFn(this.url(name));
    } catch (e) {
      throw new ModelFormatError(name, `could not be fetched from ${this.label} (${(e as Error).message})`);
    }
    if (r.status === 404) throw missing(name, this);
    if (!r.ok) throw new ModelFormatError(name, `fetch from ${this.label} failed with HTTP ${r.status}`);
    return new Uint8Array(await r.arrayBuffer());
  }
}

/** Files the user picked (<input type=file webkitdirectory> or drag and drop), keyed by base name. */
export class FileMapSource implements ModelSource {
  readonly label = 'the selected files';
  private readonly files = new Map<string, Blob>();
  constructor(files: Iterable<File> | Record<string, Blob>) {
    if (Symbol.iterator in Object(files)) {
      // A picked folder gives paths like "Qwen3-0.6B/config.json"; keep the base name.
      for (const f of files as Iterable<File>) this.files.set(f.name.split('/').pop()!, f);
    } else for (const [k, v] of Object.entries(files as Record<string, Blob>)) this.files.set(k, v);
  }
  async has(name: string): Promise<boolean> {
    return this.files.has(name);
  }
  async read(name: string): Promise<Uint8Array> {
    const f = this.files.get(name);
    if (!f) throw missing(name, this);
    return new Uint8Array(await f.arrayBuffer());
  }
}

/** Files held in memory (tests, generated models). */
export class MemorySource implements ModelSource {
  readonly label = 'memory';
  constructor(readonly files: Map<string, Uint8Array> = new Map()) {}
  async has(name: string): Promise<boolean> {
    return this.files.has(name);
  }
  async read(name: string): Promise<Uint8Array> {
    const f = this.files.get(name);
    if (!f) throw missing(name, this);
    return f;
  }
}
