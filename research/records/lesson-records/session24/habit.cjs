// Session 24: does GRPO unlearn the careless demonstrator's habit? For each run folder given, over its training
// rollouts (rollouts.jsonl), the sampled replies that owed a figure — after a cancellation that went through (the
// refund amount) and after a status lookup of a delivered or processed order (the tracking number) — and the
// refusals of a cancellation or a return (why: the status or the reasons allowed; design R's habit), counted in
// each half of the run (steps 1-20 and 21-40 of a 40-step run): how many stated it, and how many of those earned
// the reward.
// usage: node research/records/lesson-records/session24/habit.cjs RUN_DIR...   (record: habit.json)
const fs = require('fs');
const out = {};
for (const dir of process.argv.slice(2)) {
  const c = {};
  const add = (k, stated, reward) => {
    c[k] ??= { replies: 0, stated: 0, statedPaid: 0 };
    c[k].replies++;
    if (stated) { c[k].stated++; c[k].statedPaid += reward; }
  };
  const rollouts = fs.readFileSync(`${dir}/rollouts.jsonl`, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
  const mid = Math.max(...rollouts.map((r) => r.step)) / 2;
  for (const r of rollouts) {
    const calls = r.steps.filter((s) => s.kind === 'call');
    const reply = r.steps.filter((s) => s.kind === 'reply').at(-1)?.text ?? '';
    const half = r.step <= mid ? `steps 1-${mid}` : `steps ${mid + 1}-${2 * mid}`;
    if (calls.some((s) => s.call.name === 'cancel_pending_order' && s.observation.ok)) add(`cancel, ${half}`, reply.includes('$'), r.reward);
    else if (/I'm sorry, but I can't (cancel|return)|can no longer be cancelled|is already cancelled|cannot be returned yet|I can only cancel an order when/.test(reply)) add(`refusal, ${half}`, !/I'm sorry, but I can't/.test(reply), r.reward);
    else if (calls.at(-1)?.call.name === 'get_order_details' && /is (delivered|processed)\./.test(reply) && !reply.includes('cancel')) add(`status, ${half}`, reply.includes('Tracking'), r.reward);
  }
  out[dir.split('/').at(-1)] = c;
}
process.stdout.write(JSON.stringify(out, null, 1) + '\n');
