// The scripted τ² user of the lab's generated retail tasks: a customer who knows its task's intent and
// profile (user-profile.ts) and nothing else, played against any agent, scripted or model.
//
// How it meets τ²-bench's user simulation guidelines (data/tau2/user_simulator/simulation_guidelines.md),
// point by point (test/env/user.test.ts has one test per row):
//
// | guideline (τ², paraphrased)                        | how the script meets it                                                          |
// |----------------------------------------------------|----------------------------------------------------------------------------------|
// | G1 play a customer calling customer service        | first-person customer lines only; it answers the agent's greeting with its need  |
// | G2 one message per turn, natural flow              | next() returns exactly one message (or one stop) answering the latest reply      |
// | G3 follow the scenario strictly                    | every line comes from the intent + profile; it confirms only a proposal that     |
// |                                                    | matches its current request, and says no (with the right detail) otherwise      |
// | G4 never invent what the scenario does not give    | questions it cannot answer get "I don't know" (no email for a name-zip user, no  |
// |                                                    | order id for a request without one); it never makes up ids or values             |
// | G5 paraphrase, do not read the instructions out    | lines are drawn from paraphrase sets (user-phrasing.ts), never the rendered      |
// |                                                    | τ² instructions (instructions.ts)                                                |
// | G6 disclose progressively, only when asked         | the opening states the reason for the call only; identity comes when asked for, |
// |                                                    | order ids with the request or when asked (profile), one request at a time unless |
// |                                                    | the profile says it asks two things at once                                      |
// | G7 realistic, consistent character (closing note)  | one identity (its own, or the one typo its profile allows), the requests of its  |
// |                                                    | intent (or the first thought of its one change of mind), the customer's side only|
// | T1 keep going until the task is complete           | after each outcome it asks its next request or reminds of an unaddressed one     |
// | T2 ###STOP### when the goal is satisfied           | once every request is served or refused (the agent's reply names it)            |
// | T3 ###TRANSFER### when transferred                 | on the transfer hold message or "transferring you"                              |
// | T4 ###OUT-OF-SCOPE### when the scenario runs out   | when asked again for an identity it has no more of after "not found", or after   |
// |                                                    | three turns in a row that make no progress                                       |
//
// Purity: next(conversation) replays the whole conversation through the script (reading only the agent's
// replies) and answers the last one, so the same conversation always gets the same answer, and the user
// turns of a recorded conversation can be recomputed from its agent turns. Randomness is per user turn:
// turn k draws from deriveSeed(profile seed, k), so a variation in one turn never shifts another's words.

import { deriveSeed, Rng } from '../../util/rng';
import { USER_OUT_OF_SCOPE, USER_STOP, USER_TRANSFER, type Turn, type UserAct, type UserSimulator } from '../domain';
import type { Request, RetailTask } from './intent';
import { detailSay, DONT_KNOW, emailSay, GREET, NO_EMAIL, NO_ORDER, nameZipSay, orderRefsSay, pick, requestSay, YES } from './user-phrasing';
import { profileSeed, statedRequests, userProfile, type UserProfile } from './user-profile';
import { judgeProposal, mentions, readAgent } from './user-reading';

/**
 * What the scripted user said, for scripted agents (see UserAct.meaning). Request indices are the intent's;
 * `refs` are the order ids a restatement names (the ground truth of user fidelity, src/env/retail/user-fidelity.ts).
 */
export type RetailUserMeaning =
  | { kind: 'open'; requests: { index: number; request: Request; idsGiven: boolean }[] }
  | { kind: 'ask'; index: number; request: Request; idsGiven: boolean }
  | { kind: 'identity'; email: string }
  | { kind: 'identity'; first: string; last: string; zip: string }
  | { kind: 'order'; index: number; refs: string[] }
  | { kind: 'yes'; index: number }
  | { kind: 'correct' | 'change'; index: number; request: Request; refs: string[] }
  | { kind: 'remind'; index: number; request: Request; refs: string[] }
  | { kind: 'unknown' }
  | { kind: 'stop' };

type Identity = { email: string } | { first: string; last: string; zip: string; fix?: boolean };

interface State {
  opened: boolean;
  asked: number;
  wants: Request[];
  served: boolean[];
  reminded: boolean[];
  idsGiven: boolean[];
  changed: boolean;
  identityGiven: number;
  stuck: number;
  stop: UserAct<RetailUserMeaning> | null;
}

export const STUCK_LIMIT = 3;

export class ScriptedRetailUser implements UserSimulator<RetailUserMeaning> {
  readonly profile: UserProfile;
  private readonly seed: number;
  private readonly identities: Identity[];

  constructor(
    readonly task: RetailTask,
    seed = 0,
  ) {
    this.profile = userProfile(task, seed);
    this.seed = profileSeed(seed, task.id);
    const a = task.intent.auth;
    const nz = (zip: string, fix?: boolean): Identity => ({ first: (a as { first: string }).first, last: (a as { last: string }).last, zip, fix });
    this.identities =
      a.kind === 'email' ? [{ email: a.email }] : a.kind === 'email_then_name_zip' ? [{ email: a.email }, nz(a.zip)] : this.profile.wrongZip ? [nz(this.profile.wrongZip), nz(a.zip, true)] : [nz(a.zip)];
  }

  next(conversation: readonly Turn[]): UserAct<RetailUserMeaning> {
    const n = this.task.intent.requests.length;
    const s: State = {
      opened: false,
      asked: 0,
      wants: statedRequests(this.task, this.profile),
      served: new Array(n).fill(false),
      reminded: new Array(n).fill(false),
      idsGiven: new Array(n).fill(false),
      changed: false,
      identityGiven: 0,
      stuck: 0,
      stop: null,
    };
    let heard: string[] = [];
    let k = 0;
    for (const t of conversation) {
      if (t.kind === 'reply') heard.push(typeof t.text === 'string' ? t.text : '');
      else if (t.kind === 'user') {
        this.step(s, heard.join('\n'), k++);
        heard = [];
      }
    }
    return this.step(s, heard.join('\n'), k);
  }

  private step(s: State, heard: string, k: number): UserAct<RetailUserMeaning> {
    if (s.stop) return s.stop;
    const rng = new Rng(deriveSeed(this.seed, k));
    const say = (text: string, meaning: RetailUserMeaning, progress: boolean): UserAct<RetailUserMeaning> => {
      s.stuck = progress ? 0 : s.stuck + 1;
      if (s.stuck >= STUCK_LIMIT) return stop(USER_OUT_OF_SCOPE);
      return { kind: 'message', text, meaning };
    };
    const stop = (token: typeof USER_STOP | typeof USER_TRANSFER | typeof USER_OUT_OF_SCOPE): UserAct<RetailUserMeaning> => {
      s.stop = { kind: 'stop', token, text: token, meaning: { kind: 'stop' } };
      return s.stop;
    };
    if (!s.opened) return this.open(s, rng);
    const r = readAgent(heard);
    const open = () => s.wants.map((_, i) => i).filter((i) => i < s.asked && !s.served[i]);
    if (r.topic === 'transfer') return stop(USER_TRANSFER);

    if (r.topic === 'confirm') {
      // An agent may report one request and propose the next in one reply. The proposal is the paragraphs
      // from the last one before the question that names a request (its order, product or address); what
      // comes before them is an outcome.
      const paras = heard.split(/\n\s*\n/);
      let q = paras.length - 1;
      while (q > 0 && readAgent(paras[q]).topic !== 'confirm') q--;
      let start = q;
      while (start > 0 && !open().some((i) => mentions(paras[start], s.wants[i]))) start--;
      const proposal = paras.slice(start).join('\n\n');
      const report = paras.slice(0, start).join('\n\n');
      for (const i of open()) if (report && mentions(report, s.wants[i])) s.served[i] = true;
      const cands = open();
      const target = cands.find((i) => judgeProposal(proposal, s.wants[i]).about);
      if (target === undefined) {
        if (cands.length === 0) return say("No, thank you. I don't need anything else.", { kind: 'unknown' }, false);
        const i = cands[0];
        // A question that proposes no action ("can you confirm your order id?") is answered, not refused.
        if (!WRITE_WORDS.test(proposal)) {
          const refs = orderRefs(s.wants[i]);
          if (/\border\b/i.test(proposal) && refs.length > 0) {
            const progress = !s.idsGiven[i];
            s.idsGiven[i] = true;
            return say(orderRefsSay(rng, refs), { kind: 'order', index: i, refs }, progress);
          }
          return say(`${pick(rng, ['What I need is this:', 'To be clear,'])} ${lower(requestSay(rng, s.wants[i], s.idsGiven[i]))}`, { kind: 'remind', index: i, request: s.wants[i], refs: saidRefs(s.wants[i], s.idsGiven[i]) }, false);
        }
        return say(`No, that's not what I asked for. ${requestSay(rng, s.wants[i], s.idsGiven[i])}`, { kind: 'correct', index: i, request: s.wants[i], refs: saidRefs(s.wants[i], s.idsGiven[i]) }, false);
      }
      if (this.profile.changeMind?.request === target && !s.changed) {
        s.changed = true;
        s.wants[target] = this.task.intent.requests[target];
        const text = `${pick(rng, ['Actually, wait.', 'Hmm, actually I changed my mind.', 'Sorry, one change.'])} ${cap(detailSay(rng, s.wants[target]))}.`;
        return say(text, { kind: 'change', index: target, request: s.wants[target], refs: detailRefs(s.wants[target]) }, true);
      }
      const wrong = judgeProposal(proposal, s.wants[target]).wrong;
      if (wrong.length) {
        return say(`${pick(rng, ["No, that's not right.", 'No, that is not what I want.'])} ${cap(detailSay(rng, s.wants[target]))}.`, { kind: 'correct', index: target, request: s.wants[target], refs: detailRefs(s.wants[target]) }, false);
      }
      return say(pick(rng, YES), { kind: 'yes', index: target }, true);
    }

    // "I couldn't find you." without a question still asks for the next identity, unless it is about an order.
    const giveIdentity = r.topic === 'identity' || ((r.topic === 'statement' || r.topic === 'other') && r.notFound && s.identityGiven > 0 && s.identityGiven < this.identities.length && !open().some((i) => mentions(heard, s.wants[i])));
    if (giveIdentity) {
      if (s.identityGiven >= this.identities.length) {
        // Everything it knows about itself has been given and did not work: nothing left to say.
        if (r.notFound) return stop(USER_OUT_OF_SCOPE);
        return say(this.identityText(rng, this.identities[this.identities.length - 1], r.emailOnly), identityMeaning(this.identities[this.identities.length - 1]), false);
      }
      const id = this.identities[s.identityGiven++];
      return say(this.identityText(rng, id, r.emailOnly), identityMeaning(id), true);
    }

    if (r.topic === 'order') {
      const i = open()[0];
      const refs = i === undefined ? [] : orderRefs(s.wants[i]);
      if (i === undefined || refs.length === 0) return say(pick(rng, NO_ORDER), { kind: 'unknown' }, false);
      const progress = !s.idsGiven[i];
      s.idsGiven[i] = true;
      return say(orderRefsSay(rng, refs), { kind: 'order', index: i, refs }, progress);
    }

    if (r.topic === 'detail' || r.topic === 'other') {
      const i = open()[0];
      if (i === undefined) return s.asked < s.wants.length ? this.ask(s, rng, say) : stop(USER_STOP);
      if (r.topic === 'other' && /\b(e-?mail|phone|birth|password)\b/i.test(heard)) return say(pick(rng, DONT_KNOW), { kind: 'unknown' }, false);
      return say(`${pick(rng, ['As I said,', 'Just to repeat:', 'To be clear,'])} ${lower(requestSay(rng, s.wants[i], s.idsGiven[i]))}`, { kind: 'remind', index: i, request: s.wants[i], refs: saidRefs(s.wants[i], s.idsGiven[i]) }, false);
    }

    // A statement or a wrap-up: an outcome. Requests whose order (product, address) it names are done,
    // served or refused; a reply that names none gets one reminder per request, then counts as its answer.
    const before = open();
    for (const i of before) if (mentions(heard, s.wants[i])) s.served[i] = true;
    if (before.length > 0 && before.every((i) => !s.served[i])) {
      const i = before[0];
      if (!s.reminded[i]) {
        s.reminded[i] = true;
        return say(`${pick(rng, ['Sorry, what about my request?', 'Could you help me with my request?'])} ${requestSay(rng, s.wants[i], s.idsGiven[i])}`, { kind: 'remind', index: i, request: s.wants[i], refs: saidRefs(s.wants[i], s.idsGiven[i]) }, false);
      }
      s.served[i] = true;
    }
    const left = open();
    if (left.length > 0) {
      const i = left[0];
      return say(`${pick(rng, ['And my other request:', 'There was also this:'])} ${lower(requestSay(rng, s.wants[i], s.idsGiven[i]))}`, { kind: 'remind', index: i, request: s.wants[i], refs: saidRefs(s.wants[i], s.idsGiven[i]) }, true);
    }
    if (s.asked < s.wants.length) return this.ask(s, rng, say);
    return stop(USER_STOP);
  }

  private open(s: State, rng: Rng): UserAct<RetailUserMeaning> {
    s.opened = true;
    s.asked = this.profile.bothAtOnce ? s.wants.length : 1;
    const requests = s.wants.slice(0, s.asked).map((request, index) => {
      s.idsGiven[index] = this.profile.idsUpfront;
      return { index, request, idsGiven: this.profile.idsUpfront };
    });
    const said = requests.map((q, i) => (i === 0 ? requestSay(rng, q.request, q.idsGiven) : `${pick(rng, ['Also,', 'And'])} ${lower(requestSay(rng, q.request, q.idsGiven))}`));
    const text = [pick(rng, GREET), requests.length > 1 ? pick(rng, ['I have two things.', 'Two things, please.']) : '', ...said].filter((x) => x).join(' ');
    return { kind: 'message', text, meaning: { kind: 'open', requests } };
  }

  private ask(s: State, rng: Rng, say: (t: string, m: RetailUserMeaning, p: boolean) => UserAct<RetailUserMeaning>): UserAct<RetailUserMeaning> {
    const index = s.asked++;
    s.idsGiven[index] = this.profile.idsUpfront;
    const text = `${pick(rng, ['Yes, one more thing.', 'Actually, there is something else.', 'Also,'])} ${requestSay(rng, s.wants[index], this.profile.idsUpfront)}`;
    return say(text, { kind: 'ask', index, request: s.wants[index], idsGiven: this.profile.idsUpfront }, true);
  }

  private identityText(rng: Rng, id: Identity, emailAsked: boolean): string {
    if ('email' in id) return emailSay(rng, id.email);
    const nz = nameZipSay(rng, id.first, id.last, id.zip);
    if (id.fix) return `${pick(rng, ['Oh, sorry, I gave you the wrong zip code.', 'My mistake, that zip was wrong.'])} ${nz}`;
    return emailAsked ? `${pick(rng, NO_EMAIL)} ${nz}` : nz;
  }
}

const WRITE_WORDS = /\b(cancel|return|exchang|modif|chang|updat|switch|swap|refund|charge)/i;
/** The order ids a request names (none for a product, an account address or a transfer). */
export const orderRefs = (w: Request): string[] => (w.kind === 'order_total' ? [...w.orderRefs] : 'orderRef' in w ? [w.orderRef] : []);
/** The order ids requestSay states: all of them with ids, none without. */
const saidRefs = (w: Request, ids: boolean): string[] => (ids ? orderRefs(w) : []);
/** The order ids detailSay states: a write's detail names none, anything else is the whole request with its ids. */
const detailRefs = (w: Request): string[] => (w.kind === 'cancel' || w.kind === 'return' || w.kind === 'exchange' || w.kind === 'modify_items' ? [] : orderRefs(w));
const identityMeaning = (id: Identity): RetailUserMeaning => ('email' in id ? { kind: 'identity', email: id.email } : { kind: 'identity', first: id.first, last: id.last, zip: id.zip });
const cap = (t: string) => t.charAt(0).toUpperCase() + t.slice(1);
const lower = (t: string) => (/^I\b/.test(t) ? t : t.charAt(0).toLowerCase() + t.slice(1));

/** The scripted user of a generated retail task (the retail domain's `user`). */
export function retailUser(task: RetailTask, opts: { seed?: number } = {}): ScriptedRetailUser {
  return new ScriptedRetailUser(task, opts.seed ?? 0);
}
