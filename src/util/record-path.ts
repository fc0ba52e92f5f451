// Paths as records write them. A record is committed and read on other machines, so a path inside the checkout
// is written relative to the repository root (models/default, runs/x) and a temp folder as $TMPDIR/…: neither
// names the machine that wrote it. Paths elsewhere are the user's own and are kept as they are. Node only.
import { tmpdir } from 'node:os';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The checkout's root (this file is src/util/record-path.ts). */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

function under(path: string, dir: string): boolean {
  return path === dir || path.startsWith(dir.endsWith(sep) ? dir : dir + sep);
}

/** A path (absolute, or relative to the working directory) as a record names it. */
export function recordPath(path: string, root: string = REPO_ROOT, tmp: string = tmpdir()): string {
  const abs = resolve(path);
  // The checkout first: a checkout inside the temp folder is still the repository.
  if (under(abs, root)) return relative(root, abs) || '.';
  if (under(abs, tmp)) return ['$TMPDIR', relative(tmp, abs)].filter(Boolean).join('/');
  return abs;
}

/** The path a record names, on this machine: recordPath's inverse (repository-relative and $TMPDIR paths made absolute). */
export function pathFromRecord(path: string, root: string = REPO_ROOT, tmp: string = tmpdir()): string {
  if (path === '$TMPDIR' || path.startsWith('$TMPDIR/')) return join(tmp, path.slice('$TMPDIR'.length));
  return isAbsolute(path) ? path : join(root, path);
}

/** A command line as a record keeps it: each absolute argument (or --flag=/abs value) through recordPath. */
export function recordCommand(command: string, root: string = REPO_ROOT, tmp: string = tmpdir()): string {
  return command.replace(/(^|[\s=])(\/[^\s'"]*)/g, (_, pre: string, p: string) => pre + recordPath(p, root, tmp));
}
