// One rollout as a state machine, independent of how generations are batched (rollout.ts drives many):
//
//   act ──(generation)──▶ reply ─▶ done (the reply to the user ends the episode)
//                      └▶ calls ─▶ real mode: the real environment answers at once
//                                  rehearse modes: each call waits for its own Rehearse generation
//                                  (parse errors are answered at once with an error observation)
//   rehearse ──(one generation per pending call)──▶ all answered ─▶ act
//
// In the rehearse modes a shadow environment executes every call too, in order, so that each rehearsed
// observation can be compared with the real one on the same state (fidelity). The shadow's answers are
// never shown to the policy.
import type { GroundingExample, Observation, Step, Task, ToolCall } from '../env/domain';
import type { Environment } from '../env/env';
import { endsEpisode, parse, serializeObservation } from '../env/toolcall';
import { rehearses, type RolloutMode } from '../method/modes';
import type { ChatMessage } from './chat';
import type { Conversation } from './conversation';
import { compareObservations, type StepFidelity } from './fidelity';
import { parseExecutionResult, type RehearseParseFailure } from './rehearse-prompt';


export type EndReason =
  | 'reply' // the final reply to the last user message
  | 'empty' // an empty Act generation (reward −0.1)
  | 'max-turns' // the Act turn limit (terminated: reward 0)
  | 'context' // a prompt plus its generation budget would not fit the context (terminated: reward 0)
  | 'rehearse-invalid' // a Rehearse generation that does not parse (reward 0)
  | 'user-stop' // conversation episodes: the user ended the conversation, or a generated user failed (conversation.userError; terminated: reward 0)
  | 'user-turns'; // conversation episodes: the user-turn cap (terminated: reward 0, as τ²'s max_steps)

export interface PendingCall {
  /** Index of this call's slot among the observations of the current turn. */
  slot: number;
  call: ToolCall;
  /** What the real environment answered on the shadow state (rehearse modes), or would answer (revise). */
  shadow: Observation;
}

/**
 * Rehearse, then revise (real mode, at test time; the paper's Figure 7): before a turn's calls run, the
 * policy rehearses each of them; when a rehearsal predicts an error, the turn is not executed: it enters the
 * Act context as an imagined turn (the call and the rehearsed error, as an executed failure would) and the
 * policy writes the turn again, at most `max` times per episode. Only then does the environment execute.
 */
export interface ReviseOptions {
  max: number;
  /** 'calls': every turn with a call is checked; 'writes': only a turn that holds a write. */
  scope: 'calls' | 'writes';
  /**
   * The compute-matched control: a checked turn is discarded and written again by a sampled Act generation,
   * with nothing added to the context (no rehearsal, no information), as often as revise may revise.
   */
  control?: boolean;
}
export const REVISE_SCOPES = ['calls', 'writes'] as const;

/** One checked call: what the policy rehearsed, what the environment would have answered, and whether the turn was revised. */
export interface RevisionRecord {
  turn: number;
  call: ToolCall;
  rehearsed: Observation;
  real: Observation;
  revised: boolean;
}

export interface FidelityRecord extends StepFidelity {
  /** 0-based Act turn of the call. */
  turn: number;
  call: ToolCall;
  rehearsed: Observation;
  real: Observation;
}

/** One call of an Act turn as the episode holds it (a malformed block included, with an error observation). */
export interface CallSlot {
  call: ToolCall;
  /** What the policy saw: the real answer (real mode), the rehearsed one, or the parse error. null while
   * its rehearsal is pending, and for good when the episode ended before it was answered. */
  obs: Observation | null;
  /** Rehearse modes: what the shadow environment answered (null in real mode and for malformed blocks). */
  shadow: Observation | null;
  /** A malformed block as written (cut), for display. */
  raw?: string;
  /** Rehearse modes with recall: the observation came from the task's reference trajectory, not the policy. */
  recalled?: true;
}

/** One Act turn: its full text and its calls in order (what a step-by-step viewer shows). */
export interface TurnRecord {
  turn: number;
  text: string;
  calls: CallSlot[];
  /** Messages of the Act conversation before this turn (messages.slice(0, history) is its Rehearse history). */
  history: number;
}

export class Episode {
  /** The Act conversation (without the system prompt, which the prompt builder adds). */
  readonly messages: ChatMessage[] = [];
  readonly steps: Step[] = [];
  /** The 0-based Act turn of each step, in step order (what a viewer numbers a judge's verdict by). */
  readonly stepTurns: number[] = [];
  readonly fidelity: FidelityRecord[] = [];
  /** Every Act turn applied so far, in order. */
  readonly log: TurnRecord[] = [];
  /** Act turns taken so far (generated or scripted). */
  turns = 0;
  end: EndReason | null = null;
  rehearseFailure: RehearseParseFailure | null = null;
  /** When the failed rehearsal had used its whole token budget: that budget ("cut at N tokens"), else null. */
  rehearseCut: number | null = null;
  /** Calls of the current turn waiting for their Rehearse generation. */
  pending: PendingCall[] = [];
  /** Observations of the current turn, in call order; null while a rehearsal is pending. */
  private slots: CallSlot[] = [];
  /** The conversation before the current assistant turn (the Rehearse prompt's history). */
  historyBefore: ChatMessage[] = [];
  /** Rehearse-then-revise: every checked call, and the revisions (imagined turns) spent so far. */
  readonly checked: RevisionRecord[] = [];
  revisions = 0;
  /** The control arm discarded the last turn: the next Act generation is sampled, not greedy. */
  resample = false;
  /** Calls answered by recall from the reference trajectory instead of a rehearsal (src/rollout/recall.ts). */
  recalled = 0;
  /** A conversation episode's user (converse()); null: the first reply ends the episode. */
  conversation: Conversation | null = null;

  constructor(
    readonly promptId: string,
    readonly rolloutId: string,
    readonly task: Task,
    readonly mode: RolloutMode,
    /** real mode: the environment the policy acts in; rehearse modes: the hidden shadow. */
    readonly env: Environment,
    readonly grounding: readonly GroundingExample[],
    readonly maxTurns: number,
    readonly revise: ReviseOptions | null = null,
  ) {
    if (revise && rehearses(mode)) throw new Error('rehearse-then-revise runs in the real environment (real mode)');
    // All user messages open the conversation, as in the expert rows (src/env/rows.ts): there is no user
    // simulator, and generated tasks carry the whole request (with consent) in one message.
    for (const content of task.userMessages) this.messages.push({ role: 'user', content });
  }

  get done(): boolean {
    return this.end !== null;
  }
  get wantsAct(): boolean {
    return !this.done && this.pending.length === 0 && !this.conversation?.waiting;
  }
  /** Cut off before its end (a cap, the context, or a user that failed, which τ² scores 0 as well). */
  get terminated(): boolean {
    return this.end === 'max-turns' || this.end === 'context' || this.end === 'user-turns' || (this.end === 'user-stop' && this.conversation?.userError != null);
  }

  /**
   * Makes this a conversation episode, before its first Act turn: the greeting and the user's opening replace
   * the task's messages, and each reply is answered by the user instead of ending the episode.
   */
  converse(c: Conversation): void {
    if (this.turns > 0 || this.conversation) throw new Error('converse: only a fresh episode becomes a conversation');
    this.conversation = c;
    this.messages.length = 0;
    c.open(this);
  }

  finish(reason: EndReason): void {
    if (this.end === null) this.end = reason;
    this.pending = [];
  }

  /**
   * Applies one Act output (the full text, including the closing tag of a stop string). Real mode answers
   * the calls here; rehearse modes queue them in `pending`.
   */
  applyAct(text: string): void {
    if (this.done) throw new Error('applyAct on a finished episode');
    this.turns++;
    this.historyBefore = [...this.messages];
    this.slots = [];
    this.log.push({ turn: this.turns - 1, text, calls: this.slots, history: this.historyBefore.length });
    if (text.trim() === '') {
      this.addStep({ kind: 'reply', text: '' });
      return this.finish('empty');
    }
    this.messages.push({ role: 'assistant', content: text });
    const parsed = parse(text);
    if (endsEpisode(parsed)) {
      this.addStep({ kind: 'reply', text: parsed.reply });
      if (!this.conversation) return this.finish('reply');
      this.conversation.answer(this);
      return this.afterTurn();
    }
    this.resample = false;
    const calls = parsed.parts.flatMap((p) => (p.kind === 'call' ? [p.call] : []));
    if (this.revise && this.revisions < this.revise.max && calls.some((c) => this.revise!.scope === 'calls' || this.env.isWrite(c.name))) {
      if (this.revise.control) {
        // The control: forget the turn and write it again, sampled, with nothing learned in between.
        this.messages.pop();
        this.log.pop();
        this.revisions++;
        this.resample = true;
        return this.afterTurn();
      }
      // Every well-formed call waits for its rehearsal; the environment's answer is computed on a snapshot
      // (never shown) to score the prediction, and the state is left as it was.
      const snap = this.env.snapshot();
      for (const part of parsed.parts) {
        if (part.kind === 'error') {
          this.slots.push({ call: { name: '', arguments: {} }, obs: { ok: false, name: '', error: part.error.error, code: 'parse' }, shadow: null, raw: part.error.raw });
          continue;
        }
        const shadow = this.env.execute(part.call);
        this.pending.push({ slot: this.slots.length, call: part.call, shadow });
        this.slots.push({ call: part.call, obs: null, shadow });
      }
      this.env.restore(snap);
      this.checkingReply = parsed.reply;
      if (this.pending.length === 0) this.closeCheckedTurn();
      return;
    }
    // Replies alongside calls are kept as a reply step too (facts can be stated there).
    if (parsed.reply !== '') this.addStep({ kind: 'reply', text: parsed.reply });
    for (const part of parsed.parts) {
      if (part.kind === 'error') {
        // A malformed call is answered by an error observation, never by the simulator or the tools.
        const call: ToolCall = { name: '', arguments: {} };
        this.slots.push({ call, obs: { ok: false, name: '', error: part.error.error, code: 'parse' }, shadow: null, raw: part.error.raw });
      } else if (!rehearses(this.mode)) {
        this.slots.push({ call: part.call, obs: this.env.execute(part.call), shadow: null });
      } else {
        const shadow = this.env.execute(part.call);
        this.pending.push({ slot: this.slots.length, call: part.call, shadow });
        this.slots.push({ call: part.call, obs: null, shadow });
      }
    }
    if (this.pending.length === 0) this.closeTurn();
  }

  /**
   * Applies the Rehearse generation for `pending[i]` (full text including the closing tag). `cutAt`: the
   * generation stopped at its token budget (that many tokens), so a parse failure is a cut, not malformed text.
   */
  applyRehearse(p: PendingCall, text: string, cutAt: number | null = null): void {
    if (this.done) return;
    const r = parseExecutionResult(text, p.call.name);
    if (!r.ok) {
      this.rehearseFailure = r.error.code;
      this.rehearseCut = cutAt;
      return this.finish('rehearse-invalid');
    }
    this.slots[p.slot].obs = r.observation;
    this.fidelity.push({ turn: this.turns - 1, call: p.call, rehearsed: r.observation, real: p.shadow, ...compareObservations(r.observation, p.shadow) });
    this.answered(p);
  }

  /**
   * Answers `pending[i]` with an observation recalled from the reference trajectory: no generation, and no
   * fidelity record (the fidelity figures stay the policy's own).
   */
  applyRecalled(p: PendingCall, obs: Observation): void {
    if (this.done) return;
    this.slots[p.slot].obs = obs;
    this.slots[p.slot].recalled = true;
    this.recalled++;
    this.answered(p);
  }

  /** Every well-formed call the episode made before `p`, in order (what the world's state follows from). */
  callsBefore(p: PendingCall): ToolCall[] {
    const calls: ToolCall[] = [];
    for (const t of this.log) for (const [i, s] of t.calls.entries()) {
      if (t.calls === this.slots && i >= p.slot) break; // the current turn: only the calls written before p
      if (s.call.name !== '') calls.push(s.call);
    }
    return calls;
  }

  private answered(p: PendingCall): void {
    this.pending = this.pending.filter((x) => x !== p);
    if (this.pending.length === 0) (this.checkingReply !== null ? this.closeCheckedTurn() : this.closeTurn());
  }

  /** The reply text of the turn being checked (null: no turn is being checked). */
  private checkingReply: string | null = null;

  /**
   * Every rehearsal of a checked turn is in: if one predicts an error, the turn stays imagined (in the Act
   * context, never executed) and Act writes it again; otherwise its calls run for real, in order.
   */
  private closeCheckedTurn(): void {
    const reply = this.checkingReply ?? '';
    this.checkingReply = null;
    const predictsError = this.slots.some((s) => s.call.name !== '' && s.obs !== null && !s.obs.ok);
    for (const s of this.slots) if (s.call.name !== '' && s.obs && s.shadow) this.checked.push({ turn: this.turns - 1, call: s.call, rehearsed: s.obs, real: s.shadow, revised: predictsError });
    if (predictsError) {
      this.revisions++;
      for (const s of this.slots) this.messages.push({ role: 'tool', content: serializeObservation(s.obs!) });
      this.slots = [];
      return this.afterTurn();
    }
    if (reply !== '') this.addStep({ kind: 'reply', text: reply });
    for (const s of this.slots) if (s.call.name !== '') s.obs = this.env.execute(s.call);
    this.closeTurn();
  }

  /** All observations of the turn are known: they enter the Act context as ordinary tool messages. */
  private closeTurn(): void {
    for (const s of this.slots) {
      const obs = s.obs!;
      this.addStep({ kind: 'call', call: s.call, observation: obs });
      this.messages.push({ role: 'tool', content: serializeObservation(obs) });
    }
    this.slots = [];
    this.afterTurn();
  }

  private addStep(s: Step): void {
    this.steps.push(s);
    this.stepTurns.push(this.turns - 1);
  }

  private afterTurn(): void {
    if (!this.done && this.turns >= this.maxTurns) this.finish('max-turns');
  }
}
