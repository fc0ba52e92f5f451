// A RunStore (src/rl/store.ts) in the browser's origin-private file system, so a training run (its
// run.json, checkpoints and JSONL logs) survives a page reload and GrpoRun.open resumes it.
import type { RunStore } from '../../src/rl/store';

export class OpfsStore implements RunStore {
  private constructor(private readonly root: FileSystemDirectoryHandle) {}

  /** The store in folder `dir` of OPFS, or null where the browser has no OPFS. */
  static async open(dir: string): Promise<OpfsStore | null> {
    try {
      const top = await navigator.storage.getDirectory();
      return new OpfsStore(await top.getDirectoryHandle(dir, { create: true }));
    } catch {
      return null;
    }
  }

  static async remove(dir: string): Promise<void> {
    const top = await navigator.storage.getDirectory();
    await top.removeEntry(dir, { recursive: true }).catch(() => undefined);
  }

  private async file(name: string, create: boolean): Promise<FileSystemFileHandle | null> {
    const parts = name.split('/');
    let d = this.root;
    try {
      for (const p of parts.slice(0, -1)) d = await d.getDirectoryHandle(p, { create });
      return await d.getFileHandle(parts[parts.length - 1], { create });
    } catch (e) {
      if (!create && (e as DOMException).name === 'NotFoundError') return null;
      throw e;
    }
  }

  async write(name: string, bytes: Uint8Array): Promise<void> {
    const w = await (await this.file(name, true))!.createWritable();
    await w.write(bytes as BufferSource);
    await w.close();
  }

  async read(name: string): Promise<Uint8Array | null> {
    const h = await this.file(name, false);
    return h ? new Uint8Array(await (await h.getFile()).arrayBuffer()) : null;
  }

  async append(name: string, line: string): Promise<void> {
    const h = (await this.file(name, true))!;
    const size = (await h.getFile()).size;
    const w = await h.createWritable({ keepExistingData: true });
    await w.seek(size);
    await w.write(line + '\n');
    await w.close();
  }
}
