// User fidelity, one turn at a time (issue 47): does a user that someone else wrote (the policy playing the
// user, an endpoint) say at this point of a conversation what the scripted user says there? Three things are
// compared, each by rule, never by a model:
//  - information: the customer's private facts the turn reveals: its email, its name, its zip code, its order
//    ids. Expected: the scripted turn's structured meaning (RetailUserMeaning). Read: the text, by patterns
//    (an email address, the customer's own full name, five digits after "zip", an order id #W + 7 digits).
//  - decision: where the agent's last reply asks for a confirmation (readAgent's 'confirm'), whether the turn
//    is the explicit yes the confirmation rule accepts (src/env/confirmation.ts isExplicitYes): expected yes
//    exactly when the scripted meaning is 'yes'. Elsewhere there is no decision to agree on.
//  - stop: the τ² stop token the turn ends the conversation with (none for a message).
// The scripted user's own text read this way gives back its meaning on every turn (a test holds it to 100 %),
// so a disagreement is the other user's, not the reading's. Text is untrusted: nothing here throws.

import { isExplicitYes } from '../confirmation';
import { userStopToken, type UserAct, type UserStopToken } from '../domain';
import type { RetailTask } from './intent';
import { orderRefs, type RetailUserMeaning } from './user';
import { orderDigits, readAgent } from './user-reading';

export interface UserTurnReading {
  /** The private facts revealed, sorted: 'email:…', 'name:first last', 'zip:…', 'order:#W…' (lower case). */
  reveals: string[];
  /** The explicit yes of the confirmation rule. */
  yes: boolean;
  stop: UserStopToken | null;
}

const MAX_READ = 8000;
const EMAIL = /[a-z0-9._%+-]+@[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}/g;
// A zip is five digits after the word "zip" (an address's zip in a request is not the customer's identity).
const ZIP = /\bzip(?:\s*code)?\b[^0-9]{0,20}?\b(\d{5})\b/g;
const ORDER = /#?\bw(\d{7})\b/g;

/** The customer's full name as a task's identity has it, if it has one. */
function fullName(task: RetailTask): string | null {
  const a = task.intent.auth as { first?: string; last?: string };
  return typeof a.first === 'string' && typeof a.last === 'string' ? `${a.first} ${a.last}`.toLowerCase() : null;
}

const sorted = (xs: Iterable<string>) => [...new Set(xs)].sort();

/** What a user turn's text reveals, decides and stops with. */
export function readUserTurn(raw: unknown, task: RetailTask): UserTurnReading {
  const text = typeof raw === 'string' ? raw.slice(0, MAX_READ) : '';
  const t = text.toLowerCase().replaceAll('’', "'");
  const out: string[] = [];
  for (const m of t.matchAll(EMAIL)) out.push(`email:${m[0]}`);
  const name = fullName(task);
  if (name && t.replace(/\s+/g, ' ').includes(name)) out.push(`name:${name}`);
  for (const m of t.matchAll(ZIP)) out.push(`zip:${m[1]}`);
  for (const m of t.matchAll(ORDER)) out.push(`order:#w${m[1]}`);
  return { reveals: sorted(out), yes: isExplicitYes(text), stop: userStopToken(text) };
}

/** What the scripted user's turn reveals, decides and stops with, from its meaning alone. */
export function expectedUserTurn(act: UserAct<RetailUserMeaning>, task: RetailTask): UserTurnReading {
  if (act.kind === 'stop') return { reveals: [], yes: false, stop: act.token };
  const m = act.meaning;
  const orders = (refs: readonly string[]) => refs.map((r) => `order:#w${orderDigits(r)}`);
  let reveals: string[] = [];
  switch (m?.kind) {
    case 'open':
      reveals = m.requests.flatMap((q) => (q.idsGiven ? orders(orderRefs(q.request)) : []));
      break;
    case 'ask':
      reveals = m.idsGiven ? orders(orderRefs(m.request)) : [];
      break;
    case 'identity':
      reveals = 'email' in m ? [`email:${m.email.toLowerCase()}`] : [`name:${`${m.first} ${m.last}`.toLowerCase()}`, `zip:${m.zip}`];
      break;
    case 'order':
      reveals = orders(m.refs);
      break;
    case 'correct':
    case 'change':
    case 'remind':
      reveals = orders(m.refs);
      break;
  }
  // A name the task's identity does not hold cannot be read back from text; neither side names it then.
  if (fullName(task) === null) reveals = reveals.filter((r) => !r.startsWith('name:'));
  return { reveals: sorted(reveals), yes: m?.kind === 'yes', stop: null };
}

export interface UserTurnAgreement {
  /** The same private facts revealed (as sets). */
  info: boolean;
  /** At a proposal: the same yes or not-yes; null where the agent proposed nothing. */
  decision: boolean | null;
  /** The same stop token, or both none. */
  stop: boolean;
  /** All three (a null decision does not count against it). */
  all: boolean;
}

/** Whether the agent's words just before a user turn ask for a confirmation (so the turn decides). */
export const asksConfirmation = (agentText: string): boolean => readAgent(agentText).topic === 'confirm';

export function compareUserTurns(want: UserTurnReading, got: UserTurnReading, atProposal: boolean): UserTurnAgreement {
  const info = want.reveals.length === got.reveals.length && want.reveals.every((r, i) => r === got.reveals[i]);
  const decision = atProposal ? want.yes === got.yes : null;
  const stop = want.stop === got.stop;
  return { info, decision, stop, all: info && stop && decision !== false };
}
