// User-role pretraining rows (research/pretrain/user-rows.ts): one row per scripted-user turn of the
// conversation expert's conversations, each prompt byte-identical to what the model user is given at run time
// for the same conversation (so a trained user meets at run time what it trained on), no call or observation
// in any of them, the stop as the last target; and the quick pipeline with --user-tasks trains on them.
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
import { fitUserPrompt } from '../../src/rollout/user-prompt';
import { END } from '../../research/pretrain/data';
import { pretrain, QUICK_SPEC } from '../../research/pretrain/pipeline';
import { conversationRows, userRowToExample } from '../../research/pretrain/user-rows';

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
      const r = await pretrain(b, mini, { ...QUICK_SPEC, steps: 3, userTasks: 4 }, { seed: 2, out, log: () => {} });
      expect(r.data.rows.user).toBeGreaterThan(4 * 3);
      expect(r.losses.length).toBeGreaterThan(0);
      expect(r.losses.every((x) => Number.isFinite(x.loss))).toBe(true);
    } finally {
      b.dispose();
      await rm(out, { recursive: true, force: true });
    }
  }, 600_000);
});
