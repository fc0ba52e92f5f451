// User fidelity against the scripted user on held-out generated tasks (issue 47, "the policy plays the
// user"), teacher-forced: each task's conversation is the one the conversation expert has with the scripted
// user (the reference agent and the reference user), and at every user turn of it — the opening, each
// answer, and the closing stop — the user under test is asked for its turn from that same prefix. Its text
// is read by rule and compared with the scripted turn's meaning (src/env/retail/user-fidelity.ts): the same
// private facts revealed, the same yes-or-not at a proposal, the same stop. Teacher forcing keeps every
// turn comparable: a free-running model user would drift into conversations the scripted user never had.
//
// The user under test is any GeneratedUserSimulator factory (the lab's model, an endpoint) or the scripted
// user itself (its own text must score 1 on everything: the test of the reading). All turns are asked at once,
// so a model user batches them into one generation.
import type { GeneratedUserSimulator, Turn, UserAct, UserFailure } from '../env/domain';
import { runRetailExpertConversation } from '../env/retail/expert-conversation';
import type { RetailTask } from '../env/retail/intent';
import type { Domain } from '../env/domain';
import { retailUser, type RetailUserMeaning } from '../env/retail/user';
import { asksConfirmation, compareUserTurns, expectedUserTurn, readUserTurn, type UserTurnAgreement, type UserTurnReading } from '../env/retail/user-fidelity';
import { EvalError } from './evaluate';

export interface UserFidelityTurn {
  taskId: string;
  /** 0 = the opening. */
  turn: number;
  /** The scripted turn's meaning kind ('stop' for the closing stop). */
  kind: string;
  atProposal: boolean;
  want: UserTurnReading;
  got: UserTurnReading;
  /** What the user under test wrote (cut to 300 characters), or its failure. */
  text: string;
  error: string | null;
  agree: UserTurnAgreement;
}

export interface UserFidelityReport {
  tasks: number;
  turns: number;
  /** Fractions of user turns: same information, same stop, all three; decision over the turns at a proposal. */
  info: number;
  decision: number;
  stop: number;
  all: number;
  proposals: number;
  /** The issue's bar: same information and same decision (where there is one) — the ≥ 80 % of issue 47. */
  infoAndDecision: number;
  /** Turns the user under test failed (no usable text). */
  failures: number;
  /** Per scripted meaning kind: turns and the fraction that agree on all three. */
  byKind: Record<string, { turns: number; all: number }>;
  perTurn: UserFidelityTurn[];
}

/** A user under test: the user of a task, asked for its turn after a conversation. */
export type UserUnderTest = (task: RetailTask) => GeneratedUserSimulator | { next(conversation: readonly Turn[]): UserAct };

export interface UserFidelityOptions {
  /** Seed of the scripted user's profile (and of the instructions the user under test reads); default 0. */
  userSeed?: number;
  /** Seed of the conversation expert's (mistake-free) choices; default 0. */
  expertSeed?: number;
  log?: (s: string) => void;
}

/** Every (task, prefix, scripted turn) of the reference conversations. */
function referenceTurns(domain: Domain, tasks: readonly RetailTask[], userSeed: number, expertSeed: number) {
  return tasks.flatMap((task) => {
    const ref = runRetailExpertConversation(task, domain.createEnv(), { seed: expertSeed, userSeed });
    const scripted = retailUser(task, { seed: userSeed });
    // The closing stop is a user turn of the recorded conversation too: the user under test must end there.
    const at = ref.turns.flatMap((t, i) => (t.kind === 'user' ? [i] : []));
    return at.map((i, turn) => {
      const prefix = ref.turns.slice(0, i);
      let heard: string[] = [];
      for (const t of prefix) {
        if (t.kind === 'user') heard = [];
        else if (t.kind === 'reply') heard.push(t.text);
      }
      return { task, turn, prefix, expected: scripted.next(prefix) as UserAct<RetailUserMeaning>, atProposal: turn > 0 && asksConfirmation(heard.join('\n')) };
    });
  });
}

export async function measureUserFidelity(domain: Domain, tasks: readonly RetailTask[], userOf: UserUnderTest, opts: UserFidelityOptions = {}): Promise<UserFidelityReport> {
  if (tasks.length === 0) throw new EvalError('no tasks for user fidelity');
  if (tasks.some((t) => !('intent' in t))) throw new EvalError('user fidelity needs generated tasks (the scripted user plays their intents)');
  const refs = referenceTurns(domain, tasks, opts.userSeed ?? 0, opts.expertSeed ?? 0);
  opts.log?.(`user fidelity: ${refs.length} user turns of ${tasks.length} reference conversations`);
  const users = new Map(tasks.map((t) => [t.id, userOf(t)]));
  const answers = await Promise.all(
    refs.map(async (r): Promise<UserAct | UserFailure> => {
      try {
        return await users.get(r.task.id)!.next(r.prefix);
      } catch (e) {
        return { kind: 'error', error: e instanceof Error ? e.message : String(e), text: '' };
      }
    }),
  );
  const perTurn: UserFidelityTurn[] = refs.map((r, i) => {
    const a = answers[i];
    const want = expectedUserTurn(r.expected, r.task);
    const text = typeof a.text === 'string' ? a.text : '';
    const got: UserTurnReading = a.kind === 'error' ? { reveals: [], yes: false, stop: null } : readUserTurn(a.kind === 'stop' && !text.includes(a.token) ? `${text} ${a.token}` : text, r.task);
    const agree = a.kind === 'error' ? { info: false, decision: r.atProposal ? false : null, stop: false, all: false } : compareUserTurns(want, got, r.atProposal);
    return { taskId: r.task.id, turn: r.turn, kind: r.expected.kind === 'stop' ? 'stop' : (r.expected.meaning?.kind ?? 'message'), atProposal: r.atProposal, want, got, text: text.slice(0, 300), error: a.kind === 'error' ? a.error : null, agree };
  });
  const n = perTurn.length;
  const frac = (f: (t: UserFidelityTurn) => boolean, of = perTurn) => (of.length ? of.filter(f).length / of.length : NaN);
  const proposals = perTurn.filter((t) => t.atProposal);
  const byKind: UserFidelityReport['byKind'] = {};
  for (const t of perTurn) {
    const g = (byKind[t.kind] ??= { turns: 0, all: 0 });
    g.turns++;
    if (t.agree.all) g.all++;
  }
  for (const g of Object.values(byKind)) g.all /= g.turns;
  return {
    tasks: tasks.length,
    turns: n,
    info: frac((t) => t.agree.info),
    decision: frac((t) => t.agree.decision === true, proposals),
    stop: frac((t) => t.agree.stop),
    all: frac((t) => t.agree.all),
    proposals: proposals.length,
    infoAndDecision: frac((t) => t.agree.info && t.agree.decision !== false),
    failures: perTurn.filter((t) => t.error !== null).length,
    byKind,
    perTurn,
  };
}

/** The report's summary lines (the CLI's stderr). */
export function userFidelitySummary(r: UserFidelityReport): string {
  const p = (x: number) => (Number.isFinite(x) ? `${(100 * x).toFixed(1)} %` : '-');
  return [
    `user fidelity over ${r.turns} user turns of ${r.tasks} tasks (teacher-forced on the scripted conversations): information ${p(r.info)}, decision ${p(r.decision)} (${r.proposals} proposals), stop ${p(r.stop)}; all three ${p(r.all)}; information and decision ${p(r.infoAndDecision)}${r.failures ? `; ${r.failures} turns without usable text` : ''}`,
    `by scripted turn: ${Object.entries(r.byKind).map(([k, g]) => `${k} ${p(g.all)} (${g.turns})`).join(', ')}`,
  ].join('\n');
}
