// One mechanism: stepping the training loop round by round (RolloutStepper, and the lab's view over it)
// gives exactly the rollouts runRollouts gives with the same seed: the same tokens, log-probs, rows,
// observations, end reasons and rewards. A tiny random-weight model writes the generations; the expert
// writes the scripted Act turns so that real calls get rehearsed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Task } from '../../src/env/domain';
import { formatCall, serializeObservation } from '../../src/env/toolcall';
import { RolloutStepper, runRollouts, type RolloutBatch, type RolloutConfig, type RoundReport } from '../../src/rollout/rollout';
import { LabRollouts, rehearseFailureText } from '../../workers/lab/episode';
import { domain, loadTiny, retail, type Tiny } from './helpers';

let tiny: Tiny;
let tasks: ReturnType<typeof retail.tasks.generate>;
let expertText: (t: Task, turn: number) => string | undefined;
beforeAll(async () => {
  tiny = await loadTiny();
  tasks = retail.tasks.generate({ split: 'train', count: 2, seed: 0 });
  const scripts = new Map(tasks.map((t) => [t.id, retail.expert(t, retail.createEnv()).steps.map((s) => (s.kind === 'call' ? formatCall(s.call) : s.text))]));
  expertText = (t, turn) => scripts.get(t.id)?.[turn];
});
afterAll(() => tiny?.backend.dispose());

const policy = () => ({ model: tiny.model, tokenizer: tiny.tok, adapter: tiny.adapter });
/** What makes two batches the same rollouts (wall time and cache counters aside). */
const essence = (b: RolloutBatch) => ({
  rows: b.rows.map((r) => ({ role: r.role, rolloutId: r.rolloutId, turn: r.turn, reward: r.reward, prompt: [...r.promptTokens], response: [...r.responseTokens], lp: [...r.oldLogprobs] })),
  rollouts: b.rollouts,
  fidelity: b.fidelity,
  counts: { ...b.stats, wallMs: 0 },
});

describe('RolloutStepper: the training loop one round at a time', () => {
  it('stepping K rounds by hand equals runRollouts (rehearse and real mode), and each round says what it generated', async () => {
    for (const mode of ['rehearse', 'real'] as const) {
      // Scripted for the first turn only: later turns (and every rehearsal) are the model's.
      const cfg: RolloutConfig = { mode, k: 2, seed: 5, limits: { maxTurns: 3, maxActTokens: 6, maxRehearseTokens: 10 }, actScript: (t, turn) => (turn === 0 ? expertText(t, 0) : undefined) };
      const whole = await runRollouts(policy(), domain, tasks, cfg);
      const s = new RolloutStepper(policy(), domain, tasks, cfg);
      const reports: RoundReport[] = [];
      while (!s.done) reports.push(await s.round());
      const stepped = s.finish();
      expect(essence(stepped)).toEqual(essence(whole));
      expect(reports).toHaveLength(whole.stats.rounds);
      // Every row is accounted for by exactly one reported generation, with its prompt text.
      const reported = reports.flatMap((r) => [...r.acts, ...r.rehearsals]);
      expect(reported.map((g) => g.row).sort((a, b) => a - b)).toEqual(stepped.rows.map((_, i) => i));
      for (const g of reported) expect(tiny.tok.encode(g.prompt)).toEqual([...stepped.rows[g.row].promptTokens]);
      expect(reports[0].scripted).toHaveLength(4);
      if (mode === 'rehearse') expect(reports[0].rehearsals.length).toBe(4); // the scripted call of each rollout
    }
  });

  it('the lab view of K rollouts is runRollouts of the task: the same rows, texts, observations and rewards', async () => {
    const task = tasks[0];
    const maxNewTokens = 6;
    const lab = new LabRollouts(policy(), domain, task, '', { mode: 'rehearse', seed: 9, k: 2, maxTurns: 3, maxNewTokens, rehearseTokens: 4 * maxNewTokens, temperature: 1, actSource: 'expert-act' });
    while (!lab.done) await lab.step();
    const whole = await runRollouts(policy(), domain, [task], {
      mode: 'rehearse', k: 2, seed: 9, temperature: 1, actScript: expertText,
      limits: { maxTurns: 3, maxActTokens: maxNewTokens, maxRehearseTokens: 4 * maxNewTokens },
    });
    const labBatch = lab.stepper.finish();
    expect(essence(labBatch)).toEqual(essence(whole));
    for (let e = 0; e < 2; e++) {
      const v = lab.view(e);
      const rec = whole.rollouts[e];
      expect(v.done).toBe(true);
      expect(v.reward!.value).toBe(rec.reward);
      expect(v.turns).toHaveLength(rec.turns);
      expect(v.turns.map((t) => t.act.text)).toEqual(rec.messages.filter((m) => m.role === 'assistant').map((m) => m.content));
      // The expert's turn is scored by the policy (teacher forcing): one log-prob per token of its text.
      expect(v.turns[0].act.source).toBe('expert');
      expect(v.turns[0].act.tokens.map((t) => t.text).join('')).toBe(v.turns[0].act.text);
      expect(v.turns[0].act.tokens.every((t) => Number.isFinite(t.lp) && t.lp <= 0)).toBe(true);
      // Each Rehearse generation shown is a training row, token for token, beside the real observation.
      const rehRows = rec.rows.map((i) => whole.rows[i]).filter((r) => r.role === 'rehearse');
      const shown = v.turns.flatMap((t) => t.calls.flatMap((c) => (c.rehearse ? [c] : [])));
      expect(shown).toHaveLength(rehRows.length);
      shown.forEach((c, i) => {
        expect(c.rehearse!.tokens.map((t) => t.lp)).toEqual([...rehRows[i].oldLogprobs]);
        expect(c.rehearse!.promptTokens).toBe(rehRows[i].promptTokens.length);
      });
      const first = v.turns[0].calls[0];
      expect(first.real).toBe(serializeObservation(retail.createEnv().execute(task.referenceActions[0])));
      // The random model cannot write an <execution_result>: the view says why the rollout ended.
      expect(rec.end).toBe('rehearse-invalid');
      expect(v.endReason).toBe(rehearseFailureText(rec.rehearseFailure, rec.rehearseCut ?? null));
      expect(first.rehearseError).toBe(v.endReason);
      // A cut (the budget ran out before the closing tag) is told apart from malformed text.
      expect(first.rehearseCut).toBe(rec.rehearseCut ?? null);
      if (rec.rehearseCut !== null) expect(v.endReason).toMatch(/^the rehearsal was cut at 24 tokens/);
      else expect(v.endReason).toMatch(/^malformed rehearsal: /);
      expect(first.fidelity).toEqual({ exact: false, f1: 0, errorAgree: false });
    }
    const g = lab.groupRow(1);
    expect(g).toMatchObject({ rollout: 1, reward: whole.rollouts[1].reward, turns: whole.rollouts[1].turns, endReason: lab.endReason(1) });
    expect(g.actRows + g.rehearseRows).toBe(whole.rollouts[1].rows.length);
  });

  it('a prompt that cannot fit the context ends the rollout there, and the view says by how much', async () => {
    const lab = new LabRollouts(policy(), domain, tasks[0], '', { mode: 'real', seed: 1, k: 1, maxTurns: 3, maxNewTokens: 8000, rehearseTokens: 32, temperature: 1, actSource: 'policy' });
    const r = await lab.step();
    expect(r.overflows).toHaveLength(1);
    const v = lab.view();
    expect(v.done).toBe(true);
    expect(v.turns).toHaveLength(0);
    expect(v.endReason).toMatch(/^context limit: the next Act prompt and its budget need \d+ tokens, the model holds 8192$/);
    expect(v.reward!.value).toBe(0);
    expect(v.reward!.note).toBe(`reward 0 whatever the checklist says: the episode was cut off (${v.endReason})`);
    // Every item says why it failed: nothing was called before the context ran out.
    for (const it of v.reward!.items.filter((x) => !x.satisfied)) expect(it.reason).toMatch(/\S/);
  });
});
