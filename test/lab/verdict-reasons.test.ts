// The lab explains every checklist verdict with the judge's own reason (issue 49): over rollouts played in the
// lab's view — the expert's whole trajectories in rehearse and real mode, and trajectories with a wrong
// argument, a forbidden write and a missing reply — each item's explanation is the judge's reason for that
// item, numbered by the stepper's turn, plus only what the judge cannot see (an unanswered call, an early end).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Task } from '../../src/env/domain';
import { judge, judgeOptions } from '../../src/env/judge';
import { formatCall, formatObservation } from '../../src/env/toolcall';
import { LabRollouts, type LabRolloutConfig } from '../../workers/lab/episode';
import { domain, loadTiny, retail, type Tiny } from './helpers';

let tiny: Tiny;
let tasks: Task[];
beforeAll(async () => {
  tiny = await loadTiny(16384);
  tasks = retail.tasks.generate({ split: 'train', count: 12, seed: 3 });
  // Each expert trajectory is scored token by token in the view (byte-level tiny tokenizer): a few suffice.
});
afterAll(() => tiny?.backend.dispose());

const cfg = (over: Partial<LabRolloutConfig>): LabRolloutConfig => ({ mode: 'rehearse', seed: 1, k: 1, maxTurns: 12, maxNewTokens: 8, rehearseTokens: 4000, temperature: 1, actSource: 'expert', ...over });

/** Every item's explanation in the view against the judge's verdicts on the same steps. */
function expectJudgeReasons(r: LabRollouts): number {
  const ep = r.stepper.episodes[0];
  const view = r.view().reward!;
  const j = judge(ep.task.checklist, ep.steps, judgeOptions(ep.env, retail.normaliseArgs));
  expect(view.items).toHaveLength(j.items.length);
  j.items.forEach((v, i) => {
    const shown = view.items[i].reason;
    const at = v.turn !== null ? `turn ${ep.stepTurns[v.turn] + 1}: ` : '';
    const own = shown === at + v.reason || shown.startsWith(`${at}${v.reason}; the episode ended first`);
    const unanswered = /^turn \d+: the call was made, but it never got an observation/.test(shown);
    expect(own || unanswered, `${shown}\n  judge: ${v.reason}`).toBe(true);
    expect(view.items[i].satisfied).toBe(v.satisfied);
  });
  return j.items.length;
}

async function play(t: Task, over: Partial<LabRolloutConfig>): Promise<LabRollouts> {
  const r = new LabRollouts({ model: tiny.model, tokenizer: tiny.tok, adapter: null }, domain, t, '', cfg(over));
  while (!r.done) await r.step();
  return r;
}

describe("the lab's verdicts are the judge's reasons", () => {
  it('on the expert trajectories, rehearsed (expert-written observations)', async () => {
    let items = 0;
    for (const t of tasks.slice(0, 4)) items += expectJudgeReasons(await play(t, {}));
    expect(items).toBeGreaterThan(8);
  });

  it('on trajectories with a wrong argument, a forbidden write, an imagined error and no reply', () => {
    const t = tasks.find((x) => x.referenceActions.some((a) => a.name === 'cancel_pending_order'))!;
    const cancel = t.referenceActions.find((a) => a.name === 'cancel_pending_order')!;
    const before = t.referenceActions.slice(0, t.referenceActions.indexOf(cancel));
    const wrong = { ...cancel, arguments: { ...cancel.arguments, reason: cancel.arguments.reason === 'no longer needed' ? 'ordered by mistake' : 'no longer needed' } };
    for (const [calls, imaginedError, reply] of [[[...before, wrong], true, 'Done.'], [[...before, wrong], false, 'Done.'], [before, false, null]] as const) {
      const r = new LabRollouts({ model: tiny.model, tokenizer: tiny.tok, adapter: null }, domain, t, '', cfg({ actSource: 'policy' }));
      const ep = r.stepper.episodes[0];
      const env = retail.createEnv();
      for (const c of calls) {
        ep.applyAct(formatCall(c));
        const obs = env.execute(c);
        ep.applyRehearse(ep.pending[0], c === wrong && imaginedError ? '<execution_result>\n{"error":"cannot cancel"}\n</execution_result>' : formatObservation(obs));
      }
      if (reply) ep.applyAct(reply);
      else ep.finish('max-turns');
      expectJudgeReasons(r);
      // The wrong-reason cancellation counts as a forbidden write whether it was rehearsed as an error or not.
      if (calls.includes(wrong)) expect(r.view().reward!.items.find((i) => i.label === 'no forbidden writes')!.satisfied).toBe(false);
    }
  });

  it('real mode: a differing database names the write the judge faults', async () => {
    const t = tasks.find((x) => x.referenceActions.some((a) => a.name === 'cancel_pending_order'))!;
    const r = new LabRollouts({ model: tiny.model, tokenizer: tiny.tok, adapter: null }, domain, t, '', cfg({ mode: 'real', actSource: 'policy' }));
    const ep = r.stepper.episodes[0];
    const cancel = t.referenceActions.find((a) => a.name === 'cancel_pending_order')!;
    for (const c of t.referenceActions.slice(0, t.referenceActions.indexOf(cancel))) ep.applyAct(formatCall(c));
    ep.applyAct(formatCall({ ...cancel, arguments: { ...cancel.arguments, reason: cancel.arguments.reason === 'no longer needed' ? 'ordered by mistake' : 'no longer needed' } }));
    ep.applyAct('Done.');
    const db = r.view().reward!.items[0];
    expect(db.satisfied).toBe(false);
    expect(db.reason).toMatch(/differs in reason/);
    expect(db.reason).toMatch(/is not one the task asks for/);
  });
});
