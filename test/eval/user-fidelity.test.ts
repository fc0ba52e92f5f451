// User fidelity against the scripted user (src/eval/user-fidelity.ts): the measurement passes the scripted
// user's own text (100 % on every count: the reading gives back the meanings), fails a user that says yes to
// everything and a tiny random model, and reads texts the way the rule says; the eval CLI's --user model
// (generated tasks and a τ²-bench task file) and --user-fidelity end to end on a tiny model, and its usage errors.
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Backend } from '../../src/engine/backend';
import { USER_STOP, type GeneratedUserSimulator } from '../../src/env/domain';
import type { RetailTask } from '../../src/env/retail/intent';
import { loadWorldDomain, retailDataPath } from '../../src/env/retail/node';
import { retailUser } from '../../src/env/retail/user';
import { readUserTurn } from '../../src/env/retail/user-fidelity';
import { measureUserFidelity } from '../../src/eval/user-fidelity';
import { evalCli } from '../../src/cli/eval';
import type { Qwen3Model } from '../../src/model/qwen3';
import type { Tokenizer } from '../../src/model/tokenizer';
import { UserGenerator } from '../../src/rollout/model-user';
import { loadTinyPolicy } from '../fixtures/tiny-model';
import { calculateOnlyDomain, captureIo, tinyModelWorkspace } from '../helpers/cli';

const mini = loadWorldDomain('mini');
const held = mini.tasks.generate({ split: 'test', count: 12, seed: 1 }) as RetailTask[];

let backend: Backend;
let model: Qwen3Model;
let tok: Tokenizer;
beforeAll(async () => {
  ({ backend, model, tok } = await loadTinyPolicy(6));
});
afterAll(() => backend?.dispose());

describe('reading a user turn', () => {
  const t = held.find((x) => x.intent.auth.kind === 'name_zip')!;
  const a = t.intent.auth as { first: string; last: string; zip: string };
  it('reads the private facts, the explicit yes and the stop, and nothing from an address or an email\'s name', () => {
    const r = readUserTurn(`I'm ${a.first} ${a.last}, zip code ${a.zip}. It's about order #W1234567 and W7654321.`, t);
    expect(r).toEqual({ reveals: [`name:${a.first} ${a.last}`.toLowerCase(), 'order:#w1234567', 'order:#w7654321', `zip:${a.zip}`].sort(), yes: false, stop: null });
    expect(readUserTurn(`Ship it to 12 Main St, Austin, TX 78701, USA. My email is ${a.first}.${a.last}@example.com.`, t).reveals).toEqual([`email:${a.first}.${a.last}@example.com`.toLowerCase()]);
    expect(readUserTurn('Yes, please go ahead.', t)).toMatchObject({ yes: true, reveals: [] });
    expect(readUserTurn('Yes, but to the other card.', t).yes).toBe(false);
    expect(readUserTurn(`Thanks. ${USER_STOP}`, t).stop).toBe(USER_STOP);
    for (const bad of [null, 5, '', 'x'.repeat(100_000)]) expect(() => readUserTurn(bad, t)).not.toThrow();
  });
});

describe('user fidelity, teacher-forced on the scripted conversations', () => {
  it('the scripted user\'s own text scores 100 % on information, decision and stop', async () => {
    const r = await measureUserFidelity(mini, held, (t) => retailUser(t, { seed: 0 }));
    expect(r.turns).toBeGreaterThan(held.length * 3);
    expect(r.proposals).toBeGreaterThan(0);
    expect([r.info, r.decision, r.stop, r.all, r.infoAndDecision]).toEqual([1, 1, 1, 1, 1]);
    expect(r.byKind.stop.turns).toBe(held.length);
    expect(r.failures).toBe(0);
  });

  it('a user that says yes to everything fails the decisions it should not make and every fact it should give', async () => {
    const yes = (): GeneratedUserSimulator => ({ generated: true, next: async () => ({ kind: 'message', text: 'Yes, please go ahead.' }) });
    const r = await measureUserFidelity(mini, held, yes);
    // It never stops: the closing turns (one per task) disagree, the others agree on "no stop".
    expect(r.stop).toBeCloseTo(1 - held.length / r.turns, 12);
    expect(r.byKind.stop.all).toBe(0);
    expect(r.info).toBeLessThan(0.5);
    expect(r.byKind.yes.all).toBe(1);
    expect(r.byKind.identity.all).toBe(0);
    expect(r.all).toBeLessThan(0.3);
  });

  it('a tiny random model fails it, and its failures are counted, not thrown', async () => {
    const g = new UserGenerator({ model, tokenizer: tok, adapter: null, maxTokens: 6 });
    const r = await measureUserFidelity(mini, held.slice(0, 4), (t) => g.user(mini.userInstructions!(t)!, 0));
    expect(g.stats.batches).toBe(1);
    expect(r.perTurn.length).toBe(r.turns);
    expect(r.all).toBeLessThan(0.5);
    expect(r.perTurn.every((t) => typeof t.agree.all === 'boolean')).toBe(true);
  });
});

describe('npm run eval -- --user model | --user-fidelity', () => {
  const ws = tinyModelWorkspace('cli-user-');
  const small = ['--max-act-tokens', '4', '--max-rehearse-tokens', '4', '--max-user-tokens', '4', '--threads', '1'];

  it('plays generated tasks with the model as the user, and reports the user', async () => {
    const io = captureIo();
    expect(await evalCli(['--tasks', 'test', '--count', '2', '--model', ws.modelDir, '--user', 'model', '--max-user-turns', '2', '--max-turns', '3', ...small], io, { domain: calculateOnlyDomain })).toBe(0);
    const out = JSON.parse(io.stdout());
    expect(out.conversation).toMatchObject({ tasks: 2, samples: 1, user: 'model' });
    expect(out.user).toMatchObject({ kind: 'model', model: 'agent', maxTokens: 4 });
    expect(out.user.generations).toBeGreaterThanOrEqual(2);
    expect(io.stderr()).toMatch(/conversations \(model user/);
  });

  it('plays a τ²-bench task file with the model as the user (the 74 tasks\' first two)', async () => {
    const file = retailDataPath('tasks-train.json');
    expect(file, 'the τ² task file of shared/data/tau2-retail').not.toBeNull();
    const io = captureIo();
    expect(await evalCli(['--tasks', file!, '--count', '2', '--world', 'retail', '--model', ws.modelDir, '--user', 'model', '--max-user-turns', '2', '--max-turns', '2', ...small], io, { domain: calculateOnlyDomain })).toBe(0);
    const out = JSON.parse(io.stdout());
    expect(out.conversation).toMatchObject({ tasks: 2, user: 'model' });
    expect(out.conversation.perTask.map((t: { taskId: string }) => t.taskId)).toEqual(JSON.parse(readFileSync(file!, 'utf8')).slice(0, 2).map((t: { id: string }) => t.id));
  });

  it('measures user fidelity on generated tasks', async () => {
    const io = captureIo();
    expect(await evalCli(['--tasks', 'test', '--count', '2', '--model', ws.modelDir, '--user', 'model', '--user-fidelity', ...small], io, { domain: calculateOnlyDomain })).toBe(0);
    const out = JSON.parse(io.stdout());
    expect(out.userFidelity).toMatchObject({ tasks: 2 });
    expect(out.userFidelity.turns).toBe(out.userFidelity.perTurn.length);
    expect(out.conversation).toBeUndefined();
    expect(io.stderr()).toMatch(/user fidelity over \d+ user turns of 2 tasks/);
  });

  for (const [argv, msg] of [
    [['--user-model', 'x'], /--user-model needs --user/],
    [['--user', 'scripted', '--user-fidelity'], /--user-fidelity measures a model or endpoint user/],
    [['--user', 'model', '--user-url', 'http://x'], /--user-url needs --user endpoint/],
    [['--user', 'scripted', '--max-user-tokens', '9'], /--max-user-tokens needs --user model\|endpoint/],
    [['--user', 'endpoint', '--user-model', 'm'], /--user endpoint needs --user-url URL and --user-model NAME/],
    [['--user', 'endpoint', '--user-url', 'ftp://x', '--user-model', 'm'], /--user-url must be an http\(s\) URL/],
  ] as const) {
    it(`refuses ${argv.join(' ')}`, async () => {
      const io = captureIo();
      expect(await evalCli(['--tasks', 'test', '--count', '1', '--model', ws.modelDir, ...argv, '--threads', '1'], io, { domain: calculateOnlyDomain })).toBe(2);
      expect(io.stderr()).toMatch(msg);
    });
  }

  it('refuses fidelity on a task file, and a model user on tasks without instructions', async () => {
    const file = `${ws.work}/lab-tasks.json`;
    writeFileSync(file, JSON.stringify([{ id: 'x', userMessages: ['hi'], referenceActions: [], facts: [], checklist: [] }]));
    let io = captureIo();
    expect(await evalCli(['--tasks', file, '--model', ws.modelDir, '--user', 'model', '--threads', '1'], io, { domain: calculateOnlyDomain })).toBe(2);
    expect(io.stderr()).toMatch(/task x of .* has none/);
    io = captureIo();
    expect(await evalCli(['--tasks', retailDataPath('tasks-train.json')!, '--world', 'retail', '--model', ws.modelDir, '--user', 'model', '--user-fidelity', '--threads', '1'], io, { domain: calculateOnlyDomain })).toBe(2);
    expect(io.stderr()).toMatch(/--user-fidelity replays the scripted user on generated tasks/);
  });
});
