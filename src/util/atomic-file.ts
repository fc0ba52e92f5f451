// Every file the CLIs and the lab write on disk goes through here, so that a kill, a full disk or an I/O
// error never leaves a file half-written:
//   - writeFileAtomic: temp file in the same folder, fsync, rename (a reader sees the old or the new bytes);
//     on failure the temp file is removed and the error names the destination file.
//   - appendLine: a JSONL line is appended whole or not at all (a failed append is truncated back), and a
//     torn last line left by a killed process is cut off, with a warning, before the next append.
//   - parseJsonl: reads JSONL, dropping a torn last line with a warning; any other bad line names file:line.
//   - ensureDir: creates a folder one level at a time (recursive mkdir spins forever on procfs).
// Node only. The one injectable piece, FileOps.write, lets tests simulate a full disk without root.
import { constants } from 'node:fs';
import { access, mkdir, open, readFile, rename, stat, unlink, type FileHandle } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { IoError, parseJsonl } from './jsonl';

// Pure (the page's code reads run logs too): declared in ./jsonl.ts, re-exported for the Node callers.
export { IoError, parseJsonl };

/** Exit status of a CLI that failed on I/O (sysexits.h EX_IOERR); 2 stays the usage error. */
export const EXIT_IO = 74;

/** A Node system error (ENOSPC, EACCES, EIO, ...), as thrown by node:fs. */
export function isSystemError(e: unknown): e is NodeJS.ErrnoException {
  return e instanceof Error && typeof (e as NodeJS.ErrnoException).code === 'string' && typeof (e as NodeJS.ErrnoException).syscall === 'string';
}

function ioError(file: string, op: string, e: unknown): IoError {
  if (e instanceof IoError) return e;
  const se = isSystemError(e) ? e : undefined;
  const detail = se ? `${se.code}${se.code === 'ENOSPC' ? ' (no space left on device)' : ''}: ${se.message.replace(/^[A-Z]+: /, '')}` : String((e as Error)?.message ?? e);
  return new IoError(file, op, se?.code, detail);
}

export interface FileOps {
  /** Writes all of `bytes` at the handle's current position. A real disk may write part and then fail. */
  write(h: FileHandle, bytes: Uint8Array): Promise<void>;
}

export const nodeFileOps: FileOps = {
  async write(h, bytes) {
    let off = 0;
    while (off < bytes.length) off += (await h.write(bytes, off, bytes.length - off)).bytesWritten;
  },
};

let tmpCounter = 0;

/** Names of writeFileAtomic's temp files (<name>.<pid>-<n>.tmp). */
export const TMP_SUFFIX = /\.\d+-\d+\.tmp$/;

/** Replaces `path` with `bytes` atomically (same-folder temp file, fsync, rename). */
export async function writeFileAtomic(path: string, bytes: Uint8Array | string, ops: FileOps = nodeFileOps): Promise<void> {
  const file = resolve(path);
  const data = typeof bytes === 'string' ? new TextEncoder().encode(bytes) : bytes;
  await ensureDir(dirname(file));
  const tmp = `${file}.${process.pid}-${tmpCounter++}.tmp`;
  let h: FileHandle | undefined;
  try {
    h = await open(tmp, 'wx');
    await ops.write(h, data);
    await h.sync();
    await h.close();
    h = undefined;
    await rename(tmp, file);
  } catch (e) {
    await h?.close().catch(() => {});
    await unlink(tmp).catch(() => {});
    throw ioError(file, 'write', e);
  }
  // The rename is durable only once the folder is synced; failing to sync a folder (some filesystems
  // refuse it) does not undo the write, so it is not an error.
  const d = await open(dirname(file), 'r').catch(() => undefined);
  await d?.sync().catch(() => {});
  await d?.close().catch(() => {});
}

/** Bytes from the last '\n' (exclusive) to the end of the file: a torn line left by a killed writer. */
async function tornTail(h: FileHandle, size: number): Promise<number> {
  // The common case, a whole last line, costs one byte of reading.
  const last = new Uint8Array(1);
  await h.read(last, 0, 1, size - 1);
  if (last[0] === 10) return 0;
  const chunk = 65536;
  let end = size;
  let tail = 0;
  while (end > 0) {
    const n = Math.min(chunk, end);
    const buf = new Uint8Array(n);
    await h.read(buf, 0, n, end - n);
    const nl = buf.lastIndexOf(10);
    if (nl >= 0) return tail + (n - 1 - nl);
    tail += n;
    end -= n;
  }
  return tail;
}

/**
 * Appends `line` + '\n' to a JSONL file as a whole line or not at all. A torn last line (a writer killed
 * mid-append) is cut off first and reported through `warn`. Appends are not fsynced: they survive the
 * process being killed (the kernel holds them), and a power cut can at worst tear the last line, which
 * the next append or parseJsonl removes.
 */
export async function appendLine(path: string, line: string, o: { ops?: FileOps; warn?: (s: string) => void } = {}): Promise<void> {
  const file = resolve(path);
  if (line.includes('\n')) throw new Error(`appendLine(${file}): a JSONL line must not contain a newline`);
  await ensureDir(dirname(file));
  let h: FileHandle | undefined;
  let size = 0;
  try {
    h = await open(file, 'a+');
    size = (await h.stat()).size;
    if (size > 0) {
      const torn = await tornTail(h, size);
      if (torn > 0) {
        size -= torn;
        await h.truncate(size);
        o.warn?.(`${file}: dropped a torn last line (${torn} bytes, no newline) left by an interrupted write`);
      }
    }
    await (o.ops ?? nodeFileOps).write(h, new TextEncoder().encode(line + '\n'));
    await h.close();
  } catch (e) {
    if (h) {
      await h.truncate(size).catch(() => {});
      await h.close().catch(() => {});
    }
    throw ioError(file, 'append to', e);
  }
}

/** Reads a JSONL file; null when it does not exist. */
export async function readJsonl(path: string, warn?: (s: string) => void): Promise<unknown[] | null> {
  const file = resolve(path);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw ioError(file, 'read', e);
  }
  return parseJsonl(text, file, warn);
}

/** Reads a file; null when it does not exist; other failures name the file. */
export async function readFileOrNull(path: string): Promise<Uint8Array | null> {
  const file = resolve(path);
  try {
    return new Uint8Array(await readFile(file));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw ioError(file, 'read', e);
  }
}

/**
 * Creates `dir` and its missing parents one level at a time, after checking that the nearest existing
 * ancestor is a writable folder. (mkdir({recursive: true}) loops forever under /proc.)
 */
export async function ensureDir(dir: string): Promise<void> {
  const target = resolve(dir);
  const missing: string[] = [];
  let p = target;
  for (;;) {
    const s = await stat(p).catch((e: NodeJS.ErrnoException) => (e.code === 'ENOENT' ? null : Promise.reject(ioError(p, 'inspect', e))));
    if (s) {
      if (!s.isDirectory()) throw new IoError(target, 'create folder', 'ENOTDIR', `${p} is not a folder`);
      break;
    }
    missing.push(p);
    const up = dirname(p);
    if (up === p) break;
    p = up;
  }
  if (missing.length === 0) return;
  await access(p, constants.W_OK).catch((e) => Promise.reject(ioError(target, 'create folder', e)));
  for (const m of missing.reverse()) {
    await mkdir(m).catch((e: NodeJS.ErrnoException) => (e.code === 'EEXIST' ? undefined : Promise.reject(ioError(m, 'create folder', e))));
  }
}

/** Checks before any work starts that `path` could be written: its folder exists or can be made. */
export async function checkWritablePath(path: string, what: string): Promise<void> {
  try {
    await ensureDir(dirname(resolve(path)));
    const s = await stat(path).catch(() => null);
    if (s?.isDirectory()) throw new IoError(resolve(path), 'write', 'EISDIR', 'it is a folder');
    await access(s ? path : dirname(resolve(path)), constants.W_OK);
  } catch (e) {
    const err = ioError(resolve(path), 'write', e);
    err.message = `${what}: ${err.message}`;
    throw err;
  }
}
