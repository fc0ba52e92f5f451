// Conversation episodes in the rollout state machine (src/rollout/conversation.ts): the expert's conversations
// replayed as policy texts through an Episode meet the same user turns and the same rewards; the confirmation
// rule gates the verifier and the checklist judge alike (the same write before the yes fails, after it passes);
// the user-turn cap terminates; garbage from a policy never throws; one-message episodes are untouched.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { AGENT_GREETING, USER_STOP, type Step, type Task, type Turn } from '../../src/env/domain';
import { unconfirmedWrites } from '../../src/env/confirmation';
import { runRetailExpertConversation } from '../../src/env/retail/expert-conversation';
import type { RetailTask } from '../../src/env/retail/intent';
import { loadWorldDomain } from '../../src/env/retail/node';
import { realReward } from '../../src/env/reward';
import { judge } from '../../src/env/judge';
import { formatCall, formatObservation } from '../../src/env/toolcall';
import { Conversation } from '../../src/rollout/conversation';
import { Episode } from '../../src/rollout/episode';
import { rewardBy } from '../../src/rollout/reward-rule';

const domain = await loadWorldDomain('mini');
const tasks = domain.tasks.generate({ split: 'train', count: 60, seed: 2 });
const isWrite = (n: string) => domain.confirmation!.isWrite(n);
const withWrite = tasks.filter((t) => t.referenceActions.some((a) => isWrite(a.name)));

function conversationEpisode(task: Task, mode: 'real' | 'rehearse' = 'real', maxUserTurns = 30, maxTurns = 60): Episode {
  const ep = new Episode(task.id, `${task.id}:0`, task, mode, domain.createEnv(), [], maxTurns);
  ep.converse(new Conversation(domain.user!(task as RetailTask, { seed: 0 }), maxUserTurns));
  return ep;
}

/** The agent's texts of a conversation after the greeting (a call as the policy writes it, a reply as is). */
const agentTexts = (turns: readonly Turn[]): string[] => turns.slice(1).flatMap((t) => (t.kind === 'call' ? [formatCall(t.call)] : t.kind === 'reply' ? [t.text] : []));

/** Plays texts into an episode; rehearse mode answers every call faithfully (the shadow's observation). */
function play(ep: Episode, texts: readonly string[]): void {
  for (const text of texts) {
    if (ep.done) break;
    ep.applyAct(text);
    for (const p of [...ep.pending]) ep.applyRehearse(p, formatObservation(p.shadow));
  }
}

/** The expert's conversation with every write moved before the reply that proposed it (made before the yes). */
function writesFirst(turns: readonly Turn[]): Turn[] {
  const out: Turn[] = [];
  for (const t of turns) {
    if (t.kind === 'call' && isWrite(t.call.name)) {
      // Back over the user's yes and the proposal reply(s) before it: the write goes where the proposal began.
      let i = out.length;
      while (i > 0 && out[i - 1].kind === 'user') i--;
      while (i > 0 && out[i - 1].kind === 'reply') i--;
      out.splice(i, 0, t);
    } else out.push(t);
  }
  return out;
}

const userTexts = (turns: readonly Turn[]) => turns.flatMap((t) => (t.kind === 'user' ? [t.text] : []));
const stepsOf = (turns: readonly Turn[]): Step[] => turns.filter((t): t is Step => t.kind !== 'user');

describe('conversation episodes', () => {
  it('open with the greeting and the user\'s opening; a reply is answered by the user instead of ending the episode', () => {
    const task = withWrite[0];
    const ep = conversationEpisode(task);
    expect(ep.messages[0]).toEqual({ role: 'assistant', content: AGENT_GREETING });
    expect(ep.messages[1].role).toBe('user');
    expect(ep.messages[1].content).toBe(domain.user!(task as RetailTask, { seed: 0 }).next([{ kind: 'reply', text: AGENT_GREETING }]).text);
    expect(ep.messages).toHaveLength(2);
    ep.applyAct('Could you give me your email address, please?');
    expect(ep.done).toBe(false);
    expect(ep.messages.map((m) => m.role)).toEqual(['assistant', 'user', 'assistant', 'user']);
    expect(ep.conversation!.userTurns).toHaveLength(2);
  });

  it("replaying the expert's conversations meets the same user turns, ends on the user's stop, and scores 1 under both rules", () => {
    let compared = 0;
    for (const task of withWrite.slice(0, 12)) {
      const expert = runRetailExpertConversation(task, domain.createEnv(), { seed: 0 });
      if (expert.stop !== USER_STOP) continue;
      for (const mode of ['real', 'rehearse'] as const) {
        const ep = conversationEpisode(task, mode);
        play(ep, agentTexts(expert.turns));
        expect(ep.end, task.id).toBe('user-stop');
        expect(ep.conversation!.stop).toBe(USER_STOP);
        const turns = ep.conversation!.turns(ep.steps);
        // The expert's list ends with the stop as a user turn; the episode records the stop, not a turn.
        expect(userTexts(turns)).toEqual(userTexts(expert.turns).slice(0, -1));
        expect(JSON.stringify(turns)).toBe(JSON.stringify(expert.turns.slice(0, -1)));
        expect(unconfirmedWrites(turns, domain.confirmation!)).toEqual([]);
        expect(rewardBy('verifier', ep, domain), task.id).toBe(1);
        expect(rewardBy('checklist', ep, domain), task.id).toBe(1);
      }
      compared++;
    }
    expect(compared).toBeGreaterThanOrEqual(8);
  });

  it('the same writes made before the yes break the task under the verifier and the checklist judge; without the rule both would pay', () => {
    let checked = 0;
    for (const task of withWrite.slice(0, 12)) {
      const expert = runRetailExpertConversation(task, domain.createEnv(), { seed: 0 });
      if (expert.stop !== USER_STOP) continue;
      const early = writesFirst(expert.turns);
      for (const mode of ['real', 'rehearse'] as const) {
        const ep = conversationEpisode(task, mode);
        play(ep, agentTexts(early));
        const turns = ep.conversation!.turns(ep.steps);
        // The replies the user heard are the expert's, so it said the same things, yes included.
        expect(userTexts(turns)).toEqual(userTexts(expert.turns).slice(0, -1));
        const broken = unconfirmedWrites(turns, domain.confirmation!);
        expect(broken.length).toBeGreaterThan(0);
        expect(broken.every((b) => b.why === 'no-yes')).toBe(true);
        // The database and the facts are right, and the checklist is met: only the rule fails it.
        expect(realReward(domain.createEnv, task, ep.steps).reward).toBe(1);
        expect(judge(task.checklist, ep.steps, { isWrite, normaliseArgs: domain.normaliseArgs }).reward).toBe(1);
        expect(rewardBy('verifier', ep, domain), task.id).toBe(0);
        expect(rewardBy('checklist', ep, domain), task.id).toBe(0);
        expect(rewardBy('strict-checklist', ep, domain), task.id).toBe(0);
      }
      checked++;
    }
    expect(checked).toBeGreaterThanOrEqual(8);
  });

  it('a failed write attempt before the yes counts too (C4), in both rules', () => {
    const task = withWrite[0];
    const expert = runRetailExpertConversation(task, domain.createEnv(), { seed: 0 });
    const w = stepsOf(expert.turns).find((s) => s.kind === 'call' && isWrite(s.call.name));
    if (!w || w.kind !== 'call') throw new Error('fixture: the expert made no write');
    const bad = { ...w.call, arguments: { ...w.call.arguments, order_id: '#W0000000' } };
    const texts = agentTexts(expert.turns);
    const ep = conversationEpisode(task);
    // The failing attempt comes first, before the user has been asked anything; then the expert's conversation.
    play(ep, [formatCall(bad), ...texts]);
    const failed = ep.steps.find((s) => s.kind === 'call' && s.call.arguments.order_id === '#W0000000');
    expect(failed && failed.kind === 'call' && failed.observation.ok).toBe(false);
    expect(realReward(domain.createEnv, task, ep.steps).reward).toBe(1);
    expect(rewardBy('verifier', ep, domain)).toBe(0);
    expect(rewardBy('checklist', ep, domain)).toBe(0);
  });

  it('the user-turn cap terminates the episode with reward 0', () => {
    const ep = conversationEpisode(withWrite[0], 'real', 2);
    ep.applyAct('Hello.');
    expect(ep.done).toBe(false);
    ep.applyAct('Hello again.');
    expect(ep.end).toBe('user-turns');
    expect(ep.terminated).toBe(true);
    expect(ep.conversation!.userTurns).toHaveLength(2);
    expect(rewardBy('verifier', ep, domain)).toBe(0);
    expect(rewardBy('checklist', ep, domain)).toBe(0);
  });

  it('the Act-turn limit still applies across the conversation', () => {
    const ep = conversationEpisode(withWrite[0], 'real', 30, 3);
    ep.applyAct('Could you give me your email address, please?');
    const lookup = formatCall({ name: 'list_all_product_types', arguments: {} });
    ep.applyAct(lookup);
    expect(ep.done).toBe(false);
    ep.applyAct(lookup);
    expect(ep.end).toBe('max-turns');
    expect(rewardBy('verifier', ep, domain)).toBe(0);
  });

  it('a user message that carries a stop token ends the conversation (a model user may wrap one in words)', () => {
    const task = withWrite[0];
    const said = ['I need help.', `Thanks, that is all. ${USER_STOP}`];
    const user = { next: (c: readonly Turn[]) => ({ kind: 'message' as const, text: said[Math.min(c.filter((t) => t.kind === 'user').length, 1)] }) };
    const ep = new Episode(task.id, 'x', task, 'real', domain.createEnv(), [], 10);
    ep.converse(new Conversation(user, 10));
    ep.applyAct('Done.');
    expect(ep.end).toBe('user-stop');
    expect(ep.conversation!.stop).toBe(USER_STOP);
    expect(ep.messages.map((m) => m.content)).toEqual([AGENT_GREETING, 'I need help.', 'Done.']);
  });

  it('any policy text never throws and every episode ends within its limits', () => {
    const task = withWrite[1];
    fc.assert(
      fc.property(fc.array(fc.oneof(fc.string({ maxLength: 80 }), fc.constantFrom('yes', 'Could you confirm your order id?', formatCall(task.referenceActions[0]), '<tool_call>\n{"name": 1}\n</tool_call>')), { minLength: 1, maxLength: 40 }), (texts) => {
        const ep = conversationEpisode(task, 'real', 8, 20);
        play(ep, texts);
        const r = rewardBy('verifier', ep, domain);
        expect([-0.1, 0, 1]).toContain(r);
        expect(ep.conversation!.userTurns.length).toBeLessThanOrEqual(8);
        expect(ep.turns).toBeLessThanOrEqual(20);
      }),
      { numRuns: 60, seed: 47 },
    );
  });

  it('one-message episodes are unchanged: the reply ends them, and an unconfirmed write is not gated', () => {
    const task = withWrite[0];
    const ep = new Episode(task.id, 'x', task, 'real', domain.createEnv(), [], 12);
    expect(ep.messages).toEqual(task.userMessages.map((content) => ({ role: 'user', content })));
    for (const a of task.referenceActions) ep.applyAct(formatCall(a));
    ep.applyAct(task.facts.join('. ') || 'Done.');
    expect(ep.end).toBe('reply');
    expect(ep.conversation).toBeNull();
    expect(rewardBy('verifier', ep, domain)).toBe(1);
    expect(() => ep.converse(new Conversation(domain.user!(task as RetailTask)))).toThrow();
  });
});
