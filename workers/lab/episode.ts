// One rollout as a turn-by-turn state machine, so the stepper can stop after every turn and the group
// view can advance K episodes together (their Act prompts, then their Rehearse prompts, decode as one
// batch). It composes the landed pieces: the Qwen3 chat renderer (Act prompt), the untrusted tool-call
// parser, the real environment, the Rehearse prompt and its strict parser, fidelity, the judge.
import type { Domain, Observation, Step, Task, ChatMessage, GroundingExample } from '../../src/env/domain';
import type { Environment } from '../../src/env/env';
import { judge } from '../../src/env/judge';
import { realReward } from '../../src/env/reward';
import { formatCall, parse, serializeObservation } from '../../src/env/toolcall';
import { buildActPrompt } from '../../src/rollout/act-prompt';
import { referenceGrounding } from '../../src/rollout/rollout';
import { compareObservations, summarizeFidelity, type StepFidelity } from '../../src/rollout/fidelity';
import { buildRehearsePrompt, parseExecutionResult } from '../../src/rollout/rehearse-prompt';
import type { CallView, GenView, RewardView, RolloutMode, RolloutView, TurnView } from '../../src/worker-protocol';

export interface EpisodeConfig {
  mode: RolloutMode;
  seed: number;
  maxTurns: number;
}

interface Pending {
  call: { name: string; arguments: Record<string, unknown> };
  view: CallView;
  real: Observation;
  rehearsed: Observation | null;
}

export class Episode {
  readonly history: ChatMessage[];
  /** Steps as the policy experienced them (rehearsed observations in rehearse mode). */
  readonly steps: Step[] = [];
  /** The same calls against the real environment (the shadow in rehearse mode). */
  readonly realSteps: Step[] = [];
  readonly turns: TurnView[] = [];
  readonly fidelity: StepFidelity[] = [];
  readonly env: Environment;
  done = false;
  endReason: string | null = null;
  reward: RewardView | null = null;
  actRows = 0;
  rehearseRows = 0;
  private pending: Pending[] = [];
  private readonly grounding: GroundingExample[];
  private readonly expertSteps: Step[];

  constructor(
    readonly domain: Domain,
    readonly task: Task | null,
    readonly request: string,
    readonly cfg: EpisodeConfig,
  ) {
    this.env = domain.createEnv();
    this.history = task ? task.userMessages.map((content) => ({ role: 'user' as const, content })) : [{ role: 'user', content: request }];
    this.expertSteps = task ? domain.expert(task, domain.createEnv()).steps : [];
    // Grounding: the task's reference calls with their real results, exactly as training rollouts use.
    this.grounding = task ? referenceGrounding(domain, task) : [];
  }

  /** The same Act prompt training rollouts use (src/rollout/act-prompt.ts). */
  actPrompt(): string {
    return buildActPrompt(this.domain.policy, this.domain.definitions() as unknown as Record<string, unknown>[], this.history);
  }

  /** The expert's text for the current turn (teacher forcing), or null when the expert has finished. */
  expertText(): string | null {
    const s = this.expertSteps[this.turns.length];
    if (!s) return null;
    return s.kind === 'call' ? formatCall(s.call) : s.text;
  }

  /** Apply the Act turn: parse (untrusted), run each call in the real environment, queue Rehearse. */
  takeAct(act: GenView): void {
    const p = parse(act.text);
    this.actRows++;
    const turn: TurnView = { index: this.turns.length, act, calls: [], reply: null };
    this.turns.push(turn);
    if (p.parts.length === 0) {
      turn.reply = p.reply;
      this.steps.push({ kind: 'reply', text: p.reply });
      this.realSteps.push({ kind: 'reply', text: p.reply });
      this.history.push({ role: 'assistant', content: act.text });
      return this.finish('the policy replied to the user');
    }
    for (const part of p.parts) {
      if (part.kind === 'error') {
        // A block that is not even a call never reaches Rehearse: it is an error observation.
        const obs: Observation = { ok: false, name: '', error: part.error.error, code: 'parse' };
        turn.calls.push({ call: part.error.raw, name: '', rehearse: null, rehearsed: null, rehearseError: null, real: serializeObservation(obs), fidelity: null });
        this.pending.push({ call: { name: '', arguments: {} }, view: turn.calls[turn.calls.length - 1], real: obs, rehearsed: obs });
        continue;
      }
      const real = this.env.execute(part.call);
      const view: CallView = { call: JSON.stringify(part.call), name: part.call.name, rehearse: null, rehearsed: null, rehearseError: null, real: serializeObservation(real), fidelity: null };
      turn.calls.push(view);
      this.pending.push({ call: part.call, view, real, rehearsed: this.cfg.mode === 'real' ? real : null });
    }
    if (this.rehearseRequests().length === 0) this.closeTurn(act.text);
  }

  /** Rehearse prompts still to write for this turn (rehearse mode only). */
  rehearseRequests(): { index: number; prompt: string }[] {
    const out: { index: number; prompt: string }[] = [];
    this.pending.forEach((p, index) => {
      if (p.rehearsed !== null) return;
      const { text } = buildRehearsePrompt({
        tools: this.domain.definitions() as unknown as Record<string, unknown>[],
        grounding: this.grounding,
        history: this.history,
        call: p.call,
      });
      out.push({ index, prompt: text });
    });
    return out;
  }

  takeRehearse(index: number, gen: GenView): void {
    const p = this.pending[index];
    this.rehearseRows++;
    p.view.rehearse = gen;
    const parsed = parseExecutionResult(gen.text, p.call.name);
    if (!parsed.ok) {
      p.view.rehearseError = parsed.error.message;
      p.view.fidelity = { exact: false, f1: 0, errorAgree: false };
      this.fidelity.push({ exact: false, f1: 0, errorAgree: false, rehearsedError: true, realError: !p.real.ok });
      // An unparseable rehearsal ends the episode with reward 0 (the method's rule).
      this.pending = [];
      this.finish(`unparseable rehearsal: ${parsed.error.code}`, true);
      return;
    }
    p.rehearsed = parsed.observation;
    p.view.rehearsed = serializeObservation(parsed.observation);
    const f = compareObservations(parsed.observation, p.real);
    this.fidelity.push(f);
    p.view.fidelity = { exact: f.exact, f1: f.f1, errorAgree: f.errorAgree };
    if (this.pending.every((q) => q.rehearsed !== null)) this.closeTurn(this.turns[this.turns.length - 1].act.text);
  }

  private closeTurn(actText: string): void {
    this.history.push({ role: 'assistant', content: actText });
    for (const p of this.pending) {
      const seen = p.rehearsed!;
      this.history.push({ role: 'tool', content: serializeObservation(seen) });
      if (p.call.name) {
        this.steps.push({ kind: 'call', call: p.call, observation: seen });
        this.realSteps.push({ kind: 'call', call: p.call, observation: p.real });
      } else {
        this.steps.push({ kind: 'call', call: { name: '', arguments: {} }, observation: seen });
      }
    }
    this.pending = [];
    if (this.turns.length >= this.cfg.maxTurns) this.finish(`turn limit (${this.cfg.maxTurns}) reached`, true, true);
  }

  /** The next prompt plus its token budget would not fit the model's context: terminated, reward 0 (as rollouts). */
  finishContext(need: number, context: number): void {
    this.pending = [];
    this.finish(`context limit: the next prompt needs ${need} tokens, the model holds ${context}`, true, true);
  }

  private finish(reason: string, zero = false, terminated = false): void {
    this.done = true;
    this.endReason = reason;
    if (!this.task) {
      this.reward = { value: 0, kind: 'none', items: [], note: 'a typed request has no checklist: no reward' };
      return;
    }
    if (this.cfg.mode === 'real') {
      const r = realReward(() => this.domain.createEnv(), this.task, this.realSteps, { terminated });
      this.reward = {
        value: r.reward,
        kind: 'real environment',
        items: [
          { label: 'final database equals the reference', satisfied: r.db === 1 },
          ...this.task.facts.map((f) => ({ label: `states "${f}"`, satisfied: !r.missingFacts.includes(f) })),
        ],
        note: terminated ? 'terminated by the turn limit: reward 0' : '',
      };
      return;
    }
    const j = judge(this.task.checklist, this.steps, { isWrite: (n) => this.env.isWrite(n), normaliseArgs: this.domain.normaliseArgs });
    this.reward = {
      value: zero ? 0 : j.reward,
      kind: 'checklist judge',
      items: j.items.map((v) => ({ label: itemLabel(v.item), satisfied: v.satisfied })),
      note: terminated ? 'terminated (turn or context limit): reward 0' : zero ? 'unparseable rehearsal: reward 0' : j.empty ? 'empty response' : j.zeroedTurns.length ? `failed calls zero turns ${j.zeroedTurns.join(', ')}` : '',
    };
  }

  view(): RolloutView {
    const s = this.fidelity.length ? summarizeFidelity(this.fidelity) : null;
    return {
      taskId: this.task?.id ?? null,
      request: this.history.find((m) => m.role === 'user')?.content ?? this.request,
      mode: this.cfg.mode,
      seed: this.cfg.seed,
      turns: this.turns,
      done: this.done,
      endReason: this.endReason,
      reward: this.reward,
      fidelity: s ? { steps: s.steps, exact: s.exact, f1: s.f1, errorAgree: s.errorAgree } : null,
    };
  }
}

export function itemLabel(i: Task['checklist'][number]): string {
  if (i.kind === 'call') return `call ${i.name}(${JSON.stringify(i.args)})`;
  if (i.kind === 'fact') return `reply states "${i.text}"`;
  return 'no forbidden writes';
}
