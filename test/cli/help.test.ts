// Every CLI answers --help with exit 0 and a table of all its flags, each with its meaning and default
// (issue 13), through the same frame (runCli) — `pretrain` included, which used to print a stack trace —
// and so do the newer `export` and `serve`, and the research scripts (ablation, tts-table, plots, signal).
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import type { FlagSpec } from '../../src/cli/args';
import { ENV_FLAGS, envCli } from '../../src/cli/env';
import { EVAL_FLAGS, evalCli } from '../../src/cli/eval';
import { PRETRAIN_FLAGS, pretrainCli } from '../../src/cli/pretrain';
import { EXPORT_FLAGS, exportMain } from '../../src/cli/export';
import { SERVE_FLAGS, serveMain } from '../../src/cli/serve';
import { TRAIN_FLAGS, trainCli } from '../../src/cli/train';
import { ABLATION_FLAGS, ablationCli } from '../../scripts/ablation';
import { PLOTS_FLAGS, plotsCli } from '../../scripts/plots';
import { TTS_FLAGS, ttsCli } from '../../scripts/tts-table';
import { SIGNAL_FLAGS, signalCli } from '../../scripts/signal';
import { captureIo } from '../helpers/cli';

function expectTable(text: string, spec: FlagSpec): void {
  for (const [name, f] of Object.entries(spec)) {
    const line = text.split('\n').find((l) => new RegExp(`^\\s+(-\\w, )?--${name}(\\s|$)`).test(l));
    expect(line, `--${name} listed`).toBeDefined();
    expect(f.help, `--${name} has a meaning`).toBeTruthy();
    expect(line).toContain(f.help!.slice(0, 20));
    if (name !== 'help') expect(line, `--${name} states its default`).toMatch(/\((default: .+|required[^)]*)\)/);
  }
}

describe('--help', () => {
  const clis = [
    ['train', trainCli, [TRAIN_FLAGS]],
    ['eval', evalCli, [EVAL_FLAGS]],
    ['pretrain', pretrainCli, [PRETRAIN_FLAGS]],
    ['env', envCli, [ENV_FLAGS.replay, ENV_FLAGS.generate, ENV_FLAGS.expert]],
    ['export', exportMain, [EXPORT_FLAGS]],
    ['serve', serveMain, [SERVE_FLAGS]],
  ] as const;
  for (const [name, cli, specs] of clis) {
    it(`${name} --help lists every flag with its meaning and default, exit 0`, async () => {
      const io = captureIo();
      expect(await cli(['--help'], io)).toBe(0);
      for (const spec of specs) expectTable(io.stdout(), spec);
      expect(io.stdout()).toMatch(/--world W\s+task world: mini .*\(default: mini\)/);
      expect(io.stdout()).toMatch(/exit status: 0 (ok|after a clean shutdown), 1 failure, 2 usage error/);
      expect(io.stderr()).toBe('');
    });
  }
  // The research scripts used to answer --help with "Unknown option" while their usage errors advised it.
  const scripts = [
    ['ablation', ablationCli, ABLATION_FLAGS],
    ['tts-table', ttsCli, TTS_FLAGS],
    ['plots', plotsCli, PLOTS_FLAGS],
    ['signal', signalCli, SIGNAL_FLAGS],
  ] as const;
  for (const [name, cli, spec] of scripts) {
    it(`${name} --help lists every flag with its meaning and default, exit 0, and runs nothing`, async () => {
      const io = captureIo();
      expect(await cli(['--help'], io)).toBe(0);
      expect(io.stdout()).toContain(`usage: npm run ${name}`);
      expectTable(io.stdout(), spec);
      expect(io.stderr()).toBe('');
    });
  }

  it('signal: a bad flag value is a usage error (exit 2) before any model is opened', async () => {
    for (const argv of [['--k', '1'], ['--modes', 'real,bogus'], ['--split', 'dev'], ['--temperature', '0']]) {
      const io = captureIo();
      expect(await signalCli(argv, io), argv.join(' ')).toBe(2);
      expect(io.stderr()).toContain('usage: npm run signal');
      expect(io.stdout()).toBe('');
    }
  });

  it('env sub-commands take --help too', async () => {
    for (const sub of ['replay', 'generate', 'expert']) {
      const io = captureIo();
      expect(await envCli([sub, '--help'], io)).toBe(0);
      expect(io.stdout()).toContain('--mistakes RATE');
    }
  });

  it('through npm run, each CLI exits 0 (env used to exit 2, pretrain to print a stack trace and exit 1)', () => {
    for (const name of ['env', 'eval', 'train', 'pretrain']) {
      const r = spawnSync('npm', ['run', '--silent', name, '--', '--help'], { encoding: 'utf8', timeout: 60_000 });
      expect(r.status, `${name}: ${r.stderr}`).toBe(0);
      expect(r.stdout).toContain(`usage: npm run ${name}`);
      expect(r.stdout).toContain('--help');
      expect(r.stderr).not.toMatch(/at .*\.ts:\d+/);
    }
  }, 120_000);

  it('an unknown flag is a usage error (exit 2) naming the flag, with no stack trace', () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/pretrain.ts', '--bogus'], { encoding: 'utf8', timeout: 60_000 });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/Unknown option '--bogus'/);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  }, 60_000);
});
