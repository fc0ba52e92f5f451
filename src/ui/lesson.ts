// The lesson (docs/lesson/README.md) in five steps, each marked done from what the lab holds (never from clicks): a
// rollout stepped in rehearse mode, a group whose rewards differ, a training run with a held-out
// evaluation (the world-rehearsal lesson's runs have them), an EnvACE and a frozen-simulator run of the same length, a private rehearsal shown beside the
// same task without memory. Pure, so the unit tests and the page share it.
import type { RolloutView, TrainMode, TrainPoint, TtsView, WorldName } from '../worker-protocol';

export interface LessonState {
  /** Rollouts stepped in the stepper (the current one and the logged ones). */
  stepperRollouts: readonly Pick<RolloutView, 'mode' | 'turns'>[];
  /** The rewards of each group run (the current group and the logged ones). */
  groups: readonly (readonly number[])[];
  /** Training runs: the current one and the kept ones. */
  runs: readonly { mode: TrainMode; points: readonly Pick<TrainPoint, 'step' | 'heldOutSuccess'>[] }[];
  tts: Pick<TtsView, 'withoutMemory'> | null;
  /**
   * Whose bundled policy is loaded (null or absent: another model). Step 3 describes what the policy it trains
   * learned, so it must name the loaded policy's story, not the other world's.
   */
  bundled?: WorldName | null;
  /** Which of the world's bundled policies: absent, its default; else a lesson policy by name (src/env/retail/worlds.ts). */
  policy?: string;
}

/** What a lesson policy of a world (src/env/retail/worlds.ts lessonPolicies) is, in one paragraph. */
export function lessonPolicyNote(name: string, world: WorldName = 'mini'): string {
  if (name === 'careless')
    return 'The careless mini policy learned from a demonstrator who, on purpose, often leaves out what a lookup found (an order\'s tracking number, the status that stops a cancellation, the orders on the account); GRPO in the real environment is paid only when the user is told, and the per-family table shows which tasks a run wins back. It was the bundled policy until 2026-12-05; now an opt-in lesson: a habit GRPO can find in its own samples.';
  if (name === 'conversation')
    return `The conversation policy is the ${world} line trained on conversations with the scripted τ² user: it asks who the user is, looks up what the request needs, states a write's details and waits for the yes before making it, and it can play the user. Loading it steps rollouts and trains with the scripted user; its model card gives what it solves that way.`;
  return `the ${name} policy`;
}

/** What step 3 says about the policy that GRPO starts from. */
export function policyStory(bundled: WorldName | null | undefined, policy?: string): string {
  if (bundled === 'mini' && policy === 'careless') return lessonPolicyNote(policy);
  if (bundled && policy === 'conversation') return lessonPolicyNote(policy, bundled);
  if (bundled === 'mini')
    return 'The bundled mini policy is the best this recipe makes: it imitated an attentive demonstrator, learned to rehearse the world, then grew from 4 to 8 layers (59 % of held-out tasks solved; its rehearsals match the real observation in 84.1 % of held-out calls); GRPO is paid only for a task done right, and the per-family table shows which tasks a run gains or loses.';
  if (bundled === 'retail')
    return 'The bundled retail policy imitated an attentive demonstrator on the full τ²-bench retail world; GRPO in the real environment is paid only for a task done right (the database and every stated fact), and the per-family table shows which tasks it gains or loses.';
  return 'GRPO in the real environment is paid only for a task done right (the database and every stated fact); the per-family table shows which tasks the run gains or loses.';
}

export interface LessonStep {
  n: 1 | 2 | 3 | 4 | 5;
  title: string;
  what: string;
  done: boolean;
}

const lastStep = (pts: readonly Pick<TrainPoint, 'step'>[]) => (pts.length ? pts[pts.length - 1].step : 0);

export function lessonSteps(s: LessonState): LessonStep[] {
  const stepped = s.stepperRollouts.some((r) => r.mode === 'rehearse' && r.turns.some((t) => t.act.source === 'policy' && t.calls.some((c) => c.rehearse !== null)));
  const spread = s.groups.some((rs) => rs.length > 1 && Math.max(...rs) - Math.min(...rs) > 1e-9);
  const trained = s.runs.some((r) => r.points.some((p) => p.heldOutSuccess !== null));
  const lengths = (m: TrainMode) => new Set(s.runs.filter((r) => r.mode === m && r.points.length).map((r) => lastStep(r.points)));
  const frozen = lengths('frozen-simulator');
  const compared = [...lengths('rehearse')].some((n) => frozen.has(n));
  return [
    {
      n: 1, title: 'Step through a rollout', done: stepped,
      what: 'In the stepper, with the policy playing in rehearse mode, step one turn at a time: each Act call, the observation the policy rehearses for it, and what the real environment returns for the same call, with the fidelity of the rehearsal.',
    },
    {
      n: 2, title: 'Open a group whose rollouts differ', done: spread,
      what: 'Run K rollouts of a task in the Group view. Only when their rewards differ are the role-wise baselines and advantages non-zero; when all K score the same, try another task or seed.',
    },
    {
      n: 3, title: 'Train and watch held-out success and fidelity', done: trained,
      what: `Press “Run the world-rehearsal lesson” in the Training dashboard: it trains real-only GRPO on a small budget of real episodes, then world rehearsal with the same real episodes (the other prompts of each step rehearsed by the policy), each from the starting policy, and draws both runs' held-out success (real environment, greedy) and held-out rehearsal fidelity on one plot, beside the starting policy and the ceiling measured by pass@k. ${policyStory(s.bundled, s.policy)}`,
    },
    {
      n: 4, title: 'Compare EnvACE and the frozen simulator', done: compared,
      what: "The lesson kept both of its runs: train a frozen-simulator run with the world-rehearsal run's seed, steps and settings, from the base policy (or keep any run and train another mode with its settings): every kept run is drawn on the same plots, with a table of their settings and final figures.",
    },
    {
      n: 5, title: 'Private rehearsal: what the memory changed', done: !!s.tts?.withoutMemory,
      what: 'Run private rehearsal with N ≥ 1: the committed episode, conditioned on the rehearsal memory, is shown step by step beside the same task committed without memory (N = 0, same seed).',
    },
  ];
}

/** One row of a step-by-step comparison of two episodes (their step lines: calls with observations, the reply). */
export interface StepDiffRow {
  index: number;
  a: string | null;
  b: string | null;
  same: boolean;
}

/** Two episodes side by side, step by step; a step only one of them took is paired with null. */
export function stepDiff(a: readonly string[], b: readonly string[]): { rows: StepDiffRow[]; changed: number; firstChange: number | null } {
  const n = Math.max(a.length, b.length);
  const rows: StepDiffRow[] = [];
  for (let i = 0; i < n; i++) {
    const x = a[i] ?? null;
    const y = b[i] ?? null;
    rows.push({ index: i, a: x, b: y, same: x === y });
  }
  const changed = rows.filter((r) => !r.same).length;
  return { rows, changed, firstChange: changed ? rows.findIndex((r) => !r.same) : null };
}
