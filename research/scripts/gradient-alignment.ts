// Do rehearsed episodes push Act the way real ones do? (issue 46, the budget bar: rehearsed episodes beside ¼ of the
// real ones add nothing measurable, research/records/2026-12-05-powered-budget.) On the same N training tasks, three
// batches of K episodes each, from the same starting policy:
//   real A and real B: the real environment, two sampling seeds (two independent draws of the same thing);
//   rehearsed: a rehearsing mode with recall (as dyna-fq8-recall rehearses), scored by the strict checklist judge.
// Each batch's GRPO gradient of Act's LoRA parameters (one grpoUpdate on a fresh adapter, every batch from the same
// adapter initialisation; only Act's rows) is read and flattened. Printed: the cosine of real A with real B (how
// alike two real batches' gradients are at this batch size: the bar a substitute must reach) and of the rehearsed
// batch with each real one, per repeat (fresh seeds), one JSON line each and a summary line.
//   node --import tsx research/scripts/gradient-alignment.ts [--tasks N] [--k K] [--repeats R] [--model DIR] [--threads T]
import { parseArgs } from 'node:util';
import { loadWorldDomain } from '../../src/env/retail/node';
import { openBackend, openModel } from '../../src/cli/args';
import { createLoraAdapter } from '../../src/model/lora';
import { setting } from '../../src/method/run-config';
import { grpoUpdate } from '../../src/rl/grpo';
import { runRollouts, type RolloutBatch } from '../../src/rollout/rollout';
import { rewardBy } from '../../src/rollout/reward-rule';
import { Trainer } from '../../src/train/trainer';

const { values: v } = parseArgs({
  options: {
    tasks: { type: 'string', default: '32' },
    k: { type: 'string', default: '4' },
    repeats: { type: 'string', default: '3' },
    model: { type: 'string' },
    threads: { type: 'string', default: '1' },
  },
});
const k = Number(v.k);
const domain = loadWorldDomain('mini');
const backend = await openBackend('cpu-fast', Number(v.threads));
const p = await openModel(v.model, backend);
const limits = { maxTurns: 12, maxActTokens: 96, maxRehearseTokens: 641 };
const policy = { model: p.model, tokenizer: p.tokenizer, adapter: null };
const REHEARSING = 'frozen-simulator' as const;

/** Act's LoRA gradient of one batch, flattened, from a fresh adapter (seed 1) as a run's first step would take it. */
async function gradient(batch: RolloutBatch, mode: 'real' | typeof REHEARSING): Promise<Float32Array> {
  const adapter = createLoraAdapter(backend, p.model.config, { name: 'probe', rank: 8, alpha: 16, seed: 1 });
  const tr = new Trainer(p.model, { mode: 'lora', adapter, schedule: { kind: 'constant', lr: setting('lr').default }, loss: { kind: 'grpo', clipEps: 0.2, dualClip: 3, klCoef: 0 } });
  try {
    await grpoUpdate({ act: tr }, batch, mode, {});
    const parts: Float32Array[] = [];
    for (const q of tr.params.params) parts.push((await backend.read(q.grad)) as Float32Array);
    const out = new Float32Array(parts.reduce((n, a) => n + a.length, 0));
    let o = 0;
    for (const a of parts) {
      out.set(a, o);
      o += a.length;
    }
    return out;
  } finally {
    tr.free();
    adapter.free(backend);
  }
}

const cosine = (a: Float32Array, b: Float32Array): number | null => {
  let d = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    d += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return na > 0 && nb > 0 ? d / Math.sqrt(na * nb) : null;
};
const success = (b: RolloutBatch) => b.rollouts.filter((r) => r.reward === 1).length / b.rollouts.length;

const rows: { repeat: number; realReal: number | null; rehearsedRealA: number | null; rehearsedRealB: number | null }[] = [];
for (let r = 0; r < Number(v.repeats); r++) {
  const tasks = domain.tasks.generate({ split: 'train', count: Number(v.tasks), seed: 100 + r });
  const t0 = performance.now();
  const realA = await runRollouts(policy, domain, tasks, { mode: 'real', k, seed: 1000 + r, limits, temperature: 1, kvReuse: true });
  const realB = await runRollouts(policy, domain, tasks, { mode: 'real', k, seed: 2000 + r, limits, temperature: 1, kvReuse: true });
  const reh = await runRollouts(policy, domain, tasks, { mode: REHEARSING, k, seed: 3000 + r, limits, temperature: 1, kvReuse: true, recall: 'reference', reward: (ep, d) => rewardBy('strict-checklist', ep, d) });
  const [gA, gB, gH] = [await gradient(realA, 'real'), await gradient(realB, 'real'), await gradient(reh, REHEARSING)];
  const row = { repeat: r, realReal: cosine(gA, gB), rehearsedRealA: cosine(gH, gA), rehearsedRealB: cosine(gH, gB) };
  rows.push(row);
  console.log(JSON.stringify({ ...row, tasks: tasks.length, k, success: { realA: success(realA), realB: success(realB), rehearsed: success(reh) }, norms: [gA, gB, gH].map((g) => Math.sqrt(g.reduce((s, x) => s + x * x, 0))), wallS: (performance.now() - t0) / 1000 }));
}
const mean = (xs: (number | null)[]) => {
  const ys = xs.filter((x): x is number => x !== null);
  return ys.length ? ys.reduce((a, b) => a + b, 0) / ys.length : null;
};
console.log(JSON.stringify({ summary: true, model: v.model ?? 'models/default', realReal: mean(rows.map((r) => r.realReal)), rehearsedReal: mean(rows.flatMap((r) => [r.rehearsedRealA, r.rehearsedRealB])) }));
backend.dispose();
