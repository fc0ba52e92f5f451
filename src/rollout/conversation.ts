// Conversation episodes (issue 47): the agent's reply no longer ends the episode; a user simulator answers it,
// and its message becomes the next user message of the Act context, until the user stops (one of τ²'s stop
// tokens) or the user-turn cap is reached. One-message episodes (no Conversation attached) are untouched.
//
// The Act context takes the shape of src/env/conversation-rows.ts's rows, so a policy trained on the expert's
// conversations sees at run time what it saw in training: the fixed greeting as the first assistant message
// (τ²'s orchestrator writes it, the policy never generates it), then user and agent turns as they came. The
// user's stop enters no message: nothing is generated after it.
//
// The user reads only the agent's replies (UserSimulator.next's contract), so a call or an observation —
// real or rehearsed — never reaches it.
//
// A generated user (a model, an endpoint: GeneratedUserSimulator) answers asynchronously: its turn is not
// taken where the reply is applied but marked `waiting`, and the rollout loop asks every waiting
// conversation at once at the start of its next round (generatedTurn), so a model user's turns batch as Act
// turns do. A generated user that writes nothing usable ends the conversation with `userError` set, and the
// episode scores 0, as τ² scores a USER_ERROR.
import { AGENT_GREETING, userStopToken, type GeneratedUserSimulator, type Step, type Task, type Turn, type UserAct, type UserSimulator, type UserStopToken } from '../env/domain';
import type { Episode } from './episode';

/**
 * Who plays the user: the domain's scripted user (generated tasks), the lab's model playing the user from the
 * task's τ² instructions (model-user.ts), or an OpenAI-compatible endpoint doing the same (endpoint-user.ts).
 */
export const USER_KINDS = ['scripted', 'model', 'endpoint'] as const;
export type UserKind = (typeof USER_KINDS)[number];

export interface ConversationOptions {
  user: UserKind;
  /**
   * model and endpoint users: the user of a task, under the seed of its turns (every sample of a task gets
   * the same seed). Required for them, unused by the scripted user.
   */
  generatedUser?: (task: Task, seed: number) => GeneratedUserSimulator;
  /** User turns before the episode is cut off (the opening counts); default DEFAULT_MAX_USER_TURNS. */
  maxUserTurns?: number;
  /**
   * Seed of the scripted user's profile and phrasing (default 0). Every sample of a task meets the same user,
   * as τ²'s pass^k assumes: the trials differ by the agent's sampling, not by a different customer.
   */
  userSeed?: number;
}

/** τ²'s max_steps counts both sides; 30 user turns is the conversation expert's own cap (expert-conversation.ts). */
export const DEFAULT_MAX_USER_TURNS = 30;

/** A user turn placed in the agent's steps: it was said before `ep.steps[at]`. */
interface UserMark {
  at: number;
  text: string;
}

export class Conversation {
  readonly userTurns: UserMark[] = [];
  /** How the user ended it (null while it goes on, and when a cap or the agent's failure ended it). */
  stop: UserStopToken | null = null;
  /** A generated user's turn is due (the rollout loop asks for it: generatedTurn). */
  waiting = false;
  /** Why a generated user's turn could not be had (the episode then ended, reward 0); null otherwise. */
  userError: string | null = null;

  constructor(
    readonly user: UserSimulator | GeneratedUserSimulator,
    readonly maxUserTurns: number = DEFAULT_MAX_USER_TURNS,
  ) {
    if (!(Number.isInteger(maxUserTurns) && maxUserTurns >= 1)) throw new RangeError(`maxUserTurns must be a positive integer, got ${maxUserTurns}`);
  }

  /**
   * The whole conversation as τ² holds it (the greeting, then agent steps and user turns in order): what the
   * user reads and what the confirmation rule checks. The agent's steps are `ep.steps`, unchanged.
   */
  turns(steps: readonly Step[]): Turn[] {
    const out: Turn[] = [{ kind: 'reply', text: AGENT_GREETING }];
    let u = 0;
    steps.forEach((s, i) => {
      while (u < this.userTurns.length && this.userTurns[u].at === i) out.push({ kind: 'user', text: this.userTurns[u++].text });
      out.push(s);
    });
    while (u < this.userTurns.length) out.push({ kind: 'user', text: this.userTurns[u++].text });
    return out;
  }

  /** Opens the episode's Act context: the greeting, then the user's opening message (or its stop). */
  open(ep: Episode): void {
    ep.messages.push({ role: 'assistant', content: AGENT_GREETING });
    this.userTurn(ep);
  }

  /** The agent has replied (ep.steps ends with the reply): the user answers, stops, or the cap ends it. */
  answer(ep: Episode): void {
    if (this.userTurns.length >= this.maxUserTurns) return ep.finish('user-turns');
    this.userTurn(ep);
  }

  /**
   * Asks the generated user for the turn it is waiting for and applies it. Never throws: a failure, or an
   * exception of the generator (an endpoint that is down), ends the conversation with `userError`.
   */
  async generatedTurn(ep: Episode): Promise<void> {
    if (!this.waiting || ep.done) return;
    this.waiting = false;
    const user = this.user as GeneratedUserSimulator;
    const got = await user.next(this.turns(ep.steps)).catch((e: unknown) => ({ kind: 'error' as const, error: e instanceof Error ? e.message : String(e), text: '' }));
    if (ep.done) return;
    if (got.kind === 'error') {
      this.userError = typeof got.error === 'string' && got.error ? got.error : 'the user failed';
      return ep.finish('user-stop');
    }
    this.apply(ep, got);
  }

  private userTurn(ep: Episode): void {
    if (isGenerated(this.user)) {
      this.waiting = true;
      return;
    }
    this.apply(ep, this.user.next(this.turns(ep.steps)));
  }

  private apply(ep: Episode, act: UserAct): void {
    const text = typeof act.text === 'string' ? act.text : '';
    // A model user may write a stop token inside an ordinary message: τ²'s is_stop ends the conversation there.
    const stop = act.kind === 'stop' ? act.token : userStopToken(text);
    if (stop !== null) {
      this.stop = stop;
      return ep.finish('user-stop');
    }
    this.userTurns.push({ at: ep.steps.length, text });
    ep.messages.push({ role: 'user', content: text });
  }
}

export const isGenerated = (u: UserSimulator | GeneratedUserSimulator): u is GeneratedUserSimulator => (u as GeneratedUserSimulator).generated === true;
