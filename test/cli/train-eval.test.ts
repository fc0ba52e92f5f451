// `npm run train` and `npm run eval` as a user runs them: usage errors (exit 2, a message naming the flag),
// a short training run into a folder (JSONL logs, checkpoint, result JSON, progress lines), refusal to
// overwrite or re-finish a run, and evaluation of the base policy and of the run's adapter. The CLIs run
// in-process on a tiny random-weight model folder; the retail domain is shown with one tool and a short
// policy so that prompts fit the tiny model (everything else is the real code path). One spawned process
// checks the exit status of the real entry point.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { evalCli } from '../../src/cli/eval';
import { trainCli } from '../../src/cli/train';
import { calculateOnlyDomain, captureIo, tinyModelWorkspace } from '../helpers/cli';

const domain = calculateOnlyDomain;
const io = captureIo;

const ws = tinyModelWorkspace('cli-train-');
const work = ws.work;

const small = ['--max-turns', '1', '--max-act-tokens', '4', '--max-rehearse-tokens', '4', '--fidelity-tokens', '4', '--grounding-chars', '150', '--history-chars', '150', '--threads', '1'];

describe('npm run train: usage errors', () => {
  const cases: [string[], RegExp][] = [
    [['--steps', '1', '--out', 'x'], /--mode is required/],
    [['--mode', 'dream', '--steps', '1', '--out', 'x'], /--mode must be one of rehearse, real, per-role, frozen-simulator, got "dream"/],
    [['--mode', 'real', '--out', 'x'], /--steps N is required/],
    [['--mode', 'real', '--steps', '0', '--out', 'x'], /--steps must be an integer in \[1, 1000000\], got "0"/],
    [['--mode', 'real', '--steps', '1'], /--out DIR is required/],
    [['--mode', 'real', '--steps', '1', '--out', 'x', '--k', 'two'], /--k must be an integer in \[1, 64\], got "two"/],
    [['--mode', 'real', '--steps', '1', '--out', 'x', '--lr', '0'], /--lr must be a number > 0, got "0"/],
    [['--mode', 'real', '--steps', '1', '--out', 'x', '--advantage', 'median'], /--advantage must be one of role-wise, pooled/],
    [['--mode', 'real', '--steps', '1', '--out', 'x', '--baseline', 'x'], /--baseline must be one of row-weighted, rollout-mean/],
    [['--mode', 'real', '--steps', '1', '--out', 'x', '--top-p', '1.5'], /--top-p must be in \(0, 1\], got 1.5/],
    [['--mode', 'real', '--steps', '1', '--out', 'x', '--epochs', '0'], /--epochs must be an integer in \[1, 16\], got "0"/],
    [['--mode', 'real', '--steps', '1', '--out', 'x', '--task-sampling', 'hard'], /--task-sampling must be one of uniform, signal/],
    [['--mode', 'real', '--steps', '1', '--out', 'x', '--reward', 'judge'], /--reward must be one of verifier, checklist/],
    [['--mode', 'real', '--steps', '1', '--out', 'x', '--loss-agg', 'sum'], /--loss-agg must be one of seq-mean-token-mean, token-mean, seq-mean-token-sum, got "sum"/],
    [['--mode', 'real', '--steps', '1', '--out', 'x', '--backend', 'tpu'], /--backend must be one of cpu-fast, cpu-ref, webgpu/],
    [['--mode', 'real', '--steps', '1', '--out', 'x', '--bogus'], /Unknown option '--bogus'/],
    [['--mode', 'real', '--steps', '1', '--out', join(work, 'none'), '--resume'], /--resume: .* holds no run/],
    [['--mode', 'real', '--steps', '1', '--out', join(work, 'nomodel'), '--model', join(work, 'missing')], /--model .*missing: no config\.json/],
  ];
  for (const [argv, msg] of cases) {
    it(argv.join(' '), async () => {
      const t = io();
      expect(await trainCli(argv, t, { domain })).toBe(2);
      expect(t.stderr()).toMatch(msg);
      expect(t.stderr()).toMatch(/usage: npm run train/);
      expect(t.stdout()).toBe('');
    });
  }
  it('the real entry point exits 2 on a usage error', () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/train.ts', '--mode', 'nope'], { encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/--mode must be one of/);
  });
});

describe('npm run eval: usage errors', () => {
  const cases: [string[], RegExp][] = [
    [[], /--tasks is required/],
    [['--tasks', 'test', '--count', '0'], /--count must be an integer in \[1, 10000\]/],
    [['--tasks', join(work, 'nope.json')], /not test, train or a readable task file/],
    [['--tasks', 'test', '--n', '2'], /--n needs --tts parallel\|sequential/],
    [['--tasks', 'test', '--tts', 'parallel'], /--tts needs --n N/],
    [['--tasks', 'test', '--tts', 'beam', '--n', '1'], /--tts must be one of parallel, sequential/],
  ];
  for (const [argv, msg] of cases) {
    it(argv.join(' ') || '(no flags)', async () => {
      const t = io();
      expect(await evalCli(argv, t, { domain })).toBe(2);
      expect(t.stderr()).toMatch(msg);
    });
  }
});

describe('npm run train, then npm run eval', () => {
  const out = join(work, 'run');
  const trainArgs = () => ['--mode', 'rehearse', '--steps', '2', '--seed', '3', '--out', out, '--model', ws.modelDir, '--k', '2', '--prompts', '1', '--train-tasks', '3', '--eval-tasks', '1', ...small];

  it('trains: logs, checkpoints, progress, result JSON; refuses to overwrite or re-finish', async () => {
    const t = io();
    expect(await trainCli(trainArgs(), t, { domain })).toBe(0);
    const res = JSON.parse(t.stdout());
    expect(res).toMatchObject({ mode: 'rehearse', advantage: 'role-wise', baseline: 'row-weighted', seed: 3, steps: 2, resumedFrom: 0, backend: 'cpu-fast', eval: { step: 2 } });
    expect(res.eval.fidelity.steps).toBeGreaterThan(0);
    expect(t.stderr()).toMatch(/step 1\/2 .*reward/);
    expect(t.stderr()).toMatch(/step 2\/2 /);
    expect(t.stderr()).toMatch(/eval @2: success/);
    const metrics = readFileSync(join(out, 'metrics.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    expect(metrics.map((m) => m.step)).toEqual([1, 2]);
    expect(metrics[0].rollouts.rollouts).toBe(2);
    expect(readFileSync(join(out, 'rollouts.jsonl'), 'utf8').trim().split('\n')).toHaveLength(4);
    expect(JSON.parse(readFileSync(join(out, 'run.json'), 'utf8'))).toMatchObject({ step: 2, checkpoint: 'ckpt/2', config: { mode: 'rehearse', groups: 'role-wise', k: 2 } });
    for (const f of ['adapter/adapter_config.json', 'adapter/adapter_model.safetensors', 'optimizer.safetensors']) expect(existsSync(join(out, 'ckpt/2', f)), f).toBe(true);

    const again = io();
    expect(await trainCli(trainArgs(), again, { domain })).toBe(2);
    expect(again.stderr()).toMatch(/already holds a run \(2\/2 steps\); pass --resume/);
    const fin = io();
    expect(await trainCli([...trainArgs(), '--resume'], fin, { domain })).toBe(2);
    expect(fin.stderr()).toMatch(/already finished/);
  });

  it('evaluates the base policy and the run folder on held-out tasks', async () => {
    const base = io();
    expect(await evalCli(['--tasks', 'test', '--count', '1', '--model', ws.modelDir, ...small], base, { domain })).toBe(0);
    const b = JSON.parse(base.stdout());
    expect(b).toMatchObject({ adapter: null, run: null, tasks: 1, tasksFrom: 'test', tts: null });
    expect(b.perTask).toHaveLength(1);
    expect(b.perTask[0].taskId).toMatch(/^test-/);
    expect(b.fidelity.steps).toBeGreaterThan(0);
    expect(base.stderr()).toMatch(/base policy/);
    expect(base.stderr()).toMatch(/success .* tool P/);

    const tuned = io();
    expect(await evalCli(['--tasks', 'test', '--count', '1', '--model', ws.modelDir, '--adapter', out, ...small], tuned, { domain })).toBe(0);
    const a = JSON.parse(tuned.stdout());
    expect(a.run).toEqual({ mode: 'rehearse', step: 2 });
    expect(a.fidelity.steps).toBe(b.fidelity.steps);
    // --tts with N = 0 is the plain evaluation, whether or not private rehearsal exists.
    const zero = io();
    expect(await evalCli(['--tasks', 'test', '--count', '1', '--model', ws.modelDir, '--tts', 'sequential', '--n', '0', ...small], zero, { domain })).toBe(0);
    const z = JSON.parse(zero.stdout());
    expect(z.tts).toEqual({ mode: 'sequential', n: 0 });
    expect(z.perTask).toEqual(b.perTask);
  });
});
