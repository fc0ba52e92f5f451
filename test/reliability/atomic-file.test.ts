// The atomic file layer (src/util/atomic-file.ts) on its own: replacing a file under a failing disk keeps
// the old bytes and leaves no temp file; a failed JSONL append is rolled back to whole lines; a torn last
// line (a killed writer) is cut off before the next append and skipped by the reader; errors name the file.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { appendLine, ensureDir, IoError, nodeFileOps, parseJsonl, readJsonl, writeFileAtomic, type FileOps } from '../../src/util/atomic-file';

const dir = mkdtempSync(join(tmpdir(), 'atomic-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const enospc = () => Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC', errno: -28, syscall: 'write' });
/** Writes half of the bytes, then the disk is full. */
const halfThenFull: FileOps = {
  async write(h, bytes) {
    await nodeFileOps.write(h, bytes.subarray(0, bytes.length >> 1));
    throw enospc();
  },
};

describe('writeFileAtomic', () => {
  it('a disk that fills mid-write keeps the old file whole, removes the temp file, names the file', async () => {
    const f = join(dir, 'ckpt', 'adapter.safetensors');
    await writeFileAtomic(f, 'old bytes');
    const err = await writeFileAtomic(f, 'x'.repeat(10_000), halfThenFull).catch((e) => e);
    expect(err).toBeInstanceOf(IoError);
    expect(err.message).toBe(`cannot write ${f}: ENOSPC (no space left on device): no space left on device, write`);
    expect(readFileSync(f, 'utf8')).toBe('old bytes');
    expect(readdirSync(join(dir, 'ckpt'))).toEqual(['adapter.safetensors']);
  });
  it('creates missing folders; refuses a path through a file, and one under /proc, at once', async () => {
    await writeFileAtomic(join(dir, 'a', 'b', 'c.json'), '{}');
    expect(readFileSync(join(dir, 'a', 'b', 'c.json'), 'utf8')).toBe('{}');
    await expect(writeFileAtomic(join(dir, 'a', 'b', 'c.json', 'd'), 'x')).rejects.toThrow(/c\.json is not a folder/);
    await expect(ensureDir('/proc/h16-x/y')).rejects.toThrow(/cannot create folder \/proc\/h16-x/);
  });
});

describe('JSONL', () => {
  it('a failed append leaves whole lines only', async () => {
    const f = join(dir, 'metrics.jsonl');
    await appendLine(f, '{"step":1}');
    await expect(appendLine(f, JSON.stringify({ step: 2, pad: 'y'.repeat(5000) }), { ops: halfThenFull })).rejects.toThrow(`cannot append to ${f}: ENOSPC`);
    expect(readFileSync(f, 'utf8')).toBe('{"step":1}\n');
  });
  it('a torn last line is cut off (with a warning) before the next append, and skipped by the reader', async () => {
    const f = join(dir, 'rollouts.jsonl');
    writeFileSync(f, '{"a":1}\n{"a":2}\n{"a":3,"tr');
    const warnings: string[] = [];
    expect(await readJsonl(f, (w) => warnings.push(w))).toEqual([{ a: 1 }, { a: 2 }]);
    await appendLine(f, '{"a":4}', { warn: (w) => warnings.push(w) });
    expect(readFileSync(f, 'utf8')).toBe('{"a":1}\n{"a":2}\n{"a":4}\n');
    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toMatch(/rollouts\.jsonl: dropped a torn last line \(10 characters, no newline\)/);
    expect(warnings[1]).toMatch(/rollouts\.jsonl: dropped a torn last line \(10 bytes, no newline\)/);
  });
  it('a torn line longer than the scan chunk, and a file that is one torn line, are cut off too', async () => {
    const f = join(dir, 'long.jsonl');
    writeFileSync(f, '{"a":1}\n' + '{"b":"' + 'z'.repeat(200_000));
    await appendLine(f, '{"a":2}');
    expect(readFileSync(f, 'utf8')).toBe('{"a":1}\n{"a":2}\n');
    writeFileSync(f, '{"b":"' + 'z'.repeat(70_000));
    await appendLine(f, '{"a":3}');
    expect(readFileSync(f, 'utf8')).toBe('{"a":3}\n');
  });
  it('a bad line that is not the last is an error naming file:line', async () => {
    expect(() => parseJsonl('{"a":1}\nnope\n{"a":2}\n', '/x/eval.jsonl')).toThrow(/cannot read \/x\/eval\.jsonl: line 2 is not JSON/);
    await expect(appendLine(join(dir, 'x.jsonl'), 'a\nb')).rejects.toThrow(/must not contain a newline/);
  });
});
