// A RunStore over a folder on disk (Node only). Files are replaced atomically and JSONL lines are
// appended whole or not at all (src/util/atomic-file.ts), so a killed or disk-full run leaves its last
// checkpoint and its logs readable. lock() keeps a second writer out of the folder.
import { open, readdir, readFile, unlink } from 'node:fs/promises';
import { join, resolve, sep } from 'node:path';
import { appendLine, ensureDir, IoError, nodeFileOps, readFileOrNull, TMP_SUFFIX, writeFileAtomic, type FileOps } from '../util/atomic-file';
import type { RunStore } from './store';

export const LOCK_FILE = '.lock';

/** Another live process holds the run folder. */
export class LockError extends Error {
  override readonly name = 'LockError';
}

export interface DirStoreOptions {
  /** Injected by tests to simulate a full disk; the real file system otherwise. */
  ops?: FileOps;
  /** Where repairs (a torn JSONL line cut off) are reported. */
  warn?: (s: string) => void;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    // EPERM: the process exists but belongs to someone else.
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export class DirStore implements RunStore {
  readonly root: string;
  private readonly ops: FileOps;
  private readonly warn?: (s: string) => void;
  constructor(root: string, o: DirStoreOptions = {}) {
    this.root = resolve(root);
    this.ops = o.ops ?? nodeFileOps;
    this.warn = o.warn;
  }
  private path(name: string): string {
    const p = resolve(join(this.root, name));
    if (p !== this.root && !p.startsWith(this.root + sep)) throw new Error(`run file ${name} is outside ${this.root}`);
    return p;
  }
  async write(name: string, bytes: Uint8Array): Promise<void> {
    await writeFileAtomic(this.path(name), bytes, this.ops);
  }
  async read(name: string): Promise<Uint8Array | null> {
    return readFileOrNull(this.path(name));
  }
  async append(name: string, line: string): Promise<void> {
    await appendLine(this.path(name), line, { ops: this.ops, warn: this.warn });
  }

  /** Temp files of atomic writes cut short by a kill; only the lock holder may remove them. */
  private async removeTempFiles(): Promise<void> {
    const entries = await readdir(this.root, { recursive: true, withFileTypes: true }).catch(() => []);
    for (const e of entries) {
      if (!e.isFile() || !TMP_SUFFIX.test(e.name)) continue;
      // parentPath is Node >= 20.12; older 20.x call it path.
      const p = join(e.parentPath ?? (e as unknown as { path: string }).path, e.name);
      await unlink(p).catch(() => {});
      this.warn?.(`${p}: removed a temp file left by an interrupted write`);
    }
  }

  /**
   * Takes the folder's lock file (created exclusively, holding this pid); a lock whose pid is no longer
   * running is stale (a killed run) and is taken over. Returns the release function.
   */
  async lock(): Promise<() => Promise<void>> {
    await ensureDir(this.root);
    const file = this.path(LOCK_FILE);
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        const h = await open(file, 'wx');
        await h.writeFile(String(process.pid));
        await h.close();
        await this.removeTempFiles();
        return async () => {
          const owner = Number((await readFile(file, 'utf8').catch(() => '')).trim());
          if (owner === process.pid) await unlink(file).catch(() => {});
        };
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw new IoError(file, 'create', (e as NodeJS.ErrnoException).code, (e as Error).message);
      }
      const text = (await readFile(file, 'utf8').catch(() => '')).trim();
      const pid = Number(text);
      if (/^\d+$/.test(text) && (pid === process.pid || alive(pid)))
        throw new LockError(`${this.root} is in use by process ${pid} (${file}); wait for it to finish, or stop it`);
      this.warn?.(`${file}: taking over a stale lock${text ? ` of process ${text}, which is no longer running` : ''}`);
      await unlink(file).catch(() => {});
    }
    throw new LockError(`${this.root}: could not take the lock ${file}`);
  }
}
