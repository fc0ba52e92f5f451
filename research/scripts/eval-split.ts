// One held-out evaluation as the lesson runs it, timed by part: the greedy real-environment episodes, then the
// rehearsal fidelity check (all reference calls of the first F tasks). What research/records/2026-12-06-lesson-side-by-side
// measured before choosing side-by-side runs: the same evaluation at 1 and at 2 cpu-fast threads, and two one-thread
// processes at once. Prints one JSON line: seconds of each part, held-out success and fidelity (exact).
//   node --import tsx research/scripts/eval-split.ts [--threads T] [--tasks N] [--fidelity-tasks F] [--model DIR]
import { parseArgs } from 'node:util';
import { HELD_OUT_TASK_SEED } from '../../src/env/domain';
import { loadWorldDomain } from '../../src/env/retail/node';
import { openBackend, openModel } from '../../src/cli/args';
import { evalRehearsalFidelity } from '../../src/rollout/fidelity-eval';
import { runRollouts } from '../../src/rollout/rollout';

const { values: v } = parseArgs({ options: { threads: { type: 'string', default: '1' }, tasks: { type: 'string', default: '100' }, 'fidelity-tasks': { type: 'string' }, model: { type: 'string' } } });
const n = Number(v.tasks);
const domain = loadWorldDomain('mini');
const tasks = domain.tasks.generate({ split: 'test', count: n, seed: HELD_OUT_TASK_SEED });
const backend = await openBackend('cpu-fast', Number(v.threads));
const p = await openModel(v.model, backend);
// The lab's default limits on the mini world (what the lesson's runs use).
const limits = { maxTurns: 12, maxActTokens: 96, maxRehearseTokens: 641 };
let t0 = performance.now();
const b = await runRollouts({ model: p.model, tokenizer: p.tokenizer, adapter: null }, domain, tasks, { mode: 'real', k: 1, seed: 1, limits, temperature: 0, kvReuse: true });
const episodesS = (performance.now() - t0) / 1000;
t0 = performance.now();
const f = await evalRehearsalFidelity(p.model, p.tokenizer, null, domain, tasks.slice(0, Number(v['fidelity-tasks'] ?? n)), { maxRehearseTokens: limits.maxRehearseTokens });
const fidelityS = (performance.now() - t0) / 1000;
console.log(JSON.stringify({ threads: Number(v.threads), tasks: n, episodesS, fidelityS, success: b.rollouts.filter((r) => r.reward === 1).length / n, fidelityExact: f.summary.exact, fidelityCalls: f.summary.steps }));
backend.dispose();
