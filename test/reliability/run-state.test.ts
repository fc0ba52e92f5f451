// A training run's files under a full disk and under hostile edits (issue 16). Each case first shows the
// defect's trigger, then the new behaviour: a clear error naming the file and field, the right exit status
// (1 failure, 2 usage, 74 I/O), the last checkpoint intact, no temp file, and nothing hangs (every trainCli
// call here is bounded by the test timeout; the hang was an endless loop in task sampling).
import { spawn } from 'node:child_process';
import { appendFileSync, cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { evalCli } from '../../src/cli/eval';
import { pretrainCli } from '../../research/pretrain/cli';
import { trainCli } from '../../src/cli/train';
import { Rng } from '../../src/util/rng';
import { CpuRefBackend } from '../../src/engine/cpu/ref';
import { loadModel } from '../../src/model/load';
import { DirSource } from '../../src/model/source-node';
import { loadAdapters, readRunInfo } from '../../src/rl/checkpoint';
import { DirStore } from '../../src/rl/store-node';
import { EXIT_IO, nodeFileOps, type FileOps } from '../../src/util/atomic-file';
import { tinyConfig, writeTinyModel } from '../fixtures/tiny-model';
import { calculateOnlyDomain as domain, captureIo } from '../helpers/cli';

const work = mkdtempSync(join(tmpdir(), 'run-state-'));
let modelDir: string;
const reward = (ep: { rolloutId: string }) => (ep.rolloutId.endsWith(':0') ? 1 : 0);
const args = (out: string, steps = 3) => [
  '--mode', 'rehearse', '--steps', String(steps), '--seed', '5', '--out', out, '--model', modelDir, '--k', '2', '--prompts', '1',
  '--train-tasks', '3', '--eval-tasks', '1', '--eval-every', '1', '--lr', '0.05', '--max-turns', '1', '--max-act-tokens', '4',
  '--max-rehearse-tokens', '4', '--fidelity-tokens', '4', '--grounding-chars', '150', '--history-chars', '150', '--threads', '1',
];

/** Bytes a whole run writes, counted by a pass-through FileOps. */
let total = 0;
const counting: FileOps = {
  async write(h, bytes) {
    total += bytes.length;
    await nodeFileOps.write(h, bytes);
  },
};

/**
 * A disk that fills after `budget` bytes, or on the `line`-th JSONL line appended: the write that hits
 * the limit lands partly, then fails with ENOSPC, and so does every later write.
 */
function fullDisk(o: { budget?: number; line?: number }): FileOps {
  let used = 0;
  let lines = 0;
  let full = false;
  return {
    async write(h, bytes) {
      const isLine = bytes[0] === 0x7b && bytes[bytes.length - 1] === 0x0a;
      if (isLine) lines++;
      const room = full ? 0 : o.line !== undefined ? (isLine && lines >= o.line ? bytes.length >> 1 : Infinity) : Math.max(0, o.budget! - used);
      if (bytes.length > room) {
        full = true;
        await nodeFileOps.write(h, bytes.subarray(0, room));
        throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC', errno: -28, syscall: 'write' });
      }
      used += bytes.length;
      await nodeFileOps.write(h, bytes);
    },
  };
}

function walk(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(join(dir, e.name)) : [join(dir, e.name)]));
}

function expectCleanFolder(out: string): void {
  const files = walk(out);
  expect(files.filter((f) => /\.tmp$|\.lock$/.test(f))).toEqual([]);
  for (const f of files.filter((f) => f.endsWith('.jsonl'))) {
    const text = readFileSync(f, 'utf8');
    if (text) expect(text.endsWith('\n'), `${f} ends with a whole line`).toBe(true);
    for (const l of text.split('\n').filter(Boolean)) expect(() => JSON.parse(l), f).not.toThrow();
  }
}

async function train(argv: string[], ops?: FileOps) {
  const io = captureIo();
  const code = await trainCli(argv, io, { domain, reward, storeOps: ops });
  return { code, err: io.stderr(), out: io.stdout() };
}

beforeAll(async () => {
  modelDir = await writeTinyModel(tinyConfig({ maxPositionEmbeddings: 2048 }), 4);
  const r = await train(args(join(work, 'whole')), counting);
  expect(r.code, r.err).toBe(0);
}, 60_000);
afterAll(() => {
  rmSync(work, { recursive: true, force: true });
  if (modelDir) rmSync(modelDir, { recursive: true, force: true });
});

describe('a full disk', () => {
  const cases: [string, { budget?: number; line?: number }, RegExp][] = [
    ['in a checkpoint file', { budget: 0.45 }, /cannot write \S+\/ckpt\/\d\/\S+: ENOSPC \(no space left on device\)/],
    // 7: the base evaluation's step-0 line is one more line before the append this case fails (6 now hits a checkpoint).
    ['in a JSONL append', { line: 7 }, /cannot append to \S+\.jsonl: ENOSPC \(no space left on device\)/],
  ];
  for (const [where, disk, msg] of cases) {
    it(`ENOSPC ${where}: exit 74 naming the file, last checkpoint intact, no temp file or torn line, resumable`, async () => {
      const out = join(work, `full-${where.split(' ').at(-1)}`);
      const r = await train(args(out), fullDisk(disk.budget ? { budget: Math.floor(total * disk.budget) } : disk));
      expect(r.code, r.err).toBe(EXIT_IO);
      expect(r.err).toMatch(msg);
      expect(r.err).toContain(out);
      expectCleanFolder(out);
      const info = await readRunInfo(new DirStore(out));
      expect(info?.checkpoint).toMatch(/^ckpt\/\d$/);
      const b = new CpuRefBackend();
      const policy = await loadModel(new DirSource(modelDir), b, { format: 'f32' });
      const a = await loadAdapters(new DirStore(out), b, policy.model.config);
      expect(a.step).toBe(info!.step);
      // Space is back: the run resumes from that checkpoint and finishes like the uninterrupted one.
      const again = await train([...args(out), '--resume']);
      expect(again.code, again.err).toBe(0);
      expectCleanFolder(out);
      expect(readFileSync(join(out, 'ckpt/3/adapter/adapter_model.safetensors'))).toEqual(readFileSync(join(work, 'whole', 'ckpt/3/adapter/adapter_model.safetensors')));
    }, 60_000);
  }
});

describe('resume state', () => {
  /** A run stopped after step 1 of 3 (copied from the whole run's first checkpoint). */
  function partial(name: string, edit?: (state: Record<string, any>) => void): string {
    const out = join(work, name);
    cpSync(join(work, 'whole'), out, { recursive: true });
    const state = JSON.parse(readFileSync(join(out, 'run.json'), 'utf8'));
    state.step = 1;
    state.checkpoint = 'ckpt/1';
    state.rng = { seed: state.rng.seed, step: 1 };
    edit?.(state);
    writeFileSync(join(out, 'run.json'), JSON.stringify(state));
    return out;
  }

  it('Rng.restore refuses a state that would never advance', () => {
    expect(() => Rng.restore({ seed: 'x' as unknown as number, step: 0 })).toThrow(/RNG state must be .*"seed":"x"/);
    expect(() => Rng.restore({ seed: 1, step: -1 })).toThrow(RangeError);
    const fresh = new Rng(1);
    for (let i = 0; i < 3; i++) fresh.next();
    expect(Rng.restore({ seed: 1, step: 3 }).next()).toBe(fresh.next());
  });

  const bad: [string, (s: Record<string, any>) => void, RegExp][] = [
    ['rng {"seed":"x"} (used to hang forever)', (s) => (s.rng = { seed: 'x' }), /run\.json: rng\.seed: .*\(got "x"\)/],
    ['step -5 (used to train the whole run again)', (s) => (s.step = -5), /run\.json: step: .*\(got -5\)/],
    ['config.k "two"', (s) => (s.config.k = 'two'), /run\.json: config\.k: .*\(got "two"\)/],
    ['checkpoint outside ckpt/', (s) => (s.checkpoint = '../../etc'), /run\.json: checkpoint: must name a checkpoint folder/],
  ];
  for (const [what, edit, msg] of bad) {
    it(`run.json with ${what}: refused, exit 1, naming the file and field`, async () => {
      const out = partial(`bad-${what.slice(0, 8).replace(/\W/g, '')}`, edit);
      const r = await train([...args(out), '--resume']);
      expect(r.code).toBe(1);
      expect(r.err).toMatch(msg);
      expect(r.err).toContain(join(out, 'run.json'));
    }, 20_000);
  }

  it('a changed lora.rank in run.json is refused (it used to train the old adapter under the new label)', async () => {
    const out = partial('rank', (s) => (s.config.lora.rank = 4));
    const r = await train([...args(out), '--resume']);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/run\.json says lora\.rank 4, alpha \d+, but .*ckpt\/1\/adapter\/adapter_config\.json has r 8/);
  }, 20_000);

  it('a corrupt train-cli.json names the file (it used to be a bare SyntaxError)', async () => {
    const out = partial('cli-json');
    writeFileSync(join(out, 'train-cli.json'), '{"model": ');
    const r = await train([...args(out), '--resume']);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/train-cli\.json is not valid JSON/);
    writeFileSync(join(out, 'train-cli.json'), JSON.stringify({ model: modelDir, trainTasks: -1, evalTasks: 1, taskSeed: 5 }));
    expect((await train([...args(out), '--resume'])).err).toMatch(/train-cli\.json: trainTasks: /);
  }, 20_000);

  it('flags that differ from the saved run are refused by name, or ignored with --ignore-changed', async () => {
    const out = partial('differ');
    const r = await train([...args(out).map((a) => (a === '0.05' ? '0.5' : a)), '--rank', '4', '--resume']);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/flags differ from the saved run: --lr 0\.5 \(the run has lr = 0\.05\); --rank 4 \(the run has lora\.rank = 8\)/);
    const ok = await train([...args(out).map((a) => (a === '0.05' ? '0.5' : a)), '--resume', '--ignore-changed']);
    expect(ok.code, ok.err).toBe(0);
    expect(ok.err).toMatch(/ignoring flags that differ from the saved run: --lr 0\.5/);
    expect(JSON.parse(ok.out).resumedFrom).toBe(1);
  }, 30_000);

  it('a torn last line of eval.jsonl is cut off with a warning; the run finishes with exit 0 (it used to exit 1)', async () => {
    const out = partial('torn');
    appendFileSync(join(out, 'eval.jsonl'), '{"step":1,"succ');
    const r = await train([...args(out), '--resume']);
    expect(r.code, r.err).toBe(0);
    expect(r.err).toMatch(/eval\.jsonl: dropped a torn last line/);
    expectCleanFolder(out);
  }, 30_000);
});

describe('one writer per run folder', () => {
  it('a folder locked by a live process is refused naming the pid; a stale lock is taken over', async () => {
    const out = join(work, 'locked');
    const sleeper = spawn('sleep', ['30']);
    try {
      cpSync(join(work, 'whole'), out, { recursive: true });
      writeFileSync(join(out, '.lock'), String(sleeper.pid));
      const r = await train([...args(out, 4), '--resume', '--steps', '3']);
      expect(r.code).toBe(1);
      expect(r.err).toContain(`is in use by process ${sleeper.pid}`);
    } finally {
      sleeper.kill('SIGKILL');
    }
    await new Promise((res) => sleeper.on('exit', res));
    const r = await train([...args(out), '--resume']);
    expect(r.err).toContain(`taking over a stale lock of process ${sleeper.pid}`);
    expect(r.err).toMatch(/already finished/);
    expect(existsSync(join(out, '.lock'))).toBe(false);
  }, 40_000);
});

describe('paths and numbers are checked before work starts', () => {
  it('--out under /proc fails at once with exit 74 (it used to spin forever in a recursive mkdir)', async () => {
    const r = await train(args('/proc/h16-nope/run'));
    expect(r.code).toBe(EXIT_IO);
    expect(r.err).toMatch(/cannot create folder \/proc\/h16-nope/);
  }, 10_000);

  it('pretrain --out under /proc fails at once with exit 74, before building any data', async () => {
    const io = captureIo();
    const t0 = performance.now();
    expect(await pretrainCli(['--quick', '--out', '/proc/h16-nope/model'], io)).toBe(EXIT_IO);
    expect(io.stderr()).toMatch(/cannot create folder \/proc\/h16-nope/);
    expect(performance.now() - t0).toBeLessThan(5000);
  }, 10_000);

  it('--steps 0x2 and eval --count 100000000 are usage errors', async () => {
    const r = await train(args(join(work, 'hex')).map((a) => (a === '3' ? '0x2' : a)));
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/--steps must be an integer in \[1, 1000000\], got "0x2"/);
    const io = captureIo();
    expect(await evalCli(['--tasks', 'test', '--count', '100000000'], io, { domain })).toBe(2);
    expect(io.stderr()).toMatch(/--count must be an integer in \[1, 10000\]/);
  });
});
