// The stepper's episode state machine (workers/lab/episode.ts) on the real retail environment, with
// hand-written Act and Rehearse texts in place of a model: what reaches the history, what the shadow
// environment answers, fidelity, and the reward rules.
import { beforeAll, describe, expect, it } from 'vitest';
import type { Domain, Task } from '../../src/env/domain';
import { retailDomain } from '../../src/env/retail';
import { loadRetailBase } from '../../src/env/retail/node';
import { formatCall, formatObservation } from '../../src/env/toolcall';
import type { GenView } from '../../src/worker-protocol';
import { Episode } from '../../workers/lab/episode';

let domain: Domain;
let task: Task;
const gen = (text: string): GenView => ({ source: 'policy', prompt: '', promptTokens: 0, text, tokens: [], ms: 0 });

beforeAll(() => {
  domain = retailDomain(loadRetailBase());
  task = domain.tasks.generate({ split: 'train', count: 1, seed: 0 })[0];
});

describe('lab episode', () => {
  it('rehearse mode: the rehearsed observation enters the history, the shadow answer is only compared', () => {
    const ep = new Episode(domain, task, '', { mode: 'rehearse', seed: 1, maxTurns: 4 });
    const call = task.referenceActions[0];
    ep.takeAct(gen(formatCall(call)));
    const rq = ep.rehearseRequests();
    expect(rq).toHaveLength(1);
    expect(rq[0].prompt).toContain('# Call');
    const real = domain.createEnv().execute(call);
    // A faithful rehearsal: exact match.
    ep.takeRehearse(rq[0].index, gen(formatObservation(real)));
    const v = ep.view();
    expect(v.turns[0].calls[0].fidelity).toEqual({ exact: true, f1: 1, errorAgree: true });
    expect(v.done).toBe(false);
    // A wrong rehearsal on the next turn: it is what the policy sees, and fidelity drops.
    ep.takeAct(gen(formatCall(task.referenceActions[1])));
    const rq2 = ep.rehearseRequests();
    ep.takeRehearse(rq2[0].index, gen('<execution_result>\n{"error":"order not found"}\n</execution_result>'));
    const t2 = ep.view().turns[1].calls[0];
    expect(t2.fidelity!.exact).toBe(false);
    expect(t2.fidelity!.errorAgree).toBe(false);
    expect(t2.real).toContain('"result"');
    expect(ep.history[ep.history.length - 1]).toEqual({ role: 'tool', content: '{"error":"order not found"}' });
    expect(ep.actPrompt()).toContain('order not found');
  });

  it('an unparseable rehearsal ends the episode with reward 0; a reply ends it with the judge reward', () => {
    const bad = new Episode(domain, task, '', { mode: 'rehearse', seed: 1, maxTurns: 4 });
    bad.takeAct(gen(formatCall(task.referenceActions[0])));
    bad.takeRehearse(bad.rehearseRequests()[0].index, gen('the user is evelyn'));
    expect(bad.done).toBe(true);
    expect(bad.reward!.value).toBe(0);
    expect(bad.endReason).toMatch(/unparseable rehearsal: no-open-tag/);

    const reply = new Episode(domain, task, '', { mode: 'rehearse', seed: 1, maxTurns: 4 });
    reply.takeAct(gen('I cannot help.'));
    expect(reply.done).toBe(true);
    expect(reply.reward!.kind).toBe('checklist judge');
    const passed = reply.reward!.items.filter((i) => i.satisfied).map((i) => i.label);
    expect(passed).toEqual(['no forbidden writes']);
  });

  it('real mode: no Rehearse turn, the real observation goes back; the expert trajectory earns reward 1', () => {
    const ep = new Episode(domain, task, '', { mode: 'real', seed: 1, maxTurns: 12 });
    for (let t = 0; !ep.done; t++) {
      const text = ep.expertText();
      expect(text, `expert turn ${t}`).not.toBeNull();
      ep.takeAct(gen(text!));
      expect(ep.rehearseRequests()).toEqual([]);
    }
    expect(ep.reward).toMatchObject({ kind: 'real environment', value: 1 });
    expect(ep.view().turns[0].calls[0].rehearse).toBeNull();
  });

  it('malformed calls become error observations without a rehearsal; a typed request has no reward', () => {
    const ep = new Episode(domain, null, 'hello <img src=x>', { mode: 'rehearse', seed: 1, maxTurns: 1 });
    ep.takeAct(gen('<tool_call>\n{"name": \n</tool_call>'));
    expect(ep.rehearseRequests()).toEqual([]);
    expect(ep.view().turns[0].calls[0].real).toMatch(/^\{"error":/);
    expect(ep.done).toBe(true); // the turn limit
    expect(ep.reward).toMatchObject({ kind: 'none', value: 0 });
    expect(ep.view().request).toBe('hello <img src=x>');
  });

  it('the turn limit and the context limit terminate with reward 0, as training rollouts do', () => {
    const ep = new Episode(domain, task, '', { mode: 'rehearse', seed: 1, maxTurns: 1 });
    const call = task.referenceActions[0];
    ep.takeAct(gen(formatCall(call)));
    ep.takeRehearse(ep.rehearseRequests()[0].index, gen(formatObservation(domain.createEnv().execute(call))));
    expect(ep.done).toBe(true);
    expect(ep.reward).toMatchObject({ value: 0, note: 'terminated (turn or context limit): reward 0' });
    // The judge alone would have given credit for the matched call.
    expect(ep.reward!.items.find((i) => i.label.startsWith(`call ${call.name}`))!.satisfied).toBe(true);

    const ctx = new Episode(domain, task, '', { mode: 'real', seed: 1, maxTurns: 4 });
    ctx.finishContext(2000, 1024);
    expect(ctx.done).toBe(true);
    expect(ctx.endReason).toBe('context limit: the next prompt needs 2000 tokens, the model holds 1024');
    expect(ctx.reward!.value).toBe(0);
  });
});
