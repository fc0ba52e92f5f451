// The JSON API against the lab's own code: rehearse prompts byte-identical to
// the rollout's (RolloutStepper.rehearsePrompt builds them from the same inputs), rewards equal to the
// lab's defaultReward for the same trajectory (real and judge); plus the limits: body size and nesting,
// the live-episode cap, TTL expiry, graceful shutdown.
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Task, ToolCall } from '../../src/env/domain';
import { RETAIL_WRITE_TOOLS } from '../../src/env/retail/index';
import { formatCall, formatObservation } from '../../src/env/toolcall';
import { Episode } from '../../src/rollout/episode';
import { buildRehearsePrompt } from '../../src/rollout/rehearse-prompt';
import { defaultReward } from '../../src/rollout/reward-rule';
import { referenceGrounding } from '../../src/rollout/rollout';
import { api, startHarness, type Harness } from './helpers';

let h: Harness;
beforeAll(async () => {
  h = await startHarness('mini', { train: 12, test: 4 }, { maxEpisodes: 64 });
});
afterAll(async () => {
  await h.server.close(1000);
});

const MAX_TURNS = 30;
const newEpisode = async (taskId: string) => {
  const r = await api(h.server.url, 'POST', '/episodes', { task_id: taskId });
  expect(r.status).toBe(201);
  return r.json.episode_id as string;
};

/** What the lab's RolloutStepper.rehearsePrompt returns for an episode and its pending call. */
function labRehearsePrompt(ep: Episode, call: ToolCall): string {
  return buildRehearsePrompt({ tools: h.domain.definitions(), grounding: ep.grounding, history: ep.historyBefore, call }, { enableThinking: undefined }).text;
}

describe('JSON API', () => {
  it('serves health, task ids per split, and an episode start with the Act prompt\'s messages', async () => {
    const health = await api(h.server.url, 'GET', '/health');
    expect(health.json).toMatchObject({ status: 'ok', world: 'mini', tasks: { train: 12, test: 4 } });
    expect((await api(h.server.url, 'GET', '/tasks?split=train')).json.task_ids).toEqual(h.train.map((t) => t.id));
    expect((await api(h.server.url, 'GET', '/tasks?split=test')).json.task_ids).toEqual(h.test.map((t) => t.id));
    expect((await api(h.server.url, 'GET', '/tasks?split=dev')).status).toBe(400);
    const r = await api(h.server.url, 'POST', '/episodes', { task_id: h.train[0].id });
    expect(r.json.tools).toEqual(h.domain.definitions());
    expect(r.json.messages).toEqual([{ role: 'system', content: h.domain.policy }, ...h.train[0].userMessages.map((content) => ({ role: 'user', content }))]);
    expect((await api(h.server.url, 'DELETE', `/episodes/${r.json.episode_id}`)).status).toBe(200);
    expect((await api(h.server.url, 'GET', `/episodes/${r.json.episode_id}`)).status).toBe(404);
  });

  it('returns rehearse prompts byte-identical to the lab\'s at every step of an episode', async () => {
    let checked = 0;
    for (const task of h.train.slice(0, 6)) {
      const id = await newEpisode(task.id);
      // The lab's episode in the same state: the same calls with the real observations (a rehearse-mode
      // episode would hold rehearsed ones, whose JSON key order is JSON.parse's), and the task's grounding.
      const lab = new Episode(task.id, 'lab', task, 'real', h.domain.createEnv(), referenceGrounding(h.domain, task), MAX_TURNS);
      for (const call of task.referenceActions) {
        lab.applyAct(formatCall(call));
        const want = labRehearsePrompt(lab, call);
        const got = await api(h.server.url, 'POST', `/episodes/${id}/rehearse-prompt`, { name: call.name, arguments: call.arguments });
        expect(got.json.prompt).toBe(want);
        // The prompt options pass through unchanged too.
        const all = await api(h.server.url, 'POST', `/episodes/${id}/rehearse-prompt`, { ...call, options: { toolSchemas: 'all', maxHistoryChars: 20000 } });
        expect(all.json.prompt).toBe(buildRehearsePrompt({ tools: h.domain.definitions(), grounding: lab.grounding, history: lab.historyBefore, call }, { toolSchemas: 'all', maxHistoryChars: 20000 }).text);
        // The same history sent by the trainer (an imagined conversation it holds) gives the same prompt.
        const withHistory = await api(h.server.url, 'POST', `/episodes/${id}/rehearse-prompt`, { ...call, history: lab.historyBefore });
        expect(withHistory.json.prompt).toBe(want);
        await api(h.server.url, 'POST', `/episodes/${id}/calls`, call);
        checked++;
      }
      // Same conversation afterwards.
      expect((await api(h.server.url, 'GET', `/episodes/${id}`)).json.messages).toEqual(lab.messages);
      await api(h.server.url, 'DELETE', `/episodes/${id}`);
    }
    expect(checked).toBeGreaterThan(10);
    const id = await newEpisode(h.train[0].id);
    expect((await api(h.server.url, 'POST', `/episodes/${id}/rehearse-prompt`, { name: 7 })).status).toBe(400);
    expect((await api(h.server.url, 'POST', `/episodes/${id}/rehearse-prompt`, { name: 'x', arguments: {}, options: { bogus: 1 } })).status).toBe(400);
  });

  it('parses rehearsals as the lab does', async () => {
    const id = await newEpisode(h.train[0].id);
    const ok = await api(h.server.url, 'POST', `/episodes/${id}/parse-rehearsal`, { text: '<execution_result>\n{"result":{"a":1}}\n</execution_result><|im_end|>', name: 'get_user_details' });
    expect(ok.json).toEqual({ ok: true, observation: '{"result":{"a":1}}', error: null });
    const bad = await api(h.server.url, 'POST', `/episodes/${id}/parse-rehearsal`, { text: '<execution_result>\n{"result":1} trailing', name: 'x' });
    expect(bad.json.ok).toBe(false);
    expect(bad.json.error.code).toBe('no-close-tag');
  });

  /** A trajectory: the calls, what the policy says at the end, and (imagined) how each call is rehearsed. */
  interface Variant {
    name: string;
    calls: (t: Task) => ToolCall[];
    reply: (t: Task) => string;
    rehearse?: (real: string) => string;
  }
  const variants: Variant[] = [
    { name: 'expert', calls: (t) => t.referenceActions, reply: (t) => 'Done. ' + t.facts.join(', ') },
    { name: 'no facts', calls: (t) => t.referenceActions, reply: () => 'Done.' },
    { name: 'reads only', calls: (t) => t.referenceActions.filter((a) => !RETAIL_WRITE_TOOLS.has(a.name)), reply: (t) => t.facts.join(' ') },
    { name: 'empty reply', calls: (t) => t.referenceActions, reply: () => '' },
    { name: 'rehearsed errors', calls: (t) => t.referenceActions, reply: (t) => t.facts.join(' '), rehearse: () => '<execution_result>\n{"error":"simulated failure"}\n</execution_result>' },
    { name: 'invalid rehearsal', calls: (t) => t.referenceActions, reply: (t) => t.facts.join(' '), rehearse: () => '{"result": ' },
  ];

  it('scores real trajectories with the lab\'s reward (defaultReward, real mode)', async () => {
    const seen = new Set<number>();
    for (const task of h.train.slice(0, 8)) {
      for (const v of variants.filter((x) => !x.rehearse)) {
        const lab = new Episode(task.id, 'lab', task, 'real', h.domain.createEnv(), [], MAX_TURNS);
        for (const c of v.calls(task)) lab.applyAct(formatCall(c));
        lab.applyAct(v.reply(task));
        const want = defaultReward(lab, h.domain);
        const id = await newEpisode(task.id);
        for (const c of v.calls(task)) await api(h.server.url, 'POST', `/episodes/${id}/calls`, c);
        // An empty generation never enters the lab's conversation; the trainer's has it.
        const tail = v.reply(task) === '' ? [{ role: 'assistant', content: '' }] : [];
        const got = await api(h.server.url, 'POST', `/episodes/${id}/score`, { messages: [{ role: 'system', content: h.domain.policy }, ...lab.messages, ...tail] });
        expect(got.json.reward, `${task.id} ${v.name}`).toBe(want);
        expect(got.json.kind).toBe('real');
        // The same trajectory replayed from the messages alone, on a fresh episode of the task.
        const id2 = await newEpisode(task.id);
        const rep = await api(h.server.url, 'POST', `/episodes/${id2}/score`, { replay: true, messages: [...lab.messages, ...tail] });
        expect(rep.json.reward, `${task.id} ${v.name} (replay)`).toBe(want);
        expect((await api(h.server.url, 'GET', `/episodes/${id2}`)).json.db_hash).toBe(h.domain.createEnv().hash());
        await api(h.server.url, 'DELETE', `/episodes/${id2}`);
        seen.add(want);
        await api(h.server.url, 'DELETE', `/episodes/${id}`);
      }
    }
    expect([...seen].sort()).toEqual([-0.1, 0, 1]);
  });

  it('scores imagined trajectories with the lab\'s checklist judge (defaultReward, rehearse mode)', async () => {
    const seen = new Set<number>();
    for (const task of h.train.slice(0, 8)) {
      for (const v of variants) {
        const lab = new Episode(task.id, 'lab', task, 'rehearse', h.domain.createEnv(), [], MAX_TURNS);
        for (const c of v.calls(task)) {
          lab.applyAct(formatCall(c));
          const p = lab.pending[0];
          const real = formatObservation(p.shadow);
          lab.applyRehearse(p, v.rehearse ? v.rehearse(real) : real);
          if (lab.done) break;
        }
        if (!lab.done) lab.applyAct(v.reply(task));
        const want = defaultReward(lab, h.domain);
        const id = await newEpisode(task.id);
        // The trainer sends the Act conversation; an invalid rehearsal is sent as the raw generation.
        const imagined = v.rehearse && v.name === 'invalid rehearsal'
          ? [...lab.messages, { role: 'tool', content: '<execution_result>\n{"result": ' }]
          : v.reply(task) === '' ? [...lab.messages, { role: 'assistant', content: '' }] : lab.messages;
        const got = await api(h.server.url, 'POST', `/episodes/${id}/score`, { imagined });
        expect(got.json.reward, `${task.id} ${v.name}`).toBe(want);
        expect(got.json.kind).toBe('judge');
        expect(got.json.checklist.length).toBe(task.checklist.length);
        // The real database was not touched by scoring.
        expect((await api(h.server.url, 'GET', `/episodes/${id}`)).json.db_hash).toBe(h.domain.createEnv().hash());
        seen.add(Math.sign(want));
        await api(h.server.url, 'DELETE', `/episodes/${id}`);
      }
    }
    expect([...seen].sort()).toEqual([-1, 0, 1]);
  });

  it('accepts OpenAI-style tool_calls in imagined assistant messages', async () => {
    const task = h.train[0];
    const lab = new Episode(task.id, 'lab', task, 'rehearse', h.domain.createEnv(), [], MAX_TURNS);
    const msgs: unknown[] = [];
    for (const c of task.referenceActions) {
      lab.applyAct(formatCall(c));
      const p = lab.pending[0];
      lab.applyRehearse(p, formatObservation(p.shadow));
      msgs.push({ role: 'assistant', content: '', tool_calls: [{ type: 'function', function: { name: c.name, arguments: JSON.stringify(c.arguments) } }] });
      msgs.push({ role: 'tool', content: lab.messages[lab.messages.length - 1].content });
    }
    lab.applyAct(task.facts.join(' ') || 'ok');
    msgs.push({ role: 'assistant', content: task.facts.join(' ') || 'ok' });
    const id = await newEpisode(task.id);
    const got = await api(h.server.url, 'POST', `/episodes/${id}/score`, { imagined: msgs });
    expect(got.json.reward).toBe(defaultReward(lab, h.domain));
    expect(got.json.reward).toBe(1);
  });
});

describe('limits and hygiene', () => {
  it('rejects oversized and over-nested bodies with clear errors, leaving the database untouched', async () => {
    const id = await newEpisode(h.train[0].id);
    const before = (await api(h.server.url, 'GET', `/episodes/${id}`)).json.db_hash;
    const big = await api(h.server.url, 'POST', `/episodes/${id}/calls`, { name: 'get_user_details', arguments: { user_id: 'x'.repeat(2 << 20) } });
    expect(big.status).toBe(413);
    expect(big.json.error.code).toBe('too_large');
    const deep = await api(h.server.url, 'POST', `/episodes/${id}/calls`, '{"name":"x","arguments":' + '{"a":'.repeat(40) + '1' + '}'.repeat(41));
    expect(deep.status).toBe(400);
    expect(deep.json.error.message).toMatch(/nested/);
    expect((await api(h.server.url, 'POST', `/episodes/${id}/score`, { imagined: 'x' })).status).toBe(400);
    expect((await api(h.server.url, 'POST', '/episodes', [])).status).toBe(400);
    expect((await api(h.server.url, 'GET', '/nowhere')).status).toBe(404);
    expect((await api(h.server.url, 'GET', `/episodes/${id}`)).json.db_hash).toBe(before);
  });

  it('ends an episode at the turn limit', async () => {
    const s = await startHarness('mini', { train: 1, test: 0 }, { maxTurns: 2 });
    try {
      const r = await api(s.server.url, 'POST', '/episodes', { task_id: s.train[0].id });
      const id = r.json.episode_id;
      const c = { name: 'get_user_details', arguments: { user_id: 'nobody' } };
      expect((await api(s.server.url, 'POST', `/episodes/${id}/calls`, c)).json.done).toBe(false);
      expect((await api(s.server.url, 'POST', `/episodes/${id}/calls`, c)).json.done).toBe(true);
      expect((await api(s.server.url, 'POST', `/episodes/${id}/calls`, c)).status).toBe(409);
      expect((await api(s.server.url, 'POST', `/episodes/${id}/score`, {})).json).toMatchObject({ reward: 0, end: 'max-turns' });
    } finally {
      await s.server.close(500);
    }
  });

  it('caps live episodes and reclaims expired ones', async () => {
    const s = await startHarness('mini', { train: 2, test: 0 }, { maxEpisodes: 4, maxEpisodesPerClient: 4, ttlMs: 150 });
    try {
      const ids: string[] = [];
      for (let i = 0; i < 4; i++) ids.push((await api(s.server.url, 'POST', '/episodes', { task_id: s.train[i % 2].id })).json.episode_id);
      const over = await api(s.server.url, 'POST', '/episodes', { task_id: s.train[0].id });
      expect(over.status).toBe(503);
      expect(over.json.error.code).toBe('too_many_episodes');
      // Keep one alive by using it; the others expire.
      const t0 = Date.now();
      while (Date.now() - t0 < 400) {
        await api(s.server.url, 'GET', `/episodes/${ids[0]}`);
        await new Promise((r) => setTimeout(r, 40));
      }
      expect(s.server.store.size).toBe(1);
      expect(s.server.store.stats.expired).toBe(3);
      expect((await api(s.server.url, 'GET', `/episodes/${ids[1]}`)).status).toBe(404);
      expect(s.logs.some((l) => l.event === 'episode_end' && l.why === 'expired')).toBe(true);
      expect((await api(s.server.url, 'POST', '/episodes', { task_id: s.train[0].id })).status).toBe(201);
    } finally {
      await s.server.close(500);
    }
  });

  it('shuts down gracefully: a request in flight completes, new connections are refused', async () => {
    const s = await startHarness('mini', { train: 1, test: 0 });
    const id = (await api(s.server.url, 'POST', '/episodes', { task_id: s.train[0].id })).json.episode_id;
    // A request whose body is still arriving when the shutdown starts.
    const u = new URL(`${s.server.url}/episodes/${id}/score`);
    let status = 0;
    const inflight = new Promise<void>((resolve, reject) => {
      const req = request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST', headers: { 'content-type': 'application/json', 'content-length': 2 } }, (res) => {
        status = res.statusCode ?? 0;
        res.resume();
        res.on('end', resolve);
      });
      req.on('error', reject);
      req.write('{');
      setTimeout(() => req.end('}'), 200);
    });
    await new Promise((r) => setTimeout(r, 100));
    const closed = s.server.close(2000);
    await inflight;
    expect(status).toBe(200);
    await closed;
    await expect(fetch(s.server.url + '/health')).rejects.toThrow();
    expect(s.server.store.size).toBe(0);
    expect(s.logs.map((l) => l.event)).toContain('closed');
  });
});
