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

const cfg = (over: Partial<LabRolloutConfig> = {}): LabRolloutConfig => ({ mode: 'rehearse', seed: 1, k: 1, maxTurns: 4, maxNewTokens: 8, rehearseTokens: 32, temperature: 1, actSource: 'policy', ...over });
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
    expect(v.endReason).toBe('malformed rehearsal: it does not start with <execution_result> (no-open-tag)');
    expect(v.reward!.note).toBe(`reward 0 whatever the checklist says: ${v.endReason}`);
    expect(v.turns[0].calls[0].rehearsed).toBeNull();
    expect(v.turns[0].calls[0].rehearseCut).toBeNull();
    // The summary counts the unparseable rehearsal it shows as a miss.
    expect(v.fidelity).toMatchObject({ steps: 1, misses: 1, exact: 0 });
    // Every ✗ says why: the call was made but never got an observation.
    const first = v.reward!.items.find((i) => i.label.startsWith(`call ${task.referenceActions[0].name}`))!;
    expect(first.satisfied).toBe(false);
    expect(first.reason).toBe(`turn 1: the call was made, but it never got an observation: ${v.endReason}`);

    const reply = lab();
    reply.stepper.episodes[0].applyAct('I cannot help.');
    const rv = reply.view();
    expect(rv.done).toBe(true);
    expect(rv.turns[0].reply).toBe('I cannot help.');
    expect(rv.endReason).toBe('the policy replied to the user');
    expect(rv.reward!.kind).toBe('checklist judge');
    expect(rv.reward!.items.filter((i) => i.satisfied).map((i) => i.label)).toEqual(['no forbidden writes']);
    for (const it of rv.reward!.items.filter((i) => !i.satisfied)) expect(it.reason).toMatch(/^no call to \w+ \(rule J3\)$|^the reply \("I cannot help\."\) does not state it/);
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
    expect(v.reward).toMatchObject({ value: 0, note: 'reward 0 whatever the checklist says: the episode was cut off (turn limit (1) reached)' });
    // The judge alone would have given credit for the matched call.
    const item = v.reward!.items.find((i) => i.label.startsWith(`call ${call.name}`))!;
    expect(item.satisfied).toBe(true);
    expect(item.reason).toMatch(/^turn 1: \w+ was called with the required arguments \(rule J3; the judge does not read its observation, rule J2\)/);
  });

  it('a rehearsed error observation does not undo its call (rule J2); a cut rehearsal says so', () => {
    const r = lab();
    const ep = r.stepper.episodes[0];
    const call = task.referenceActions[0];
    ep.applyAct(formatCall(call));
    ep.applyRehearse(ep.pending[0], '<execution_result>\n{"error":"user not found"}\n</execution_result>');
    ep.applyAct('Sorry.');
    const it = r.view().reward!.items.find((i) => i.label.startsWith(`call ${call.name}`))!;
    expect(it.satisfied).toBe(true);
    expect(it.reason).toBe(`turn 1: ${call.name} was called with the required arguments (rule J3; the judge does not read its observation, rule J2)`);

    const cut = lab();
    const e2 = cut.stepper.episodes[0];
    e2.applyAct(formatCall(call));
    e2.applyRehearse(e2.pending[0], '<execution_result>\n{"result":"us', 32);
    const v = cut.view();
    expect(v.endReason).toBe('the rehearsal was cut at 32 tokens (the Rehearse budget) before its closing </execution_result> tag, so it does not parse');
    expect(v.turns[0].calls[0].rehearseCut).toBe(32);
  });

  it("the expert plays Act and Rehearse: with the measured budget every rehearsal of the task parses; a budget too small cuts", async () => {
    const { tokenBudgets } = await import('../../src/rollout/budget');
    const b = tokenBudgets(retail, tiny.tok, { tasks: 20 });
    expect(b.rehearse).toBe(b.observations.atQuantile);
    expect(b.observations.max).toBeGreaterThanOrEqual(b.rehearse);
    const steps = retail.expert(task, retail.createEnv()).steps;
    const calls = steps.filter((s) => s.kind === 'call').length;
    // A byte-level tokenizer makes prompts long: a model with room for them.
    const big = await loadTiny(16384);
    const mk = (over: Partial<LabRolloutConfig>) => new LabRollouts({ model: big.model, tokenizer: big.tok, adapter: null }, domain, task, '', cfg(over));
    const full = mk({ actSource: 'expert', maxTurns: 12, rehearseTokens: b.observations.max });
    while (!full.done) await full.step();
    const v = full.view();
    expect(v.endReason).toBe('the expert replied to the user');
    const shown = v.turns.flatMap((t) => t.calls);
    expect(shown).toHaveLength(calls);
    for (const c of shown) {
      expect(c.rehearseError).toBeNull();
      expect(c.rehearse!.source).toBe('expert');
      expect(c.fidelity!.exact).toBe(true);
    }
    expect(v.reward!.value).toBe(1);
    const small = mk({ actSource: 'expert', maxTurns: 12, rehearseTokens: 5 });
    while (!small.done) await small.step();
    expect(small.view().endReason).toBe('the rehearsal was cut at 5 tokens (the Rehearse budget) before its closing </execution_result> tag, so it does not parse');
    big.backend.dispose();
  }, 300_000);

  it('bad input is a clear error: stepping a finished rollout, an expert with no turn left', async () => {
    const r = lab();
    r.stepper.episodes[0].applyAct('bye');
    await expect(r.step()).rejects.toThrow('the rollout has ended');
    const typed = lab({ actSource: 'expert' }, null, 'hi');
    await expect(typed.step()).rejects.toThrow('the expert has no further turn for this task');
  });
});
