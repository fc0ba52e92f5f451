// Records name repository-relative paths (issue 49): the writers' helper on hand-made cases, and the committed
// files themselves — no tracked file names a checkout of this repository on the machine that runs the test
// (this one and every other worktree git knows) or a path under the system temp folder.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { pathFromRecord, recordCommand, recordPath, REPO_ROOT } from '../../src/util/record-path';

const ROOT = resolve(dirname(new URL(import.meta.url).pathname), '../..');
const git = (...args: string[]): string => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 << 20 });

describe('recordPath', () => {
  const root = '/home/u/envace';
  const tmp = '/var/tmp';
  it('writes a path inside the checkout relative to its root, the root itself as "."', () => {
    expect(recordPath('/home/u/envace/models/default', root, tmp)).toBe('models/default');
    expect(recordPath('/home/u/envace', root, tmp)).toBe('.');
    expect(recordPath('/home/u/envace/', root, tmp)).toBe('.');
  });
  it('writes a temp path as $TMPDIR/… and keeps other paths as given', () => {
    expect(recordPath('/var/tmp/envace-ablation/real-s1', root, tmp)).toBe('$TMPDIR/envace-ablation/real-s1');
    expect(recordPath('/var/tmp', root, tmp)).toBe('$TMPDIR');
    expect(recordPath('/home/u/envace-other/models', root, tmp), 'a sibling folder sharing the prefix').toBe('/home/u/envace-other/models');
    expect(recordPath('/data/models/qwen3', root, tmp)).toBe('/data/models/qwen3');
  });
  it('knows the real checkout, and reads a relative path against the working directory', () => {
    expect(REPO_ROOT).toBe(ROOT);
    expect(recordPath(resolve(ROOT, 'research/records'))).toBe('research/records');
    expect(recordPath('models/default', '/nowhere', '/nowhere-tmp')).toBe(resolve('models/default'));
  });
  it('reads a record\'s path back on this machine (pathFromRecord inverts recordPath)', () => {
    for (const p of ['/home/u/envace/models/default', '/home/u/envace', '/var/tmp/envace-ablation/real-s1', '/var/tmp', '/data/models/qwen3'])
      expect(pathFromRecord(recordPath(p, root, tmp), root, tmp), p).toBe(p);
    expect(pathFromRecord('models/default', '/elsewhere/envace', '/t')).toBe('/elsewhere/envace/models/default');
  });
  it('rewrites the absolute arguments of a command line, --flag=value ones included', () => {
    expect(recordCommand('npm run pretrain -- --init /home/u/envace/runs/a --out=/var/tmp/x --world mini', root, tmp)).toBe(
      'npm run pretrain -- --init runs/a --out=$TMPDIR/x --world mini',
    );
    expect(recordCommand('node --import tsx research/scripts/item-probe.ts --model models/default', root, tmp)).toBe(
      'node --import tsx research/scripts/item-probe.ts --model models/default',
    );
  });
});

describe('tracked files', () => {
  it('name no checkout of this machine and no temp folder path', () => {
    const checkouts = [ROOT, ...git('worktree', 'list', '--porcelain').split('\n').filter((l) => l.startsWith('worktree ')).map((l) => l.slice(9))];
    const needles = [...new Set(checkouts)].map((c) => c.replace(/\/+$/, ''));
    const tmp = tmpdir().replace(/\/+$/, '') + '/';
    expect(needles.length).toBeGreaterThan(0);
    // git grep finds candidates fast (tracked, text files); the regex then asks that each match starts a path.
    let listed = '';
    try {
      listed = git('grep', '-lIF', ...[...needles, tmp].flatMap((n) => ['-e', n]));
    } catch (e) {
      if ((e as { status?: number }).status !== 1) throw e; // 1: nothing found
    }
    const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    const re = new RegExp(`(^|[^\\w.-])(${needles.map(esc).join('|')})(?![\\w.-])|(^|[^\\w.-])${esc(tmp)}\\S`, 'm');
    const offenders = listed.split('\n').filter(Boolean).filter((f) => re.test(readFileSync(join(ROOT, f), 'utf8')));
    expect(offenders).toEqual([]);
  });
});
