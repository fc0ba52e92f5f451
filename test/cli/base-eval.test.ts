// Issue 48: "CLI defaults equal the lab's; `train` reports the change against the base measured on the same tasks",
// and "the pre-training evaluation can be skipped or reused when the base's record exists". `npm run train` now
// measures the starting policy on its held-out tasks before the first step (step 0, as the lab does), keeps it in
// the run folder (base-eval.json), reports every later evaluation against it, and reuses a record of the same
// model, world, tasks and limits (--base-eval reuse, --base-record FILE|DIR), or skips it (--base-eval skip).
// In-process on the tiny random-weight model folder and the calculate-only domain, as test/cli/train-eval.test.ts.
import { copyFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { TRAIN_FLAGS, trainCli } from '../../src/cli/train';
import { helpText } from '../../src/cli/args';
import { labDefault, RUN_SETTINGS, type RunSetting } from '../../src/method/run-config';
import { tokenBudgets } from '../../src/rollout/budget';
import { Tokenizer } from '../../src/model/tokenizer';
import { DirSource } from '../../src/model/source-node';
import { calculateOnlyDomain as domain, captureIo as io, tinyModelWorkspace } from '../helpers/cli';
import { recordPath } from '../../src/util/record-path';

const ws = tinyModelWorkspace('cli-base-');
// A function: the workspace's model folder exists only once its beforeAll has run.
const small = () => ['--model', ws.modelDir, '--k', '2', '--prompts', '1', '--train-tasks', '3', '--max-turns', '1', '--max-act-tokens', '4', '--max-rehearse-tokens', '4', '--fidelity-tokens', '4', '--grounding-chars', '150', '--history-chars', '150', '--threads', '1'];
const train = async (out: string, more: string[] = []) => {
  const t = io();
  const code = await trainCli(['--mode', 'rehearse', '--steps', '2', '--out', join(ws.work, out), '--eval-tasks', '2', '--eval-every', '2', ...small(), ...more], t, { domain });
  return { code, t, res: code === 0 ? JSON.parse(t.stdout()) : null, evals: () => readFileSync(join(ws.work, out, 'eval.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l)) };
};

describe('npm run train: the base evaluation', () => {
  it('measures the starting policy on the held-out tasks, keeps it, and reports the change against it', async () => {
    const a = await train('a');
    expect(a.code, a.t.stderr()).toBe(0);
    expect(a.res).toMatchObject({ baseSource: 'measured', base: { step: 0 }, eval: { step: 2 } });
    expect(a.res.base.reused).toBeUndefined();
    expect(a.res.changePoints).toBe(Math.round(100 * (a.res.eval.success - a.res.base.success)));
    expect(a.evals().map((e) => e.step)).toEqual([0, 2]);
    expect(a.t.stderr()).toMatch(/base: eval @0: success/);
    expect(a.t.stderr()).toMatch(/eval @2: success .*\(base \d\.\d\d on the same 2 tasks: [+−±]\d+ points?\)/);
    const record = JSON.parse(readFileSync(join(ws.work, 'a', 'base-eval.json'), 'utf8'));
    expect(record).toMatchObject({ version: 1, key: { world: 'mini', tasks: { count: 2 }, limits: { maxTurns: 1, maxActTokens: 4, maxRehearseTokens: 4 } }, eval: a.res.base });
    expect(record.key.model).toMatch(/^f32 weights [0-9a-f]{16}$/);
  });

  it('reuses a record of the same base from another run folder without evaluating it again', async () => {
    const a = JSON.parse(readFileSync(join(ws.work, 'a', 'base-eval.json'), 'utf8'));
    const b = await train('b', ['--base-record', join(ws.work, 'a'), '--seed', '5', '--lr', '0.01']);
    expect(b.code, b.t.stderr()).toBe(0);
    expect(b.res.baseSource).toBe('reused');
    // Only the reuse path marks step 0 as reused (a measurement never does): the record is the run's step 0.
    expect(b.res.base).toEqual({ ...a.eval, reused: a.measuredAt });
    expect(b.evals()[0]).toEqual(b.res.base);
    expect(b.t.stderr()).toContain(`base (reused from ${join(ws.work, 'a', 'base-eval.json')}, measured ${a.measuredAt})`);
    expect(b.t.stderr()).not.toMatch(/^train: base: /m);
  });

  it('refuses a record of other held-out tasks; --base-eval skip leaves no step 0 and reports no change', async () => {
    const other = await train('c', ['--base-record', join(ws.work, 'a', 'base-eval.json'), '--eval-tasks', '1']);
    expect(other.code).toBe(2);
    expect(other.t.stderr()).toMatch(/--base-record .*base-eval\.json: measured on another base or other tasks: tasks: \{"count":1,/);
    const runOnly = await train('d', ['--base-eval', 'run', '--base-record', join(ws.work, 'a')]);
    expect(runOnly.code).toBe(2);
    expect(runOnly.t.stderr()).toMatch(/--base-record only applies with --base-eval reuse \(not run\)/);
    const skip = await train('e', ['--base-eval', 'skip']);
    expect(skip.code, skip.t.stderr()).toBe(0);
    expect(skip.res).toMatchObject({ baseSource: 'skipped', base: null, changePoints: null, eval: { step: 2 } });
    expect(skip.evals().map((e) => e.step)).toEqual([2]);
    expect(existsSync(join(ws.work, 'e', 'base-eval.json'))).toBe(false);
    expect(skip.t.stderr()).toMatch(/eval @2: success .*\(no base evaluation \(skipped\)/);
  });
});

describe('npm run train: --base-wait (a base another process is still measuring)', () => {
  it('trains at once and logs step 0 from the record when it appears, ahead of its first evaluation; the steps are unchanged', async () => {
    const a = JSON.parse(readFileSync(join(ws.work, 'a', 'base-eval.json'), 'utf8'));
    const later = join(ws.work, 'late-src');
    mkdirSync(later);
    const t = io();
    const out = join(ws.work, 'late');
    const running = trainCli(['--mode', 'rehearse', '--steps', '2', '--out', out, '--eval-tasks', '2', '--eval-every', '2', ...small(), '--base-record', later, '--base-wait', '60', '--seed', '5', '--lr', '0.01'], t, { domain });
    // The record appears only once the run has said it is training without it.
    while (!/is not there yet/.test(t.stderr())) await new Promise((r) => setTimeout(r, 5));
    copyFileSync(join(ws.work, 'a', 'base-eval.json'), join(later, 'base-eval.json'));
    expect(await running, t.stderr()).toBe(0);
    const res = JSON.parse(t.stdout());
    expect(res).toMatchObject({ baseSource: 'reused', base: { ...a.eval, reused: a.measuredAt }, eval: { step: 2 } });
    const evals = readFileSync(join(out, 'eval.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    expect(evals.map((e) => e.step)).toEqual([0, 2]);
    expect(evals[0]).toEqual(res.base);
    // The same run with the record there from the start ('b' above) took the same steps.
    const steps = (d: string) => readFileSync(join(ws.work, d, 'metrics.jsonl'), 'utf8').trim().split('\n').map((l) => ({ ...JSON.parse(l), wallMs: 0 }));
    expect(steps('late')).toEqual(steps('b'));
    expect(readFileSync(join(out, 'base-eval.json'), 'utf8')).toBe(readFileSync(join(ws.work, 'a', 'base-eval.json'), 'utf8'));
  });

  it('fails with the file and the wait when the record never comes, and needs --base-record', async () => {
    const never = await train('never', ['--base-record', join(ws.work, 'nowhere', 'base-eval.json'), '--base-wait', '1']);
    expect(never.code).toBe(1);
    expect(never.t.stderr()).toMatch(/--base-wait 1: .*nowhere\/base-eval\.json did not appear in 1 s; the run keeps its checkpoints/);
    const alone = await train('alone', ['--base-wait', '5']);
    expect(alone.code).toBe(2);
    expect(alone.t.stderr()).toMatch(/--base-wait needs --base-record/);
  });
});

describe("npm run train: the lab's defaults", () => {
  it("every setting the lab defaults otherwise has the lab's default in the CLI's help", () => {
    const help = helpText('', TRAIN_FLAGS);
    for (const row of RUN_SETTINGS as readonly RunSetting[]) {
      const flag = row.cli?.flag;
      if (!flag || row.cli?.required || row.lab?.default === undefined) continue;
      const line = help.split('\n').find((l) => l.trimStart().startsWith(`--${flag} `))!;
      const d = labDefault(row);
      // A budget of 0 is the lab's "measured": the help says the CLI measures it as the lab does.
      expect(line, row.name).toMatch(d === 0 ? /measured as the lab's/ : new RegExp(`default: ${String(d)}\\b`));
    }
  });

  it('without flags for them, a run has the seed, held-out tasks, schedule and measured budgets the lab would use', async () => {
    const t = io();
    const out = join(ws.work, 'defaults');
    // Only the run's size and the model are given; the tiny model's context still fits the measured budgets.
    expect(await trainCli(['--mode', 'real', '--steps', '1', '--out', out, '--model', ws.modelDir, '--k', '1', '--prompts', '1', '--train-tasks', '1', '--eval-tasks', '1', '--max-turns', '1', '--threads', '1'], t, { domain }), t.stderr()).toBe(0);
    const run = JSON.parse(readFileSync(join(out, 'run.json'), 'utf8'));
    const lab = Object.fromEntries(RUN_SETTINGS.map((r) => [r.name, labDefault(r)]));
    expect(run.config.seed).toBe(lab.seed);
    expect(run.config.evalEvery).toBe(lab.evalEvery);
    // The model as a record names it (the folder may be committed: no machine path), read back on --resume.
    expect(JSON.parse(readFileSync(join(out, 'train-cli.json'), 'utf8'))).toMatchObject({ world: 'mini', taskSeed: lab.seed, model: recordPath(ws.modelDir) });
    const tok = await Tokenizer.load(new DirSource(ws.modelDir));
    const m = tokenBudgets(domain, tok, { tasks: 100 });
    expect(run.config.limits).toMatchObject({ maxActTokens: m.act, maxRehearseTokens: m.rehearse });
    expect(t.stderr()).toContain(`budgets: Act ${m.act}, Rehearse ${m.rehearse} tokens (measured as the lab does`);
    expect(JSON.parse(t.stdout())).toMatchObject({ baseSource: 'measured', eval: { step: 1 } });
  });
});
