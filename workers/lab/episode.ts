// The lab's rollouts are the training rollouts: this file is a view over src/rollout's RolloutStepper
// (the loop runRollouts runs), stepped one round at a time. A round is one Act turn of every live
// rollout decoded as one batch, then every pending call's Rehearse generation as one batch, with the
// same prompts, seeds, stop strings, parsers, shadow environment and reward as training. What is added
// here is only what a person needs to see: the prompts, tokens with log-probs, the rehearsed observation
// beside the real one, fidelity, the reward's checklist, and the expert's turn scored by the policy.
import type { Domain, Task } from '../../src/env/domain';
import { judge, judgeOptions } from '../../src/env/judge';
import { realReward } from '../../src/env/reward';
import { formatCall, formatObservation, serializeObservation } from '../../src/env/toolcall';
import type { GenerateResult } from '../../src/model/generate';
import { logprobs } from '../../src/model/score';
import type { Tokenizer } from '../../src/model/tokenizer';
import { ACT_STOP, REHEARSE_STOP } from '../../src/rollout/act-prompt';
import { summarizeFidelity } from '../../src/rollout/fidelity';
import { fullText, RolloutStepper, type RolloutDomain, type RolloutPolicy, type RoundOptions, type RoundReport } from '../../src/rollout/rollout';
import { rehearses } from '../../src/method/modes';
import type { ActSource, CallView, RehearseDecoding, GenView, GroupRow, RewardView, RolloutMode, RolloutView, StepperUser, TurnView } from '../../src/worker-protocol';
import { realReasons, verdictReason, type VerdictContext } from './verdicts';
import { conversationView } from './conversation-view';

/**
 * The Act turn's source is the scripted expert when `actSource` says so (teacher forcing); in a conversation, the
 * expert that talks to the same scripted user.
 */
export type LabDomain = RolloutDomain & Pick<Domain, 'expert' | 'expertConversation'>;

export interface LabRolloutConfig {
  mode: RolloutMode;
  seed: number;
  /** Rollouts of the task (the GRPO group; 1 for the stepper). */
  k: number;
  maxTurns: number;
  /** Act budget (resolved: the measured default or the user's number). */
  maxNewTokens: number;
  /** Rehearse budget (resolved: measured from the world's real observations, or the user's number). */
  rehearseTokens: number;
  temperature: number;
  actSource: ActSource;
  rehearseDecoding?: RehearseDecoding;
  /** 'scripted': a conversation with the domain's scripted user (the eval CLI's `--user scripted`); default 'off'. */
  user?: StepperUser;
}

export class LabRollouts {
  readonly stepper: RolloutStepper;
  readonly task: Task;
  private readonly typed: boolean;
  private readonly expertTexts: string[];
  /** Per episode: the Act turn's view by turn, the Rehearse generation's view by `${turn}:${slot}`. */
  private readonly acts: Map<number, GenView>[];
  private readonly rehearsals: Map<string, GenView>[];
  private readonly overflow: (string | null)[];
  private readonly rewards: (RewardView | null)[];

  constructor(
    readonly policy: RolloutPolicy,
    readonly domain: LabDomain,
    task: Task | null,
    request: string,
    readonly cfg: LabRolloutConfig,
  ) {
    // A typed request is a task with nothing to check: it runs the same loop and earns no reward.
    this.typed = task === null;
    this.task = task ?? { id: 'typed request', userMessages: [request], referenceActions: [], facts: [], checklist: [] };
    const talks = cfg.user === 'scripted';
    if (talks && !task) throw new Error('a scripted user plays a task: pick one (a typed request has no customer behind it)');
    if (talks && cfg.actSource !== 'policy' && !domain.expertConversation) throw new Error('this domain has no expert that holds a conversation');
    // The conversation expert talks to the user the rollout will meet (the same seed), so its turns answer that
    // user's messages in order.
    const steps = !task ? [] : talks && cfg.actSource !== 'policy' ? domain.expertConversation!(task, domain.createEnv(), { userSeed: USER_SEED }).turns.slice(1).filter((t) => t.kind !== 'user') : domain.expert(task, domain.createEnv()).steps;
    this.expertTexts = steps.map((s) => (s.kind === 'call' ? formatCall(s.call) : s.text));
    this.stepper = new RolloutStepper(policy, domain, [this.task], {
      mode: cfg.mode,
      k: cfg.k,
      seed: cfg.seed,
      limits: { maxTurns: cfg.maxTurns, maxActTokens: cfg.maxNewTokens, maxRehearseTokens: cfg.rehearseTokens },
      temperature: cfg.temperature,
      rehearsePrompt: { decoding: cfg.rehearseDecoding },
      actScript: cfg.actSource !== 'policy' ? (_t, turn) => this.expertTexts[turn] : undefined,
      // The expert plays the environment too: the real observation, held to the same budget as a generation.
      rehearseScript: cfg.actSource === 'expert' ? (_t, _turn, p) => formatObservation(p.shadow) : undefined,
      ...(this.typed ? { reward: () => 0 } : {}),
      ...(talks ? { conversation: { user: 'scripted' as const, userSeed: USER_SEED } } : {}),
    });
    const n = this.stepper.episodes.length;
    this.acts = Array.from({ length: n }, () => new Map());
    this.rehearsals = Array.from({ length: n }, () => new Map());
    this.overflow = new Array<string | null>(n).fill(null);
    this.rewards = new Array<RewardView | null>(n).fill(null);
  }

  get done(): boolean {
    return this.stepper.done;
  }

  /** One round of the training loop, then the views of what it generated. */
  async step(opts: RoundOptions = {}): Promise<RoundReport> {
    if (this.done) throw new Error('the rollout has ended');
    if (this.cfg.actSource !== 'policy' && this.stepper.episodes.some((ep) => ep.wantsAct && this.expertTexts[ep.turns] === undefined))
      throw new Error('the expert has no further turn for this task');
    const r = await this.stepper.round(opts);
    for (const a of r.acts) this.acts[a.episode].set(a.turn, this.genView(a.prompt, a.result, fullText(a.result, ACT_STOP), 'policy', r.actMs));
    for (const s of r.scripted) this.acts[s.episode].set(s.turn, await this.score(s.prompt, s.text));
    for (const h of r.scriptedRehearsals) this.rehearsals[h.episode].set(`${h.turn}:${h.call.slot}`, await this.score(h.prompt, h.text));
    for (const h of r.rehearsals) this.rehearsals[h.episode].set(`${h.turn}:${h.call.slot}`, this.genView(h.prompt, h.result, fullText(h.result, REHEARSE_STOP), 'policy', r.rehearseMs));
    for (const o of r.overflows) this.overflow[o.episode] = `context limit: the next ${o.role === 'act' ? 'Act' : 'Rehearse'} prompt and its budget need ${o.need} tokens, the model holds ${o.maxContext}`;
    return r;
  }

  private genView(prompt: string, r: Pick<GenerateResult, 'tokens' | 'logprobs' | 'promptTokens'>, text: string, source: GenView['source'], ms: number): GenView {
    return genView(this.policy.tokenizer, prompt, r, text, source, ms);
  }

  /** Teacher forcing: the expert's turn, scored token by token by the policy (display only: no row). */
  private async score(prompt: string, text: string): Promise<GenView> {
    const t0 = performance.now();
    const tok = this.policy.tokenizer;
    const promptTokens = tok.encode(prompt);
    const tokens = tok.encode(text);
    const fits = promptTokens.length + tokens.length <= this.policy.model.config.maxPositionEmbeddings;
    const lps = fits ? (await logprobs(this.policy.model, [{ tokens: [...promptTokens, ...tokens], start: promptTokens.length }], { adapter: this.policy.adapter }))[0] : [];
    return this.genView(prompt, { tokens: fits ? tokens : [], logprobs: lps, promptTokens }, text, 'expert', performance.now() - t0);
  }

  endReason(e: number): string | null {
    const ep = this.stepper.episodes[e];
    switch (ep.end) {
      case null:
        return null;
      case 'reply':
        return this.cfg.actSource === 'policy' ? 'the policy replied to the user' : 'the expert replied to the user';
      case 'empty':
        return 'an empty Act turn';
      case 'max-turns':
        return `turn limit (${this.cfg.maxTurns}) reached`;
      case 'context':
        return this.overflow[e] ?? 'context limit';
      case 'rehearse-invalid':
        return rehearseFailureText(ep.rehearseFailure, ep.rehearseCut);
      case 'user-stop':
        return ep.conversation?.userError ? `the user failed: ${ep.conversation.userError}` : `the user ended the call (${ep.conversation?.stop ?? 'stop'})`;
      case 'user-turns':
        return `user-turn limit (${ep.conversation?.maxUserTurns ?? '?'}) reached`;
    }
  }

  /** The context the verdicts are explained in (./verdicts.ts). */
  private verdictContext(e: number): VerdictContext {
    const ep = this.stepper.episodes[e];
    return {
      steps: ep.steps,
      stepTurns: ep.stepTurns,
      log: ep.log,
      observations: !rehearses(ep.mode) ? 'real' : this.cfg.actSource === 'expert' ? 'expert-written' : 'rehearsed',
      endedEarly: ep.end === 'reply' || (ep.end === 'user-stop' && !ep.terminated) ? null : this.endReason(e),
      isWrite: (n) => ep.env.isWrite(n),
    };
  }

  /** The training reward of a finished rollout, with the checklist (or real-environment checks) behind it. */
  reward(e: number): RewardView | null {
    const ep = this.stepper.episodes[e];
    if (!ep.done) return null;
    if (this.rewards[e]) return this.rewards[e];
    const value = this.stepper.record(e).reward;
    const task = this.task;
    let view: RewardView;
    if (this.typed) view = { value, kind: 'none', items: [], note: 'a typed request has no checklist: no reward' };
    else {
      const end = this.endReason(e);
      const why = ep.terminated
        ? `reward 0 whatever the checklist says: the episode was cut off (${end})`
        : ep.end === 'rehearse-invalid'
          ? `reward 0 whatever the checklist says: ${end}`
          : ep.end === 'empty' ? 'an empty Act turn: reward −0.1 (rule J1)' : '';
      const cx = this.verdictContext(e);
      if (!rehearses(ep.mode)) {
        const r = realReward(() => this.domain.createEnv(), task, ep.steps);
        const judged = judge(task.checklist, ep.steps, judgeOptions(ep.env, this.domain.normaliseArgs?.bind(this.domain))).items;
        const reasons = realReasons(r.db === 1, r.missingFacts, task.facts, judged, cx);
        const items = [
          { label: 'final database equals the reference', satisfied: r.db === 1, reason: reasons.db },
          ...task.facts.map((f, i) => ({ label: `states "${f}"`, satisfied: !r.missingFacts.includes(f), reason: reasons.facts[i] })),
        ];
        view = { value, kind: 'real environment', items, note: why };
      } else {
        const j = judge(task.checklist, ep.steps, judgeOptions(ep.env, this.domain.normaliseArgs?.bind(this.domain)));
        const items = j.items.map((v) => ({ label: itemLabel(v.item), satisfied: v.satisfied, reason: verdictReason(v, cx) }));
        const zeroed = j.zeroedTurns.length ? `${j.zeroedTurns.length} call(s) failed a check that needs no state (malformed, unknown tool or invalid arguments) and count for nothing (rule J2)` : '';
        view = { value, kind: 'checklist judge', items, note: why || zeroed };
      }
    }
    if (ep.conversation) view = this.withConfirmation(e, view);
    this.rewards[e] = view;
    return view;
  }

  /** A conversation's reward: the confirmation rule first (it zeroes the reward whatever the rest says: reward-rule.ts). */
  private withConfirmation(e: number, view: RewardView): RewardView {
    const ep = this.stepper.episodes[e];
    const un = conversationView(ep, this.domain.confirmation).unconfirmed;
    const writes = ep.steps.filter((s) => s.kind === 'call' && !!this.domain.confirmation?.isWrite(s.call.name)).length;
    const item = {
      label: "every write had the user's explicit yes to its details (confirmation rule)",
      satisfied: un.length === 0,
      reason: un.length
        ? un.map((w) => `turn ${w.turn + 1}: ${w.why}`).join('; ')
        : writes ? `${writes === 1 ? 'the write' : `each of the ${writes} writes`} came after the user's explicit yes to a proposal that stated its details` : 'no write was made',
    };
    const note = un.length && !view.note ? "reward 0 whatever the rest says: a write was made without the user's explicit yes" : view.note;
    return { ...view, items: [item, ...view.items], note };
  }

  private turnView(e: number, t: number): TurnView {
    const ep = this.stepper.episodes[e];
    const rec = ep.log[t];
    let failed = false;
    const calls = rec.calls.map((c, slot): CallView => {
      const gen = this.rehearsals[e].get(`${t}:${slot}`) ?? null;
      const f = ep.fidelity.find((x) => x.turn === t && x.call === c.call);
      // A generated rehearsal left unanswered: the first one did not parse; the ones after it came too late.
      let rehearseError: string | null = null;
      let rehearseCut: number | null = null;
      let miss = false;
      if (c.obs === null && ep.done) {
        const first = !failed && ep.end === 'rehearse-invalid';
        rehearseError = first ? rehearseFailureText(ep.rehearseFailure, ep.rehearseCut) : gen ? 'not used: the episode had already ended' : `never rehearsed: the episode ended first (${this.endReason(e)})`;
        if (first) rehearseCut = ep.rehearseCut;
        miss = first;
        failed = true;
      }
      return {
        call: c.raw ?? JSON.stringify(c.call),
        name: c.call.name,
        rehearse: gen,
        rehearsed: c.shadow && c.obs ? serializeObservation(c.obs) : null,
        rehearseError,
        rehearseCut,
        real: serializeObservation((c.shadow ?? c.obs)!),
        // An unparseable rehearsal is shown as a miss (as the fidelity evaluation scores it); training's
        // fidelity log, and so the rollout's summary, only holds parsed rehearsals.
        fidelity: f ? { exact: f.exact, f1: f.f1, errorAgree: f.errorAgree } : miss ? { exact: false, f1: 0, errorAgree: false } : null,
      };
    });
    const last = ep.steps[ep.steps.length - 1];
    const endedHere = (ep.end === 'reply' || ep.end === 'empty') && t === ep.log.length - 1 && last?.kind === 'reply';
    // In a conversation every reply goes to the user, who answers it.
    const said = ep.conversation ? ep.steps.find((s, i) => s.kind === 'reply' && ep.stepTurns[i] === t) : undefined;
    // A turn applied outside step() has no generation to show: its text alone.
    const act = this.acts[e].get(t) ?? { source: 'policy', prompt: '', promptTokens: 0, text: rec.text, tokens: [], ms: 0 };
    return { index: t, act, calls, reply: said?.kind === 'reply' ? said.text : endedHere ? last.text : null };
  }

  view(e = 0): RolloutView {
    const ep = this.stepper.episodes[e];
    // The summary counts what the call cards show: every rehearsal scored, an unparseable one as a miss.
    const misses = ep.end === 'rehearse-invalid' ? 1 : 0;
    const s0 = ep.fidelity.length ? summarizeFidelity(ep.fidelity) : null;
    const n = (s0?.steps ?? 0) + misses;
    const s = n ? { steps: n, misses, exact: ((s0?.exact ?? 0) * (n - misses)) / n, f1: ((s0?.f1 ?? 0) * (n - misses)) / n, errorAgree: ((s0?.errorAgree ?? 0) * (n - misses)) / n } : null;
    return {
      taskId: this.typed ? null : this.task.id,
      request: this.task.userMessages.join('\n'),
      mode: this.cfg.mode,
      seed: this.cfg.seed,
      turns: ep.log.map((_, t) => this.turnView(e, t)),
      steps: ep.steps.map((s, i) => ({ ...s, turn: ep.stepTurns[i] })),
      done: ep.done,
      endReason: this.endReason(e),
      reward: this.reward(e),
      fidelity: s,
      ...(ep.conversation ? { conversation: conversationView(ep, this.domain.confirmation) } : {}),
    };
  }

  groupRow(e: number): GroupRow {
    const rows = this.stepper.rowsOfEpisode(e).map((i) => this.stepper.rows[i]);
    const r = this.reward(e);
    return {
      rollout: e,
      reward: r?.value ?? 0,
      passed: r?.items.filter((x) => x.satisfied).map((x) => x.label) ?? [],
      failed: r?.items.filter((x) => !x.satisfied).map((x) => x.label) ?? [],
      actRows: rows.filter((x) => x.role === 'act').length,
      rehearseRows: rows.filter((x) => x.role === 'rehearse').length,
      endReason: this.endReason(e) ?? '',
      turns: this.stepper.episodes[e].turns,
    };
  }
}

/** The scripted user's seed (the eval CLI's default): every rollout of a task meets the same customer. */
const USER_SEED = 0;

/** A generation as the page shows it: the prompt, every sampled token with its log-probability. */
export function genView(tok: Tokenizer, prompt: string, r: Pick<GenerateResult, 'tokens' | 'logprobs' | 'promptTokens'>, text: string, source: GenView['source'], ms: number): GenView {
  return { source, prompt, promptTokens: r.promptTokens.length, text, tokens: [...r.tokens].map((t, i) => ({ text: tok.decode([t]), lp: r.logprobs[i] })), ms };
}

/** A failed rehearsal in words: cut by its token budget, or malformed (and how). */
export function rehearseFailureText(code: string | null, cut: number | null): string {
  if (cut !== null) return `the rehearsal was cut at ${cut} tokens (the Rehearse budget) before its closing </execution_result> tag, so it does not parse`;
  const why: Record<string, string> = {
    empty: 'it is empty',
    'too-long': 'it is longer than any observation may be',
    'no-open-tag': 'it does not start with <execution_result>',
    'no-close-tag': 'its <execution_result> block is not closed',
    'trailing-text': 'text follows </execution_result>',
    'invalid-json': 'its body is not valid JSON',
    'bad-shape': 'its JSON is not {"result": …} or {"error": "…"}',
  };
  return `malformed rehearsal: ${why[code ?? ''] ?? code ?? 'unknown'} (${code})`;
}

export function itemLabel(i: Task['checklist'][number]): string {
  if (i.kind === 'call') return `call ${i.name}(${JSON.stringify(i.args)})`;
  if (i.kind === 'fact') return `reply states "${i.text}"`;
  return 'no forbidden writes';
}
