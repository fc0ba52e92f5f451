// The greedy-member runs' groups, from each run's rollouts.jsonl (not committed: rerun
// `GREEDY=1 bash scripts/lesson-grpo.sh OUT 1 2 3 4 5` to have them). Usage: node greedy-groups.cjs OUT/real-s1 ...
// Rollout ":0" of each group is the greedy one (src/rollout/rollout.ts greedyMember).
const fs = require('fs');
const rows = [];
for (const dir of process.argv.slice(2)) {
  const rs = fs.readFileSync(`${dir}/rollouts.jsonl`, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  const groups = new Map();
  for (const r of rs) {
    const k = `${r.step}|${r.promptId}`;
    if (!groups.has(k)) groups.set(k, []);
    groups.get(k).push(r);
  }
  let spread = 0, greedyFails = 0, greedyWins = 0, greedySuccess = 0;
  for (const g of groups.values()) {
    const greedy = g.find((r) => r.rolloutId.endsWith(':0')).reward;
    const samples = g.filter((r) => !r.rolloutId.endsWith(':0')).map((r) => r.reward);
    const all = g.map((r) => r.reward);
    if (Math.max(...all) !== Math.min(...all)) spread++;
    if (greedy === 0 && samples.includes(1)) greedyFails++;
    if (greedy === 1 && samples.includes(0)) greedyWins++;
    if (greedy === 1) greedySuccess++;
  }
  rows.push({ run: dir, groups: groups.size, spread, greedyFailsASampleSucceeds: greedyFails, greedySucceedsASampleFails: greedyWins, greedySuccess: greedySuccess / groups.size });
}
console.log(JSON.stringify(rows, null, 1));
