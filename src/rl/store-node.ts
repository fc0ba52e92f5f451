// A RunStore over a folder on disk (Node only).
import { appendFile, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname, join, resolve, sep } from 'node:path';
import type { RunStore } from './store';

export class DirStore implements RunStore {
  readonly root: string;
  constructor(root: string) {
    this.root = resolve(root);
  }
  private path(name: string): string {
    const p = resolve(join(this.root, name));
    if (p !== this.root && !p.startsWith(this.root + sep)) throw new Error(`run file ${name} is outside ${this.root}`);
    return p;
  }
  async write(name: string, bytes: Uint8Array): Promise<void> {
    const p = this.path(name);
    await mkdir(dirname(p), { recursive: true });
    // Write then rename, so an interrupted checkpoint never leaves a half-written file behind.
    await writeFile(p + '.tmp', bytes);
    await rename(p + '.tmp', p);
  }
  async read(name: string): Promise<Uint8Array | null> {
    try {
      return new Uint8Array(await readFile(this.path(name)));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw e;
    }
  }
  async append(name: string, line: string): Promise<void> {
    const p = this.path(name);
    await mkdir(dirname(p), { recursive: true });
    await appendFile(p, line + '\n');
  }
}
