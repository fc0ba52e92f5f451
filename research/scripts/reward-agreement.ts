// Does the reward that rehearsed episodes train on say what the real environment would say? (issue 46, the budget bar)
// For N training tasks × K sampled episodes in a rehearsing mode (rehearsal with recall, as dyna-fq8-recall and the
// lesson's world-rehearsal run rehearse; with no adapter every rehearsing mode samples the same), every episode is scored twice: by the judge it trains on (strict checklist,
// on the imagined trajectory) and by the verifier (its calls replayed on a fresh real database, τ²'s DB × COMMUNICATE).
// Beside them, K real-environment episodes of the same tasks at the same seed: how often the policy succeeds when the
// observations are real. Prints one JSON line: the judge-by-verifier table of the rehearsed episodes, the within-group
// agreement of their GRPO advantages (what the update sees), and success rates.
//   node --import tsx research/scripts/reward-agreement.ts [--tasks N] [--k K] [--seed S] [--mode M] [--model DIR] [--threads T]
import { parseArgs } from 'node:util';
import { loadWorldDomain } from '../../src/env/retail/node';
import { openBackend, openModel } from '../../src/cli/args';
import { rehearses, ROLLOUT_MODES, type RolloutMode } from '../../src/method/modes';
import { runRollouts } from '../../src/rollout/rollout';
import { rewardBy } from '../../src/rollout/reward-rule';

const { values: v } = parseArgs({
  options: {
    tasks: { type: 'string', default: '100' },
    k: { type: 'string', default: '4' },
    seed: { type: 'string', default: '1' },
    mode: { type: 'string', default: 'rehearse' },
    model: { type: 'string' },
    threads: { type: 'string', default: '1' },
  },
});
const mode = v.mode as RolloutMode;
if (!ROLLOUT_MODES.includes(mode) || !rehearses(mode)) throw new Error(`--mode must be a rehearsing mode, one of ${ROLLOUT_MODES.filter(rehearses).join(', ')}`);
const k = Number(v.k);
const seed = Number(v.seed);
const domain = loadWorldDomain('mini');
// Training tasks as a run of the lab's seed draws them (src/rl/grpo-config.ts splitTasks).
const tasks = domain.tasks.generate({ split: 'train', count: Number(v.tasks), seed });
const backend = await openBackend('cpu-fast', Number(v.threads));
const p = await openModel(v.model, backend);
// The lab's default limits on the mini world and training's sampling temperature.
const limits = { maxTurns: 12, maxActTokens: 96, maxRehearseTokens: 641 };
const scored: { task: string; judge: number; verifier: number }[] = [];
const policy = { model: p.model, tokenizer: p.tokenizer, adapter: null };
const t0 = performance.now();
await runRollouts(policy, domain, tasks, {
  mode, k, seed, limits, temperature: 1, kvReuse: true, recall: 'reference',
  reward: (ep, d) => {
    const judge = rewardBy('strict-checklist', ep, d);
    scored.push({ task: ep.task.id, judge, verifier: rewardBy('verifier', ep, d) });
    return judge;
  },
});
const real = await runRollouts(policy, domain, tasks, { mode: 'real', k, seed, limits, temperature: 1, kvReuse: true });
const wallS = (performance.now() - t0) / 1000;

// Judge-by-verifier counts (rewards are 1, 0, or -0.1 for an empty response: "pass" is 1).
const pass = (r: number) => r === 1;
const table = { bothPass: 0, judgeOnly: 0, verifierOnly: 0, bothFail: 0 };
for (const s of scored) table[pass(s.judge) ? (pass(s.verifier) ? 'bothPass' : 'judgeOnly') : pass(s.verifier) ? 'verifierOnly' : 'bothFail']++;
// Within each task's group of K, the GRPO advantage (reward minus the group mean) under each reward: the share of the
// groups the judge gives a gradient whose advantages point the way the verifier's do (cosine > 0), and the cosine
// summed over all groups (how much of the judge's gradient the verifier agrees with).
const groups = new Map<string, { judge: number[]; verifier: number[] }>();
for (const s of scored) {
  const g = groups.get(s.task) ?? { judge: [], verifier: [] };
  g.judge.push(s.judge);
  g.verifier.push(s.verifier);
  groups.set(s.task, g);
}
const centred = (xs: number[]) => {
  const m = xs.reduce((a, b) => a + b, 0) / xs.length;
  return xs.map((x) => x - m);
};
let judgeGroups = 0;
let agreeing = 0;
let opposed = 0;
let dot = 0;
let nj = 0;
let nv = 0;
for (const g of groups.values()) {
  const a = centred(g.judge);
  const b = centred(g.verifier);
  const d = a.reduce((s, x, i) => s + x * b[i], 0);
  const aa = a.reduce((s, x) => s + x * x, 0);
  const bb = b.reduce((s, x) => s + x * x, 0);
  dot += d;
  nj += aa;
  nv += bb;
  if (aa === 0) continue;
  judgeGroups++;
  if (d > 0) agreeing++;
  else if (d < 0) opposed++;
}
const rate = (xs: number[]) => xs.filter(pass).length / Math.max(1, xs.length);
console.log(
  JSON.stringify({
    mode, tasks: tasks.length, k, seed, model: v.model ?? 'models/default', episodes: scored.length,
    table,
    judgePrecision: table.bothPass / Math.max(1, table.bothPass + table.judgeOnly),
    judgeRecall: table.bothPass / Math.max(1, table.bothPass + table.verifierOnly),
    groupsWithJudgeSignal: judgeGroups, agreeing, opposed, orthogonal: judgeGroups - agreeing - opposed,
    advantageCosine: nj > 0 && nv > 0 ? dot / Math.sqrt(nj * nv) : null,
    success: { rehearsedJudge: rate(scored.map((s) => s.judge)), rehearsedVerifier: rate(scored.map((s) => s.verifier)), real: rate(real.rollouts.map((r) => r.reward)) },
    wallS,
  }),
);
backend.dispose();
