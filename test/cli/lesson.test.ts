// `npm run lesson`: the lab's world-rehearsal lesson run headless. Its runs must be the lab's (the flags it hands the
// train CLI read back as exactly the settings the lab's lesson gives each run), and a short lesson on the bundled
// policy writes both run folders and a lesson.json whose curves are the runs' own held-out evaluations.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { lessonCli, trainArgs, type LessonRecord } from '../../src/cli/lesson';
import { parseFlags } from '../../src/cli/args';
import { readRunFlags } from '../../src/cli/run-flags';
import { TRAIN_FLAGS } from '../../src/cli/train';
import { cliDefault, defaultOf, labDefault, RUN_SETTINGS, type RunSetting } from '../../src/method/run-config';
import { LESSON_RUNS, LESSON_SIZE, lessonValues } from '../../src/method/lesson-runs';
import { captureIo } from '../helpers/cli';

const rows = RUN_SETTINGS as readonly RunSetting[];
const freshLab = Object.fromEntries(rows.filter((r) => r.lab).map((r) => [r.name, labDefault(r)]));

describe('npm run lesson: the lab lesson as train-CLI flags', () => {
  it.each(LESSON_RUNS.map((s) => [s.role, s] as const))('%s: the flags read back as the lab lesson\'s settings', (_, spec) => {
    for (const seed of [1, 7]) {
      const values: Record<string, unknown> = lessonValues(spec, LESSON_SIZE, { ...freshLab, seed });
      const back = readRunFlags(parseFlags([...trainArgs(values), '--out', 'x'], TRAIN_FLAGS));
      for (const r of rows) {
        const want = values[r.name];
        if (want === undefined || want === 'auto') continue;
        // A setting left off the command line is the train CLI's default, which must then be the lab's value.
        const got = back[r.name] ?? cliDefault(r) ?? defaultOf(r, values);
        expect(got, r.name).toEqual(want);
      }
    }
  });

  it('the real budget goes through --real-episodes as episodes per run (1 real prompt × K 4 × 40 steps = 160)', () => {
    const reh = LESSON_RUNS.find((s) => s.role === 'rehearsed')!;
    const argv = trainArgs(lessonValues(reh, LESSON_SIZE, freshLab));
    expect(argv[argv.indexOf('--real-episodes') + 1]).toBe('160');
  });

  it('refuses a value no train flag can say, rather than dropping it', () => {
    expect(() => trainArgs({ ...lessonValues(LESSON_RUNS[0], LESSON_SIZE, freshLab), loraTargets: ['q'] })).toThrow(/loraTargets/);
  });

  it('usage errors exit 2 and name the flag', async () => {
    const io = captureIo();
    expect(await lessonCli(['--steps', '2'], io)).toBe(2);
    expect(io.stderr()).toMatch(/--out DIR is required/);
    const io2 = captureIo();
    expect(await lessonCli(['--out', 'x', '--steps', '0'], io2)).toBe(2);
    expect(io2.stderr()).toMatch(/--steps/);
  });
});

describe('npm run lesson: a short lesson on the bundled policy', () => {
  const dir = mkdtempSync(join(tmpdir(), 'lesson-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('runs real-only GRPO, then world rehearsal from the same base, and records both curves', async () => {
    const io = captureIo();
    const rc = await lessonCli(['--out', dir, '--steps', '1', '--eval-every', '1', '--eval-tasks', '1', '--threads', '1'], io);
    expect(rc, io.stderr()).toBe(0);
    const rec = JSON.parse(readFileSync(join(dir, 'lesson.json'), 'utf8')) as LessonRecord;
    expect(rec.runs.map((r) => r.research)).toEqual(LESSON_RUNS.map((s) => s.research));
    expect(rec.model).toBe('models/default');
    for (const r of rec.runs) {
      expect(r.curve.map((p) => p.step)).toEqual([0, 1]);
      expect(r.curve[0].success).toBe(rec.base);
      expect(r.final).toBe(r.curve[1].success);
      const evals = readFileSync(join(dir, r.role, 'eval.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { step: number; success: number });
      expect(evals.at(-1)!.success).toBe(r.final);
    }
    // The second run reused the first's base evaluation (the same base, tasks and limits).
    expect(io.stderr()).toMatch(/base \(reused from /);
    expect(io.stdout()).toMatch(/world rehearsal\s+\d+ % held-out success \(dyna-q-recall/);
    // On two cores or more the runs trained side by side, in two processes; one after the other, in this process,
    // they give the same evaluations and the same steps.
    expect(rec.sideBySide).toBe(availableParallelism() >= 2);
    const io2 = captureIo();
    expect(await lessonCli(['--out', join(dir, 'seq'), '--steps', '1', '--eval-every', '1', '--eval-tasks', '1', '--threads', '1', '--one-at-a-time'], io2), io2.stderr()).toBe(0);
    const seq = JSON.parse(readFileSync(join(dir, 'seq', 'lesson.json'), 'utf8')) as LessonRecord;
    expect(seq.sideBySide).toBe(false);
    expect(seq.runs.map((r) => r.curve)).toEqual(rec.runs.map((r) => r.curve));
    const steps = (d: string, role: string) => readFileSync(join(d, role, 'metrics.jsonl'), 'utf8').trim().split('\n').map((l) => ({ ...JSON.parse(l), wallMs: 0 }));
    for (const r of LESSON_RUNS) expect(steps(join(dir, 'seq'), r.role)).toEqual(steps(dir, r.role));
  }, 600_000);

  it('a run that cannot start fails the lesson with its exit code and folder', async () => {
    const io = captureIo();
    const rc = await lessonCli(['--out', join(dir, 'bad'), '--steps', '1', '--eval-tasks', '1', '--model', join(dir, 'no-such-model')], io);
    expect(rc).not.toBe(0);
    expect(io.stderr()).toMatch(/real-only run failed \(exit \d+\)/);
  }, 120_000);

  it.runIf(availableParallelism() >= 2)('side by side, a first run that fails before the base exists stops the second, which would wait for it', async () => {
    // The real-only folder holds a broken run.json: that run fails at once, before it measures the base.
    mkdirSync(join(dir, 'broken', 'real-only'), { recursive: true });
    writeFileSync(join(dir, 'broken', 'real-only', 'run.json'), '{ not json');
    const io = captureIo();
    const rc = await lessonCli(['--out', join(dir, 'broken'), '--steps', '2', '--eval-every', '2', '--eval-tasks', '1', '--threads', '1'], io);
    expect(rc).not.toBe(0);
    expect(io.stderr()).toMatch(/real-only run failed \(exit \d+\)/);
    // Returning at all says the second was stopped: left alone it would wait an hour for the base (the test's limit is 2 minutes).
    expect(existsSync(join(dir, 'broken', 'rehearsed', 'eval.jsonl'))).toBe(false);
  }, 120_000);
});
