// `npm run bench`'s command line (issue 48): --help prints help and exits 0 without running anything, unknown
// options and suites are usage errors (exit 2), and results go to a git-ignored folder unless
// --write-committed asks for the committed records.
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { COMMITTED_DIR, DEFAULT_OUT_DIR } from '../../bench/lib';
import { parseArgs } from '../../bench/run';

const bench = (...args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', 'bench/run.ts', ...args], { encoding: 'utf8', timeout: 60_000 });
const committedStatus = () => spawnSync('git', ['status', '--porcelain', '--', COMMITTED_DIR, 'README.md'], { encoding: 'utf8' }).stdout;

describe('bench command line', () => {
  it('parses suites and options; writes under the git-ignored folder by default', () => {
    expect(parseArgs(['matmul', '--quick'])).toEqual({ kind: 'run', suites: ['matmul'], quick: true, outDir: DEFAULT_OUT_DIR });
    expect(parseArgs(['attention', '--write-committed'])).toEqual({ kind: 'run', suites: ['attention'], quick: false, outDir: COMMITTED_DIR });
    expect(parseArgs(['--out', 'x/y', 'matmul'])).toMatchObject({ kind: 'run', outDir: 'x/y' });
    expect(parseArgs(['--out=z'])).toMatchObject({ kind: 'run', outDir: 'z' });
    const all = parseArgs([]);
    expect(all.kind === 'run' && all.suites).not.toContain('gpu');
    expect(all.kind === 'run' && all.suites).not.toContain('cpu-browser');
    expect(parseArgs(['--table'])).toEqual({ kind: 'table', check: false });
    expect(parseArgs(['--check-table'])).toEqual({ kind: 'table', check: true });
  });

  it('--help (anywhere) is help; unknown options, unknown suites and contradictions are errors', () => {
    expect(parseArgs(['--help'])).toEqual({ kind: 'help' });
    expect(parseArgs(['matmul', '-h'])).toEqual({ kind: 'help' });
    expect(parseArgs(['--bogus'])).toMatchObject({ kind: 'error', message: expect.stringContaining('--bogus') });
    expect(parseArgs(['nosuch'])).toMatchObject({ kind: 'error', message: expect.stringContaining('nosuch') });
    expect(parseArgs(['--out'])).toMatchObject({ kind: 'error' });
    expect(parseArgs(['--out', 'd', '--write-committed'])).toMatchObject({ kind: 'error' });
    expect(parseArgs(['--table', 'matmul'])).toMatchObject({ kind: 'error' });
    expect(parseArgs(['gpu', '--device-report'])).toMatchObject({ kind: 'run', suites: ['gpu'], deviceReport: true });
    expect(parseArgs(['matmul', '--device-report'])).toMatchObject({ kind: 'error', message: expect.stringContaining('gpu') });
    expect(parseArgs(['--table', '--device-report'])).toMatchObject({ kind: 'error' });
  });

  it('`bench --help` prints the usage, exits 0 and leaves the committed records alone; a bad option exits 2', () => {
    const before = committedStatus();
    const help = bench('--help');
    expect(help.status).toBe(0);
    expect(help.stdout).toContain('usage: npm run bench');
    expect(help.stdout).toContain('--write-committed');
    expect(help.stderr).not.toContain('[bench]'); // no suite started
    const bad = bench('--bogus');
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain("unknown option '--bogus'");
    expect(committedStatus()).toBe(before);
  });
});
