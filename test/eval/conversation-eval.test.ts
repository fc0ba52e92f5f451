// The conversation evaluation (src/eval/conversation-eval.ts): τ²'s pass^k estimator, the report's figures on
// a reference agent (the conversation expert replayed) and on the same agent writing before the yes, and the
// eval CLI's --user flags (a tiny random model end to end; usage errors).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Task, Turn } from '../../src/env/domain';
import { runRetailExpertConversation } from '../../src/env/retail/expert-conversation';
import { loadWorldDomain } from '../../src/env/retail/node';
import { formatCall } from '../../src/env/toolcall';
import type { Backend } from '../../src/engine/backend';
import type { Qwen3Model } from '../../src/model/qwen3';
import type { Tokenizer } from '../../src/model/tokenizer';
import { evaluateConversations, passHatK, type ConversationTranscript } from '../../src/eval/conversation-eval';
import { evalCli } from '../../src/cli/eval';
import { loadTinyPolicy } from '../fixtures/tiny-model';
import { calculateOnlyDomain, captureIo, tinyModelWorkspace } from '../helpers/cli';

/** τ²'s own formula, with binomials computed the direct way. */
const comb = (n: number, k: number): number => (k < 0 || k > n ? 0 : k === 0 ? 1 : (comb(n - 1, k - 1) * n) / k);

describe('pass^k (τ²\'s estimator)', () => {
  it('is C(c, k) / C(n, k) for every c, k <= n <= 8, and refuses what is not a count', () => {
    for (let n = 1; n <= 8; n++) for (let c = 0; c <= n; c++) for (let k = 1; k <= n; k++) expect(passHatK(c, n, k)).toBeCloseTo(comb(c, k) / comb(n, k), 12);
    expect(passHatK(2, 4, 1)).toBe(0.5);
    expect(passHatK(2, 4, 2)).toBeCloseTo(1 / 6, 12);
    expect(passHatK(2, 4, 3)).toBe(0);
    expect(passHatK(4, 4, 4)).toBe(1);
    for (const [c, n, k] of [[5, 4, 1], [1, 4, 0], [1, 4, 5], [-1, 4, 1], [1.5, 4, 1]]) expect(() => passHatK(c, n, k)).toThrow(RangeError);
  });
});

const mini = await loadWorldDomain('mini');
const tasks = mini.tasks.generate({ split: 'test', count: 30, seed: 1 }).filter((t) => t.referenceActions.some((a) => mini.confirmation!.isWrite(a.name))).slice(0, 4);
const isWrite = (n: string) => mini.confirmation!.isWrite(n);
const experts = new Map(tasks.map((t) => [t.id, runRetailExpertConversation(t, mini.createEnv(), { seed: 0 }).turns]));
const texts = (turns: readonly Turn[]) => turns.slice(1).flatMap((s) => (s.kind === 'call' ? [formatCall(s.call)] : s.kind === 'reply' ? [s.text] : []));
/** Every write moved before the reply that proposed it. */
function writesFirst(turns: readonly Turn[]): Turn[] {
  const out: Turn[] = [];
  for (const t of turns) {
    if (t.kind !== 'call' || !isWrite(t.call.name)) {
      out.push(t);
      continue;
    }
    let i = out.length;
    while (i > 0 && out[i - 1].kind === 'user') i--;
    while (i > 0 && out[i - 1].kind === 'reply') i--;
    out.splice(i, 0, t);
  }
  return out;
}

let backend: Backend;
let model: Qwen3Model;
let tok: Tokenizer;
beforeAll(async () => {
  ({ backend, model, tok } = await loadTinyPolicy(2));
});
afterAll(() => backend?.dispose());

const limits = { maxTurns: 40, maxActTokens: 8, maxRehearseTokens: 8 };
const policy = () => ({ model, tokenizer: tok, actAdapter: null });

describe('evaluateConversations', () => {
  it('the reference agent: success 1, pass^k 1 for every k, no unconfirmed write, every episode ended by the user', async () => {
    const r = await evaluateConversations(policy(), mini, tasks, { limits, seed: 0, conversation: { user: 'scripted' }, samples: 3, actScript: (t: Task, turn: number) => texts(experts.get(t.id)!)[turn] });
    expect(r.tasks).toBe(tasks.length);
    expect(r.temperature).toBe(1);
    expect(r.success).toBe(1);
    expect(r.passK).toEqual([1, 1, 1]);
    expect(r.successWithoutRule).toBe(1);
    expect(r.unconfirmed).toMatchObject({ writes: 0, effective: 0, episodes: 0 });
    expect(r.writes).toBe(3 * tasks.reduce((a, t) => a + experts.get(t.id)!.filter((s) => s.kind === 'call' && isWrite(s.call.name)).length, 0));
    expect(r.ends).toEqual({ 'user-stop': 3 * tasks.length });
    const agent = tasks.reduce((a, t) => a + texts(experts.get(t.id)!).length, 0) / tasks.length;
    const user = tasks.reduce((a, t) => a + experts.get(t.id)!.filter((s) => s.kind === 'user').length - 1, 0) / tasks.length;
    expect(r.turns.agent).toBeCloseTo(agent, 12);
    expect(r.turns.user).toBeCloseTo(user, 12);
    expect(r.toolPrecision).toBe(1);
    expect(r.toolRecall).toBe(1);
    expect(r.perTask.every((p) => p.successes === 3 && p.samples === 3)).toBe(true);
  });

  it('the same agent writing before the yes: success 0 under the rule, 1 without it, every write counted', async () => {
    const early = new Map(tasks.map((t) => [t.id, writesFirst(experts.get(t.id)!)]));
    const seen: ConversationTranscript[] = [];
    const r = await evaluateConversations(policy(), mini, tasks, { limits, seed: 0, conversation: { user: 'scripted' }, samples: 1, actScript: (t: Task, turn: number) => texts(early.get(t.id)!)[turn], onConversation: (c) => seen.push(c) });
    // The transcripts: one per conversation in task order, each the conversation the rule judged, with its writes.
    expect(seen.map((c) => c.taskId)).toEqual(tasks.map((t) => t.id));
    expect(seen.every((c) => c.sample === 0 && c.reward === 0 && c.successWithoutRule)).toBe(true);
    expect(seen.reduce((a, c) => a + c.unconfirmed.length, 0)).toBe(r.writes);
    for (const c of seen) {
      expect(c.turns.filter((x) => x.kind !== 'user').map((x) => (x.kind === 'reply' ? x.text : formatCall(x.call))).slice(1)).toEqual(texts(early.get(c.taskId)!).slice(0, c.turns.filter((x) => x.kind !== 'user').length - 1));
      expect(c.turns.some((x) => x.kind === 'user')).toBe(true);
    }
    expect(r.temperature).toBe(0);
    expect(r.success).toBe(0);
    expect(r.passK).toEqual([0]);
    expect(r.successWithoutRule).toBe(1);
    expect(r.unconfirmed.writes).toBe(r.writes);
    expect(r.unconfirmed.effective).toBe(r.writes);
    expect(r.unconfirmed.noYes).toBe(r.writes);
    expect(r.unconfirmed.episodes).toBe(1);
    expect(r.unconfirmed.perEpisode).toBeCloseTo(r.writes / tasks.length, 12);
  });

  it('mixes: one task solved in 2 of 4 samples gives pass^1 1/2, pass^2 1/6 for it', async () => {
    const t = tasks[0];
    const good = texts(experts.get(t.id)!);
    const bad = texts(writesFirst(experts.get(t.id)!));
    // The rollout loop asks the script by (task, turn): the k samples of a task cannot be told apart there, so
    // the sample is read from the call count (runRollouts asks each episode's turn once, in episode order).
    const seen = new Map<number, number>();
    const actScript = (_: Task, turn: number) => {
      const k = seen.get(turn) ?? 0;
      seen.set(turn, k + 1);
      return (k % 4 < 2 ? good : bad)[turn];
    };
    const r = await evaluateConversations(policy(), mini, [t], { limits, seed: 0, conversation: { user: 'scripted' }, samples: 4, actScript });
    expect(r.perTask[0].successes).toBe(2);
    expect(r.passK[0]).toBe(0.5);
    expect(r.passK[1]).toBeCloseTo(1 / 6, 12);
    expect(r.passK.slice(2)).toEqual([0, 0]);
  });
});

describe('npm run eval -- --user scripted', () => {
  const ws = tinyModelWorkspace('cli-conv-');
  const small = ['--max-act-tokens', '4', '--max-rehearse-tokens', '4', '--threads', '1'];

  it('runs conversations end to end with a model and writes the conversation report', async () => {
    const io = captureIo();
    expect(await evalCli(['--tasks', 'test', '--count', '2', '--model', ws.modelDir, '--user', 'scripted', '--samples', '2', '--max-user-turns', '3', ...small], io, { domain: calculateOnlyDomain })).toBe(0);
    const out = JSON.parse(io.stdout());
    expect(out.limits.maxTurns).toBe(30);
    expect(out.conversation).toMatchObject({ tasks: 2, samples: 2, temperature: 1, user: 'scripted', maxUserTurns: 3 });
    expect(out.conversation.passK).toHaveLength(2);
    expect(Object.values(out.conversation.ends as Record<string, number>).reduce((a, b) => a + b, 0)).toBe(4);
    expect(out.conversation.turns.user).toBeLessThanOrEqual(3);
    expect(io.stderr()).toMatch(/pass\^k k=1 .*, k=2 /);
    expect(io.stderr()).toMatch(/writes without confirmation: \d+ of \d+ writes/);
  });

  it('--transcripts writes every conversation as a JSON line, and refuses a folder before anything runs', async () => {
    const { readFileSync } = await import('node:fs');
    const file = `${ws.work}/conv/transcripts.jsonl`;
    const io = captureIo();
    expect(await evalCli(['--tasks', 'test', '--count', '2', '--model', ws.modelDir, '--user', 'scripted', '--samples', '2', '--max-user-turns', '3', '--transcripts', file, ...small], io, { domain: calculateOnlyDomain })).toBe(0);
    const lines = readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as ConversationTranscript);
    expect(lines.map((l) => l.sample)).toEqual([0, 1, 0, 1]);
    const out = JSON.parse(io.stdout());
    expect(lines.filter((l) => l.reward === 1).length).toBe(Math.round(out.conversation.success * 4));
    expect(lines.map((l) => l.end).sort()).toEqual(Object.entries(out.conversation.ends as Record<string, number>).flatMap(([k, n]) => Array(n).fill(k)).sort());
    for (const l of lines) expect(l.turns[0]).toMatchObject({ kind: 'reply' });
    const bad = captureIo();
    expect(await evalCli(['--tasks', 'test', '--count', '1', '--model', ws.modelDir, '--user', 'scripted', '--transcripts', ws.work, ...small], bad, { domain: calculateOnlyDomain })).not.toBe(0);
    expect(bad.stderr()).toMatch(/--transcripts: .*folder/);
  });

  for (const [argv, msg] of [
    [['--samples', '4'], /--samples needs --user \(scripted, model or endpoint\)/],
    [['--user', 'human'], /--user must be one of scripted, model, endpoint/],
    [['--user', 'scripted', '--tts', 'parallel', '--n', '1'], /--user does not combine with --tts/],
    [['--user', 'scripted', '--samples', '17'], /--samples/],
    [['--transcripts', 'x.jsonl'], /--transcripts needs --user/],
  ] as const) {
    it(`refuses ${argv.join(' ')}`, async () => {
      const io = captureIo();
      expect(await evalCli(['--tasks', 'test', '--count', '1', '--model', ws.modelDir, ...argv, ...small], io, { domain: calculateOnlyDomain })).toBe(2);
      expect(io.stderr()).toMatch(msg);
    });
  }

  it('refuses a task file: the scripted user needs generated intents', async () => {
    const io = captureIo();
    const file = `${ws.work}/tasks.json`;
    const { writeFileSync } = await import('node:fs');
    writeFileSync(file, JSON.stringify([{ id: 'x', userMessages: ['hi'], referenceActions: [], facts: [], checklist: [] }]));
    expect(await evalCli(['--tasks', file, '--model', ws.modelDir, '--user', 'scripted', ...small], io, { domain: calculateOnlyDomain })).toBe(2);
    expect(io.stderr()).toMatch(/--user scripted plays the generated tasks/);
  });
});
