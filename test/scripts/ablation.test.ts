// `npm run ablation` and `npm run plots` on a tiny random-weight model (in-process; the retail domain shown
// with one tool so prompts fit): 2 trained configurations (+ the base policy) × 2 seeds × 2 steps on 3 held-out
// tasks. A simulated crash after step 1 of one run leaves it unfinished; the rerun skips the finished runs,
// resumes that one from its checkpoint, and aggregates all of them into the tables; a rerun with another
// budget on the same folder is refused; the plots command renders the run records to a PNG whose SVG carries
// the expected series. The private-rehearsal table runs its cells (base policy and that EnvACE run's adapter,
// N = 0 and 1, 2 seeds) into per-cell records, skips them on a rerun and pairs EnvACE with the base.
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ablationCli } from '../../research/scripts/ablation';
import { CHROMIUM, plotsCli } from '../../research/scripts/plots';
import { readCells, renderTtsSection, ttsCli, type TtsMeta } from '../../research/scripts/tts-table';
import { ABLATION_CONFIGS, emptyResultsDoc, renderAblation, summarize } from '../../research/ablation/grpo-ablation';
import { readAblationRuns } from '../../research/scripts/results';
import { tinyConfig, writeTinyModel } from '../fixtures/tiny-model';
import { calculateOnlyDomain as domain, captureIo as io } from '../helpers/cli';

const work = mkdtempSync(join(tmpdir(), 'ablation-script-'));
const out = join(work, 'records');
const results = join(work, 'results.md');
let modelDir: string;
beforeAll(async () => {
  modelDir = await writeTinyModel(tinyConfig({ maxPositionEmbeddings: 2048 }), 4);
  writeFileSync(results, emptyResultsDoc());
});
afterAll(() => {
  rmSync(work, { recursive: true, force: true });
  if (modelDir) rmSync(modelDir, { recursive: true, force: true });
});

const small = ['--max-turns', '1', '--max-act-tokens', '4', '--max-rehearse-tokens', '4', '--fidelity-tokens', '4', '--grounding-chars', '150', '--history-chars', '150', '--eval-limits', 'train', '--threads', '1'];
const args = () => [
  '--model', modelDir, '--out', out, '--results', results, '--configs', 'base,real,envace', '--steps', '2', '--seeds', '2', '--tasks', '3', '--train-tasks', '3',
  '--k', '2', '--prompts', '1', '--eval-every', '1', '--curve-tasks', '2', '--boot-reps', '200', '--world', 'retail', ...small,
];
const jsonl = (f: string) => readFileSync(f, 'utf8').trim().split('\n').map((l) => JSON.parse(l));

describe('npm run ablation: record folders, skip, resume, aggregation', () => {
  it('a crash leaves one run unfinished; the rerun skips the finished ones and resumes it', async () => {
    const first = io();
    const crash = (config: string, seed: number, step: number) => {
      if (config === 'envace' && seed === 1 && step === 1) throw new Error('simulated crash');
    };
    expect(await ablationCli(args(), first, { domain, afterStep: crash })).toBe(1);
    expect(first.stderr()).toMatch(/simulated crash/);
    for (const d of ['base-s0', 'real-s0', 'envace-s0', 'real-s1']) expect(existsSync(join(out, d, 'result.json')), d).toBe(true);
    expect(existsSync(join(out, 'envace-s1', 'result.json'))).toBe(false);
    expect(existsSync(join(out, 'envace-s1', 'lock'))).toBe(false);
    expect(JSON.parse(readFileSync(join(out, 'envace-s1', 'run.json'), 'utf8'))).toMatchObject({ step: 1, checkpoint: 'ckpt/1' });
    const before = statSync(join(out, 'envace-s0', 'result.json')).mtimeMs;

    const second = io();
    expect(await ablationCli(args(), second, { domain })).toBe(0);
    expect(second.stderr()).toMatch(/envace seed 0: finished, skipped/);
    expect(second.stderr()).toMatch(/base seed 0: finished, skipped/);
    expect(second.stderr()).toMatch(/EnvACE, role-wise, seed 1: resuming at step 1\/2/);
    expect(statSync(join(out, 'envace-s0', 'result.json')).mtimeMs).toBe(before);

    // The resumed run: each step once in its metrics, the curve at steps 1 and 2, a complete record.
    const metrics = jsonl(join(out, 'envace-s1', 'metrics.jsonl'));
    expect(metrics.map((m) => m.step)).toEqual([1, 2]);
    for (const m of metrics) expect(m.advantage.spread).toBeGreaterThanOrEqual(0);
    expect(jsonl(join(out, 'envace-s1', 'curve.jsonl')).map((p) => p.step)).toEqual([1, 2]);
    expect(jsonl(join(out, 'base-s0', 'curve.jsonl')).map((p) => [p.step, p.tasks])).toEqual([[0, 2]]);
    const rec = JSON.parse(readFileSync(join(out, 'envace-s1', 'result.json'), 'utf8'));
    expect(rec).toMatchObject({ config: 'envace', seed: 1, steps: 2 });
    expect(rec.perTask).toHaveLength(3);
    expect(rec.trainS).toBeGreaterThan(0);
    expect(rec.wallS).toBeCloseTo(rec.trainS + rec.curveS + rec.evalS, 6);

    const res = JSON.parse(second.stdout());
    expect(res.runs).toBe(5);
    expect(res.rows.map((r: { config: string; runs: number }) => [r.config, r.runs])).toEqual([['base', 1], ['real', 2], ['envace', 2]]);
    expect(res.pairs.map((p: { a: string; b: string }) => `${p.a}-${p.b}`)).toEqual(['real-base', 'envace-base', 'real-envace']);
    const doc = readFileSync(results, 'utf8');
    expect(doc).toMatch(/\| GRPO, real environment \| 2 \| [\d.]+( \[[\d.]+, [\d.]+\])? \| [-+\d.]+( \[[-+\d.]+, [-+\d.]+\])? \| (no|\*\*yes\*\*) \|/);
    expect(doc).toContain('| EnvACE, role-wise − base policy |');
    expect(doc).toMatch(/\| configuration \| seed 0 \| seed 1 \| mean \| max \|/);
    expect(doc).toContain('World `retail`');
    expect(doc).toContain('--world retail');
  });

  it('--table-only aggregates without running; another budget on the same folder is refused', async () => {
    const t = io();
    expect(await ablationCli([...args(), '--table-only', '--no-write'], t, { domain })).toBe(0);
    expect(JSON.parse(t.stdout()).runs).toBe(5);
    // npm run results re-renders the section from the records and the meta.json written beside them, byte for byte.
    const meta = JSON.parse(readFileSync(join(out, 'meta.json'), 'utf8'));
    const runs = readAblationRuns(out, meta.key);
    expect(runs).toHaveLength(5);
    expect(renderAblation(summarize(runs, ABLATION_CONFIGS, meta.bootstrap), meta) + '\n').toBe(readFileSync(join(out, 'table.md'), 'utf8'));
    expect(t.stderr()).not.toMatch(/starting|resuming/);
    // --pilot over the same records: nothing to run, the learning curve and the measured minutes per seed.
    const p = io();
    expect(await ablationCli([...args(), '--pilot'], p, { domain })).toBe(0);
    const pilot = JSON.parse(p.stdout()).pilot;
    expect(pilot.envace.curve.map((x: { step: number; seeds: number }) => [x.step, x.seeds])).toEqual([[1, 2], [2, 2]]);
    expect(pilot.envace.stepS).toBeGreaterThan(0);
    expect(pilot.envace.minutesPerSeed).toBeGreaterThan(0);
    expect(p.stderr()).toMatch(/EnvACE, role-wise: @1 [\d.]+%  @2 [\d.]+%; [\d.]+ s\/step/);
    // --estimate: one step per trained mode and one evaluation, projected minutes; nothing written.
    const e = io();
    expect(await ablationCli([...args(), '--configs', 'base,envace', '--estimate'], e, { domain })).toBe(0);
    const est = JSON.parse(e.stdout());
    expect(Object.keys(est.stepS)).toEqual(['rehearse']);
    expect(est.minutesPerConfigSeed.envace).toBeGreaterThan(0);
    const other = io();
    expect(await ablationCli([...args(), '--k', '3'], other, { domain })).toBe(2);
    expect(other.stderr()).toMatch(/holds a finished run of another budget/);
  });

  it('npm run plots: a PNG (and its SVG) with one series per configuration and panel', async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is required for the plots test`);
    const png = join(work, 'fig', 'curves.png');
    const t = io();
    expect(await plotsCli([out, '--out', png, '--title', 'tiny ablation'], t)).toBe(0);
    const bytes = readFileSync(png);
    expect([...bytes.subarray(0, 8)]).toEqual([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    expect(bytes.readUInt32BE(16)).toBe(1200); // IHDR width: 3 panels of 400 px
    const svg = readFileSync(png.replace(/\.png$/, '.svg'), 'utf8');
    const series = [...svg.matchAll(/<g class="panel" data-panel="([^"]+)">([\s\S]*?)<\/g>/g)].map((m) => [m[1], [...m[2].matchAll(/class="series" data-config="([^"]+)" data-points="(\d+)"/g)].map((s) => `${s[1]}:${s[2]}`)]);
    expect(Object.fromEntries(series)).toEqual({
      // Held-out success: step 0 (the base policy's evaluation), 1 and 2.
      success: ['base:1', 'real:3', 'envace:3'],
      'train-reward': ['real:2', 'envace:2'],
      spread: ['real:2', 'envace:2'],
      'fidelity-exact': ['base:1', 'real:3', 'envace:3'],
      'fidelity-f1': ['base:1', 'real:3', 'envace:3'],
      'fidelity-error': ['base:1', 'real:3', 'envace:3'],
    });
    expect(svg).toMatch(/EnvACE, role-wise \(2 seeds\)/);
    const res = JSON.parse(t.stdout());
    expect(res.fidelitySource).toBe('held-out');
    expect(res.panels.find((p: { panel: string; config: string }) => p.panel === 'success' && p.config === 'envace').steps).toEqual([0, 1, 2]);
  });

  it('npm run plots: usage errors', async () => {
    const t = io();
    expect(await plotsCli([], t)).toBe(2);
    expect(t.stderr()).toMatch(/give one records folder/);
    const u = io();
    expect(await plotsCli([join(work, 'nope')], u)).toBe(2);
    expect(u.stderr()).toMatch(/no such records folder/);
  });

  it('npm run tts-table: per-cell records, skip on rerun, paired differences to N = 0 and to the base policy', async () => {
    const ttsOut = join(work, 'tts');
    const targs = [
      '--model', modelDir, '--adapter', join(out, 'envace-s0'), '--out', ttsOut, '--results', results, '--world', 'retail', '--tasks', '2', '--seeds', '2', '--ns', '0,1',
      '--modes', 'parallel', '--max-turns', '1', '--max-act-tokens', '4', '--max-rehearse-tokens', '4', '--max-eval-tokens', '4', '--grounding-chars', '150',
      '--history-chars', '150', '--threads', '1', '--boot-reps', '200',
    ];
    const t = io();
    expect(await ttsCli(targs, t, { domain })).toBe(0);
    const cells = ['base-none-n0', 'base-parallel-n1', 'envace-none-n0', 'envace-parallel-n1'].flatMap((c) => [0, 1].map((s) => `${c}-s${s}.json`));
    for (const c of cells) expect(existsSync(join(ttsOut, 'cells', c)), c).toBe(true);
    const cell = JSON.parse(readFileSync(join(ttsOut, 'cells', 'envace-parallel-n1-s1.json'), 'utf8'));
    expect(cell).toMatchObject({ policy: 'envace', mode: 'parallel', n: 1, seed: 1, tasks: 2 });
    expect(cell.perTask).toHaveLength(2);
    const doc = readFileSync(results, 'utf8');
    expect(doc).toMatch(/\| base policy \| parallel \| 1 \| 2 \| [\d.]+( \[[\d.]+, [\d.]+\])? \| [-+\d.]+( \[[-+\d.]+, [-+\d.]+\])? \| (no|\*\*yes\*\*) \| – \| – \|/);
    expect(doc).toMatch(/\| EnvACE adapter \| parallel \| 1 \| 2 \| [\d.]+( \[[\d.]+, [\d.]+\])? \| [-+\d.]+( \[[-+\d.]+, [-+\d.]+\])? \| (no|\*\*yes\*\*) \| [-+\d.]+( \[[-+\d.]+, [-+\d.]+\])? \| (no|\*\*yes\*\*) \|/);
    expect(doc).toContain('World `retail`'); // the ablation section is kept
    expect(doc).toContain('world `retail`');
    // The same from the cells and meta.json alone (npm run results), with the note the run was given.
    const meta = JSON.parse(readFileSync(join(ttsOut, 'meta.json'), 'utf8')) as TtsMeta;
    expect(meta.command).toContain('--ns 0,1');
    expect(renderTtsSection(readCells(ttsOut), meta) + '\n').toBe(readFileSync(join(ttsOut, 'tts-table.md'), 'utf8'));

    const again = io();
    expect(await ttsCli(targs, again, { domain })).toBe(0);
    expect(again.stderr().match(/finished, skipped/g)).toHaveLength(8);
  });
});
