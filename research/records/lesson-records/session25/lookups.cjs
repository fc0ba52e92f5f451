// Session 25: does GRPO unlearn the careless demonstrator's lookups habit? For each run folder given, over its
// training rollouts (rollouts.jsonl), the sampled final replies that owed what a lookup found — the tracking number
// of a delivered or processed order, the status that stops a cancellation, return, exchange or item change, the
// account's orders when an order is not found — counted in each half of the run: how many stated it, and how many of
// those earned the reward (and of those that left it out).
// usage: node research/records/lesson-records/session25/lookups.cjs RUN_DIR...   (record: lookups.json)
const fs = require('fs');
const out = {};
for (const dir of process.argv.slice(2)) {
  const c = {};
  const add = (k, stated, reward) => {
    c[k] ??= { replies: 0, stated: 0, statedPaid: 0, omittedPaid: 0 };
    c[k].replies++;
    if (stated) { c[k].stated++; c[k].statedPaid += reward; } else c[k].omittedPaid += reward;
  };
  const rollouts = fs.readFileSync(`${dir}/rollouts.jsonl`, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
  const mid = Math.max(...rollouts.map((r) => r.step)) / 2;
  for (const r of rollouts) {
    const calls = r.steps.filter((s) => s.kind === 'call');
    const reply = r.steps.filter((s) => s.kind === 'reply').at(-1)?.text ?? '';
    const half = r.step <= mid ? `steps 1-${mid}` : `steps ${mid + 1}-${2 * mid}`;
    if (/I could not find order/.test(reply)) add(`unknown order, ${half}`, /orders on your account are/.test(reply), r.reward);
    else if (!/for that reason/.test(reply) && /I'm sorry, but I can't (cancel order|return items|exchange the items|modify the items)|can no longer be cancelled|is already cancelled|cannot be returned yet|cannot be exchanged|cannot be modified/.test(reply)) add(`status refusal, ${half}`, !/I'm sorry, but I can't/.test(reply), r.reward);
    else if (calls.at(-1)?.call.name === 'get_order_details' && /is (delivered|processed)\./.test(reply) && !reply.includes('cancel')) add(`tracking, ${half}`, reply.includes('Tracking'), r.reward);
  }
  out[dir.split('/').at(-1)] = c;
}
process.stdout.write(JSON.stringify(out, null, 1) + '\n');
