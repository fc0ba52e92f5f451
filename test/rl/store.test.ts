import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DirStore } from '../../src/rl/store-node';
import { MemoryStore } from '../../src/rl/store';

const dir = mkdtempSync(join(tmpdir(), 'run-store-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('run stores', () => {
  for (const [name, make] of [
    ['DirStore', () => new DirStore(dir)],
    ['MemoryStore', () => new MemoryStore()],
  ] as const) {
    it(`${name}: write/read/append, missing files are null`, async () => {
      const s = make();
      expect(await s.read('nope.json')).toBeNull();
      await s.write('ckpt/1/a.bin', new Uint8Array([1, 2, 3]));
      await s.write('ckpt/1/a.bin', new Uint8Array([4, 5]));
      expect(Array.from((await s.read('ckpt/1/a.bin'))!)).toEqual([4, 5]);
      await s.append('m.jsonl', '{"step":1}');
      await s.append('m.jsonl', '{"step":2}');
      expect(new TextDecoder().decode((await s.read('m.jsonl'))!)).toBe('{"step":1}\n{"step":2}\n');
    });
  }
  it('DirStore keeps files inside its folder', async () => {
    const s = new DirStore(dir);
    await expect(s.write('../escape.bin', new Uint8Array([1]))).rejects.toThrow(/outside/);
    expect(readFileSync(join(dir, 'ckpt/1/a.bin'))).toEqual(Buffer.from([4, 5]));
  });
});
