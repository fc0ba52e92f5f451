// Session 24: does GRPO unlearn the careless demonstrator's habit? For each run folder given, over its training
// rollouts (rollouts.jsonl), the sampled replies that owed a figure — after a cancellation that went through (the
// refund amount) and after a status lookup of a delivered or processed order (the tracking number) — counted in
// steps 1-20 and 21-40: how many stated it, and how many of those episodes earned the reward.
// usage: node docs/lesson-records/session24/habit.cjs RUN_DIR...   (record: habit.json)
const fs = require('fs');
const out = {};
for (const dir of process.argv.slice(2)) {
  const c = {};
  const add = (k, stated, reward) => {
    c[k] ??= { replies: 0, stated: 0, statedPaid: 0 };
    c[k].replies++;
    if (stated) { c[k].stated++; c[k].statedPaid += reward; }
  };
  for (const line of fs.readFileSync(`${dir}/rollouts.jsonl`, 'utf8').split('\n')) {
    if (!line) continue;
    const r = JSON.parse(line);
    const calls = r.steps.filter((s) => s.kind === 'call');
    const reply = r.steps.filter((s) => s.kind === 'reply').at(-1)?.text ?? '';
    const half = r.step <= 20 ? 'steps 1-20' : 'steps 21-40';
    if (calls.some((s) => s.call.name === 'cancel_pending_order' && s.observation.ok)) add(`cancel, ${half}`, reply.includes('$'), r.reward);
    else if (calls.at(-1)?.call.name === 'get_order_details' && /is (delivered|processed)\./.test(reply) && !reply.includes('cancel')) add(`status, ${half}`, reply.includes('Tracking'), r.reward);
  }
  out[dir.split('/').at(-1)] = c;
}
process.stdout.write(JSON.stringify(out, null, 1) + '\n');
