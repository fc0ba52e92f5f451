// The expectation in PREREGISTERED.md: the default run's own rollouts (session 20's five seeds; rollouts.jsonl is not
// committed, rerun research/scripts/lesson-grpo.sh to have it) under the baseline each run trained with (its run.json)
// and the other one. Usage: node --import tsx research/records/lesson-records/session22/baseline-shift.ts OUT
import { readFileSync } from 'node:fs';
import { computeAdvantages, type AdvantageRow } from '../../../../src/method/advantage';
import { BASELINES, readRecorded, setting } from '../../../../src/method/run-config';
for (const s of [1, 2, 3, 4, 5]) {
  const dir = `${process.argv[2] ?? 'runs/s20/lesson'}/real-s${s}`;
  const used = readRecorded(JSON.parse(readFileSync(`${dir}/run.json`, 'utf8')).config, setting('baseline')) as (typeof BASELINES)[number];
  const other = BASELINES.find((b) => b !== used)!;
  const L = readFileSync(`${dir}/rollouts.jsonl`, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  const bySteps = new Map<number, any[]>();
  for (const r of L) (bySteps.get(r.step) ?? bySteps.set(r.step, []).get(r.step)!).push(r);
  let dMu = 0, nMixed = 0, rel = 0, relN = 0, flips = 0, rowsN = 0;
  for (const rs of bySteps.values()) {
    const rows: AdvantageRow[] = rs.flatMap((r) => r.steps.map(() => ({ promptId: r.promptId, rolloutId: r.rolloutId, role: 'act' as const, reward: r.reward })));
    const a = computeAdvantages(rows, 'standard', used);
    const b = computeAdvantages(rows, 'standard', other);
    a.groups.forEach((g, i) => { if (Math.abs(g.baseline) > 1e-9 && Math.abs(g.baseline - 1) > 1e-9) { dMu += Math.abs(g.baseline - b.groups[i].baseline); nMixed++; } });
    let num = 0, den = 0;
    a.advantage.forEach((x, i) => { const y = b.advantage[i]!; num += Math.abs(x! - y); den += Math.abs(x!); if (Math.sign(x!) !== Math.sign(y) && x !== 0) flips++; rowsN++; });
    rel += num; relN += den;
  }
  console.log(`seed ${s}: mixed groups ${nMixed}, mean |Δbaseline| ${(dMu / nMixed).toFixed(3)}, Σ|ΔA|/Σ|A| ${(rel / relN).toFixed(3)}, sign flips ${flips} of ${rowsN} rows`);
}
