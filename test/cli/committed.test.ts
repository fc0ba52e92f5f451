// Which outputs count as committed (src/cli/args.ts committedFiles, checkOutput): the guard that keeps a
// command from overwriting the bundled policy, its card or docs/ figures without --write-committed (issue 48).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ArgError, checkOutput, committedFiles, REPO_ROOT, runsPath } from '../../src/cli/args';

describe('committed outputs', () => {
  it('a committed folder or file is committed; runs/, a new file and a path outside the checkout are not', () => {
    expect(committedFiles(join(REPO_ROOT, 'models/default'))).toContain('models/default/model.safetensors');
    expect(committedFiles(join(REPO_ROOT, 'models/default/README.md'))).toEqual(['models/default/README.md']);
    expect(committedFiles(runsPath('pretrain-mini'))).toEqual([]);
    expect(committedFiles(join(REPO_ROOT, 'models/default/not-a-committed-file.json'))).toEqual([]);
    const outside = mkdtempSync(join(tmpdir(), 'envace-committed-'));
    try {
      expect(committedFiles(outside)).toEqual([]);
    } finally {
      rmSync(outside, { recursive: true });
    }
  });

  it('through a symlink (public/models -> ../models) the real place counts', () => {
    expect(committedFiles(join(REPO_ROOT, 'public/models/default/config.json'))).toEqual(['models/default/config.json']);
  });

  it('checkOutput refuses a committed output unless --write-committed, naming the flag and the files', () => {
    const card = join(REPO_ROOT, 'models/default/README.md');
    expect(() => checkOutput(card, '--out', {})).toThrow(ArgError);
    expect(() => checkOutput(card, '--out', {})).toThrow(/--out .*README\.md would overwrite files the repository commits \(models\/default\/README\.md\): pass --write-committed/);
    expect(checkOutput(card, '--out', { 'write-committed': true })).toBe(card);
    expect(checkOutput(runsPath('x/README.md'), '--out', {})).toBe(runsPath('x/README.md'));
  });
});
