// A model folder on disk (Node only; kept apart from source.ts so the browser bundle has no node:fs).
import { access, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ModelSource } from './source';
import { missing } from './source';
import { ModelFormatError } from '../engine/errors';

export class DirSource implements ModelSource {
  readonly label: string;
  constructor(readonly dir: string) {
    this.label = dir;
  }
  async has(name: string): Promise<boolean> {
    try {
      await access(join(this.dir, name));
      return true;
    } catch {
      return false;
    }
  }
  async read(name: string): Promise<Uint8Array> {
    try {
      const b = await readFile(join(this.dir, name));
      return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw missing(name, this);
      throw new ModelFormatError(name, `cannot be read from ${this.dir} (${(e as Error).message})`);
    }
  }
}
