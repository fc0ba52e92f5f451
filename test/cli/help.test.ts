// Every CLI answers --help with exit 0 and a table of all its flags, each with its meaning and default
// (issue 13), through the same frame (runCli) — `pretrain` included, which used to print a stack trace —
// and so do the newer `export` and `serve`, and the research scripts (ablation, tts-table, plots, signal, and the
// one-off probes run as `node --import tsx research/scripts/<name>.ts`: reason-probe, item-probe, focus-grpo,
// no-repeat-rehearsal, structured-rehearsal, lesson-table).
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import type { CliIo, FlagSpec } from '../../src/cli/args';
import { ENV_FLAGS, envCli } from '../../src/cli/env';
import { EVAL_FLAGS, evalCli } from '../../src/cli/eval';
import { PRETRAIN_FLAGS, pretrainCli } from '../../research/pretrain/cli';
import { EXPORT_FLAGS, exportMain } from '../../src/cli/export';
import { SERVE_FLAGS, serveMain } from '../../src/cli/serve';
import { TRAIN_FLAGS, trainCli } from '../../src/cli/train';
import { ABLATION_FLAGS, ABLATION_USAGE, ablationCli } from '../../research/scripts/ablation';
import { PLOTS_FLAGS, PLOTS_USAGE, plotsCli } from '../../research/scripts/plots';
import { TTS_FLAGS, TTS_USAGE, ttsCli } from '../../research/scripts/tts-table';
import { SIGNAL_FLAGS, SIGNAL_USAGE, signalCli } from '../../research/scripts/signal';
import { REASON_PROBE_FLAGS, REASON_PROBE_USAGE, reasonProbeCli } from '../../research/scripts/reason-probe';
import { ITEM_PROBE_FLAGS, ITEM_PROBE_USAGE, itemProbeCli } from '../../research/scripts/item-probe';
import { FOCUS_GRPO_FLAGS, FOCUS_GRPO_USAGE, focusGrpoCli } from '../../research/scripts/focus-grpo';
import { NO_REPEAT_REHEARSAL_FLAGS, NO_REPEAT_REHEARSAL_USAGE, noRepeatRehearsalCli } from '../../research/scripts/no-repeat-rehearsal';
import { STRUCTURED_REHEARSAL_FLAGS, STRUCTURED_REHEARSAL_USAGE, structuredRehearsalCli } from '../../research/scripts/structured-rehearsal';
import { LESSON_TABLE_FLAGS, LESSON_TABLE_USAGE, lessonTableCli } from '../../research/scripts/lesson-table';
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
  // Each says how it is really run: `npm run <name> --` where package.json has a script, else `node --import tsx`.
  const scripts = [
    ['ablation', ablationCli, ABLATION_FLAGS, ABLATION_USAGE],
    ['tts-table', ttsCli, TTS_FLAGS, TTS_USAGE],
    ['plots', plotsCli, PLOTS_FLAGS, PLOTS_USAGE],
    ['signal', signalCli, SIGNAL_FLAGS, SIGNAL_USAGE],
    ['reason-probe', reasonProbeCli, REASON_PROBE_FLAGS, REASON_PROBE_USAGE],
    ['item-probe', itemProbeCli, ITEM_PROBE_FLAGS, ITEM_PROBE_USAGE],
    ['focus-grpo', focusGrpoCli, FOCUS_GRPO_FLAGS, FOCUS_GRPO_USAGE],
    ['no-repeat-rehearsal', noRepeatRehearsalCli, NO_REPEAT_REHEARSAL_FLAGS, NO_REPEAT_REHEARSAL_USAGE],
    ['structured-rehearsal', structuredRehearsalCli, STRUCTURED_REHEARSAL_FLAGS, STRUCTURED_REHEARSAL_USAGE],
    ['lesson-table', lessonTableCli, LESSON_TABLE_FLAGS, LESSON_TABLE_USAGE],
  ] as const;
  for (const [name, cli, spec, usage] of scripts) {
    it(`${name} --help lists every flag with its meaning and default, exit 0, and runs nothing`, async () => {
      const io = captureIo();
      expect(await cli(['--help'], io)).toBe(0);
      expect(usage).toMatch(new RegExp(`^usage: (npm run ${name} --|node --import tsx research/scripts/${name}\\.ts)( |$)`));
      expect(io.stdout().startsWith(`${usage}\n`), 'the help opens with the usage').toBe(true);
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

  // The one-off scripts used to take any string: Number('x') ran on as NaN, `--threads 0` reached the backend.
  // Each bad value is named in the error (so it is the flag check that answered, not a model or file missing:
  // no case gets that far, and --model points nowhere to be sure).
  it('the one-off scripts: a bad flag value is a usage error (exit 2) before any model is opened', async () => {
    const nowhere = '/nonexistent/envace-help-test';
    type Cli = (argv: readonly string[], io: CliIo) => Promise<number>;
    // [cli, its usage, whether it takes --model, [flags, what the error names][]]
    const cases: [Cli, string, boolean, [string[], string][]][] = [
      [reasonProbeCli, REASON_PROBE_USAGE, true, [[['--count', '0'], '--count'], [['--count', '1e3'], '--count'], [['--attention-tasks', '-1'], '--attention-tasks'], [['--split', 'dev'], '--split'], [['--bogus'], "Unknown option '--bogus'"]]],
      [itemProbeCli, ITEM_PROBE_USAGE, true, [[['--count', 'x'], '--count'], [['--split', 'dev'], '--split'], [['--out', ' '], '--out'], [['--threads', '2'], "Unknown option '--threads'"]]],
      [focusGrpoCli, FOCUS_GRPO_USAGE, true, [
        [[], '--out DIR is required'], [['--out', nowhere, '--threads', '0'], '--threads'], [['--out', nowhere, '--lr', '0'], '--lr'], [['--out', nowhere, '--k', '0'], '--k'],
        [['--out', nowhere, '--steps', 'x'], '--steps'], [['--out', nowhere, '--families', 'cancel,bogus'], '--families'], [['--out', nowhere, '--train-on', 'test'], '--train-on'], [['--out', nowhere, '--temperature', '-1'], '--temperature'],
      ]],
      [noRepeatRehearsalCli, NO_REPEAT_REHEARSAL_USAGE, true, [[['--n', '1,x'], '--n'], [['--n', '0,1'], '--n'], [['--n', '16,'], '--n'], [['--threads', '0'], '--threads'], [['--world', 'moon'], '--world']]],
      [structuredRehearsalCli, STRUCTURED_REHEARSAL_USAGE, true, [[['--count', '0'], '--count'], [['--task-seed', '-1'], '--task-seed'], [['--threads', '65'], '--threads'], [['--world', 'moon'], '--world'], [['--check-only', 'x'], 'Unexpected argument']]],
      [lessonTableCli, LESSON_TABLE_USAGE, false, [[[], 'OUT_DIR'], [['a', 'b'], 'one OUT_DIR'], [['a', '--figure'], '--figure'], [['a', '--bogus'], "Unknown option '--bogus'"], [['--summary'], '--summary needs']]],
    ];
    for (const [cli, usage, takesModel, bad] of cases) {
      for (const [flags, named] of bad) {
        const argv = takesModel ? [...flags, '--model', nowhere] : flags;
        const io = captureIo();
        expect(await cli(argv, io), argv.join(' ')).toBe(2);
        expect(io.stderr().split('\n')[0], argv.join(' ')).toMatch(/^error: /);
        expect(io.stderr().split('\n')[0], argv.join(' ')).toContain(named);
        expect(io.stderr()).toContain(`${usage}\n(--help lists every flag)`);
        expect(io.stdout()).toBe('');
      }
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
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'research/pretrain/cli.ts', '--bogus'], { encoding: 'utf8', timeout: 60_000 });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/Unknown option '--bogus'/);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  }, 60_000);
});
