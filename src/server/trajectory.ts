// Whole trajectories on the server, for an agent loop that holds one episode per trajectory (verl's
// integrations/verl/envace_verl/agent_loop.py): the trainer sends the policy's raw Act generations and, in
// simulate mode, its raw Rehearse generations; the lab's own Episode parses, executes or queues the calls,
// applies the rehearsals, enforces the turn limit and ends the episode, exactly as the lab's rollout loop
// does (RolloutStepper: real mode executes; rehearse mode queues each call for a Rehearse generation whose
// prompt is built from the episode's history before the turn, and an unreadable rehearsal ends the episode).
//   POST /episodes/ID/act {"text", "mode"?: "real" | "simulate"}   POST /episodes/ID/rehearse {"text"}
// Both answer a TurnResult. `continuation` is what the lab's next Act prompt holds after this turn's
// assistant text (the turn's end, the tool responses, the next generation prompt), so a trainer that appends
// it to the tokens it generated trains on the lab's exact format without rendering a chat template itself.
import { Episode } from '../rollout/episode';
import { buildActPrompt } from '../rollout/act-prompt';
import { buildRehearsePrompt } from '../rollout/rehearse-prompt';
import { defaultReward } from '../rollout/reward-rule';
import { judge, judgeOptions } from '../env/judge';
import { ApiError, type ScoreResult, type ServerEpisode } from './episodes';

export type TrajectoryMode = 'real' | 'simulate';

const TURN_HEADER = '<|im_start|>assistant\n';
const TURN_END = '<|im_end|>\n';

export interface TurnResult {
  mode: TrajectoryMode;
  done: boolean;
  end: string | null;
  turns: number;
  /** The tool messages this turn added to the Act conversation (observations, real or rehearsed), once it closed. */
  tool_messages: string[];
  /** Text of the next Act prompt after this turn's assistant text; null when done or the turn is still open. */
  continuation: string | null;
  /** simulate: the call waiting for its Rehearse generation, with the lab's Rehearse prompt for it. */
  rehearse: { name: string; arguments: Record<string, unknown>; prompt: string } | null;
}

/** The rehearse-mode Episode of a simulate trajectory (the real database is never touched by one). */
const imagined = new WeakMap<ServerEpisode, Episode>();

function episodeFor(se: ServerEpisode, mode: TrajectoryMode): Episode {
  const current: TrajectoryMode | undefined = imagined.has(se) ? 'simulate' : se.ep.turns > 0 ? 'real' : undefined;
  if (current !== undefined && current !== mode) throw new ApiError(409, 'mode_mismatch', `this episode's trajectory is in ${current} mode`);
  if (mode === 'real') return se.ep;
  let ep = imagined.get(se);
  if (!ep) {
    ep = new Episode(se.task.id, se.id + ':simulate', se.task, 'rehearse', se.domain.createEnv(), se.grounding, se.ep.maxTurns);
    imagined.set(se, ep);
  }
  return ep;
}

function result(se: ServerEpisode, ep: Episode, mode: TrajectoryMode, before: number, text: string | null): TurnResult {
  const p = ep.pending[0];
  const closed = ep.pending.length === 0;
  const toolMessages = closed ? ep.messages.slice(before).filter((m) => m.role === 'tool').map((m) => m.content) : [];
  let continuation: string | null = null;
  if (closed && !ep.done && text !== null) {
    const next = buildActPrompt(se.domain.policy, se.domain.definitions(), ep.messages);
    const at = next.lastIndexOf(text);
    if (at >= 0) continuation = next.slice(at + text.length);
    else {
      // The renderer changed the text (Qwen3's template drops a think span from history): the turn then ends
      // at the first end-of-turn after its own header, the one before the final generation prompt.
      const header = next.lastIndexOf(TURN_HEADER, next.lastIndexOf(TURN_HEADER) - 1);
      const end = header >= 0 ? next.indexOf(TURN_END, header) : -1;
      continuation = end >= 0 ? next.slice(end) : null;
    }
  }
  return {
    mode, done: ep.done, end: ep.end, turns: ep.turns, tool_messages: toolMessages, continuation,
    rehearse: p ? { name: p.call.name, arguments: p.call.arguments, prompt: buildRehearsePrompt({ tools: se.domain.definitions(), grounding: ep.grounding, history: ep.historyBefore, call: p.call }, {}).text } : null,
  };
}

/** Texts of the turn whose tool messages are still to come, per episode (for the continuation). */
const openTurn = new WeakMap<Episode, { before: number; text: string }>();

/** Applies one Act generation (the raw text, stop string included). */
export function applyAct(se: ServerEpisode, text: unknown, mode: TrajectoryMode = 'real'): TurnResult {
  if (typeof text !== 'string') throw new ApiError(400, 'bad_request', '"text" must be the Act generation (a string)');
  const ep = episodeFor(se, mode);
  if (ep.done) throw new ApiError(409, 'episode_ended', `the episode has ended (${ep.end})`);
  if (ep.pending.length > 0) throw new ApiError(409, 'rehearsal_pending', `${ep.pending.length} call(s) of this turn wait for their Rehearse generation (POST /episodes/ID/rehearse)`);
  const before = ep.messages.length;
  ep.applyAct(text);
  if (ep.pending.length > 0) openTurn.set(ep, { before, text });
  return result(se, ep, mode, before, text);
}

/** Applies the Rehearse generation of the first pending call of a simulate trajectory. */
export function applyRehearse(se: ServerEpisode, text: unknown): TurnResult {
  if (typeof text !== 'string') throw new ApiError(400, 'bad_request', '"text" must be the Rehearse generation (a string)');
  const ep = imagined.get(se);
  const p = ep?.pending[0];
  if (!ep || !p) throw new ApiError(409, 'no_pending_call', 'no call waits for a rehearsal (POST /episodes/ID/act with "mode": "simulate" first)');
  ep.applyRehearse(p, text);
  const open = openTurn.get(ep)!;
  if (ep.pending.length === 0 || ep.done) openTurn.delete(ep);
  return result(se, ep, 'simulate', open.before, open.text);
}

/**
 * The lab's reward of the trajectory as it stands: defaultReward of its Episode, as the rollout loop scores it
 * (real mode: τ²'s DB × COMMUNICATE over the calls and replies; simulate: the checklist judge; both: the
 * empty-turn penalty and 0 at the turn limit or after an unreadable rehearsal).
 */
export function scoreTrajectory(se: ServerEpisode): ScoreResult {
  const ep = imagined.get(se) ?? se.ep;
  const env = ep.env;
  const j = judge(se.task.checklist, ep.steps, judgeOptions(env, se.domain.normaliseArgs?.bind(se.domain)));
  return { kind: ep === se.ep ? 'real' : 'judge', reward: defaultReward(ep, se.domain), checklist: j.items.map(({ item, satisfied, turn, reason }) => ({ ...item, satisfied, turn, reason })), end: ep.end };
}
