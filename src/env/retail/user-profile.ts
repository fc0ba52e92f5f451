// How a generated task's customer behaves beyond its intent: the user-side variation of issue 47 (a wrong zip
// first, a change of mind at the confirmation, two requests in one breath) and whether order ids come in the
// opening message or only when asked. Drawn once per (seed, task) from its own stream, so the generator's
// tasks (and every dataset pinned on them) stay as they were, and the scripted user and the instruction
// renderer read the same profile: a model that plays the rendered instructions is asked to do what the
// script does.

import { deriveSeedFromText, hash32, Rng } from '../../util/rng';
import type { Request, RetailTask } from './intent';
import { CANCEL_REASONS } from './tools';

export interface UserProfile {
  /** A zip given first by mistake (name-and-zip users only); the right one follows when the agent cannot find the account. */
  wrongZip: string | null;
  /** The request whose detail the user changes when first asked to confirm it, and what it asks for before that. */
  changeMind: { request: number; first: Request } | null;
  /** Both requests of a two-request task in the opening message (else one at a time). */
  bothAtOnce: boolean;
  /** Order ids stated with the request (else given when the agent asks for them). */
  idsUpfront: boolean;
  /** A persona line, in the style of τ² task_instructions. */
  persona: string;
}

/** The rates of the user-side variation, per task that admits it (the test measures them). */
export const PROFILE_RATES = { wrongZip: 0.2, changeMind: 0.25, bothAtOnce: 0.5, idsUpfront: 0.5 } as const;

const PERSONAS = [
  'You are polite and brief.',
  'You are friendly and patient.',
  'You are direct and a little impatient.',
  'You are a private person who does not reveal much about yourself.',
  'You are organized and calm.',
];

export const profileSeed = (seed: number, taskId: string) => deriveSeedFromText(hash32(seed ^ 0x05e4a11), taskId);

/** What the user asks before changing its mind, for requests where a different valid choice exists. */
export function firstThought(r: Request): Request | null {
  if (r.kind === 'cancel' && (CANCEL_REASONS as readonly string[]).includes(r.reason)) {
    return { ...r, reason: CANCEL_REASONS.find((x) => x !== r.reason)! };
  }
  if (r.kind === 'return' && r.refund.kind === 'gift_card') return { ...r, refund: { kind: 'original' } };
  if ((r.kind === 'exchange' || r.kind === 'modify_items') && r.payment.kind !== 'original') return { ...r, payment: { kind: 'original' } };
  return null;
}

export function userProfile(task: RetailTask, seed = 0): UserProfile {
  const rng = new Rng(profileSeed(seed, task.id));
  // Every draw happens whatever the task, so one quirk's eligibility never shifts another's draw.
  const [zipDraw, zipPos, mindDraw, bothDraw, idsDraw, personaDraw] = [0, 0, 0, 0, 0, 0].map(() => rng.next());
  const auth = task.intent.auth;
  let wrongZip: string | null = null;
  if (auth.kind === 'name_zip' && zipDraw < PROFILE_RATES.wrongZip) {
    const i = Math.floor(zipPos * auth.zip.length);
    const d = auth.zip.charCodeAt(i) - 48;
    // Another digit at that position (d + 1..9 mod 10): a typo, never the right zip.
    wrongZip = auth.zip.slice(0, i) + String((d + 1 + (Math.floor(zipPos * 80) % 9)) % 10) + auth.zip.slice(i + 1);
  }
  const eligible = task.intent.requests.map((r, i) => ({ i, first: firstThought(r) })).filter((x) => x.first !== null);
  // The draw below the rate, rescaled to [0, 1), picks which eligible request changes.
  const chosen = eligible.length > 0 && mindDraw < PROFILE_RATES.changeMind ? eligible[Math.floor((mindDraw / PROFILE_RATES.changeMind) * eligible.length)] : null;
  const changeMind = chosen ? { request: chosen.i, first: chosen.first! } : null;
  const bothAtOnce = task.intent.requests.length > 1 && bothDraw < PROFILE_RATES.bothAtOnce;
  return {
    wrongZip,
    changeMind,
    bothAtOnce,
    // Two requests stated together name their orders, or the agent could not tell which order is which.
    idsUpfront: bothAtOnce || idsDraw < PROFILE_RATES.idsUpfront,
    persona: PERSONAS[Math.floor(personaDraw * PERSONAS.length)],
  };
}

/** The requests as the user first states them (a changed mind starts from its first thought). */
export function statedRequests(task: RetailTask, p: UserProfile): Request[] {
  return task.intent.requests.map((r, i) => (p.changeMind?.request === i ? p.changeMind.first : r));
}
