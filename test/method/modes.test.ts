// The mode table (src/method/modes.ts) through every consumer: each mode of the table is accepted by the
// train CLI's flag parser, the run configuration the CLI and the lab's worker build, the page's settings
// parser, mode list and run labels, the checkpoint schema; and a real one-step GRPO run of each mode (tiny
// random-weight model) rolls out, routes its rows to the adapters the table names, checkpoints, and reads
// its adapters back as the table says. A mode added to the table runs through all of these untouched; and
// no file outside the table names a mode to decide what it does (the last test).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { trainCli, TRAIN_USAGE } from '../../src/cli/train';
import type { Backend } from '../../src/engine/backend';
import type { Task } from '../../src/env/domain';
import { formatCall } from '../../src/env/toolcall';
import { effectiveGroups, hasRehearseAdapter, isRolloutMode, MODES, ROLLOUT_MODES, trainedRoles } from '../../src/method/modes';
import type { Qwen3Model } from '../../src/model/qwen3';
import { Tokenizer } from '../../src/model/tokenizer';
import { loadAdapters, parseRunState } from '../../src/rl/checkpoint';
import { grpoRunConfig } from '../../src/rl/grpo-config';
import { GrpoRun } from '../../src/rl/run';
import { MemoryStore } from '../../src/rl/store';
import { runLabel } from '../../src/ui/compare';
import { parseSettings } from '../../src/ui/settings.svelte';
import type { TrainRequest } from '../../src/worker-protocol';
import { loadTinyPolicy } from '../fixtures/tiny-model';
import { calculateOnlyDomain, captureIo } from '../helpers/cli';

const ROOT = join(import.meta.dirname, '../..');

describe('the mode table', () => {
  it('is well-formed: every route trains a known role once, forced groupings only where Act alone trains', () => {
    expect(ROLLOUT_MODES.length).toBeGreaterThan(0);
    for (const m of ROLLOUT_MODES) {
      const spec = MODES[m];
      const roles = trainedRoles(m);
      expect(new Set(roles).size, m).toBe(roles.length);
      expect(roles, m).toContain('act');
      for (const r of roles) expect(['act', 'rehearse'], m).toContain(r);
      // A second adapter exists exactly when a route trains one; the environment writes no Rehearse rows to train.
      expect(spec.routes.some((r) => r.target === 'rehearse'), m).toBe(hasRehearseAdapter(m));
      if (spec.simulator === 'environment' || spec.simulator === 'base') expect(roles, m).toEqual(['act']);
      if (roles.length === 1) expect(spec.groups, m).toBe('standard');
      for (const field of [spec.name, spec.label, spec.description]) expect(field.length, m).toBeGreaterThan(0);
    }
    expect(new Set(ROLLOUT_MODES.map((m) => MODES[m].name)).size).toBe(ROLLOUT_MODES.length);
    expect(isRolloutMode('nonsense')).toBe(false);
    expect(isRolloutMode('toString')).toBe(false);
  });

  it('every mode passes the train CLI parser (usage and help list it; a bad one is a usage error)', async () => {
    for (const m of ROLLOUT_MODES) {
      expect(TRAIN_USAGE).toContain(m);
      const io = captureIo();
      // Everything but --out: the parser accepts the mode and stops at the next missing flag.
      expect(await trainCli(['--mode', m, '--steps', '1'], io), m).toBe(2);
      expect(io.stderr(), m).toContain('--out DIR is required');
    }
    const io = captureIo();
    expect(await trainCli(['--mode', 'nonsense', '--steps', '1', '--out', 'x'], io)).toBe(2);
    expect(io.stderr()).toContain('--mode');
    const help = captureIo();
    await trainCli(['--help'], help);
    for (const m of ROLLOUT_MODES) expect(help.stdout()).toContain(MODES[m].description);
  });

  it('every mode passes the run configuration (CLI and worker), the checkpoint schema and the page', () => {
    for (const m of ROLLOUT_MODES) {
      const c = grpoRunConfig({ mode: m, steps: 1, seed: 0, groups: 'pooled' });
      expect(c.groups, m).toBe(effectiveGroups(m, 'pooled'));
      const state = { version: 1, config: c, step: 0, rng: { seed: 1, step: 0 }, checkpoint: null };
      expect(parseRunState(new TextEncoder().encode(JSON.stringify(state))).config.mode).toBe(m);
      expect(parseSettings(`?tmode=${m}`).mode, m).toBe(m);
      const req = { mode: m, groups: 'role-wise', seed: 3, steps: 2 } as TrainRequest;
      expect(runLabel(req)).toContain(MODES[m].name);
    }
    expect(parseSettings('?tmode=nonsense').mode).toBe(parseSettings('').mode);
    // The page's mode lists are the table's, not lists of their own.
    for (const f of ['src/ui/panels/TrainPanel.svelte', 'src/ui/panels/CompareRuns.svelte'])
      expect(readFileSync(join(ROOT, f), 'utf8'), f).toMatch(/#each ROLLOUT_MODES as m/);
  });

  describe('a one-step run of every mode', () => {
    const domain = calculateOnlyDomain;
    const calc = { name: 'calculate', arguments: { expression: '2+2' } };
    const train: Task[] = ['Hi.', '2+2?'].map((m, i) => ({ id: `t${i}`, userMessages: [m], referenceActions: [calc], facts: [], checklist: [] }));
    // Task t1 opens with a scripted call, so a random-weight policy has something to rehearse; t0's Act turns
    // are generated. Both tasks are in the step, and rollout 0 of each wins, so every routed role has advantages.
    const hooks = { reward: (ep: { rolloutId: string }) => (ep.rolloutId.endsWith(':0') ? 1 : 0), actScript: (t: Task, turn: number) => (t.id === 't1' && turn === 0 ? formatCall(calc) : undefined) };
    let backend: Backend;
    let model: Qwen3Model;
    let tok: Tokenizer;
    beforeAll(async () => ({ backend, model, tok } = await loadTinyPolicy(21)));
    afterAll(() => backend?.dispose());

    it.each(ROLLOUT_MODES)('%s: rollouts, the routed update, a checkpoint and its adapters read back', async (m) => {
      const store = new MemoryStore();
      const config = grpoRunConfig({ mode: m, steps: 1, seed: 3, k: 2, promptsPerStep: 2, rank: 2, lr: 1e-2, maxTurns: 2, maxActTokens: 4, maxRehearseTokens: 4 });
      const run = await GrpoRun.open(model, tok, domain, { train }, store, config, hooks);
      expect(run.rehearseAdapter !== null).toBe(hasRehearseAdapter(m));
      const metrics = await run.trainStep();
      run.free();
      const routes = MODES[m].routes.map((r) => r.target);
      expect(metrics.updates.map((u) => u.target)).toEqual(routes);
      expect(metrics.rollouts.rows.rehearse > 0).toBe(MODES[m].simulator !== 'environment');
      const loaded = await loadAdapters(store, backend, model.config);
      expect(loaded.mode).toBe(m);
      expect(loaded.rehearse !== null).toBe(hasRehearseAdapter(m));
      loaded.act.free(backend);
      loaded.rehearse?.free(backend);
    });
  });

  it('no file outside the table names a mode to decide what the mode does', () => {
    // Places that name a mode as a choice, not a switch: experiment arms (and the claims over them, and a probe of one arm's
    // gradients), the lesson's steps, the default comparison, the plots' colours, private rehearsal picking the mode its adapters make.
    const CHOICES = new Set(['research/ablation/grpo-ablation.ts', 'research/scripts/results.ts', 'research/scripts/gradient-alignment.ts', 'src/ui/lesson.ts', 'src/ui/compare.ts', 'src/ui/panels/CompareRuns.svelte', 'src/ui/panels/LessonStrip.svelte', 'research/scripts/plots.ts', 'src/eval/rehearsal-phases.ts']);
    const files = (d: string): string[] =>
      readdirSync(join(ROOT, d)).flatMap((n) => (statSync(join(ROOT, d, n)).isDirectory() ? files(join(d, n)) : /\.(ts|svelte)$/.test(n) ? [join(d, n)] : []));
    const named = ['src', 'workers', 'scripts', 'research'].flatMap(files).filter((f) => f !== 'src/method/modes.ts' && !CHOICES.has(f))
      .filter((f) => ROLLOUT_MODES.filter((m) => m !== 'rehearse' && m !== 'real').some((m) => readFileSync(join(ROOT, f), 'utf8').includes(`'${m}'`)));
    expect(named).toEqual([]);
  });
});
