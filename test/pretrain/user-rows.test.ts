// User-role pretraining rows (research/pretrain/user-rows.ts): one row per scripted-user turn of the
// conversation expert's conversations, each prompt byte-identical to what the model user is given at run time
// for the same conversation (so a trained user meets at run time what it trained on), no call or observation
// in any of them, the stop as the last target; and the quick pipeline with --user-tasks trains on them.
// The identity swap (--user-swap-share): a swapped row is the row with the user's identity replaced by one
// fresh identity everywhere (scenario, conversation, target), the other rows are byte-identical to the rows
// without the swap, and the draw is deterministic under its seed. --user-identity-repeat N: the rows that state
// the identity come N times, each copy with its own swap draw.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createBackend } from '../../src/engine/index';
import { userStopToken } from '../../src/env/domain';
import { runRetailExpertConversation } from '../../src/env/retail/expert-conversation';
import type { RetailTask } from '../../src/env/retail/intent';
import { loadWorldDomain } from '../../src/env/retail/node';
import { deriveSeed } from '../../src/util/rng';
import { userProfile } from '../../src/env/retail/user-profile';
import { fitUserPrompt } from '../../src/rollout/user-prompt';
import { END } from '../../research/pretrain/data';
import { pretrainCommand } from '../../research/pretrain/cli';
import { MINI_SPEC, pretrain, QUICK_SPEC } from '../../research/pretrain/pipeline';
import { conversationRows, userIdentityTargets, userRowToExample } from '../../research/pretrain/user-rows';

const mini = loadWorldDomain('mini');

describe('user-role rows', () => {
  const o = { split: 'train' as const, tasks: 6, seed: 11 };
  const { user, agent } = conversationRows(mini, o);
  const tasks = mini.tasks.generate({ split: 'train', count: o.tasks, seed: o.seed }) as RetailTask[];

  it('one row per user turn, the stop last, and the run-time prompt of the model user for the same conversation', () => {
    expect(agent.some((r) => r.role === 'act') && agent.some((r) => r.role === 'rehearse')).toBe(true);
    let n = 0;
    tasks.forEach((task, i) => {
      const userSeed = deriveSeed(o.seed, i, 1);
      const conv = runRetailExpertConversation(task, mini.createEnv(), { seed: deriveSeed(o.seed, i, 2), userSeed });
      const rows = user.filter((r) => r.taskId === task.id);
      const at = conv.turns.flatMap((t, j) => (t.kind === 'user' ? [j] : []));
      expect(rows.length).toBe(at.length);
      expect(userStopToken(rows.at(-1)!.target)).toBe(conv.stop);
      rows.forEach((r, k) => {
        const ex = userRowToExample(r);
        expect(ex.role).toBe('user');
        expect(ex.response).toBe((conv.turns[at[k]] as { text: string }).text + END);
        expect(ex.prompt).toBe(fitUserPrompt(mini.userInstructions!(task, { seed: userSeed })!, conv.turns.slice(0, at[k]), () => true)!.text);
        // A user never sees the agent's calls or observations.
        expect(ex.prompt).not.toMatch(/<tool_call>|<tool_response>|"name": "find_user_id/);
        n++;
      });
    });
    expect(n).toBe(user.length);
  });

  it('the quick pipeline trains on them (--user-tasks)', async () => {
    const out = await mkdtemp(join(tmpdir(), 'pretrain-user-'));
    const b = await createBackend('cpu-fast', { threads: 1 });
    try {
      const lines: string[] = [];
      const r = await pretrain(b, mini, { ...QUICK_SPEC, steps: 3, userTasks: 4, userSwapShare: 0.5 }, { seed: 2, out, log: (l) => lines.push(l) });
      expect(r.data.rows.user).toBeGreaterThan(4 * 3);
      expect(lines.some((l) => /user-role rows: \d+ .*identity swapped in [1-9]\d* of them/.test(l))).toBe(true);
      expect(r.losses.length).toBeGreaterThan(0);
      expect(r.losses.every((x) => Number.isFinite(x.loss))).toBe(true);
    } finally {
      b.dispose();
      await rm(out, { recursive: true, force: true });
    }
  }, 600_000);
});

describe('identity swap of user rows (--user-swap-share)', () => {
  const base = { split: 'train' as const, tasks: 40, seed: 11 };
  const plain = conversationRows(mini, base);
  const swapped = conversationRows(mini, { ...base, userSwap: { share: 0.6, seed: 5 } });
  const tasks = new Map((mini.tasks.generate({ split: 'train', count: base.tasks, seed: base.seed }) as RetailTask[]).map((t, i) => [t.id, { task: t, i }]));
  const text = (r: (typeof plain.user)[number]) => {
    const e = userRowToExample(r);
    return e.prompt + e.response;
  };
  const changed = plain.user.map((r, k) => text(r) !== text(swapped.user[k]));

  it('swaps a share of the rows; the others are byte-identical to the rows without the swap', () => {
    expect(swapped.user.length).toBe(plain.user.length);
    expect(plain.swapped).toBe(0);
    expect(changed.filter(Boolean).length).toBe(swapped.swapped);
    const share = swapped.swapped / plain.user.length;
    expect(share).toBeGreaterThan(0.45);
    expect(share).toBeLessThan(0.75);
    plain.user.forEach((r, k) => {
      if (!changed[k]) expect(swapped.user[k]).toEqual(r);
    });
    // The agent's rows are never swapped.
    expect(swapped.agent).toEqual(plain.agent);
  });

  it('a swapped row is the row with one fresh identity in the scenario, the conversation and the target', () => {
    const kinds = new Set<string>();
    let identityTurns = 0;
    let wrongZips = 0;
    plain.user.forEach((r, k) => {
      if (!changed[k]) return;
      const { task, i } = tasks.get(r.taskId)!;
      const a = task.intent.auth;
      kinds.add(a.kind);
      const wrongZip = userProfile(task, deriveSeed(base.seed, i, 1)).wrongZip;
      const s = swapped.user[k];
      // The identity before and after, read from the two scenarios (an email may be written in capitals).
      const nzOf = (x: string) => /You are (\w+) (\w+) in zip code (\d{5})\./.exec(x);
      const emOf = (x: string) => /[Yy]our email is (\S+@example\.com)/i.exec(x);
      const [nz0, nz] = [nzOf(r.instructions.knownInfo), nzOf(s.instructions.knownInfo)];
      const [em0, em] = [emOf(r.instructions.knownInfo), emOf(s.instructions.knownInfo)];
      const pairs: [string, string][] = [];
      if (a.kind !== 'email') {
        expect(nz0 && nz, `${a.kind}: ${s.instructions.knownInfo}`).not.toBeNull();
        expect([nz0![1], nz0![2], nz0![3]]).toEqual([a.first, a.last, a.zip]);
        pairs.push([a.first, nz![1]], [a.last, nz![2]], [a.zip, nz![3]]);
      }
      if (a.kind !== 'name_zip') {
        expect(em0 && em, `${a.kind}: ${s.instructions.knownInfo}`).not.toBeNull();
        expect(em0![1].toLowerCase()).toBe(a.email.toLowerCase());
        pairs.push([em0![1], em![1]]);
      }
      if (wrongZip) {
        wrongZips++;
        const wz = /you first give (\d{5}) by mistake/.exec(s.instructions.taskInstructions);
        expect(wz).not.toBeNull();
        pairs.push([wrongZip, wz![1]]);
      }
      // Every value is fresh: none of the old ones is left anywhere in the rendered row.
      for (const [old, now] of pairs) expect(now).not.toBe(old);
      const swappedText = text(s);
      for (const [old] of pairs) expect(swappedText).not.toMatch(new RegExp(`(?<![A-Za-z0-9])${old.replace(/[.]/g, '\\.')}(?![A-Za-z0-9])`, 'i'));
      // Replacing each old value by the new one in the unswapped row gives the swapped row, byte for byte.
      const sub = (x: string) => pairs.reduce((acc, [old, now]) => acc.replace(new RegExp(`(?<![A-Za-z0-9])${old.replace(/[.]/g, '\\.')}(?![A-Za-z0-9])`, 'g'), now), x);
      const e0 = userRowToExample(r);
      const e1 = userRowToExample(s);
      expect(e1.prompt).toBe(sub(e0.prompt));
      expect(e1.response).toBe(sub(e0.response));
      // Identity turns: the target now states values that only the scenario holds.
      if (pairs.some(([old]) => r.target.includes(old))) {
        identityTurns++;
        for (const [old, now] of pairs) if (r.target.includes(old)) expect(e1.prompt.slice(0, e1.prompt.indexOf('</scenario>'))).toContain(now);
      }
    });
    expect(identityTurns).toBeGreaterThan(5);
    // Every kind of identity, and the wrong zip given first, among the swapped rows.
    expect(kinds.size).toBe(3);
    expect(wrongZips).toBeGreaterThan(0);
  });

  it('the identity targets: names lower case, the zip, the wrong zip, the email digits (not its .old mark)', () => {
    for (const { task } of tasks.values()) {
      const a = task.intent.auth;
      const t = userIdentityTargets(task, a.kind === 'name_zip' ? '12345' : null);
      if (a.kind !== 'email') expect(t.names).toEqual(expect.arrayContaining([a.first.toLowerCase(), a.last.toLowerCase()]));
      if (a.kind !== 'email') expect(t.numbers).toContain(a.zip);
      if (a.kind === 'name_zip') expect(t.numbers).toContain('12345');
      if (a.kind !== 'name_zip') expect(t.numbers).toContain(a.email.match(/[0-9]{4,}/)![0]);
      expect(t.names).not.toContain('old');
    }
  });

  it('is deterministic under its seed, and another seed draws other rows and values', () => {
    const again = conversationRows(mini, { ...base, userSwap: { share: 0.6, seed: 5 } });
    expect(again.user).toEqual(swapped.user);
    const other = conversationRows(mini, { ...base, userSwap: { share: 0.6, seed: 6 } });
    expect(other.user).not.toEqual(swapped.user);
    expect(conversationRows(mini, { ...base, userSwap: { share: 0, seed: 5 } }).user).toEqual(plain.user);
  });

  it('--user-identity-repeat: the rows that state the identity N times, each copy drawn on its own; the others once', () => {
    const rep = conversationRows(mini, { ...base, identityRepeat: 3 });
    const states = (r: (typeof plain.user)[number]) => {
      const { task, i } = tasks.get(r.taskId)!;
      const a = task.intent.auth;
      const wz = userProfile(task, deriveSeed(base.seed, i, 1)).wrongZip;
      const vals = [...(a.kind !== 'email' ? [a.first, a.last, a.zip] : []), ...(a.kind !== 'name_zip' ? [a.email] : []), ...(wz ? [wz] : [])];
      return vals.some((v) => new RegExp(`(?<![A-Za-z0-9])${v.replace(/[.]/g, '\\.')}(?![A-Za-z0-9])`, 'i').test(r.target));
    };
    const n = plain.user.filter(states).length;
    expect(n).toBeGreaterThan(20);
    expect(rep.user.length).toBe(plain.user.length + 2 * n);
    // Without the swap the copies are the row itself, right after it; the rest in the same order.
    expect(rep.user.filter((r, k) => k === 0 || r !== rep.user[k - 1] || !states(r))).toEqual(plain.user);
    // With the swap every copy has its own draw: at share 1 the three copies of a row are three identities.
    const both = conversationRows(mini, { ...base, identityRepeat: 3, userSwap: { share: 1, seed: 5 } });
    expect(both.user.length).toBe(rep.user.length);
    expect(both.swapped).toBe(rep.user.length);
    let triples = 0;
    for (let k = 0; k + 2 < rep.user.length; k++)
      if (rep.user[k] === rep.user[k + 1] && rep.user[k] === rep.user[k + 2]) {
        triples++;
        expect(new Set([both.user[k].target, both.user[k + 1].target, both.user[k + 2].target]).size).toBe(3);
        k += 2;
      }
    expect(triples).toBe(n);
    // Repeat 1 is the rows as without it.
    expect(conversationRows(mini, { ...base, identityRepeat: 1, userSwap: { share: 0.6, seed: 5 } }).user).toEqual(swapped.user);
  });

  it('the command line records the flags', () => {
    const cmd = pretrainCommand({ world: 'mini', seed: 1, backend: 'cpu-fast', quick: false, init: undefined, lr: undefined, snapshotEvery: undefined, spec: { ...MINI_SPEC, userTasks: 6000, userLossWeight: 2, userSwapShare: 0.7 }, base: MINI_SPEC });
    expect(cmd).toBe(`npm run pretrain -- --world mini --seed 1 --steps ${MINI_SPEC.steps} --backend cpu-fast --user-tasks 6000 --user-weight 2 --user-swap-share 0.7`);
    const rep = pretrainCommand({ world: 'mini', seed: 1, backend: 'cpu-fast', quick: false, init: undefined, lr: undefined, snapshotEvery: undefined, spec: { ...MINI_SPEC, userTasks: 6000, userSwapShare: 0.7, userIdentityRepeat: 4 }, base: MINI_SPEC });
    expect(rep).toBe(`npm run pretrain -- --world mini --seed 1 --steps ${MINI_SPEC.steps} --backend cpu-fast --user-tasks 6000 --user-swap-share 0.7 --user-identity-repeat 4`);
  });
});
