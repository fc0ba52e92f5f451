// The agent's conversation rows (--conversation-tasks, research/pretrain/user-rows.ts conversationAgentExamples):
// each Act row's prompt must be byte-identical to the prompt a conversation rollout with the scripted user
// renders at the same turn (src/rollout/conversation.ts: greeting, user and agent turns, tool results), or the
// policy would train on one text and be asked another at evaluation. Checked by replaying the expert's own
// turns through the rollout loop (actScript) against the same scripted user, with the expert's recoverable
// mistakes on (their error observations must enter both the same way). Also: the targets are the expert's
// turns, the Rehearse rows carry the real observations, and the pipeline and the CLI take the setting.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Backend } from '../../src/engine/backend';
import { createBackend } from '../../src/engine/index';
import type { Task } from '../../src/env/domain';
import { runRetailExpertConversation } from '../../src/env/retail/expert-conversation';
import type { RetailTask } from '../../src/env/retail/intent';
import { loadWorldDomain } from '../../src/env/retail/node';
import { formatCall, formatObservation } from '../../src/env/toolcall';
import type { Qwen3Model } from '../../src/model/qwen3';
import type { Tokenizer } from '../../src/model/tokenizer';
import type { ToolDefinition } from '../../src/rollout/chat';
import { RolloutStepper } from '../../src/rollout/rollout';
import { deriveSeed } from '../../src/util/rng';
import { END } from '../../research/pretrain/data';
import { pretrainCommand } from '../../research/pretrain/cli';
import { MINI_SPEC, pretrain, QUICK_SPEC } from '../../research/pretrain/pipeline';
import { conversationAgentExamples, statedOrderNumbers, userIdentityTargets, writeChainTargets } from '../../research/pretrain/user-rows';
import { userProfile } from '../../src/env/retail/user-profile';
import { isExplicitYes } from '../../src/env/confirmation';
import { loadTinyPolicy } from '../fixtures/tiny-model';

const mini = loadWorldDomain('mini');
const tools = mini.definitions() as unknown as ToolDefinition[];
const o = { tasks: 30, seed: 13, mistakeRate: 0.5 };
const tasks = mini.tasks.generate({ split: 'train', count: o.tasks, seed: o.seed }) as RetailTask[];
const examples = conversationAgentExamples(mini, o, tools).examples;
/** The expert's conversation of task i, exactly as conversationRows draws it. */
const expertOf = (i: number) => runRetailExpertConversation(tasks[i], mini.createEnv(), { seed: deriveSeed(o.seed, i, 2), userSeed: deriveSeed(o.seed, i, 1), mistakeRate: o.mistakeRate });

let backend: Backend;
let model: Qwen3Model;
let tok: Tokenizer;
beforeAll(async () => {
  ({ backend, model, tok } = await loadTinyPolicy(3));
});
afterAll(() => backend?.dispose());

describe('conversation rows for the agent', () => {
  it("each Act row's prompt is the prompt a conversation rollout with the scripted user renders at that turn", async () => {
    let mistakes = 0;
    let compared = 0;
    for (let i = 0; i < tasks.length; i++) {
      const task = tasks[i];
      const expert = expertOf(i);
      mistakes += expert.mistakes;
      // The expert's agent texts after the greeting, one per Act turn: the rollout's scripted turns.
      const texts = expert.turns.slice(1).flatMap((s) => (s.kind === 'call' ? [formatCall(s.call)] : s.kind === 'reply' ? [s.text] : []));
      const s = new RolloutStepper({ model, tokenizer: tok, adapter: null }, mini, [task], {
        mode: 'real',
        k: 1,
        seed: 1,
        limits: { maxTurns: 60, maxActTokens: 16, maxRehearseTokens: 16 },
        conversation: { user: 'scripted', userSeed: deriveSeed(o.seed, i, 1) },
        actScript: (_: Task, turn: number) => texts[turn],
      });
      const prompts: string[] = [];
      while (!s.done) for (const x of (await s.round()).scripted) prompts.push(x.prompt);
      const b = s.finish();
      expect(b.rollouts[0].end).toBe('user-stop');
      const acts = examples.filter((e) => e.taskId === task.id && e.role === 'act');
      expect(acts.map((e) => e.prompt)).toEqual(prompts);
      expect(acts.map((e) => e.response)).toEqual(texts.map((t) => t + END));
      compared += prompts.length;
    }
    // The replay covered conversations with several turns and with the expert's mistakes in them.
    expect(compared).toBeGreaterThan(4 * tasks.length);
    expect(mistakes).toBeGreaterThan(0);
  }, 120_000);

  it('the Act prompts open with the greeting and ask for identity before any lookup; Rehearse targets are the real observations', () => {
    tasks.forEach((task, i) => {
      const acts = examples.filter((e) => e.taskId === task.id && e.role === 'act');
      // The first Act turn answers the user's opening, which states no identity: the expert asks for it.
      expect(acts[0].prompt).toContain('<|im_start|>assistant\nHi! How can I help you today?<|im_end|>\n<|im_start|>user\n');
      expect(acts[0].response).not.toContain('<tool_call>');
      const calls = expertOf(i).turns.flatMap((t) => (t.kind === 'call' ? [t] : []));
      const reh = examples.filter((e) => e.taskId === task.id && e.role === 'rehearse');
      expect(reh.map((e) => e.response)).toEqual(calls.map((c) => formatObservation(c.observation) + END));
    });
  });

  it('--conversation-write-repeat repeats the proposal a yes answered and the write call, and nothing else', () => {
    const isWrite = mini.confirmation!.isWrite;
    const repeated = conversationAgentExamples(mini, { ...o, writeChainRepeat: 3 }, tools).examples;
    let chains = 0;
    tasks.forEach((task, i) => {
      const turns = expertOf(i).turns;
      const chain = writeChainTargets(turns, isWrite);
      // Each write call is in the chain, and the reply before its user turn, which is a yes, is the proposal.
      turns.forEach((t, k) => {
        if (t.kind !== 'call' || !isWrite(t.call.name)) return;
        expect(chain.has(formatCall(t.call))).toBe(true);
        const yes = turns[k - 1];
        const proposal = turns[k - 2];
        expect(yes.kind === 'user' && isExplicitYes(yes.text)).toBe(true);
        expect(proposal.kind === 'reply' && chain.has(proposal.text) && /yes\/no/.test(proposal.text)).toBe(true);
      });
      chains += chain.size;
      const once = examples.filter((e) => e.taskId === task.id);
      const thrice = repeated.filter((e) => e.taskId === task.id);
      const inChain = (e: (typeof examples)[number]) => e.role === 'act' && chain.has(e.response.slice(0, -END.length));
      expect(thrice.length).toBe(once.length + 2 * once.filter(inChain).length);
      // The copies follow their row; the order of everything else is unchanged.
      const same = (a: (typeof examples)[number], b: (typeof examples)[number]) => a.prompt === b.prompt && a.response === b.response;
      expect(thrice.filter((e, k) => k === 0 || !same(e, thrice[k - 1]) || !inChain(e))).toEqual(once);
    });
    expect(chains).toBeGreaterThan(10);
  });

  it('--conversation-wrong-proposals: a wrong proposal is in the history of the rows after it, and never a target', () => {
    const withWrong = conversationAgentExamples(mini, { ...o, wrongProposalRate: 0.6 }, tools).examples;
    const wrongText = /(?:^|\n\n)To confirm: I will cancel order #W\d+ with the reason "[a-z ]+"\. Shall I proceed \(yes\/no\)\?$/;
    let inHistory = 0;
    tasks.forEach((task, i) => {
      const c = runRetailExpertConversation(task, mini.createEnv(), { seed: deriveSeed(o.seed, i, 2), userSeed: deriveSeed(o.seed, i, 1), mistakeRate: o.mistakeRate, wrongProposalRate: 0.6 });
      const acts = withWrong.filter((e) => e.taskId === task.id && e.role === 'act');
      for (const k of c.wrongTurns) {
        const text = (c.turns[k] as { text: string }).text;
        expect(text).toMatch(wrongText);
        expect(acts.some((e) => e.response === text + END)).toBe(false);
        inHistory += acts.filter((e) => e.prompt.includes(`<|im_start|>assistant\n${text}<|im_end|>`)).length;
      }
      // Every other agent turn after the greeting is a target.
      const agentTurns = c.turns.filter((t, k) => k > 0 && t.kind !== 'user' && !c.wrongTurns.includes(k)).length;
      expect(acts.length).toBe(agentTurns);
    });
    expect(inHistory).toBeGreaterThan(5);
  });

  it("--conversation-swap-share: a drawn task's rows hold one fresh identity everywhere, the others are as without it", () => {
    const plain = conversationAgentExamples(mini, { ...o, writeChainRepeat: 2 }, tools);
    const swapped = conversationAgentExamples(mini, { ...o, writeChainRepeat: 2, agentSwap: { share: 0.5, seed: 7 } }, tools);
    expect(swapped.examples.length).toBe(plain.examples.length);
    const cap = (w: string) => w.charAt(0).toUpperCase() + w.slice(1);
    let drawn = 0;
    let calls = 0;
    tasks.forEach((task, i) => {
      const a = plain.examples.filter((e) => e.taskId === task.id);
      const b = swapped.examples.filter((e) => e.taskId === task.id);
      if (a.every((e, k) => e.prompt === b[k].prompt && e.response === b[k].response)) return;
      drawn++;
      const turns = expertOf(i).turns;
      const old = userIdentityTargets(task, userProfile(task, deriveSeed(o.seed, i, 1)).wrongZip);
      const text = b.map((e) => e.prompt + e.response).join('\n');
      for (const n of old.names) expect(text).not.toMatch(new RegExp(`\\b${cap(n)}\\b`));
      for (const d of [...old.numbers, ...statedOrderNumbers(turns)]) expect(text).not.toMatch(new RegExp(`(?<![0-9])${d}(?![0-9])`));
      // The same fresh values in the user's turns and the calls that copy them.
      for (const e of b.filter((x) => x.role === 'act' && x.response.includes('find_user_id_by'))) {
        const values = [...e.response.matchAll(/"(?:first_name|last_name|zip|email)": ?"([^"]+)"/g)].map((m) => m[1]);
        for (const v of values) expect(e.prompt.toLowerCase()).toContain(v.toLowerCase());
        calls += values.length;
      }
    });
    expect(swapped.agentSwapped).toBe(drawn);
    expect(drawn).toBeGreaterThan(5);
    expect(drawn).toBeLessThan(tasks.length - 5);
    expect(calls).toBeGreaterThan(5);
    // Absent or 0: no draw, the rows as without it.
    expect(conversationAgentExamples(mini, { ...o, agentSwap: { share: 0, seed: 7 } }, tools)).toEqual(conversationAgentExamples(mini, o, tools));
  });

  it('the quick pipeline trains on them and counts them apart (--conversation-tasks); the command records the flag', async () => {
    const out = await mkdtemp(join(tmpdir(), 'pretrain-conv-'));
    const b = await createBackend('cpu-fast', { threads: 1 });
    try {
      const r = await pretrain(b, mini, { ...QUICK_SPEC, steps: 2, conversationTasks: 3 }, { seed: 2, out, log: () => {} });
      expect(r.data.rows.conversationAct).toBeGreaterThan(3 * 2);
      expect(r.data.rows.conversationRehearse).toBeGreaterThan(0);
      const without = await pretrain(b, mini, { ...QUICK_SPEC, steps: 2 }, { seed: 2, out, log: () => {} });
      expect(without.data.rows.conversationAct).toBeUndefined();
      // The one-message rows are the same with and without: the conversations are added, nothing replaced.
      expect([r.data.rows.act, r.data.rows.rehearse]).toEqual([without.data.rows.act, without.data.rows.rehearse]);
      expect(r.losses.every((x) => Number.isFinite(x.loss))).toBe(true);
      const lines: string[] = [];
      const swapped = await pretrain(b, mini, { ...QUICK_SPEC, steps: 2, conversationTasks: 3, conversationSwapShare: 1 }, { seed: 2, out, log: (l) => lines.push(l) });
      // (Counted after the length cut, which fresh names of other lengths may move by a row.)
      expect(swapped.data.rows.conversationAct).toBeGreaterThan(3 * 2);
      expect(lines.join('\n')).toMatch(/conversation rows: .*; identity swapped in 3 of the tasks/);
    } finally {
      b.dispose();
      await rm(out, { recursive: true, force: true });
    }
    const cmd = pretrainCommand({ world: 'mini', seed: 0, backend: 'cpu-fast', quick: false, init: undefined, lr: undefined, snapshotEvery: undefined, spec: { ...MINI_SPEC, conversationTasks: 1500, conversationWriteRepeat: 3, conversationWrongProposals: 0.3, conversationSwapShare: 0.5, userLossWeight: 2 }, base: MINI_SPEC });
    expect(cmd).toBe(`npm run pretrain -- --world mini --seed 0 --steps ${MINI_SPEC.steps} --backend cpu-fast --conversation-tasks 1500 --conversation-write-repeat 3 --conversation-wrong-proposals 0.3 --conversation-swap-share 0.5 --user-weight 2`);
  }, 600_000);

  it('--user-weight scales the user-role rows\' loss, and only theirs', async () => {
    const out = await mkdtemp(join(tmpdir(), 'pretrain-userw-'));
    const b = await createBackend('cpu-fast', { threads: 1 });
    // The same seed and data: the losses of the first steps (user rows among their batches) differ only through the weights.
    const first = async (spec: typeof QUICK_SPEC) => (await pretrain(b, mini, { ...spec, steps: 6 }, { seed: 2, out, log: () => {} })).losses.map((x) => x.loss);
    try {
      const withUser = { ...QUICK_SPEC, userTasks: 3 };
      expect(await first({ ...withUser, userLossWeight: 3 })).not.toEqual(await first(withUser));
      expect(await first({ ...QUICK_SPEC, userLossWeight: 3 })).toEqual(await first(QUICK_SPEC));
    } finally {
      b.dispose();
      await rm(out, { recursive: true, force: true });
    }
  }, 600_000);
});
