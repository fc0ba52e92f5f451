// Conversation episodes through the batched rollout loop (RolloutConfig.conversation), with the tiny random
// model and the real mini world: scripted Act turns see exactly the prompts conversation-rows.ts trains on,
// records carry the conversation, a generated reply is answered by the user, and the configuration is checked.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Backend } from '../../src/engine/backend';
import { USER_STOP, type Task } from '../../src/env/domain';
import { rowsFromConversation } from '../../src/env/conversation-rows';
import { runRetailExpertConversation } from '../../src/env/retail/expert-conversation';
import type { RetailTask } from '../../src/env/retail/intent';
import { loadWorldDomain } from '../../src/env/retail/node';
import { formatCall } from '../../src/env/toolcall';
import type { Qwen3Model } from '../../src/model/qwen3';
import type { Tokenizer } from '../../src/model/tokenizer';
import { buildActPrompt } from '../../src/rollout/act-prompt';
import { RolloutConfigError, RolloutStepper, runRollouts, type RolloutConfig, type RolloutDomain } from '../../src/rollout/rollout';
import { loadTinyPolicy } from '../fixtures/tiny-model';

const mini = await loadWorldDomain('mini');
const tasks = mini.tasks.generate({ split: 'train', count: 40, seed: 5 }).filter((t) => t.referenceActions.some((a) => mini.confirmation!.isWrite(a.name))).slice(0, 3);
const experts = new Map(tasks.map((t) => [t.id, runRetailExpertConversation(t, mini.createEnv(), { seed: 0 })]));
/** The expert's agent texts after the greeting, one per Act turn. */
const textsOf = (t: Task) => experts.get(t.id)!.turns.slice(1).flatMap((s) => (s.kind === 'call' ? [formatCall(s.call)] : s.kind === 'reply' ? [s.text] : []));
const script = (t: Task, turn: number) => textsOf(t)[turn];
const limits = { maxTurns: 60, maxActTokens: 16, maxRehearseTokens: 16 };

let backend: Backend;
let model: Qwen3Model;
let tok: Tokenizer;
beforeAll(async () => {
  ({ backend, model, tok } = await loadTinyPolicy(3));
});
afterAll(() => backend?.dispose());

const cfg = (over: Partial<RolloutConfig> = {}): RolloutConfig => ({ mode: 'real', k: 2, seed: 1, limits, conversation: { user: 'scripted' }, actScript: script, ...over });

describe('conversation episodes in the rollout loop', () => {
  it("scripted Act turns see the prompts of the conversation rows, turn by turn, and the records carry the conversation", async () => {
    const s = new RolloutStepper({ model, tokenizer: tok, adapter: null }, mini, tasks, cfg());
    const prompts = new Map<number, string[]>();
    while (!s.done) for (const x of (await s.round()).scripted) (prompts.get(x.episode) ?? prompts.set(x.episode, []).get(x.episode)!).push(x.prompt);
    const b = s.finish();
    expect(b.rows).toHaveLength(0);
    b.rollouts.forEach((r, e) => {
      const task = tasks[Math.floor(e / 2)];
      const expert = experts.get(task.id)!;
      const rows = rowsFromConversation(task.id, expert.turns).filter((x) => x.role === 'act');
      expect(prompts.get(e)).toEqual(rows.map((x) => buildActPrompt(mini.policy, mini.definitions(), x.messages)));
      expect(expert.stop).toBe(USER_STOP);
      expect(r.end).toBe('user-stop');
      expect(r.conversation?.stop).toBe(expert.stop);
      expect(JSON.stringify(r.conversation?.turns)).toBe(JSON.stringify(expert.turns.slice(0, -1)));
      expect(r.conversation?.userTurns).toBe(expert.turns.filter((t) => t.kind === 'user').length - 1);
      expect(r.reward).toBe(1);
    });
  });

  it("a generated reply does not end the episode: the user answers it and the next Act prompt holds the user's message", async () => {
    // A compact view of the domain keeps the byte-level tiny model's prompts inside its 2048 tokens.
    const compact: RolloutDomain = { policy: 'You are a retail agent.', definitions: () => mini.definitions().slice(0, 1), createEnv: mini.createEnv, user: mini.user!.bind(mini) as RolloutDomain['user'], confirmation: mini.confirmation };
    // Turn 0 is a reply written by the script; turn 1 is generated (the tiny model's garbage, under 16 tokens).
    const actScript = (_: Task, turn: number) => (turn === 0 ? 'Could you give me your email address, please?' : turn >= 2 ? 'Thank you.' : undefined);
    const b = await runRollouts({ model, tokenizer: tok, adapter: null }, compact, tasks.slice(0, 1), cfg({ k: 1, actScript, limits: { ...limits, maxTurns: 3 } }));
    const r = b.rollouts[0];
    expect(b.rows).toHaveLength(1);
    const user = mini.user!(tasks[0] as RetailTask, { seed: 0 });
    const conv = r.conversation!;
    // The opening, then the user's answer to the scripted question, as the simulator says them.
    expect(conv.turns[1]).toEqual({ kind: 'user', text: user.next(conv.turns.slice(0, 1)).text });
    expect(conv.turns[3]).toEqual({ kind: 'user', text: user.next(conv.turns.slice(0, 3)).text });
    expect(r.messages.slice(0, 5).map((m) => m.role)).toEqual(['assistant', 'user', 'assistant', 'user', 'assistant']);
    // The generated turn (turns[4]): a reply gets the user's answer or stop; a call gets its observation.
    const generated = conv.turns[4];
    if (generated.kind === 'reply' && r.end !== 'user-stop') expect(conv.turns[5]).toEqual({ kind: 'user', text: user.next(conv.turns.slice(0, 5)).text });
    if (generated.kind === 'call') expect(r.messages[5].role).toBe('tool');
    expect(['user-stop', 'max-turns']).toContain(r.end);
  });

  it('refuses a conversation without a scripted user or with an unknown user kind', () => {
    const noUser: RolloutDomain = { policy: mini.policy, definitions: mini.definitions, createEnv: mini.createEnv };
    expect(() => new RolloutStepper({ model, tokenizer: tok, adapter: null }, noUser, tasks, cfg())).toThrow(RolloutConfigError);
    expect(() => new RolloutStepper({ model, tokenizer: tok, adapter: null }, mini, tasks, cfg({ conversation: { user: 'model' as never } }))).toThrow(RolloutConfigError);
    expect(() => new RolloutStepper({ model, tokenizer: tok, adapter: null }, mini, tasks, cfg({ conversation: { user: 'scripted', maxUserTurns: 0 } }))).toThrow(RolloutConfigError);
  });

  it('without the option, records carry no conversation and the reply ends the episode', async () => {
    const t = tasks[0];
    const actScript = (_: Task, turn: number) => (turn === 0 ? 'Hello.' : undefined);
    const b = await runRollouts({ model, tokenizer: tok, adapter: null }, mini, [t], { mode: 'real', k: 1, seed: 1, limits, actScript });
    expect(b.rollouts[0].end).toBe('reply');
    expect('conversation' in b.rollouts[0]).toBe(false);
    expect(b.rollouts[0].messages).toEqual([...t.userMessages.map((content) => ({ role: 'user', content })), { role: 'assistant', content: 'Hello.' }]);
  });
});
