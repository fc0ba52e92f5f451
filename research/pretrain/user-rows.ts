// Pretraining data for the user role (issue 47, "the policy plays the user"): the conversation expert talks
// with the scripted user on train-split tasks (src/env/retail/expert-conversation.ts), and every user turn
// of those conversations becomes a row (src/env/conversation-rows.ts userRowsFromConversation): the user-role
// prompt of the task's τ² instructions and what the user had seen so far, rendered exactly as the model user
// renders it at run time (src/rollout/user-prompt.ts), and the scripted user's turn as the response (its
// stop token included, so the model learns when to end). The same conversations give their Act and Rehearse
// rows (rowsFromConversation), so a stage can teach both sides of a conversation from one draw.
//
// The user profile seed varies per task (seed-derived), so the rows cover the scripted user's variations (a
// wrong zip first, a change of mind, two requests at once) under instructions that say so.
//
// Identity swap (userSwap, --user-swap-share): in a world of 16 users the user role lowers its loss on the
// identity turns by recalling a training-set email, not by copying the scenario's (conv-mini-3 answered 94 of
// 127 held-out identity turns with one memorised email). A seeded share of the user rows is used with the
// user's identity (first and last name, the email's name parts and digits, the zip, the wrong zip the profile
// gives first) replaced by fresh random values — augment.ts identitySwapper, the mechanism of the Act rows'
// identity swap — consistently in the scenario, the conversation the user has seen and the target, so only
// copying the scenario predicts them. Order ids are left as they are (copied well already).
// identityRepeat (--user-identity-repeat N) puts each row that states the identity N times into the data,
// each copy with its own swap draw: the identity turns are ~30 % of the user rows, and a stage sees ~5 % of
// its data, so without it a 1,000-step stage meets only ~200 swapped identity turns.
import { deriveSeed, Rng } from '../../src/util/rng';
import type { Domain, Row, Turn } from '../../src/env/domain';
import { formatCall } from '../../src/env/toolcall';
import { rowsFromConversation, userRowsFromConversation, type UserRow } from '../../src/env/conversation-rows';
import { runRetailExpertConversation } from '../../src/env/retail/expert-conversation';
import type { RetailTask } from '../../src/env/retail/intent';
import { userProfile } from '../../src/env/retail/user-profile';
import { renderUserPrompt, userSystemMessage } from '../../src/rollout/user-prompt';
import type { ToolDefinition } from '../../src/rollout/chat';
import type { RehearsePromptOptions } from '../../src/rollout/rehearse-prompt';
import { identitySwapper } from './augment';
import { END, rowToExample, type Example } from './data';

export interface ConversationDataOptions {
  split: 'train' | 'test';
  tasks: number;
  seed: number;
  /** The expert's recoverable-mistake rate (default 0). */
  mistakeRate?: number;
  /**
   * Identity swap of the user rows: each row is swapped with probability `share` (one draw per row, in row
   * order, from a generator seeded by `seed`; a swapped row's fresh values are drawn from the same generator).
   * Absent or share 0: no draw, the rows as without it.
   */
  userSwap?: { share: number; seed: number };
  /**
   * Times each user row whose target states the user's identity (a name, the email, the zip: userIdentityTargets)
   * appears, the copies right after it, before the swap draws (so each copy is drawn on its own); absent: 1.
   */
  identityRepeat?: number;
  /**
   * Times each agent Act row of the write chain appears (writeChainTargets: the proposal a yes answered and the
   * write call itself), the copies right after it; absent: 1. Conversation stages fail at these rows (the
   * request named turns back, the order's items, the wait for the yes: research/records/2026-12-06-write-chain),
   * and they are about one in six of the conversation Act rows (measured on 400 train tasks of either world).
   */
  writeChainRepeat?: number;
  /**
   * The conversation expert's wrong first proposals (expert-conversation.ts wrongProposalRate): the user's correction
   * and the expert's right proposal after it become rows, the wrong proposal itself never a target; absent: 0.
   */
  wrongProposalRate?: number;
  /**
   * Identity swap of the agent's rows (--conversation-swap-share): each task's Act and Rehearse rows are swapped
   * together with probability `share` (one draw per task, in task order, from a generator seeded by `seed`; the
   * fresh values from the same generator), consistently in every message, call and observation of every row, so
   * a swapped task's user id, names, zip, email digits and stated order numbers are values no other row holds.
   * Why: the held-out users of the full world are strings the model never saw, and without the swap every agent
   * row of a conversation names a train user, whose orders the model can recall instead of comparing the order's
   * `user_id` with the one the lookup found (research/records/2026-12-06-retail-stage-8b: a held-out user's own
   * cancellation refused as "not on your account"). Absent or share 0: no draw, the rows as without it.
   */
  agentSwap?: { share: number; seed: number };
}

/**
 * The write chain of a conversation, as the Act targets that make it: every write call (`isWrite`), and the agent
 * reply the user answered just before one (the proposal its yes confirmed). Read from the turns, never from a
 * reply's wording, so a domain's own phrasing needs nothing here.
 */
export function writeChainTargets(turns: readonly Turn[], isWrite: (name: string) => boolean): Set<string> {
  const out = new Set<string>();
  turns.forEach((t, i) => {
    if (t.kind !== 'call' || !isWrite(t.call.name)) return;
    out.add(formatCall(t.call));
    const user = turns[i - 1]?.kind === 'user' ? i - 1 : -1;
    const proposal = user > 0 ? turns[user - 1] : undefined;
    if (proposal?.kind === 'reply') out.add(proposal.text);
  });
  return out;
}

/**
 * The identity a task's user gives and its scenario states: the first and last name and the letter runs of the
 * email's local part (lower case; not the generator's ".old" mark of a wrong email), the zip, the wrong zip
 * the profile gives first, and the email's runs of 4+ digits.
 */
export function userIdentityTargets(task: RetailTask, wrongZip: string | null): { names: string[]; numbers: string[] } {
  const a = task.intent.auth;
  const names = new Set<string>();
  const numbers = new Set<string>();
  if (a.kind !== 'email') {
    names.add(a.first.toLowerCase());
    names.add(a.last.toLowerCase());
    numbers.add(a.zip);
  }
  if (a.kind !== 'name_zip') {
    const local = a.email.split('@')[0];
    for (const w of local.match(/[A-Za-z]+/g) ?? []) if (w.toLowerCase() !== 'old') names.add(w.toLowerCase());
    for (const d of local.match(/[0-9]{4,}/g) ?? []) numbers.add(d);
  }
  if (wrongZip) numbers.add(wrongZip);
  return { names: [...names], numbers: [...numbers] };
}

/** A user row rewritten by `swap`: every field of its scenario, every message of the conversation it has seen, its target. */
export function swapUserRow(row: UserRow, swap: (s: string) => string): UserRow {
  const ins = row.instructions;
  return {
    ...row,
    instructions: { ...ins, reasonForCall: swap(ins.reasonForCall), knownInfo: swap(ins.knownInfo), unknownInfo: swap(ins.unknownInfo), taskInstructions: swap(ins.taskInstructions) },
    messages: row.messages.map((m) => ({ ...m, content: swap(m.content) })),
    target: swap(row.target),
  };
}

/** Every string in a row (message contents, call arguments, grounding examples) rewritten by `swap`; keys kept. */
export function swapStrings<T>(v: T, swap: (s: string) => string): T {
  if (typeof v === 'string') return swap(v) as T;
  if (Array.isArray(v)) return v.map((x) => swapStrings(x, swap)) as T;
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, swapStrings(x, swap)])) as T;
  return v;
}

/** The order numbers (the digits after `W`) a conversation's user states. */
export function statedOrderNumbers(turns: readonly Turn[]): string[] {
  const out = new Set<string>();
  for (const t of turns) if (t.kind === 'user') for (const m of t.text.matchAll(/W([0-9]{7})(?![0-9])/g)) out.add(m[1]);
  return [...out];
}

/**
 * The conversations' rows: each task's user rows (a share of them identity-swapped with o.userSwap; `swapped`
 * counts them), and the agent's Act and Rehearse rows of the same conversation (a share of the tasks swapped
 * with o.agentSwap; `agentSwapped` counts those tasks).
 */
export function conversationRows(domain: Domain, o: ConversationDataOptions): { user: UserRow[]; agent: Row[]; tasks: number; swapped: number; agentSwapped: number } {
  if (!domain.userInstructions) throw new Error(`domain ${domain.name} has no user instructions`);
  const isWrite = domain.confirmation?.isWrite;
  if ((o.writeChainRepeat ?? 1) > 1 && !isWrite) throw new Error(`domain ${domain.name} names no writes (confirmation.isWrite): no write chain to repeat`);
  const tasks = domain.tasks.generate({ split: o.split, count: o.tasks, seed: o.seed }) as RetailTask[];
  const user: UserRow[] = [];
  const agent: Row[] = [];
  const share = o.userSwap?.share ?? 0;
  const rng = share > 0 ? new Rng(o.userSwap!.seed) : null;
  let swapped = 0;
  const agentShare = o.agentSwap?.share ?? 0;
  const agentRng = agentShare > 0 ? new Rng(o.agentSwap!.seed) : null;
  let agentSwapped = 0;
  tasks.forEach((task, i) => {
    const userSeed = deriveSeed(o.seed, i, 1);
    const conv = runRetailExpertConversation(task, domain.createEnv(), { seed: deriveSeed(o.seed, i, 2), userSeed, mistakeRate: o.mistakeRate ?? 0, wrongProposalRate: o.wrongProposalRate ?? 0 });
    let rows = userRowsFromConversation(task.id, conv.turns, domain.userInstructions!(task, { seed: userSeed })!);
    const targets = userIdentityTargets(task, userProfile(task, userSeed).wrongZip);
    if ((o.identityRepeat ?? 1) > 1) {
      // A row states the identity when the swap would change its target (a fixed probe generator: no draw from rng).
      const probe = identitySwapper(targets, new Rng(0));
      rows = rows.flatMap((r) => (probe && probe(r.target) !== r.target ? Array.from({ length: o.identityRepeat! }, () => r) : [r]));
    }
    if (rng) {
      rows.forEach((r, k) => {
        if (rng.next() >= share) return;
        const swap = identitySwapper(targets, rng);
        if (!swap) return;
        rows[k] = swapUserRow(r, swap);
        swapped++;
      });
    }
    user.push(...rows);
    const agentRows = rowsFromConversation(task.id, conv.turns, undefined, conv.wrongTurns);
    // The write chain is found on the rows as the conversation said them, before any swap.
    const chain = (o.writeChainRepeat ?? 1) > 1 ? writeChainTargets(conv.turns, isWrite!) : null;
    const times = agentRows.map((r) => (chain && r.role === 'act' && chain.has(r.target) ? o.writeChainRepeat! : 1));
    const swap = agentRng && agentRng.next() < agentShare ? identitySwapper({ names: targets.names, numbers: [...targets.numbers, ...statedOrderNumbers(conv.turns)] }, agentRng) : null;
    if (swap) agentSwapped++;
    agentRows.forEach((r, k) => agent.push(...Array<Row>(times[k]).fill(swap ? swapStrings(r, swap) : r)));
  });
  return { user, agent, tasks: tasks.length, swapped, agentSwapped };
}

/** A user row as a training pair: the prompt the model user is given at run time, the turn as the response. */
export function userRowToExample(row: UserRow): Example {
  return { role: 'user', taskId: row.taskId, prompt: renderUserPrompt([{ role: 'system', content: userSystemMessage(row.instructions) }, ...row.messages]), response: row.target + END };
}

/**
 * The agent's side of the conversations as training pairs (--conversation-tasks): every Act and Rehearse row
 * of the conversation expert's conversations on `tasks` train tasks, rendered with the rollout prompts
 * (rowToExample), so an Act row's prompt is the bytes a conversation rollout shows the policy at that turn;
 * `agentSwapped` counts the tasks whose rows o.agentSwap swapped.
 */
export function conversationAgentExamples(domain: Domain, o: Omit<ConversationDataOptions, 'split'>, tools: readonly ToolDefinition[], rehearsePrompt: RehearsePromptOptions = {}): { examples: Example[]; agentSwapped: number } {
  const { agent, agentSwapped } = conversationRows(domain, { ...o, split: 'train' });
  return { examples: agent.map((r) => rowToExample(r, domain.policy, tools, rehearsePrompt)), agentSwapped };
}
