// Issue 48: commands never write into the checkout unless told to. Every command runs, with --help and with its
// README example at the smallest settings, in a clean copy of this working tree (its own git repository, so the
// copy's `git status` sees exactly what the commands left): afterwards `git status --porcelain` is empty. Outputs
// that are not named go under runs/ (git-ignored); files the repository commits are written only with
// --write-committed. And every command refuses an unknown flag as a usage error (exit 2).
//
// The long README examples (training, the ablation, the private-rehearsal table, the lesson's run, focus-grpo, the
// benchmarks, the build and the dev server) run at their smallest settings in a test of their own. Left out:
// `npm run lab` (it runs scripts/setup.sh, whose `npm ci` would replace the node_modules this copy links to; the
// server it then starts is `npm run dev`, run here), `npm test` (this suite) and `npm run test:real-size` (an
// opt-in E2E).
import { spawn, execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, realpathSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CliIo } from '../../src/cli/args';
import { envCli } from '../../src/cli/env';
import { evalCli } from '../../src/cli/eval';
import { exportMain } from '../../src/cli/export';
import { pretrainCli } from '../../research/pretrain/cli';
import { serveMain } from '../../src/cli/serve';
import { loadWorldDomain } from '../../src/env/retail/node';
import { formatCall } from '../../src/env/toolcall';
import { Episode } from '../../src/rollout/episode';
import { buildWasmCli } from '../../scripts/build-wasm';
import { cardSweepsCli } from '../../research/scripts/card-sweeps';
import { focusGrpoCli } from '../../research/scripts/focus-grpo';
import { itemProbeCli } from '../../research/scripts/item-probe';
import { lessonTableCli } from '../../research/scripts/lesson-table';
import { noRepeatRehearsalCli } from '../../research/scripts/no-repeat-rehearsal';
import { CHROMIUM, plotsCli } from '../../research/scripts/plots';
import { reasonProbeCli } from '../../research/scripts/reason-probe';
import { rolloutFamiliesCli } from '../../research/scripts/rollout-families';
import { signalCli } from '../../research/scripts/signal';
import { structuredRehearsalCli } from '../../research/scripts/structured-rehearsal';
import { ttsCli } from '../../research/scripts/tts-table';
import { captureIo } from '../helpers/cli';

const ROOT = resolve(__dirname, '../..');

/**
 * A copy of the working tree as git would commit it (tracked and untracked-but-not-ignored files; nothing
 * ignored: no runs/, no dist/), made its own repository with one commit, node_modules linked in.
 */
function cleanCopy(): { base: string; dir: string } {
  const base = mkdtempSync(join(tmpdir(), 'envace-no-write-'));
  const dir = join(base, 'lab');
  const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 << 20 })
    .split('\0')
    .filter((f) => f && f !== 'node_modules');
  for (const f of new Set(files)) {
    const src = join(ROOT, f);
    let st;
    try {
      st = lstatSync(src);
    } catch {
      continue; // deleted in the working tree, not yet in the index
    }
    const dst = join(dir, f);
    mkdirSync(dirname(dst), { recursive: true });
    if (st.isSymbolicLink()) symlinkSync(readlinkSync(src), dst);
    else copyFileSync(src, dst);
  }
  symlinkSync(realpathSync(join(ROOT, 'node_modules')), join(dir, 'node_modules'));
  const git = (...args: string[]) => execFileSync('git', args, { cwd: dir, encoding: 'utf8' });
  git('init', '-q');
  // A symlinked node_modules is a file to git, which .gitignore's `node_modules/` (folders only) does not cover.
  writeFileSync(join(dir, '.git/info/exclude'), 'node_modules\n');
  git('add', '-A');
  git('-c', 'user.name=test', '-c', 'user.email=test@example.invalid', 'commit', '-qm', 'clean copy', '--no-gpg-sign');
  return { base, dir };
}

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

// Colour codes (Vite colours its output whatever FORCE_COLOR says: "Local" in bold, then the colon).
const ANSI = /\x1b\[[\d;]*m/g;

/** Runs a command in the copy; with `until`, stops it (SIGTERM) once its stdout, colours taken out, matches. */
function sh(cwd: string, cmd: string, args: string[], o: { timeoutMs?: number; until?: RegExp; env?: Record<string, string> } = {}): Promise<Ran> {
  return new Promise((done, fail) => {
    // Its own process group: npm does not pass a SIGTERM on to the command it started, so the group gets it.
    const p = spawn(cmd, args, { cwd, env: { ...process.env, FORCE_COLOR: '0', ...o.env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const kill = (sig: NodeJS.Signals) => {
      try {
        process.kill(-p.pid!, sig);
      } catch {
        /* already gone */
      }
    };
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => {
      kill('SIGKILL');
      fail(new Error(`${cmd} ${args.join(' ')}: still running after ${o.timeoutMs ?? 60_000} ms\n${stderr}`));
    }, o.timeoutMs ?? 60_000);
    p.stdout.on('data', (d) => {
      stdout += d;
      if (o.until?.test(stdout.replace(ANSI, ''))) kill('SIGTERM');
    });
    p.stderr.on('data', (d) => (stderr += d));
    p.on('close', (code) => {
      clearTimeout(timer);
      done({ code, stdout, stderr });
    });
  });
}

const npm = (cwd: string, script: string, args: string[], o?: { timeoutMs?: number; until?: RegExp; env?: Record<string, string> }) => sh(cwd, 'npm', ['run', '--silent', script, '--', ...args], o);
const tsx = (cwd: string, file: string, args: string[], o?: { timeoutMs?: number }) => sh(cwd, process.execPath, ['--import', 'tsx', file, ...args], o);

// Every command a user can run: npm scripts by name, the research scripts by file.
const NPM_COMMANDS = ['env', 'pretrain', 'train', 'eval', 'serve', 'export', 'ablation', 'tts-table', 'plots', 'signal', 'build:wasm', 'bench', 'results', 'revise-table'];
const SCRIPT_FILES = ['item-probe', 'reason-probe', 'focus-grpo', 'no-repeat-rehearsal', 'structured-rehearsal', 'lesson-table', 'card-sweeps', 'rollout-families'];

/** A command's run, which must exit 0 (the failure names it and shows its stderr's end). */
async function ok(what: string, r: Promise<Ran>): Promise<Ran> {
  const x = await r;
  expect(x.code, `${what}: ${x.stderr.slice(-2000)}`).toBe(0);
  return x;
}

let copy: { base: string; dir: string };
const status = () => execFileSync('git', ['status', '--porcelain', '--untracked-files=all'], { cwd: copy.dir, encoding: 'utf8' });

describe('commands leave a clean checkout clean', () => {
  beforeAll(() => {
    copy = cleanCopy();
    expect(status(), 'the copy starts clean').toBe('');
  }, 120_000);
  afterAll(() => rmSync(copy.base, { recursive: true, force: true }));

  it('--help on every command prints its usage, exits 0 and writes nothing', async () => {
    const jobs: (() => Promise<[string, Ran]>)[] = [
      ...NPM_COMMANDS.map((c) => async (): Promise<[string, Ran]> => [`npm run ${c} -- --help`, await npm(copy.dir, c, ['--help'])]),
      ...SCRIPT_FILES.map((f) => async (): Promise<[string, Ran]> => [`research/scripts/${f}.ts --help`, await tsx(copy.dir, `research/scripts/${f}.ts`, ['--help'])]),
    ];
    // Two at a time: each is a Node start-up and a TypeScript load.
    const results: [string, Ran][] = [];
    const queue = [...jobs];
    await Promise.all([0, 1].map(async () => {
      for (let job = queue.shift(); job; job = queue.shift()) results.push(await job());
    }));
    for (const [what, r] of results) {
      expect(r.code, `${what}: ${r.stderr}`).toBe(0);
      expect(r.stdout, what).toMatch(/^usage: /m);
      expect(r.stdout, what).toContain('--help');
    }
    expect(status()).toBe('');
  }, 300_000);


  it("each README example at its smallest settings writes only under runs/, and committed files only on request", async () => {
    const d = copy.dir;
    // npm run env -- replay <tasks.json> (on generated tasks: the replay of the full τ²-bench file takes long).
    await ok('env generate', npm(d, 'env', ['generate', '--count', '3', '--out', 'runs/no-write/tasks.json']));
    await ok('env replay', npm(d, 'env', ['replay', 'runs/no-write/tasks.json']));
    // npm run export: the three forms, no --out.
    const exported = await ok('export parquet', npm(d, 'export', ['--split', 'train', '--format', 'parquet', '--count', '5']));
    expect(JSON.parse(exported.stdout).out).toBe(join(realpathSync(d), 'runs/export/envace-mini-train.parquet'));
    await ok('export jsonl', npm(d, 'export', ['--split', 'test', '--format', 'jsonl', '--count', '5']));
    await ok('export tool-config', npm(d, 'export', ['--format', 'tool-config', '--mode', 'real']));
    writeFileSync(join(d, 'runs/no-write/rollouts.jsonl'), rolloutsJsonl());
    await ok('export rollouts', npm(d, 'export', ['--rollouts', 'runs/no-write/rollouts.jsonl', '--format', 'parquet']));
    expect(statSync(join(d, 'runs/export/rollouts.parquet')).size).toBeGreaterThan(0);
    // npm run eval -- --tasks test (two tasks; the fidelity check included).
    const ev = await ok('eval', npm(d, 'eval', ['--tasks', 'test', '--count', '2']));
    expect(ev.stderr).toMatch(/fidelity check: .*: \d+ of \d+/);
    // npm run pretrain -- --world mini (one step), its card, the quick configuration.
    await ok('pretrain', npm(d, 'pretrain', ['--world', 'mini', '--steps', '1', '--eval', '0'], { timeoutMs: 120_000 }));
    expect(statSync(join(d, 'runs/pretrain-mini/model.safetensors')).size).toBeGreaterThan(0);
    await ok('pretrain --card', npm(d, 'pretrain', ['--card', '--world', 'mini']));
    expect(readFileSync(join(d, 'runs/pretrain-mini/README.md'), 'utf8').length).toBeGreaterThan(100);
    await ok('pretrain --quick', npm(d, 'pretrain', ['--quick']));
    // npm run serve -- --port 0: up, then stopped.
    const served = await npm(d, 'serve', ['--port', '0'], { until: /"url"/ });
    expect(served.stdout).toMatch(/"url":"http:\/\/127\.0\.0\.1:\d+"/);
    // npm run signal, npm run plots (default output), lesson-table and reason-probe at their smallest.
    await ok('signal', npm(d, 'signal', ['--world', 'mini', '--count', '1', '--k', '2', '--modes', 'real']));
    // plots rasterizes with Chromium: where there is none, it cannot run at all.
    if (existsSync(CHROMIUM)) {
      await ok('plots', npm(d, 'plots', ['research/records/ablation-records']));
      expect(statSync(join(d, 'runs/plots/ablation-curves.png')).size).toBeGreaterThan(0);
    }
    await ok('lesson-table', tsx(d, 'research/scripts/lesson-table.ts', ['research/records/lesson-records']));
    await ok('reason-probe', tsx(d, 'research/scripts/reason-probe.ts', ['--count', '1', '--attention-tasks', '0']));
    // npm run build:wasm rebuilds the committed kernels: identical, so the file is left as it is.
    await ok('build:wasm', npm(d, 'build:wasm', [], { timeoutMs: 120_000 }));
    expect(status(), 'nothing outside runs/ changed').toBe('');

    // Committed files are refused without --write-committed (exit 2, nothing written) ...
    const card = await npm(d, 'pretrain', ['--card', '--out', 'models/default']);
    expect(card.code).toBe(2);
    expect(card.stderr).toMatch(/--out models\/default would overwrite files the repository commits \(models\/default\/.*--write-committed/);
    const cfg = 'integrations/verl/config/envace_mini_tools_real.yaml';
    const refused = await npm(d, 'export', ['--format', 'tool-config', '--out', cfg]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('--write-committed');
    // ... and written with it (the committed tool config equals a fresh export, so the tree stays clean).
    const before = statSync(join(d, cfg)).mtimeMs;
    await ok('export --write-committed', npm(d, 'export', ['--format', 'tool-config', '--out', cfg, '--write-committed']));
    expect(statSync(join(d, cfg)).mtimeMs).toBeGreaterThan(before);
    expect(status()).toBe('');
  }, 600_000);

  it('the long README examples at their smallest settings write only under runs/ (and dist/)', async () => {
    const d = copy.dir;
    const tiny = ['--max-turns', '3', '--max-act-tokens', '32', '--max-rehearse-tokens', '64', '--threads', '1'];
    const long = { timeoutMs: 300_000 };
    // npm run train -- --mode rehearse --real-episodes B ... --out DIR (one step, two held-out tasks).
    await ok('train', npm(d, 'train', ['--mode', 'rehearse', '--real-episodes', '2', '--steps', '1', '--prompts', '2', '--k', '2', '--train-tasks', '2', '--eval-tasks', '2', '--eval-every', '1', '--fidelity-tokens', '0', '--base-eval', 'skip', ...tiny, '--out', 'runs/no-write/train'], long));
    expect(existsSync(join(d, 'runs/no-write/train/eval.jsonl'))).toBe(true);
    // npm run ablation: without --write-committed the tables go to <out>/table.md, docs/results.md stays as it is.
    await ok('ablation', npm(d, 'ablation', ['--configs', 'base,real', '--seeds', '1', '--steps', '1', '--tasks', '2', '--train-tasks', '2', '--prompts', '1', '--k', '2', '--fidelity-tokens', '0', '--boot-reps', '100', ...tiny, '--out', 'runs/no-write/ablation'], long));
    expect(readFileSync(join(d, 'runs/no-write/ablation/table.md'), 'utf8')).toMatch(/real/);
    // npm run tts-table (one task, N = 0 and 1, the base policy only).
    await ok('tts-table', npm(d, 'tts-table', ['--tasks', '1', '--seeds', '1', '--ns', '0,1', '--modes', 'parallel', '--adapter', 'none', '--max-eval-tokens', '8', '--boot-reps', '100', ...tiny, '--out', 'runs/no-write/tts'], long));
    // bash research/scripts/lesson-grpo.sh runs/lesson (one seed, one step, two held-out tasks).
    // MODE as well: vitest sets MODE=test in the environment, and the script reads MODE.
    const lessonEnv = { MODE: 'real', EVAL_TASKS: '2', TRAIN_TASKS: '2', STEPS: '1', PROMPTS: '1', K: '2', EVAL_EVERY: '1', REH_TOKENS: '64', THREADS: '1' };
    const lesson = await sh(d, 'bash', ['research/scripts/lesson-grpo.sh', 'runs/no-write/lesson', '1'], { ...long, env: lessonEnv });
    const logs = ['base-s0/eval.log', 'real-s1.log'].map((f) => join(d, 'runs/no-write/lesson', f)).filter(existsSync).map((f) => readFileSync(f, 'utf8').slice(-1500));
    expect(lesson.code, `lesson-grpo.sh: ${lesson.stderr}\n${logs.join('\n')}`).toBe(0);
    expect(existsSync(join(d, 'runs/no-write/lesson/real-s1/done.json'))).toBe(true);
    // research/scripts/focus-grpo.ts --out DIR --families cancel (one step, two held-out tasks).
    await ok('focus-grpo', tsx(d, 'research/scripts/focus-grpo.ts', ['--out', 'runs/no-write/focus', '--steps', '1', '--k', '2', '--prompts', '1', '--eval-tasks', '2', '--threads', '1'], long));
    // npm run bench (one suite, --quick, no WebGPU): records under runs/bench/, bench/results/ untouched.
    await ok('bench', sh(d, 'npm', ['run', '--silent', 'bench', '--', 'matmul', '--quick'], { ...long, env: { BENCH_WEBGPU: '0' } }));
    expect(existsSync(join(d, 'runs/bench/matmul.json'))).toBe(true);
    await ok('bench --check-table', npm(d, 'bench', ['--check-table']));
    // npm run results -- --check and npm run revise-table read the records and write nothing.
    await ok('results --check', npm(d, 'results', ['--check'], long));
    await ok('revise-table', npm(d, 'revise-table', []));
    // npm run build writes dist/ (git-ignored); npm run dev serves the lab (up, then stopped).
    await ok('build', npm(d, 'build', [], long));
    expect(existsSync(join(d, 'dist/index.html'))).toBe(true);
    const dev = await npm(d, 'dev', ['--port', '0'], { ...long, until: /Local:\s+http:\/\/localhost:\d+/ });
    expect(dev.stdout.replace(ANSI, '')).toMatch(/Local:\s+http:\/\/localhost:\d+/);
    expect(status(), 'nothing outside runs/ and dist/ changed').toBe('');
  }, 1_500_000);
});

/** Three episodes of the expert's calls in the layout src/rl/run.ts appends to rollouts.jsonl. */
function rolloutsJsonl(): string {
  const domain = loadWorldDomain('mini');
  return domain.tasks.generate({ split: 'train', count: 3, seed: 0 }).map((task, i) => {
    const ep = new Episode(`${i}:${task.id}`, `${i}:${task.id}:0`, task, 'real', domain.createEnv(), [], 30);
    for (const c of task.referenceActions) ep.applyAct(formatCall(c));
    ep.applyAct('Done. ' + task.facts.join(' '));
    return JSON.stringify({ step: i, promptId: ep.promptId, rolloutId: ep.rolloutId, taskId: task.id, mode: 'real', end: ep.end, reward: 1, turns: ep.turns, steps: ep.steps, messages: ep.messages, fidelity: [], rehearseFailure: null }) + '\n';
  }).join('');
}

// In-process (fast): an unknown flag is a usage error before anything runs, on every command.
describe('unknown flags', () => {
  type Cli = (argv: readonly string[], io: CliIo) => Promise<number>;
  const clis: [string, Cli, string[]][] = [
    ['env replay', envCli, ['replay']], ['env generate', envCli, ['generate']], ['env expert', envCli, ['expert']],
    ['pretrain', pretrainCli, []], ['eval', evalCli, []], ['serve', serveMain, []], ['export', exportMain, []],
    ['tts-table', ttsCli, []], ['plots', plotsCli, []], ['signal', signalCli, []], ['build:wasm', buildWasmCli, []],
    ['item-probe', itemProbeCli, []], ['reason-probe', reasonProbeCli, []], ['focus-grpo', focusGrpoCli, []],
    ['no-repeat-rehearsal', noRepeatRehearsalCli, []], ['structured-rehearsal', structuredRehearsalCli, []],
    ['lesson-table', lessonTableCli, []], ['card-sweeps', cardSweepsCli, []], ['rollout-families', rolloutFamiliesCli, []],
  ];
  for (const [name, cli, pre] of clis) {
    it(`${name} --no-such-flag: exit 2 naming the flag`, async () => {
      const io = captureIo();
      expect(await cli([...pre, '--no-such-flag'], io)).toBe(2);
      expect(io.stderr()).toContain("Unknown option '--no-such-flag'");
      expect(io.stdout()).toBe('');
    });
  }
});
