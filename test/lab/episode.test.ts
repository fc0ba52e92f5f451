// The lab's view of a rollout (workers/lab/episode.ts) over the engine's own episode: hand-written Act and
// Rehearse texts are applied to the RolloutStepper's Episode (as the engine's tests do), and the view must
// show what reached the history, what the shadow environment answered, fidelity, and the reward rules.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Task } from '../../src/env/domain';
import { formatCall, formatObservation } from '../../src/env/toolcall';
import { LabRollouts, type LabRolloutConfig } from '../../workers/lab/episode';
import { domain, loadTiny, retail, type Tiny } from './helpers';

let tiny: Tiny;
let task: ReturnType<typeof retail.tasks.generate>[number];
beforeAll(async () => {
  tiny = await loadTiny(1024);
  task = retail.tasks.generate({ split: 'train', count: 1, seed: 0 })[0];
});
afterAll(() => tiny?.backend.dispose());

const cfg = (over: Partial<LabRolloutConfig> = {}): LabRolloutConfig => ({ mode: 'rehearse', seed: 1, k: 1, maxTurns: 4, maxNewTokens: 8, temperature: 1, actSource: 'policy', ...over });
const lab = (over: Partial<LabRolloutConfig> = {}, t: Task | null = task, request = '') =>
  new LabRollouts({ model: tiny.model, tokenizer: tiny.tok, adapter: null }, domain, t, request, cfg(over));

describe('lab rollout view', () => {
  it('rehearse mode: the rehearsed observation enters the history, the shadow answer is only compared', () => {
    const r = lab();
    const ep = r.stepper.episodes[0];
    const call = task.referenceActions[0];
    ep.applyAct(formatCall(call));
    expect(ep.pending).toHaveLength(1);
    expect(r.stepper.rehearsePrompt(ep, ep.pending[0])).toContain('# Call');
    const real = retail.createEnv().execute(call);
    ep.applyRehearse(ep.pending[0], formatObservation(real)); // a faithful rehearsal
    const v = r.view();
    expect(v.turns[0].calls[0].fidelity).toEqual({ exact: true, f1: 1, errorAgree: true });
    expect(v.turns[0].calls[0].name).toBe(call.name);
    expect(v.done).toBe(false);
    // A wrong rehearsal on the next turn: it is what the policy sees, and fidelity drops.
    ep.applyAct(formatCall(task.referenceActions[1]));
    ep.applyRehearse(ep.pending[0], '<execution_result>\n{"error":"order not found"}\n</execution_result>');
    const t2 = r.view().turns[1].calls[0];
    expect(t2.fidelity!.exact).toBe(false);
    expect(t2.fidelity!.errorAgree).toBe(false);
    expect(t2.real).toContain('"result"');
    expect(t2.rehearsed).toBe('{"error":"order not found"}');
    expect(ep.messages[ep.messages.length - 1]).toEqual({ role: 'tool', content: '{"error":"order not found"}' });
    expect(r.stepper.actPrompt(ep)).toContain('order not found');
    expect(r.view().fidelity).toMatchObject({ steps: 2, exact: 0.5 });
  });

  it('an unparseable rehearsal ends the episode with reward 0; a reply ends it with the judge reward', () => {
    const bad = lab();
    const ep = bad.stepper.episodes[0];
    ep.applyAct(formatCall(task.referenceActions[0]));
    ep.applyRehearse(ep.pending[0], 'the user is evelyn');
    const v = bad.view();
    expect(v.done).toBe(true);
    expect(v.reward!.value).toBe(0);
    expect(v.reward!.note).toBe('unparseable rehearsal: reward 0');
    expect(v.endReason).toBe('unparseable rehearsal: no-open-tag');
    expect(v.turns[0].calls[0].rehearsed).toBeNull();

    const reply = lab();
    reply.stepper.episodes[0].applyAct('I cannot help.');
    const rv = reply.view();
    expect(rv.done).toBe(true);
    expect(rv.turns[0].reply).toBe('I cannot help.');
    expect(rv.endReason).toBe('the policy replied to the user');
    expect(rv.reward!.kind).toBe('checklist judge');
    expect(rv.reward!.items.filter((i) => i.satisfied).map((i) => i.label)).toEqual(['no forbidden writes']);
  });

  it('real mode: no Rehearse turn, the real observation goes back; the expert trajectory earns reward 1', () => {
    const r = lab({ mode: 'real', maxTurns: 12 });
    const ep = r.stepper.episodes[0];
    for (const s of retail.expert(task, retail.createEnv()).steps) {
      ep.applyAct(s.kind === 'call' ? formatCall(s.call) : s.text);
      expect(ep.pending).toEqual([]);
    }
    const v = r.view();
    expect(v.reward).toMatchObject({ kind: 'real environment', value: 1 });
    expect(v.turns[0].calls[0].rehearse).toBeNull();
    expect(v.turns[0].calls[0].rehearsed).toBeNull();
    expect(v.turns[0].calls[0].real).toContain('"result"');
  });

  it('malformed calls become error observations without a rehearsal; a typed request has no reward', () => {
    const r = lab({ maxTurns: 1 }, null, 'hello <img src=x>');
    const ep = r.stepper.episodes[0];
    ep.applyAct('<tool_call>\n{"name": \n</tool_call>');
    expect(ep.pending).toEqual([]);
    const v = r.view();
    expect(v.turns[0].calls[0].real).toMatch(/^\{"error":/);
    expect(v.turns[0].calls[0].call).toContain('{"name":');
    expect(v.done).toBe(true); // the turn limit
    expect(v.endReason).toBe('turn limit (1) reached');
    expect(v.reward).toMatchObject({ kind: 'none', value: 0 });
    expect(v.request).toBe('hello <img src=x>');
    expect(v.taskId).toBeNull();
  });

  it('the turn limit terminates with reward 0, as training rollouts do', () => {
    const r = lab({ maxTurns: 1 });
    const ep = r.stepper.episodes[0];
    const call = task.referenceActions[0];
    ep.applyAct(formatCall(call));
    ep.applyRehearse(ep.pending[0], formatObservation(retail.createEnv().execute(call)));
    const v = r.view();
    expect(v.done).toBe(true);
    expect(v.reward).toMatchObject({ value: 0, note: 'terminated (turn or context limit): reward 0' });
    // The judge alone would have given credit for the matched call.
    expect(v.reward!.items.find((i) => i.label.startsWith(`call ${call.name}`))!.satisfied).toBe(true);
  });

  it('bad input is a clear error: stepping a finished rollout, an expert with no turn left', async () => {
    const r = lab();
    r.stepper.episodes[0].applyAct('bye');
    await expect(r.step()).rejects.toThrow('the rollout has ended');
    const typed = lab({ actSource: 'expert' }, null, 'hi');
    await expect(typed.step()).rejects.toThrow('the expert has no further turn for this task');
  });
});
