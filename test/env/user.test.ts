// The scripted τ² user (src/env/retail/user.ts), one test per τ² simulation guideline its header claims
// (G1-G6 core principles, T1-T4 task completion), played against hand-written agent replies so that each
// test fails when the behaviour it names breaks.

import { describe, expect, it } from 'vitest';
import { AGENT_GREETING, USER_OUT_OF_SCOPE, USER_STOP, USER_TRANSFER, userStopToken, type Turn, type UserAct } from '../../src/env/domain';
import { isExplicitYes } from '../../src/env/confirmation';
import { retailDomain } from '../../src/env/retail/index';
import type { Request, RetailTask } from '../../src/env/retail/intent';
import { TRANSFER_MESSAGE } from '../../src/env/retail/intent';
import { runRetailExpertConversation } from '../../src/env/retail/expert-conversation';
import { renderInstructions } from '../../src/env/retail/instructions';
import { retailUser, STUCK_LIMIT, type RetailUserMeaning } from '../../src/env/retail/user';
import { userProfile, type UserProfile } from '../../src/env/retail/user-profile';
import { base } from './helpers';

const domain = retailDomain(base);
const tasks = domain.tasks.generate({ split: 'train', count: 400, seed: 5 });

/** The first (task, seed) whose task and profile satisfy `pred`: cases come from the generator, not by hand. */
function find(pred: (t: RetailTask, p: UserProfile) => boolean): { task: RetailTask; seed: number } {
  for (let seed = 0; seed < 40; seed++) for (const task of tasks) if (pred(task, userProfile(task, seed))) return { task, seed };
  throw new Error('no generated task fits the case');
}

/** Plays a list of agent replies against the user; returns the user's acts in order. */
function play(task: RetailTask, seed: number, replies: string[]): UserAct<RetailUserMeaning>[] {
  const u = retailUser(task, { seed });
  const turns: Turn[] = [];
  const acts: UserAct<RetailUserMeaning>[] = [];
  for (const r of replies) {
    turns.push({ kind: 'reply', text: r });
    const a = u.next(turns);
    acts.push(a);
    turns.push({ kind: 'user', text: a.text });
    if (a.kind === 'stop') break;
  }
  return acts;
}

const ASK_ID = 'Could you give me your email address, or your first name, last name and zip code?';
const ref = (r: Request) => ('orderRef' in r ? (r.orderRef.startsWith('#') ? r.orderRef : '#' + r.orderRef) : '');
const cancelProposal = (id: string, reason: string) => `To confirm: I will cancel order ${id} with the reason "${reason}". Shall I proceed (yes/no)?`;
const oneCancel = (t: RetailTask, p: UserProfile) =>
  t.family === 'cancel' && t.intent.requests.length === 1 && !p.changeMind && p.idsUpfront && t.intent.auth.kind === 'email';

describe('τ² simulation guidelines, core principles', () => {
  it('G1 plays a customer: answers the greeting with its own need, in the first person', () => {
    const { task, seed } = find(oneCancel);
    const [open] = play(task, seed, [AGENT_GREETING]);
    expect(open.kind).toBe('message');
    expect(open.text).toMatch(/\bI\b/);
    expect(open.text.toLowerCase()).toContain('cancel');
    expect(open.text).not.toMatch(/how can I help|shall I/i);
  });

  it('G2 one message per turn, the same message for the same conversation', () => {
    const { task, seed } = find(oneCancel);
    const u = retailUser(task, { seed });
    const turns: Turn[] = [{ kind: 'reply', text: AGENT_GREETING }];
    const a = u.next(turns);
    expect(u.next(turns)).toEqual(a);
    expect(retailUser(task, { seed }).next(turns)).toEqual(a);
    expect(userStopToken(a.text)).toBeNull();
    // Calls and observations are not the user's to see: inserting them changes nothing.
    const withCalls: Turn[] = [{ kind: 'call', call: { name: 'get_order_details', arguments: { order_id: '#W0000000' } }, observation: { ok: true, name: 'x', result: { secret: 'yes' } } }, ...turns];
    expect(u.next(withCalls)).toEqual(a);
  });

  it('G3 follows its scenario: confirms only its own request, says no to a wrong one with the right detail', () => {
    const { task, seed } = find(oneCancel);
    const r = task.intent.requests[0] as Extract<Request, { kind: 'cancel' }>;
    const other = r.reason === 'no longer needed' ? 'ordered by mistake' : 'no longer needed';
    const base = [AGENT_GREETING, ASK_ID];
    const right = play(task, seed, [...base, cancelProposal(ref(r), r.reason)]);
    expect(isExplicitYes(right[2].text)).toBe(true);
    expect(right[2].meaning).toEqual({ kind: 'yes', index: 0 });
    const wrongReason = play(task, seed, [...base, cancelProposal(ref(r), other)]);
    expect(isExplicitYes(wrongReason[2].text)).toBe(false);
    expect(wrongReason[2].text).toContain(r.reason);
    const wrongOrder = play(task, seed, [...base, cancelProposal('#W0000001', r.reason) + ` Also cancel ${ref(r)}?`]);
    expect(isExplicitYes(wrongOrder[2].text)).toBe(false);
    const wrongAction = play(task, seed, [...base, `To confirm: I will return the items of order ${ref(r)}. Shall I proceed?`]);
    expect(isExplicitYes(wrongAction[2].text)).toBe(false);
    expect(wrongAction[2].meaning).toMatchObject({ kind: 'correct' });
  });

  it('G4 never invents what it was not given: no email, no order id, no phone number', () => {
    const nz = find((t, p) => t.intent.auth.kind === 'name_zip' && !p.wrongZip && t.family === 'product_price');
    const acts = play(nz.task, nz.seed, [AGENT_GREETING, 'What is your email address?', 'Could you tell me the order id?', 'What is your phone number?']);
    expect(acts[1].text).toMatch(/don't remember|can't remember/);
    expect(acts[1].text).not.toMatch(/@/);
    for (const a of acts.slice(2)) {
      expect(a.text).not.toMatch(/#?W\d{7}|\d{3}-?\d{4}/);
      expect(a.meaning).toEqual({ kind: 'unknown' });
    }
  });

  it('G5 paraphrases: no sentence of the rendered instructions appears verbatim in its messages', () => {
    let checked = 0;
    for (const task of tasks.slice(0, 150)) {
      const ins = renderInstructions(task, 0);
      const sentences = [ins.reason_for_call, ins.task_instructions, ins.known_info].join(' ').split(/(?<=[.!?])\s+/).filter((s) => s.length >= 20);
      const said = runRetailExpertConversation(task, domain.createEnv()).turns.flatMap((t) => (t.kind === 'user' ? [t.text] : []));
      for (const s of sentences) for (const m of said) expect(m.includes(s), `${task.id}: "${s}"`).toBe(false);
      checked += sentences.length;
    }
    expect(checked).toBeGreaterThan(300);
  });

  it('G6 discloses progressively: identity and order ids only when asked, one request at a time', () => {
    const { task, seed } = find((t, p) => t.family === 'multi' && !p.bothAtOnce && !p.idsUpfront && t.intent.auth.kind === 'email' && 'orderRef' in t.intent.requests[0]);
    const a = task.intent.auth as { email: string };
    const [r0, r1] = task.intent.requests;
    const acts = play(task, seed, [AGENT_GREETING, 'Sure. Is there anything you would like?', ASK_ID, 'Could you tell me the order id?']);
    const digits = (r: Request) => ('orderRef' in r ? r.orderRef.replace(/\D/g, '') : '@@');
    expect(acts[0].text).not.toContain(a.email);
    expect(acts[0].text).not.toContain(digits(r0));
    expect(acts[0].meaning).toMatchObject({ kind: 'open', requests: [{ index: 0 }] });
    expect(acts.slice(0, 2).every((x) => !x.text.includes(a.email))).toBe(true);
    expect(acts[2].text).toContain(a.email);
    expect(acts[3].text).toContain(digits(r0));
    for (const x of acts) if (r1.kind !== r0.kind && 'orderRef' in r1) expect(x.text).not.toContain(digits(r1));
  });

  it('G7 stays one consistent character: its own identity, its own requests, the customer side only', () => {
    for (const task of tasks.slice(0, 200)) {
      const p = userProfile(task, 0);
      const a = task.intent.auth;
      const turns = runRetailExpertConversation(task, domain.createEnv()).turns;
      const u = retailUser(task, { seed: 0 });
      const allowed = [...task.intent.requests, ...(p.changeMind ? [p.changeMind.first] : [])].map((r) => JSON.stringify(r));
      turns.forEach((x, i) => {
        if (x.kind !== 'user') return;
        expect(x.text).not.toMatch(/how can I help|shall I proceed|I found your account/i);
        const m = u.next(turns.slice(0, i)).meaning!;
        if (m.kind === 'identity') {
          if ('email' in m) expect(m.email).toBe((a as { email: string }).email);
          else expect([(a as { zip: string }).zip, p.wrongZip]).toContain(m.zip);
        }
        if (m.kind === 'open') for (const q of m.requests) expect(allowed).toContain(JSON.stringify(q.request));
        if (m.kind === 'ask' || m.kind === 'change' || m.kind === 'correct' || m.kind === 'remind') expect(allowed).toContain(JSON.stringify(m.request));
      });
    }
  });
});

describe('τ² simulation guidelines, task completion', () => {
  it('T1 keeps going: after the first outcome of a two-request task it asks the second', () => {
    const { task, seed } = find((t, p) => t.family === 'multi' && !p.bothAtOnce && p.idsUpfront && t.intent.requests[0].kind === 'status');
    const r0 = task.intent.requests[0];
    const acts = play(task, seed, [AGENT_GREETING, ASK_ID, `Order ${ref(r0)} is delivered. Is there anything else I can help you with?`]);
    expect(acts[2].kind).toBe('message');
    expect(acts[2].meaning).toMatchObject({ kind: 'ask', index: 1 });
  });

  it('T2 stops with ###STOP### once its request is served, and once it is refused', () => {
    const { task, seed } = find(oneCancel);
    const r = task.intent.requests[0] as Extract<Request, { kind: 'cancel' }>;
    const served = play(task, seed, [AGENT_GREETING, ASK_ID, cancelProposal(ref(r), r.reason), `Order ${ref(r)} is cancelled. Anything else?`]);
    expect(served.at(-1)).toMatchObject({ kind: 'stop', token: USER_STOP, text: USER_STOP });
    const refused = play(task, seed, [AGENT_GREETING, ASK_ID, `Order ${ref(r)} is delivered, so it cannot be cancelled.`]);
    expect(refused.at(-1)).toMatchObject({ kind: 'stop', token: USER_STOP });
    // An outcome that names nothing it asked for is not the end: it asks once more first.
    const vague = play(task, seed, [AGENT_GREETING, ASK_ID, 'All done!']);
    expect(vague.at(-1)).toMatchObject({ kind: 'message', meaning: { kind: 'remind' } });
  });

  it('T3 says ###TRANSFER### when transferred to a human agent', () => {
    const { task, seed } = find((t) => t.family === 'transfer');
    const acts = play(task, seed, [AGENT_GREETING, ASK_ID, TRANSFER_MESSAGE]);
    expect(acts.at(-1)).toMatchObject({ kind: 'stop', token: USER_TRANSFER });
    expect(play(task, seed, [AGENT_GREETING, 'I am transferring you to a colleague now.']).at(-1)).toMatchObject({ token: USER_TRANSFER });
  });

  it('T4 says ###OUT-OF-SCOPE### when its scenario has nothing more to give', () => {
    const { task, seed } = find(oneCancel);
    const notFound = 'I could not find an account with that email address. Could you give me your email again?';
    const acts = play(task, seed, [AGENT_GREETING, ASK_ID, notFound]);
    expect(acts.at(-1)).toMatchObject({ kind: 'stop', token: USER_OUT_OF_SCOPE });
    // Questions it cannot answer, again and again: it gives up after STUCK_LIMIT turns without progress.
    const pestered = play(task, seed, [AGENT_GREETING, ...new Array(STUCK_LIMIT + 1).fill('What is your date of birth?')]);
    expect(pestered.at(-1)).toMatchObject({ kind: 'stop', token: USER_OUT_OF_SCOPE });
    expect(pestered.length).toBe(STUCK_LIMIT + 1);
  });
});

describe('reading untrusted agent text', () => {
  it('plays an agent worded unlike the expert (in a chat model style) to the same end', () => {
    const { task, seed } = find((t, p) => t.family === 'cancel' && t.intent.requests.length === 1 && !p.changeMind && !p.idsUpfront && t.intent.auth.kind === 'email');
    const r = task.intent.requests[0] as Extract<Request, { kind: 'cancel' }>;
    const acts = play(task, seed, [
      AGENT_GREETING,
      "Hello! I'd be glad to help you cancel your order. To get started, could you please provide the email address associated with your account?",
      "Thanks! I've located your account. Before I go further, can you confirm which order you'd like to cancel?",
      `I see that order ${ref(r)} is currently pending. Here are the details of the cancellation:\n- Order: ${ref(r)}\n- Reason: ${r.reason}\n\nWould you like me to proceed with the cancellation? Please reply yes or no.`,
      `Your order ${ref(r)} has been successfully cancelled. Is there anything else I can help you with today?`,
    ]);
    expect(acts.map((a) => a.meaning?.kind)).toEqual(['open', 'identity', 'order', 'yes', 'stop']);
    expect(acts[1].text).toContain((task.intent.auth as { email: string }).email);
    expect(acts[2].text).toContain(r.orderRef);
    expect(isExplicitYes(acts[3].text)).toBe(true);
    expect(acts[4]).toMatchObject({ kind: 'stop', token: USER_STOP });
  });

  it('tells a failed account lookup from a failed order lookup', () => {
    const { task, seed } = find((t, p) => t.intent.auth.kind === 'email_then_name_zip' && p.idsUpfront && t.intent.requests.length === 1 && 'orderRef' in t.intent.requests[0]);
    const a = task.intent.auth as { zip: string };
    const acts = play(task, seed, [AGENT_GREETING, ASK_ID, "Sorry, I couldn't find an account with that email.", "I couldn't find that order. Could you double check the order number?"]);
    expect(acts[2].meaning).toMatchObject({ kind: 'identity', zip: a.zip });
    expect(acts[3].meaning).toMatchObject({ kind: 'order', index: 0 });
    // A user with a zip still to correct answers a question about an order with the order, not the zip.
    const z = find((t, p) => p.wrongZip !== null && p.idsUpfront && t.intent.requests.length === 1 && 'orderRef' in t.intent.requests[0]);
    const zs = play(z.task, z.seed, [AGENT_GREETING, ASK_ID, "I couldn't find that order. Could you double check the order number?"]);
    expect(zs[1].meaning).toMatchObject({ kind: 'identity', zip: userProfile(z.task, z.seed).wrongZip });
    expect(zs[2].meaning).toMatchObject({ kind: 'order', index: 0 });
  });

  it('never throws and always answers with one act', () => {
    const { task, seed } = find(oneCancel);
    const odd = ['', '?'.repeat(100000), '<tool_call>{"name":', 'CONFIRM?'.repeat(500), '\u0000\u202e', 42 as unknown as string, '###STOP###'];
    for (const text of odd) {
      const a = retailUser(task, { seed }).next([{ kind: 'reply', text: AGENT_GREETING }, { kind: 'user', text: 'hi' }, { kind: 'reply', text }]);
      expect(['message', 'stop']).toContain(a.kind);
      expect(typeof a.text).toBe('string');
    }
  });
});
