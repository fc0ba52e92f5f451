// Whole trajectories on the server (/act, /rehearse, score {"trajectory": true}) against the lab's own
// Episode driven with the same generations: the same observations, the same Rehearse prompts as the
// rollout loop builds (history before the turn, the task's grounding), the same rewards; continuations that
// are the lab's next Act prompt after the assistant text; and trajectories that survive a restart.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Task } from '../../src/env/domain';
import { formatCall, serializeObservation } from '../../src/env/toolcall';
import { buildActPrompt } from '../../src/rollout/act-prompt';
import { Episode } from '../../src/rollout/episode';
import { buildRehearsePrompt } from '../../src/rollout/rehearse-prompt';
import { defaultReward } from '../../src/rollout/reward-rule';
import { referenceGrounding } from '../../src/rollout/rollout';
import { api, startHarness, type Harness } from './helpers';

let h: Harness;
const state = mkdtempSync(join(tmpdir(), 'envace-traj-'));
beforeAll(async () => {
  h = await startHarness('mini', { train: 8, test: 0 }, { stateDir: state });
});
afterAll(async () => {
  await h.server.close(500);
  rmSync(state, { recursive: true, force: true });
});

const newEpisode = async (task: Task) => (await api(h.server.url, 'POST', '/episodes', { task_id: task.id })).json.episode_id as string;
const reply = (t: Task) => 'Done. ' + t.facts.join(', ');
/** What the lab's rehearse would write for a call if it were faithful: the real observation. */
const faithful = (obs: string) => `<execution_result>\n${obs}\n</execution_result>`;

describe('trajectories in real mode', () => {
  it('applies Act generations as the lab does: observations, continuations, reward', async () => {
    const rewards = new Set<number>();
    for (const task of h.train) {
      const lab = new Episode(task.id, 'lab', task, 'real', h.domain.createEnv(), [], 30);
      const id = await newEpisode(task);
      for (const c of task.referenceActions) {
        const text = formatCall(c);
        const before = lab.messages.length;
        lab.applyAct(text);
        const r = (await api(h.server.url, 'POST', `/episodes/${id}/act`, { text })).json;
        expect(r.tool_messages).toEqual(lab.messages.slice(before).filter((m) => m.role === 'tool').map((m) => m.content));
        const next = buildActPrompt(h.domain.policy, h.domain.definitions(), lab.messages);
        // The continuation is the lab's next prompt after this turn's text: the turn's end, tool responses, generation prompt.
        expect(next.endsWith(text + r.continuation)).toBe(true);
        expect(r.continuation).toMatch(/^<\|im_end\|>\n<\|im_start\|>user\n<tool_response>\n[\s\S]*<\|im_start\|>assistant\n<think>\n\n<\/think>\n\n$/);
        expect(r).toMatchObject({ mode: 'real', done: false, rehearse: null, turns: lab.turns });
      }
      const last = (await api(h.server.url, 'POST', `/episodes/${id}/act`, { text: reply(task) })).json;
      lab.applyAct(reply(task));
      expect(last).toMatchObject({ done: true, end: 'reply', continuation: null });
      const score = (await api(h.server.url, 'POST', `/episodes/${id}/score`, { trajectory: true })).json;
      expect(score.reward).toBe(defaultReward(lab, h.domain));
      expect(score.kind).toBe('real');
      rewards.add(score.reward);
      expect((await api(h.server.url, 'GET', `/episodes/${id}`)).json.db_hash).toBe(lab.env.hash());
      expect((await api(h.server.url, 'POST', `/episodes/${id}/act`, { text: 'more' })).status).toBe(409);
    }
    expect(rewards.has(1)).toBe(true);
  });

  it('places a turn whose text the template re-renders (blank lines around a think span)', async () => {
    const task = h.train[0];
    const id = await newEpisode(task);
    const text = '<think>\n\n\nlook the user up\n\n\n</think>\n\n' + formatCall(task.referenceActions[0]);
    const r = (await api(h.server.url, 'POST', `/episodes/${id}/act`, { text })).json;
    const lab = new Episode(task.id, 'lab', task, 'real', h.domain.createEnv(), [], 30);
    lab.applyAct(text);
    const next = buildActPrompt(h.domain.policy, h.domain.definitions(), lab.messages);
    expect(next).not.toContain(text); // the renderer trimmed the blank lines
    expect(r.continuation).toMatch(/^<\|im_end\|>\n<\|im_start\|>user\n<tool_response>/);
    expect(next.endsWith(formatCall(task.referenceActions[0]) + r.continuation)).toBe(true);
  });
});

describe('trajectories in simulate mode', () => {
  it('queues each call for a Rehearse generation with the rollout loop\'s prompt, and scores with the judge', async () => {
    for (const [k, task] of h.train.slice(0, 4).entries()) {
      const lab = new Episode(task.id, 'lab', task, 'rehearse', h.domain.createEnv(), referenceGrounding(h.domain, task), 30);
      const real = h.domain.createEnv();
      const id = await newEpisode(task);
      for (const c of task.referenceActions) {
        const text = formatCall(c);
        lab.applyAct(text);
        const r = (await api(h.server.url, 'POST', `/episodes/${id}/act`, { text, mode: 'simulate' })).json;
        const p = lab.pending[0];
        expect(r.rehearse.name).toBe(c.name);
        expect(r.rehearse.prompt).toBe(buildRehearsePrompt({ tools: h.domain.definitions(), grounding: lab.grounding, history: lab.historyBefore, call: p.call }, {}).text);
        expect(r.tool_messages).toEqual([]);
        // Rehearse faithfully, except the second task, whose first write is rehearsed as a failure.
        const obs = k === 1 && c === task.referenceActions.find((a) => real.isWrite(a.name)) ? '{"error":"simulated failure"}' : serializeObservation(real.execute(c));
        lab.applyRehearse(p, faithful(obs));
        const t = (await api(h.server.url, 'POST', `/episodes/${id}/rehearse`, { text: faithful(obs) })).json;
        // What the lab's conversation holds (a rehearsed result is re-serialised from its parse: JSON.parse's key order).
        expect(t.tool_messages).toEqual([lab.messages.at(-1)!.content]);
        expect(JSON.parse(t.tool_messages[0])).toEqual(JSON.parse(obs));
        expect(t.rehearse).toBeNull();
        expect(buildActPrompt(h.domain.policy, h.domain.definitions(), lab.messages).endsWith(text + t.continuation)).toBe(true);
      }
      await api(h.server.url, 'POST', `/episodes/${id}/act`, { text: reply(task), mode: 'simulate' });
      lab.applyAct(reply(task));
      const score = (await api(h.server.url, 'POST', `/episodes/${id}/score`, { trajectory: true })).json;
      expect(score).toMatchObject({ kind: 'judge', reward: defaultReward(lab, h.domain), end: 'reply' });
      // The real database was never touched.
      expect((await api(h.server.url, 'GET', `/episodes/${id}`)).json.db_hash).toBe(h.domain.createEnv().hash());
    }
  });

  it('ends on an unreadable rehearsal with reward 0, and refuses out-of-order steps', async () => {
    const task = h.train[0];
    const id = await newEpisode(task);
    expect((await api(h.server.url, 'POST', `/episodes/${id}/rehearse`, { text: 'x' })).status).toBe(409);
    await api(h.server.url, 'POST', `/episodes/${id}/act`, { text: formatCall(task.referenceActions[0]), mode: 'simulate' });
    const again = await api(h.server.url, 'POST', `/episodes/${id}/act`, { text: formatCall(task.referenceActions[0]), mode: 'simulate' });
    expect(again.status).toBe(409);
    expect(again.json.error.code).toBe('rehearsal_pending');
    expect((await api(h.server.url, 'POST', `/episodes/${id}/act`, { text: 'x', mode: 'real' })).json.error.code).toBe('mode_mismatch');
    const bad = (await api(h.server.url, 'POST', `/episodes/${id}/rehearse`, { text: '{"result": ' })).json;
    expect(bad).toMatchObject({ done: true, end: 'rehearse-invalid', continuation: null });
    expect((await api(h.server.url, 'POST', `/episodes/${id}/score`, { trajectory: true })).json.reward).toBe(0);
    expect((await api(h.server.url, 'POST', `/episodes/${id}/act`, { text: 1 })).status).toBe(400);
  });

  it('survives a restart mid-turn: the pending rehearsal and the conversation come back', async () => {
    const task = h.train[2];
    const id = await newEpisode(task);
    const [a, b] = task.referenceActions;
    const real = h.domain.createEnv();
    await api(h.server.url, 'POST', `/episodes/${id}/act`, { text: formatCall(a), mode: 'simulate' });
    await api(h.server.url, 'POST', `/episodes/${id}/rehearse`, { text: faithful(serializeObservation(real.execute(a))) });
    const pending = (await api(h.server.url, 'POST', `/episodes/${id}/act`, { text: formatCall(b ?? a), mode: 'simulate' })).json;
    await h.server.close(500);
    h = await startHarness('mini', { train: 8, test: 0 }, { stateDir: state });
    const t = await api(h.server.url, 'POST', `/episodes/${id}/rehearse`, { text: faithful('{"result":"ok"}') });
    expect(t.status).toBe(200);
    expect(t.json.turns).toBe(pending.turns);
    expect(t.json.tool_messages).toEqual(['{"result":"ok"}']);
  });
});
