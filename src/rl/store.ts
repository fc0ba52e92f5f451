// Where a training run keeps its files: run state, adapters, optimizer moments, JSONL logs. One small
// interface so the same run code writes to a folder in Node (store-node.ts), to OPFS in a browser, or to
// memory in tests.

export interface RunStore {
  /** Replace a file (names may contain '/' for sub-folders): readers see the old bytes or the new, never a mix. */
  write(name: string, bytes: Uint8Array): Promise<void>;
  /** The file's bytes, or null when it does not exist. */
  read(name: string): Promise<Uint8Array | null>;
  /** Append one line (a '\n' is added): the whole line or nothing, even if the process dies meanwhile. */
  append(name: string, line: string): Promise<void>;
}

export class MemoryStore implements RunStore {
  readonly files = new Map<string, Uint8Array>();
  async write(name: string, bytes: Uint8Array): Promise<void> {
    this.files.set(name, bytes.slice());
  }
  async read(name: string): Promise<Uint8Array | null> {
    const f = this.files.get(name);
    return f ? f.slice() : null;
  }
  async append(name: string, line: string): Promise<void> {
    const add = new TextEncoder().encode(line + '\n');
    const old = this.files.get(name) ?? new Uint8Array(0);
    const out = new Uint8Array(old.length + add.length);
    out.set(old, 0);
    out.set(add, old.length);
    this.files.set(name, out);
  }
  text(name: string): string {
    const f = this.files.get(name);
    return f ? new TextDecoder().decode(f) : '';
  }
}
