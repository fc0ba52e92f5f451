// What structured rehearsal decoding (src/rollout/rehearse-constraint.ts) costs: the bundled retail policy
// rehearses every reference call of held-out tasks, decoded free and structured, in one process, the two
// interleaved so that the machine's load falls on both. Tokens/s counts the tokens each decoding generated
// (a free loop runs to its budget, so the two write different amounts); the parse share is the same pass's.
import os from 'node:os';
import { createBackend } from '../../src/engine/index';
import { HELD_OUT_TASK_SEED } from '../../src/env/domain';
import { loadWorldDomain } from '../../src/env/retail/node';
import { DirSource } from '../../src/model/source-node';
import { Tokenizer } from '../../src/model/tokenizer';
import { loadQwen3 } from '../../src/model/weights';
import { tokenBudgets } from '../../src/rollout/budget';
import { evalRehearsalFidelity } from '../../src/rollout/fidelity-eval';
import type { RehearseDecoding } from '../../src/rollout/rehearse-prompt';
import type { BenchSuite } from '../lib';

const suite: BenchSuite = {
  name: 'decoding',
  async run(ctx) {
    const threads = os.cpus().length;
    const b = await createBackend('cpu-fast', { threads });
    try {
      const src = new DirSource('models/retail');
      const { model } = await loadQwen3(src, b, { format: 'f32' });
      const tok = await Tokenizer.load(src);
      const domain = loadWorldDomain('retail');
      const tasks = domain.tasks.generate({ split: 'test', count: ctx.quick ? 4 : 30, seed: HELD_OUT_TASK_SEED });
      const maxRehearseTokens = tokenBudgets(domain, tok).rehearse;
      const decodings: RehearseDecoding[] = ['free', 'structured'];
      const total = Object.fromEntries(decodings.map((d) => [d, { s: 0, tokens: 0, calls: 0, parsed: 0 }]));
      for (let rep = 0; rep < (ctx.quick ? 1 : 2); rep++)
        for (const decoding of rep % 2 ? [...decodings].reverse() : decodings) {
          const t0 = performance.now();
          const r = await evalRehearsalFidelity(model, tok, null, domain, tasks, { maxRehearseTokens, rehearsePrompt: { excludeSameCall: false, decoding } });
          const t = total[decoding];
          t.s += (performance.now() - t0) / 1000;
          t.tokens += r.steps.reduce((a, s) => a + s.tokens, 0);
          t.calls += r.steps.length;
          t.parsed += r.steps.filter((s) => s.failure === null).length;
        }
      for (const d of decodings) {
        const t = total[d];
        const c = { case: `rehearse ${d} (models/retail, ${tasks.length} held-out tasks)`, backend: 'cpu-fast' as const, threads, shape: `calls=${t.calls},budget=${maxRehearseTokens}`, model: 'models/retail' };
        ctx.record({ ...c, metric: 'rehearse_tok_s', value: t.tokens / t.s, unit: 'tok/s' });
        ctx.record({ ...c, metric: 'ms_per_rehearsal', value: (1000 * t.s) / t.calls, unit: 'ms' });
        ctx.record({ ...c, metric: 'parsed_share', value: t.parsed / t.calls, unit: 'fraction' });
        ctx.log(`${d}: ${(t.tokens / t.s).toFixed(0)} tok/s, ${((1000 * t.s) / t.calls).toFixed(0)} ms per rehearsal, ${t.parsed}/${t.calls} parse`);
      }
      model.free();
    } finally {
      b.dispose();
    }
  },
};
export default suite;
