// Conversations of the conversation expert (src/env/retail/expert-conversation.ts) with the scripted user:
// they reach the reference database with every fact stated and no write before a yes, they replay byte for
// byte under a seed, and the user-side variation shows at its stated rates.

import { describe, expect, it } from 'vitest';
import { agentSteps, USER_STOP_TOKENS, type Turn } from '../../src/env/domain';
import { unconfirmedWrites } from '../../src/env/confirmation';
import { retailConfirmationOptions } from '../../src/env/retail/confirm-details';
import { runRetailExpertConversation } from '../../src/env/retail/expert-conversation';
import { worldDomain, WORLDS, worldBase, type WorldName } from '../../src/env/retail/index';
import type { RetailTask } from '../../src/env/retail/intent';
import { retailUser } from '../../src/env/retail/user';
import { firstThought, PROFILE_RATES, userProfile } from '../../src/env/retail/user-profile';
import { realReward } from '../../src/env/reward';
import { rowsFromConversation } from '../../src/env/conversation-rows';
import { rowsFromEpisode } from '../../src/env/rows';
import { base } from './helpers';

const worlds = Object.fromEntries(
  (['retail', 'mini'] as WorldName[]).map((w) => {
    const d = worldDomain(w, base);
    return [w, { domain: d, tasks: d.tasks.generate({ split: 'train', count: 200, seed: 0 }), confirm: retailConfirmationOptions(worldBase(base, WORLDS[w])) }];
  }),
) as Record<WorldName, { domain: ReturnType<typeof worldDomain>; tasks: RetailTask[]; confirm: ReturnType<typeof retailConfirmationOptions> }>;

const userTexts = (turns: Turn[]) => turns.flatMap((t) => (t.kind === 'user' ? [t.text] : []));

describe('the conversation expert against the scripted user', () => {
  for (const w of ['retail', 'mini'] as WorldName[]) {
    it(`reaches the reference database with the facts stated and every write confirmed (${w}, 200 train tasks)`, () => {
      const { domain, tasks, confirm } = worlds[w];
      let solved = 0;
      const unconfirmed: string[] = [];
      for (const t of tasks) {
        const r = runRetailExpertConversation(t, domain.createEnv(), { seed: 0 });
        const reward = realReward(domain.createEnv, t, r.steps);
        const u = unconfirmedWrites(r.turns, confirm);
        if (u.length) unconfirmed.push(`${t.id}: ${u.map((x) => x.call.name).join(', ')}`);
        if (reward.reward === 1 && u.length === 0 && r.stop !== null) solved++;
      }
      expect(unconfirmed).toEqual([]);
      expect(solved / tasks.length).toBeGreaterThanOrEqual(0.95);
    });
  }

  it('recovers from its deliberate mistakes without breaking the rule (mistakeRate 0.3)', () => {
    const { domain, tasks, confirm } = worlds.retail;
    let solved = 0;
    let mistakes = 0;
    for (const t of tasks) {
      const r = runRetailExpertConversation(t, domain.createEnv(), { seed: 1, mistakeRate: 0.3 });
      mistakes += r.mistakes;
      if (realReward(domain.createEnv, t, r.steps).reward === 1 && unconfirmedWrites(r.turns, confirm).length === 0) solved++;
    }
    expect(mistakes).toBeGreaterThan(5);
    expect(solved / tasks.length).toBeGreaterThanOrEqual(0.95);
  });

  it('recovers from a wrong first proposal: the user says no and restates, the right proposal follows, no wrong write (wrongProposalRate 0.5)', () => {
    for (const w of ['retail', 'mini'] as WorldName[]) {
      const { domain, tasks, confirm } = worlds[w];
      let solved = 0;
      let wrong = 0;
      for (const t of tasks) {
        const r = runRetailExpertConversation(t, domain.createEnv(), { seed: 2, wrongProposalRate: 0.5 });
        for (const k of r.wrongTurns) {
          wrong++;
          const [proposal, answer] = [r.turns[k], r.turns[k + 1]];
          expect(proposal.kind === 'reply' && /(?:^|\n\n)To confirm: I will cancel order #W\d+ with the reason "[a-z ]+"\. Shall I proceed \(yes\/no\)\?$/.test(proposal.text)).toBe(true);
          // A no with the request restated (or, for a user whose profile changes its mind at the first proposal, the change).
          expect(answer.kind === 'user' && /^(No,|Actually, wait\.|Hmm, actually I changed my mind\.|Sorry, one change\.)/.test(answer.text)).toBe(true);
          // The next proposal is made after an apology (or the change's acknowledgement), and no write comes between the wrong one and it.
          const next = r.turns.findIndex((x, i) => i > k + 1 && x.kind === 'reply');
          expect(r.turns.slice(k + 1, next).some((x) => x.kind === 'call' && confirm.isWrite(x.call.name))).toBe(false);
          expect(r.turns[next].kind === 'reply' && /^(I am sorry about that, let me correct it\.|No problem, let me update that\.)/.test((r.turns[next] as { text: string }).text)).toBe(true);
        }
        if (realReward(domain.createEnv, t, r.steps).reward === 1 && unconfirmedWrites(r.turns, confirm).length === 0) solved++;
      }
      expect(wrong).toBeGreaterThan(30);
      expect(solved / tasks.length).toBeGreaterThanOrEqual(0.95);
    }
  });

  it('runs through the Domain contract: domain.user and domain.confirmation', () => {
    const { domain, tasks } = worlds.mini;
    for (const t of tasks.slice(0, 40)) {
      const r = runRetailExpertConversation(t, domain.createEnv(), { seed: 4, user: domain.user!(t, { seed: 4 }) as ReturnType<typeof retailUser> });
      expect(JSON.stringify(r.turns)).toBe(JSON.stringify(runRetailExpertConversation(t, domain.createEnv(), { seed: 4 }).turns));
      expect(unconfirmedWrites(r.turns, domain.confirmation!)).toEqual([]);
      expect(domain.realReward(t, agentSteps(r.turns))).toBe(1);
    }
  });

  it('ends every conversation with a τ² stop token, greeting first, user and agent alternating', () => {
    for (const t of worlds.mini.tasks) {
      const { turns, stop } = runRetailExpertConversation(t, worlds.mini.domain.createEnv());
      expect(USER_STOP_TOKENS).toContain(stop);
      expect(turns[0]).toEqual({ kind: 'reply', text: 'Hi! How can I help you today?' });
      expect(turns.at(-1)).toEqual({ kind: 'user', text: stop });
      // After a user turn the agent acts, and its turn ends with one reply before the user speaks again.
      turns.forEach((x, i) => {
        if (x.kind === 'user' && i + 1 < turns.length) expect(turns.slice(i + 1).find((y) => y.kind !== 'call')?.kind).toBe('reply');
      });
    }
  });
});

describe('replay', () => {
  it('is deterministic: the same seed gives a byte-identical conversation', () => {
    const { domain, tasks } = worlds.retail;
    for (const t of tasks.slice(0, 60)) {
      const a = JSON.stringify(runRetailExpertConversation(t, domain.createEnv(), { seed: 7, mistakeRate: 0.2 }).turns);
      const b = JSON.stringify(runRetailExpertConversation(t, domain.createEnv(), { seed: 7, mistakeRate: 0.2 }).turns);
      expect(b).toBe(a);
    }
    const seeds = tasks.slice(0, 60).filter((t) => JSON.stringify(runRetailExpertConversation(t, domain.createEnv(), { seed: 7 }).turns) !== JSON.stringify(runRetailExpertConversation(t, domain.createEnv(), { seed: 8 }).turns));
    expect(seeds.length).toBeGreaterThan(30);
  });

  it('recomputes every user turn of a recorded conversation from the turns before it', () => {
    const { domain, tasks } = worlds.mini;
    for (const t of tasks.slice(0, 80)) {
      const { turns } = runRetailExpertConversation(t, domain.createEnv(), { seed: 3 });
      const recorded = JSON.parse(JSON.stringify(turns)) as Turn[];
      const user = retailUser(t, { seed: 3 });
      recorded.forEach((x, i) => {
        if (x.kind === 'user') expect(user.next(recorded.slice(0, i)).text).toBe(x.text);
      });
    }
  });
});

describe('user-side variation', () => {
  const tasks = worlds.retail.domain.tasks.generate({ split: 'train', count: 3000, seed: 2 });
  const profiles = tasks.map((t) => ({ t, p: userProfile(t, 0) }));
  const rate = (xs: { t: RetailTask; p: ReturnType<typeof userProfile> }[], f: (x: (typeof xs)[number]) => boolean) => xs.filter(f).length / xs.length;
  // Binomial: 4 standard deviations at the smallest eligible count keeps a correct rate from failing by chance.
  const near = (got: number, want: number, n: number) => expect(Math.abs(got - want)).toBeLessThan(4 * Math.sqrt((want * (1 - want)) / n));

  it('draws each variation at its stated rate among the tasks that admit it', () => {
    const nz = profiles.filter((x) => x.t.intent.auth.kind === 'name_zip');
    near(rate(nz, (x) => x.p.wrongZip !== null), PROFILE_RATES.wrongZip, nz.length);
    const can = profiles.filter((x) => x.t.intent.requests.some((r) => firstThought(r) !== null));
    near(rate(can, (x) => x.p.changeMind !== null), PROFILE_RATES.changeMind, can.length);
    const two = profiles.filter((x) => x.t.intent.requests.length === 2);
    near(rate(two, (x) => x.p.bothAtOnce), PROFILE_RATES.bothAtOnce, two.length);
    const single = profiles.filter((x) => !x.p.bothAtOnce);
    near(rate(single, (x) => x.p.idsUpfront), PROFILE_RATES.idsUpfront, single.length);
    // Only where they make sense.
    expect(profiles.every((x) => x.p.wrongZip === null || x.t.intent.auth.kind === 'name_zip')).toBe(true);
    expect(profiles.every((x) => !x.p.bothAtOnce || x.t.intent.requests.length === 2)).toBe(true);
    for (const x of nz) if (x.p.wrongZip) expect(x.p.wrongZip).not.toBe((x.t.intent.auth as { zip: string }).zip);
  });

  it('shows in the conversations: a wrong zip corrected, a mind changed at the confirmation, two things asked at once', () => {
    const { domain, tasks: ts } = worlds.retail;
    let zips = 0;
    let minds = 0;
    let both = 0;
    for (const t of ts) {
      const p = userProfile(t, 0);
      const r = runRetailExpertConversation(t, domain.createEnv(), { seed: 0 });
      const said = userTexts(r.turns);
      const calls = r.steps.flatMap((s) => (s.kind === 'call' ? [s] : []));
      if (p.wrongZip) {
        const tries = calls.filter((c) => c.call.name === 'find_user_id_by_name_zip');
        expect(tries.map((c) => [c.call.arguments.zip, c.observation.ok])).toEqual([[p.wrongZip, false], [(t.intent.auth as { zip: string }).zip, true]]);
        zips++;
      }
      // What each user turn meant, recomputed from the turns before it.
      const user = retailUser(t, { seed: 0 });
      const meant = r.turns.flatMap((x, i) => (x.kind === 'user' ? [user.next(r.turns.slice(0, i)).meaning?.kind] : []));
      if (meant.includes('change')) {
        expect(p.changeMind).not.toBeNull();
        // The change comes in answer to a proposal, and a yes follows it.
        expect(meant.indexOf('yes', meant.indexOf('change'))).toBeGreaterThan(meant.indexOf('change'));
        minds++;
      }
    }
    for (const t of tasks.filter((x) => x.intent.requests.length === 2).slice(0, 60)) {
      const r = runRetailExpertConversation(t, domain.createEnv(), { seed: 0 });
      const said = userTexts(r.turns);
      if (userProfile(t, 0).bothAtOnce) {
        expect(said[0]).toMatch(/two things/i);
        both++;
      } else expect(said[0]).not.toMatch(/two things/i);
      expect(realReward(domain.createEnv, t, r.steps).reward).toBe(1);
    }
    expect(zips).toBeGreaterThan(3);
    expect(minds).toBeGreaterThan(3);
    expect(both).toBeGreaterThan(15);
  });
});

describe('rows from conversations', () => {
  it('are the one-message rows when the conversation is one user message and the agent steps', () => {
    const { domain, tasks } = worlds.retail;
    for (const t of tasks.slice(0, 30)) {
      const { steps } = domain.expert(t, domain.createEnv());
      expect(rowsFromConversation(t.id, [{ kind: 'user', text: t.userMessages[0] }, ...steps])).toEqual(rowsFromEpisode(t, steps));
    }
  });

  it('train every agent turn but the fixed greeting, with the user turns in the history and no stop token', () => {
    const { domain, tasks } = worlds.mini;
    for (const t of tasks.slice(0, 40)) {
      const { turns } = runRetailExpertConversation(t, domain.createEnv());
      const rows = rowsFromConversation(t.id, turns);
      const calls = turns.filter((x) => x.kind === 'call').length;
      const replies = turns.filter((x) => x.kind === 'reply').length;
      expect(rows.filter((r) => r.role === 'act').length).toBe(calls + replies - 1);
      expect(rows.filter((r) => r.role === 'rehearse').length).toBe(calls);
      const last = rows.at(-1)!;
      expect(last.messages.filter((m) => m.role === 'user').map((m) => m.content)).toEqual(userTexts(turns).slice(0, -1));
      expect(rows.every((r) => r.messages.every((m) => !USER_STOP_TOKENS.some((k) => m.content.includes(k))))).toBe(true);
      expect(rows.some((r) => r.role === 'act' && r.target === 'Hi! How can I help you today?')).toBe(false);
    }
  });
});
