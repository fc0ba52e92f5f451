// Kill-and-resume, as issue 16 asks: a training run (the real `npm run train` code, as a child process on
// the tiny model) is SIGKILLed again and again — half-way through a JSONL append or a checkpoint file
// (the child kills itself mid-write, leaving the torn bytes) and at random instants — and resumed each time
// with --resume. The finished run must equal an uninterrupted one bit for bit (adapter, optimizer moments,
// run state, every step's metrics), every JSONL file must parse line by line, and no temp or lock file
// may remain. The schedule comes from a fixed seed; each child is bounded in time.
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Rng } from '../../src/util/rng';
import { tinyModelWorkspace } from '../helpers/cli';

const ws = tinyModelWorkspace('kill-resume-');
const work = ws.work;

const STEPS = 6;
const args = (out: string) => [
  '--mode', 'rehearse', '--steps', String(STEPS), '--seed', '3', '--out', out, '--model', ws.modelDir, '--k', '2', '--prompts', '1',
  '--train-tasks', '3', '--eval-tasks', '1', '--eval-every', '2', '--lr', '0.05', '--max-turns', '1', '--max-act-tokens', '4',
  '--max-rehearse-tokens', '4', '--fidelity-tokens', '4', '--grounding-chars', '150', '--history-chars', '150', '--threads', '1',
];

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
}

/**
 * Runs the child; `killAtWrite` makes it kill itself mid-write; `killAfterSave` has the test kill it `ms` after
 * the child has saved a step past `from` (run.json in `dir`), so the instant lands inside a step of real work
 * however fast or loaded the machine is; `watchSaves` records the instant of each new save in `dir`.
 */
function child(
  argv: string[],
  o: { killAtWrite?: number; killAfterSave?: { dir: string; from: number; ms: number }; watchSaves?: { dir: string; at: number[] } } = {},
): Promise<Exit> {
  return new Promise((res) => {
    const p = spawn(process.execPath, ['--import', 'tsx', 'test/reliability/train-child.ts', ...argv], {
      env: { ...process.env, KILL_AT_WRITE: String(o.killAtWrite ?? 0) },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    p.stderr.on('data', (d) => (stderr += d));
    const timers: NodeJS.Timeout[] = [setTimeout(() => p.kill('SIGKILL'), 60_000)];
    // One watcher of the run folder's run.json: each new save is timed (watchSaves) and the first past `from`
    // arms the kill (killAfterSave).
    const { killAfterSave: k, watchSaves: w } = o;
    const dir = k?.dir ?? w?.dir;
    let seen = -1;
    let armed = false;
    const watch = dir
      ? setInterval(() => {
          const s = savedStep(dir);
          if (s <= seen) return;
          seen = s;
          w?.at.push(performance.now());
          if (k && !armed && s > k.from) {
            armed = true;
            timers.push(setTimeout(() => p.kill('SIGKILL'), k.ms));
          }
        }, 5)
      : undefined;
    p.on('exit', (code, signal) => {
      clearInterval(watch);
      timers.forEach(clearTimeout);
      res({ code, signal, stderr });
    });
  });
}

/** The step of the run's last saved state, -1 before the first save (or while run.json is being replaced). */
function savedStep(dir: string): number {
  try {
    return (JSON.parse(readFileSync(join(dir, 'run.json'), 'utf8')) as { step: number }).step;
  } catch {
    return -1;
  }
}

function walk(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(join(dir, e.name)) : [join(dir, e.name)]));
}

/** The last line of each step in a JSONL log (a replayed step appears twice), without wall times. */
function metricsByStep(out: string, file = 'metrics.jsonl'): Map<number, string> {
  const m = new Map<number, string>();
  for (const l of readFileSync(join(out, file), 'utf8').trim().split('\n')) {
    const { wallMs, ...rest } = JSON.parse(l) as { step: number; wallMs: number };
    void wallMs;
    m.set(rest.step, JSON.stringify(rest));
  }
  return m;
}

describe('kill and resume', () => {
  it('>= 10 SIGKILLs (mid-append, mid-checkpoint, random) resume to the bits of an uninterrupted run', async () => {
    const ref = join(work, 'ref');
    const saves: number[] = [];
    const whole = await child(args(ref), { watchSaves: { dir: ref, at: saves } });
    expect(whole.code, whole.stderr).toBe(0);
    // Random-instant kills are drawn within this run's shortest measured step (save to save, without startup)
    // and counted from a save the try itself made, so on a fast, idle machine and a loaded one alike they land
    // inside a step of real work and a try completes at most the step it was killed in.
    const gaps = saves.slice(1).map((t, j) => t - saves[j]);
    expect(gaps.length, 'the reference run saved too fast to be watched').toBeGreaterThanOrEqual(2);
    const stepMs = Math.min(...gaps);

    const out = join(work, 'killed');
    const rng = new Rng(20261201);
    const kinds: string[] = [];
    let resumed = 0;
    for (let i = 0; i < 24 && kinds.length < 12; i++) {
      const step = savedStep(out);
      if (step >= 0) resumed++;
      // Even tries: killed inside its n-th write (a step takes 7-8 writes: metrics, rollouts, eval, adapter,
      // optimizer, run.json), so a try completes at most one step. Odd tries: killed from outside at a random
      // instant inside the step after the try's first save, while there are steps enough left. Near the end only
      // early writes are hit, so the run cannot finish before the 12th kill; the clean resume after them does.
      const nearEnd = step >= STEPS - 1;
      const o = i % 2 === 1 && step <= STEPS - 3 ? { killAfterSave: { dir: out, from: step, ms: Math.floor(stepMs * rng.next()) } } : { killAtWrite: 1 + rng.int(nearEnd ? 6 : 9) };
      const r = await child([...args(out), ...(step >= 0 ? ['--resume'] : [])], o);
      if (o.killAfterSave !== undefined && r.signal !== 'SIGKILL') {
        // The instant came after the try had finished the whole run (the machine sped up by more than the
        // steps left): a clean exit, not a kill, and not counted as one. Nothing is left to resume, so the
        // killed run starts over from nothing; it must still end on the reference's bits.
        expect(r.code, r.stderr).toBe(0);
        rmSync(out, { recursive: true, force: true });
        continue;
      }
      expect(r.signal, `try ${i} was not killed: ${r.stderr}`).toBe('SIGKILL');
      kinds.push(o.killAtWrite ? `write #${o.killAtWrite} at step ${step}` : `${o.killAfterSave?.ms} ms after a save, from step ${step}`);
      // Between kills, whatever a reader finds must be readable: at most a torn last line, which it drops.
      for (const f of existsSync(out) ? walk(out).filter((f) => f.endsWith('.jsonl')) : []) {
        const lines = readFileSync(f, 'utf8').split('\n');
        lines.slice(0, -1).forEach((l) => expect(() => JSON.parse(l), `${f}: ${l.slice(0, 80)}`).not.toThrow());
      }
    }
    expect(kinds.length).toBeGreaterThanOrEqual(10);
    expect(resumed, kinds.join(', ')).toBeGreaterThanOrEqual(3);
    const last = await child([...args(out), ...(savedStep(out) >= 0 ? ['--resume'] : [])]);
    expect(last.code, last.stderr).toBe(0);

    for (const f of [`ckpt/${STEPS}/adapter/adapter_model.safetensors`, `ckpt/${STEPS}/optimizer.safetensors`, 'run.json']) {
      expect(Buffer.compare(readFileSync(join(out, f)), readFileSync(join(ref, f))), f).toBe(0);
    }
    expect(metricsByStep(out)).toEqual(metricsByStep(ref));
    expect(metricsByStep(out, 'eval.jsonl')).toEqual(metricsByStep(ref, 'eval.jsonl'));
    const files = walk(out);
    for (const f of files.filter((f) => f.endsWith('.jsonl'))) {
      const text = readFileSync(f, 'utf8');
      expect(text.endsWith('\n'), f).toBe(true);
      for (const l of text.trim().split('\n')) expect(() => JSON.parse(l), `${f}: ${l.slice(0, 80)}`).not.toThrow();
    }
    expect(files.filter((f) => f.endsWith('.tmp') || f.endsWith('.lock'))).toEqual([]);
  }, 240_000);
});
