// The run settings' table is the one place a setting is declared: a row added to it (here a dummy one, in a
// copy of the table) must appear in every artefact derived from it with no other edit. If a derivation were
// still written by hand somewhere, the dummy row would be missing there and this test would fail.
import { describe, expect, it } from 'vitest';
import { helpText, parseFlags } from '../../src/cli/args';
import { readRunFlags, resumeDiffs, runFlags } from '../../src/cli/run-flags';
import { TRAIN_FLAGS } from '../../src/cli/train';
import { RUN_SETTINGS, recordConfig, readRecorded, setting, type RunSetting } from '../../src/method/run-config';
import { DEFAULT_LIMITS, grpoRunConfig, runConfigOf } from '../../src/rl/grpo-config';
import { configSchema } from '../../src/rl/run-schema';
import { MIN_ACT_TOKENS } from '../../src/rollout/budget';
import { labApplies, labRequest, labRequestOf } from '../../src/method/run-config';
import { defaultsOf, parseSettings, settingsQuery, type Settings } from '../../src/ui/settings.svelte';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const source = (f: string) => readFileSync(join(ROOT, f), 'utf8');

const dummy = {
  name: 'dummyCoef', kind: { type: 'number', min: 0, max: 2 }, default: 0, help: 'a dummy coefficient of the test',
  cli: { flag: 'dummy-coef', arg: 'C' }, lab: { key: 'dc' }, record: { when: 'changed' }, resume: 'fixed',
} as const satisfies RunSetting;
const table: readonly RunSetting[] = [...RUN_SETTINGS, dummy];
const base = { mode: 'real', steps: 2, seed: 0 };

describe('a new run setting is one row', () => {
  it('appears in the train CLI help and is parsed by its kind and range', () => {
    const help = helpText('usage', runFlags(table));
    expect(help).toMatch(/--dummy-coef C +a dummy coefficient of the test, in \[0, 2\] \(default: 0\)/);
    expect(helpText('usage', runFlags())).not.toContain('dummy');
    expect(readRunFlags(parseFlags(['--dummy-coef', '0.5'], runFlags(table)), table)).toEqual({ dummyCoef: 0.5 });
    expect(() => readRunFlags(parseFlags(['--dummy-coef', '3'], runFlags(table)), table)).toThrow(/--dummy-coef must be in \[0, 2\], got 3/);
  });

  it('is recorded in run.json when it differs from its default, and the checkpoint schema checks it', () => {
    const on = runConfigOf({ ...base, dummyCoef: 0.5 }, table);
    expect(on.dummyCoef).toBe(0.5);
    // At its default it is not written, so a run.json from before the row reads the same.
    expect(runConfigOf(base, table)).toEqual(runConfigOf(base, RUN_SETTINGS));
    expect(configSchema(table).safeParse(on).success).toBe(true);
    expect(configSchema(table).safeParse({ ...on, dummyCoef: -1 }).success).toBe(false);
    // The table without the row lets the key pass through (a newer run's extra setting still opens).
    expect(configSchema().safeParse({ ...on, dummyCoef: -1 }).success).toBe(true);
    expect(readRecorded(runConfigOf(base, table), dummy, table)).toBe(0);
  });

  it("is a lab setting: its URL key round-trips, clamped to its range, and the lab's request carries it to run.json", () => {
    expect(defaultsOf(table)).toMatchObject({ dummyCoef: 0 });
    const s = { ...defaultsOf(table), dummyCoef: 1.5 } as Settings;
    const q = settingsQuery(s, table);
    expect(q).toBe('?dc=1.5');
    expect(parseSettings(q, table)).toEqual(s);
    expect(parseSettings('?dc=9', table)).toMatchObject({ dummyCoef: 2 });
    expect(settingsQuery(parseSettings('?dc=1.5'), RUN_SETTINGS)).toBe('');
    // The page's request, across the worker boundary (a structured clone), into the run's configuration.
    const req = structuredClone(labRequestOf(parseSettings(q, table) as unknown as Record<string, unknown>, table));
    expect(req.dummyCoef).toBe(1.5);
    // The worker resolves the budgets the page leaves at 0 (= measured) before the run (workers/lab/lab.ts trainStart).
    const config = runConfigOf({ ...labRequest(req, {}, table), maxActTokens: 96, maxRehearseTokens: 640, checkpointEvery: 1 }, table);
    expect(config.dummyCoef).toBe(1.5);
  });

  it('is refused by --resume when it differs from the saved run', () => {
    const v = parseFlags(['--dummy-coef', '0.5'], runFlags(table));
    const saved = runConfigOf(base, table);
    expect(resumeDiffs(v, runConfigOf({ ...base, dummyCoef: 0.5 }, table), saved, table)).toEqual(['--dummy-coef 0.5 (the run has dummyCoef = 0)']);
    expect(resumeDiffs(v, runConfigOf({ ...base, dummyCoef: 0 }, table), saved, table)).toEqual([]);
    // A row a resume may change is not compared.
    const free = [...RUN_SETTINGS, { ...dummy, resume: 'free' }] as readonly RunSetting[];
    expect(resumeDiffs(v, runConfigOf({ ...base, dummyCoef: 0.5 }, free), saved, free)).toEqual([]);
  });
});

describe('the table against what it replaced', () => {
  it('every setting flag of the train CLI is a row, and every row with a flag is a train CLI flag', () => {
    for (const r of RUN_SETTINGS) if ('cli' in r) expect(TRAIN_FLAGS[r.cli.flag], r.name).toBeDefined();
  });

  it('the Act budget default is the rollout budget floor', () => {
    expect(DEFAULT_LIMITS.maxActTokens).toBe(MIN_ACT_TOKENS);
  });

  it('a value a run recorded only when changed reads back as its default, a derived one from the others', () => {
    const c = grpoRunConfig({ mode: 'rehearse', steps: 1, seed: 0, rank: 4 }) as unknown as Record<string, unknown>;
    expect(c.topP).toBeUndefined();
    expect(readRecorded(c, setting('topP'))).toBe(1);
    expect(readRecorded(c, setting('alpha'))).toBe(8);
    expect(readRecorded(c, setting('reward'))).toBe('checklist');
    expect(readRecorded({ ...c, mode: 'real' }, setting('reward'))).toBe('verifier');
    // The grouping is recorded as the mode forces it.
    expect(recordConfig({ mode: 'frozen-simulator', steps: 1, seed: 0, groups: 'pooled' }).groups).toBe('standard');
  });

  it('a run.json written before the table (nested limits, lora, rehearsePrompt) passes the derived schema, and a wrong type does not', () => {
    const old = {
      mode: 'rehearse', groups: 'role-wise', baseline: 'row-weighted', steps: 2, promptsPerStep: 3, k: 2, seed: 3,
      limits: { maxTurns: 2, maxActTokens: 6, maxRehearseTokens: 24 }, rehearsePrompt: {}, temperature: 1, kvReuse: true,
      lora: { rank: 2, alpha: 4 }, lr: 0.01, updateEpochs: 1, taskSampling: 'uniform', klCoef: 0, maxBatchTokens: 4096, evalEvery: 0, evalFidelityTokens: 0, checkpointEvery: 1,
    };
    expect(configSchema().safeParse(old).success).toBe(true);
    expect(configSchema().safeParse({ ...old, lora: { alpha: 4 } }).success).toBe(false);
    expect(configSchema().safeParse({ ...old, k: '2' }).success).toBe(false);
    expect(configSchema().safeParse({ ...old, limits: undefined }).success).toBe(false);
  });
});

describe("a lab setting's path from its control to the optimizer passes through no file twice", () => {
  // The path of a value, hop by hop, each hop a function in one file: the control's URL state (parseSettings),
  // the page's request (labRequestOf), the worker's entry (trainStart: measured budgets for 0), its training
  // (Training.start, which calls grpoRunConfig with the request whole), the run configuration (grpoRunConfig),
  // the run (GrpoRun.open, which hands lr and the loss settings to the Trainer), the optimizer. Before the
  // table, the value was copied field by field in each hop (Settings -> TrainRequest -> TrainOptions ->
  // GrpoRunConfig) and checked against restated lists back in earlier files. The static check: the hops are
  // defined in distinct files, in this order, and each hop hands the value on whole rather than field by field.
  const HOPS: [fn: RegExp, file: string][] = [
    [/export function parseSettings\(/, 'src/ui/settings.svelte.ts'],
    [/export function labRequestOf\(/, 'src/method/run-config.ts'],
    [/trainStart\(req: TrainRequest/, 'workers/lab/lab.ts'],
    [/async start\(/, 'workers/lab/training.ts'],
    [/export function grpoRunConfig\(/, 'src/rl/grpo-config.ts'],
    [/static async open\(/, 'src/rl/run.ts'],
    [/export class Trainer\b/, 'src/train/trainer.ts'],
  ];

  it('each hop is defined in one file, and no file is visited twice', () => {
    const files = HOPS.map(([, f]) => f);
    expect(new Set(files).size).toBe(files.length);
    for (const [fn, f] of HOPS) expect(source(f), `${fn} in ${f}`).toMatch(fn);
  });

  it('the page and the worker hand the request on whole, never setting by setting', () => {
    // The page builds its request from every lab row of the table; the worker passes it to grpoRunConfig spread.
    expect(source('src/ui/lab.svelte.ts')).toMatch(/const req = labRequestOf\(settings\b/);
    expect(source('workers/lab/training.ts')).toMatch(/grpoRunConfig\(\{ \.\.\.req, checkpointEvery: 1 \}\)/);
    // The protocol's request and the lab's settings are the table's types, not restated ones.
    expect(source('src/worker-protocol.ts')).toMatch(/export type TrainRequest = LabRequest;/);
    expect(source('src/ui/settings.svelte.ts')).toMatch(/export type Settings = PageSettings & LabRunValues;/);
    // No hop restates a setting's choices: the lists live in the table (and the protocol re-exports its own).
    for (const f of ['src/ui/settings.svelte.ts', 'src/worker-protocol.ts', 'workers/lab/training.ts', 'src/rl/grpo-config.ts', 'src/rl/checkpoint.ts', 'src/cli/train.ts'])
      expect(source(f), f).not.toMatch(/'row-weighted'|'seq-mean-token-mean'|'with-call'|\['uniform', 'signal'\]/);
  });

  it("the optimizer reads the table's lr: a value from the URL arrives in the run's configuration unchanged", () => {
    const s = parseSettings('?lr=0.0005&tmode=rehearse');
    const config = grpoRunConfig({ ...labRequest(structuredClone(labRequestOf(s as unknown as Record<string, unknown>))), maxActTokens: 96, maxRehearseTokens: 640, checkpointEvery: 1 });
    expect(config.lr).toBe(5e-4);
    expect(config.mode).toBe('rehearse');
  });
});

describe("the rehearsing modes' real-interaction budget and recall are lab settings (issue 46: the lab teaches what is found)", () => {
  const req = (q: string) => structuredClone(labRequestOf(parseSettings(q) as unknown as Record<string, unknown>));

  it('their URL keys round-trip, clamped to their ranges, and are absent from a default URL', () => {
    const s = parseSettings('?tmode=rehearse&real=1&recall=reference');
    expect(s).toMatchObject({ mode: 'rehearse', realPrompts: 1, rehearsalRecall: 'reference' });
    expect(parseSettings(settingsQuery(s))).toEqual(s);
    expect(settingsQuery(s)).toBe('?tmode=rehearse&real=1&recall=reference');
    expect(defaultsOf()).toMatchObject({ realPrompts: 0, rehearsalRecall: 'none' });
    expect(parseSettings('?real=99&recall=everything')).toMatchObject({ realPrompts: 16, rehearsalRecall: 'none' });
    expect(parseSettings('?real=-1').realPrompts).toBe(0);
  });

  it("in a rehearsing mode the lab's request carries them to run.json, as the CLI's --real-episodes and --recall do", () => {
    const r = req('?tmode=rehearse&steps=40&k=4&prompts=4&real=1&recall=reference&reward=strict-checklist');
    expect(r).toMatchObject({ realPrompts: 1, rehearsalRecall: 'reference' });
    const config = grpoRunConfig({ ...labRequest(r), maxActTokens: 96, maxRehearseTokens: 640, checkpointEvery: 1 });
    expect(config.realPrompts).toBe(1);
    expect(config.rehearsalRecall).toBe('reference');
    // The same run from the CLI: --real-episodes 160 over 40 steps × K 4 is one real prompt per step.
    const cli = readRunFlags(parseFlags(['--real-episodes', '160', '--recall', 'reference', '--steps', '40', '--k', '4'], runFlags()));
    expect(cli).toMatchObject({ realPrompts: 1, rehearsalRecall: 'reference' });
    expect(recordConfig({ mode: 'rehearse', steps: 40, seed: 1, ...cli })).toMatchObject({ realPrompts: 1, rehearsalRecall: 'reference' });
  });

  it('in real mode they do not apply: the request carries their defaults (a run would refuse the values), and run.json omits them', () => {
    // A value kept from a rehearsing run (or copied by a comparison run in another mode) must not reach a real-mode run.
    const r = req('?tmode=real&real=1&recall=reference');
    expect(r).toMatchObject({ mode: 'real', realPrompts: 0, rehearsalRecall: 'none' });
    const config = grpoRunConfig({ ...labRequest(r), maxActTokens: 96, maxRehearseTokens: 640, checkpointEvery: 1 }) as unknown as Record<string, unknown>;
    expect(config.realPrompts).toBeUndefined();
    expect(config.rehearsalRecall).toBeUndefined();
    expect(labApplies(setting('realPrompts'), { mode: 'real' })).toBe(false);
    expect(labApplies(setting('rehearsalRecall'), { mode: 'frozen-simulator' })).toBe(true);
    // A row without appliesIf always applies.
    expect(labApplies(setting('lr'), { mode: 'real' })).toBe(true);
  });

  it('a run kept before they were lab settings reads as the run it was: no real prompts, no recall', () => {
    const old = { mode: 'rehearse', steps: 2, seed: 1 };
    expect(labRequest(old)).toMatchObject({ realPrompts: 0, rehearsalRecall: 'none' });
  });
});
