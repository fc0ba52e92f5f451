// The stepper's conversation mode (workers/lab/episode.ts with user 'scripted'): the same rollout the eval CLI's
// `--user scripted` runs, viewed. The expert that talks to the same scripted user plays a task to the user's stop
// (every user turn placed before the Act turn that answered it, the yes marked, reward 1); a write made before
// any yes is found by the confirmation rule and zeroes the reward; a one-message rollout has no conversation.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Task } from '../../src/env/domain';
import { loadWorldDomain } from '../../src/env/retail/node';
import { formatCall } from '../../src/env/toolcall';
import { stepperRows } from '../../src/ui/stepper-rows';
import { LabRollouts, type LabRolloutConfig } from '../../workers/lab/episode';
import { loadTiny, type Tiny } from './helpers';

const mini = await loadWorldDomain('mini');
const task: Task = mini.tasks.generate({ split: 'train', count: 12, seed: 0 }).find((t) => t.referenceActions.some((a) => mini.confirmation!.isWrite(a.name)))!;

let tiny: Tiny;
beforeAll(async () => {
  tiny = await loadTiny();
});
afterAll(() => tiny?.backend.dispose());

const cfg = (over: Partial<LabRolloutConfig> = {}): LabRolloutConfig => ({ mode: 'real', seed: 1, k: 1, maxTurns: 30, maxNewTokens: 8, rehearseTokens: 32, temperature: 1, actSource: 'expert', user: 'scripted', ...over });
const lab = (over: Partial<LabRolloutConfig> = {}, t: Task | null = task) => new LabRollouts({ model: tiny.model, tokenizer: tiny.tok, adapter: null }, mini, t, '', cfg(over));

describe('the stepper with the scripted user', () => {
  it('the conversation expert plays the task to the stop: user turns in order, the yes before the write, reward 1', async () => {
    const r = lab();
    const v0 = r.view();
    // Before any Act turn: the greeting and the user's opening, nothing else.
    expect(v0.conversation!.userTurns).toEqual([expect.objectContaining({ before: 0, opening: true })]);
    expect(stepperRows(v0).map((x) => x.kind)).toEqual(['greeting', 'user']);
    while (!r.done) await r.step();
    const v = r.view();
    const c = v.conversation!;
    expect(v.endReason).toBe('the user ended the call (###STOP###)');
    expect(c.stop).toBe('###STOP###');
    expect(c.userTurns.length).toBeGreaterThan(2);
    expect(c.unconfirmed).toEqual([]);
    expect(v.reward!.value).toBe(1);
    expect(v.reward!.items[0]).toMatchObject({ label: expect.stringMatching(/confirmation rule/), satisfied: true, reason: expect.stringMatching(/came after the user's explicit yes to a proposal that stated its details$/) });
    // Each user turn after the opening answers a reply: the Act turn before it wrote one, shown as the reply.
    const rows = stepperRows(v);
    rows.forEach((row, i) => {
      if (row.kind !== 'user' || row.turn.opening) return;
      const prev = rows[i - 1];
      expect(prev.kind === 'act' && prev.turn.reply, JSON.stringify(row)).toBeTruthy();
    });
    expect(rows.at(-1)).toEqual({ kind: 'stop', token: '###STOP###' });
    // The write comes after a yes: the last user turn before the write's Act turn confirms.
    const w = v.turns.findIndex((t) => t.calls.some((x) => mini.confirmation!.isWrite(x.name)));
    expect(w).toBeGreaterThan(0);
    const lastUser = c.userTurns.filter((u) => u.before <= w).at(-1)!;
    expect(lastUser.confirms).toBe(true);
    expect(c.userTurns.filter((u) => u.confirms).length).toBeGreaterThan(0);
  });

  it('a write made before any yes: the confirmation rule names it, and the reward is 0 whatever the rest says', () => {
    const r = lab({ maxTurns: 2, actSource: 'policy' });
    const ep = r.stepper.episodes[0];
    const write = task.referenceActions.find((a) => mini.confirmation!.isWrite(a.name))!;
    ep.applyAct(formatCall(write));
    ep.applyAct('I have done it.');
    const v = r.view();
    expect(v.done).toBe(true);
    expect(v.conversation!.unconfirmed).toEqual([{ turn: 0, call: formatCall(write), why: expect.stringMatching(new RegExp(`^${write.name} was (made|attempted).*without the user's explicit yes`)) }]);
    expect(v.reward!.value).toBe(0);
    expect(v.reward!.items[0]).toMatchObject({ satisfied: false, reason: expect.stringMatching(/^turn 1: /) });
    // The user answered the reply before the turn limit ended it: a second user turn, after the reply's turn.
    expect(v.conversation!.userTurns.map((u) => u.before)).toEqual([0, 2]);
    expect(v.turns[1].reply).toBe('I have done it.');
  });

  it('off (the default): a one-message episode with no conversation; a typed request cannot meet a scripted user', () => {
    const v = lab({ user: undefined, actSource: 'policy' }).view();
    expect(v.conversation).toBeUndefined();
    expect(stepperRows(v)).toEqual([]);
    expect(() => lab({}, null)).toThrow(/a scripted user plays a task/);
  });
});
