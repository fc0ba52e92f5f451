// A GRPO run with a user (the run setting `user`, issue 47): training rollouts and held-out evaluations are
// conversations with the mini world's scripted user, run.json records the setting, a conversation's reward is the
// confirmation-gated one, and the base evaluation of a conversation run is never reused for a one-message run.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Backend } from '../../src/engine/backend';
import { AGENT_GREETING, type Task } from '../../src/env/domain';
import { loadWorldDomain } from '../../src/env/retail/node';
import { runRetailExpertConversation } from '../../src/env/retail/expert-conversation';
import { formatCall } from '../../src/env/toolcall';
import type { Qwen3Model } from '../../src/model/qwen3';
import type { Tokenizer } from '../../src/model/tokenizer';
import { baseEvalKey, keyDiffs } from '../../src/rl/base-eval';
import { grpoRunConfig, type TrainOptions } from '../../src/rl/grpo-config';
import { GrpoRun, type EvalMetrics } from '../../src/rl/run';
import { MemoryStore } from '../../src/rl/store';
import type { RolloutDomain } from '../../src/rollout/rollout';
import { loadTinyPolicy } from '../fixtures/tiny-model';

const mini = await loadWorldDomain('mini');
const writes = mini.tasks.generate({ split: 'train', count: 40, seed: 5 }).filter((t) => t.referenceActions.some((a) => mini.confirmation!.isWrite(a.name)));
const tasks = writes.slice(0, 2);
const expert = new Map(tasks.map((t) => [t.id, runRetailExpertConversation(t, mini.createEnv(), { seed: 0 })]));
// The expert's agent turns after the greeting, one per Act turn: a scripted policy that converses as the expert does.
const script = (t: Task, turn: number) =>
  expert.get(t.id)!.turns.slice(1).flatMap((s) => (s.kind === 'call' ? [formatCall(s.call)] : s.kind === 'reply' ? [s.text] : []))[turn];
// The same agent, but it writes at once: the write comes before the user's yes.
const eager = (t: Task, turn: number) => (turn === 0 ? formatCall(t.referenceActions.find((a) => mini.confirmation!.isWrite(a.name))!) : script(t, turn));

let backend: Backend;
let model: Qwen3Model;
let tok: Tokenizer;
beforeAll(async () => {
  ({ backend, model, tok } = await loadTinyPolicy(5));
});
afterAll(() => backend?.dispose());

const options = (over: Partial<TrainOptions> = {}): TrainOptions => ({
  mode: 'real', steps: 1, seed: 2, k: 2, promptsPerStep: 2, lr: 1e-2, rank: 2, evalEvery: 1, evalFidelityTokens: 0,
  maxTurns: 60, maxActTokens: 8, maxRehearseTokens: 16, user: 'scripted', ...over,
});

async function run(o: TrainOptions, actScript: (t: Task, turn: number) => string | undefined, domain: RolloutDomain = mini, evalTasks: Task[] = []) {
  const store = new MemoryStore();
  const r = await GrpoRun.open(model, tok, domain, { train: tasks, eval: evalTasks }, store, grpoRunConfig(o), { actScript });
  await r.trainStep();
  r.free();
  const lines = (f: string) => store.text(f).trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
  return { store, rollouts: lines('rollouts.jsonl'), evals: lines('eval.jsonl') as EvalMetrics[], run: JSON.parse(store.text('run.json')) };
}

describe('a GRPO run with the scripted user', () => {
  it("training rollouts are conversations: the expert's turns succeed, the same write before the yes scores 0", async () => {
    const good = await run(options(), script);
    expect(good.run.config.user).toBe('scripted');
    expect(good.rollouts).toHaveLength(4);
    for (const r of good.rollouts) {
      expect(r.conversation.turns[0]).toEqual({ kind: 'reply', text: AGENT_GREETING });
      expect(r.conversation.userTurns).toBeGreaterThan(1);
      expect(r.end).toBe('user-stop');
      expect(r.reward).toBe(1);
    }
    const bad = await run(options(), eager);
    for (const r of bad.rollouts) expect(r.reward).toBe(0);
  });

  it('the held-out evaluation is a conversation too (a reply does not end it), and off is the one-message run it was', async () => {
    // The byte-level tiny model needs a compact view of the domain to stay inside its context.
    const compact: RolloutDomain = { policy: 'You are a retail agent.', definitions: () => mini.definitions().slice(0, 1), createEnv: mini.createEnv, user: mini.user!.bind(mini) as RolloutDomain['user'], confirmation: mini.confirmation };
    const withUser = await run(options({ maxTurns: 3 }), script, compact, tasks);
    expect(withUser.evals).toHaveLength(1);
    expect(Object.keys(withUser.evals[0].ends).every((e) => e !== 'reply')).toBe(true);
    const off = await run(options({ maxTurns: 3, user: 'off' }), script, compact, tasks);
    expect(off.run.config).not.toHaveProperty('user');
    expect(off.rollouts.every((r) => !('conversation' in r))).toBe(true);
    expect(Object.keys(off.evals[0].ends).some((e) => e !== 'context')).toBe(true);
  });

  it("the base evaluation's key names the user, and only when there is one", () => {
    const c = grpoRunConfig(options());
    const off = grpoRunConfig(options({ user: 'off' }));
    expect(keyDiffs(baseEvalKey('m', 'mini', tasks, c), baseEvalKey('m', 'mini', tasks, off)).map((d) => d.split(':')[0])).toEqual(['user']);
    expect(baseEvalKey('m', 'mini', tasks, off)).not.toHaveProperty('user');
  });
});
