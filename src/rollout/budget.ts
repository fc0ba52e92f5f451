// Token budgets from data: how many tokens a Rehearse generation may need is a property of the domain's
// real observations under the policy's tokenizer, not a constant. The budget is a high quantile (p99 by
// default) of the token length of the Rehearse *target* (src/env/toolcall.ts formatObservation: the
// observation JSON between its <execution_result> tags, closing tag included, since generation stops on
// it), over every call of the scripted expert's trajectories of a sample of the domain's tasks. The same
// measurement gives the Act budget (a call with its <tool_call> tags, or a final reply).
import { agentSteps, type Domain, type Step } from '../env/domain';
import { formatCall, formatObservation } from '../env/toolcall';

export interface LengthStats {
  /** How many texts were measured. */
  count: number;
  p50: number;
  /** The quantile the budget is (nearest rank). */
  quantile: number;
  atQuantile: number;
  max: number;
}

/**
 * The Act budget no measurement goes below: the policy's own call or reply may run past the expert's p99 (a
 * longer id, a reply that lists more), and a constant this size is what every run used before budgets were
 * measured. With a tokenizer that writes the expert's turns in fewer tokens (the bundled mini policy: p99 52),
 * the measured quantile alone would cut the policy's longer turns that a run of the CLIs lets through.
 */
export const MIN_ACT_TOKENS = 96;

export interface TokenBudgets {
  /** Rehearse budget: the quantile of the formatted real observations' token lengths (tags included). */
  rehearse: number;
  /** Act budget: the quantile of the expert's Act turns (a call with its tags, or the reply), at least MIN_ACT_TOKENS. */
  act: number;
  observations: LengthStats;
  acts: LengthStats;
  /** Tasks whose expert trajectories were measured, and their split. */
  tasks: number;
  split: 'train' | 'test';
}

export interface BudgetOptions {
  /** Tasks sampled from the split (default 100). */
  tasks?: number;
  split?: 'train' | 'test';
  seed?: number;
  /** Default 0.99. */
  quantile?: number;
  /**
   * Measure the expert's turns in conversations with the domain's scripted user (Domain.expertConversation)
   * instead of one-message episodes: a proposal that lists a multi-item exchange runs past a one-message turn
   * (issue 47: p99 113 tokens against 96 with the mini tokenizer). Needs a domain that has conversations.
   */
  conversations?: boolean;
}

/** Nearest-rank quantile of a non-empty list. */
export function quantile(xs: readonly number[], q: number): number {
  if (xs.length === 0) throw new Error('quantile of an empty list');
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
}

function stats(xs: number[], q: number): LengthStats {
  return { count: xs.length, p50: quantile(xs, 0.5), quantile: q, atQuantile: quantile(xs, q), max: Math.max(...xs) };
}

type ExpertDomain = Pick<Domain, 'tasks' | 'expert' | 'createEnv' | 'expertConversation'>;

/** Every step of the expert's trajectories of the sampled tasks (each task on a fresh environment). */
function expertSteps(domain: ExpertDomain, o: Omit<BudgetOptions, 'quantile'>): { tasks: number; steps: Step[] } {
  const tasks = domain.tasks.generate({ split: o.split ?? 'train', count: o.tasks ?? 100, seed: o.seed ?? 0 });
  if (!o.conversations) return { tasks: tasks.length, steps: tasks.flatMap((task) => domain.expert(task, domain.createEnv()).steps) };
  const talk = domain.expertConversation;
  if (!talk) throw new Error('tokenBudgets: this domain has no expert conversations to measure');
  return { tasks: tasks.length, steps: tasks.flatMap((task, i) => agentSteps(talk(task, domain.createEnv(), { seed: i, userSeed: i }).turns)) };
}

/** Budgets measured on the expert's real trajectories of `tasks` tasks of the domain (see the file comment). */
export function tokenBudgets(domain: ExpertDomain, tokenizer: { encode(text: string): number[] }, o: BudgetOptions = {}): TokenBudgets {
  const q = o.quantile ?? 0.99;
  const split = o.split ?? 'train';
  const { tasks, steps } = expertSteps(domain, o);
  const obs: number[] = [];
  const acts: number[] = [];
  for (const s of steps) {
    if (s.kind === 'call') {
      obs.push(tokenizer.encode(formatObservation(s.observation)).length);
      acts.push(tokenizer.encode(formatCall(s.call)).length);
    } else acts.push(tokenizer.encode(s.text).length);
  }
  if (obs.length === 0) throw new Error('tokenBudgets: the expert made no call on the sampled tasks');
  const o1 = stats(obs, q);
  const a1 = stats(acts, q);
  return { rehearse: o1.atQuantile, act: Math.max(MIN_ACT_TOKENS, a1.atQuantile), observations: o1, acts: a1, tasks, split };
}

/**
 * Per tool, the longest JSON string (key or value, in characters) in the real observations of the expert's
 * trajectories of `tasks` tasks: what a rehearsed observation of that tool may need (src/rollout/rehearse-constraint.ts).
 */
export function observationStringLimits(domain: ExpertDomain, o: Omit<BudgetOptions, 'quantile'> = {}): Record<string, number> {
  const out: Record<string, number> = {};
  const note = (tool: string, n: number) => (out[tool] = Math.max(out[tool] ?? 0, n));
  const walk = (tool: string, v: unknown): void => {
    if (typeof v === 'string') note(tool, v.length);
    else if (Array.isArray(v)) for (const x of v) walk(tool, x);
    else if (v !== null && typeof v === 'object')
      for (const [k, x] of Object.entries(v)) {
        note(tool, k.length);
        walk(tool, x);
      }
  };
  for (const s of expertSteps(domain, o).steps) if (s.kind === 'call' && s.observation.ok) walk(s.call.name, s.observation.result);
  return out;
}
