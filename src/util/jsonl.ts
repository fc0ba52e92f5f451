// JSONL as the run logs hold it, without Node: the browser's run store and the CLIs' files read it alike.
// src/util/atomic-file.ts (Node only) writes those files and re-exports these.

/** An I/O failure on a named file. */
export class IoError extends Error {
  override readonly name = 'IoError';
  constructor(
    readonly file: string,
    readonly op: string,
    readonly code: string | undefined,
    detail: string,
  ) {
    super(`cannot ${op} ${file}: ${detail}`);
  }
}

/**
 * Parses JSONL text line by line. A last line with no newline that does not parse is a torn write: it is
 * dropped and reported through `warn`. Any other line that does not parse is an error naming file:line.
 */
export function parseJsonl(text: string, file: string, warn?: (s: string) => void): unknown[] {
  const lines = text.split('\n');
  const last = lines.pop() ?? '';
  const out: unknown[] = [];
  lines.forEach((l, i) => {
    if (l.trim() === '') return;
    try {
      out.push(JSON.parse(l));
    } catch (e) {
      throw new IoError(file, 'read', undefined, `line ${i + 1} is not JSON (${(e as Error).message})`);
    }
  });
  if (last.trim() !== '') {
    try {
      out.push(JSON.parse(last));
    } catch {
      warn?.(`${file}: dropped a torn last line (${last.length} characters, no newline) left by an interrupted write`);
    }
  }
  return out;
}
