// The parts of the model card that come from records written after pretraining: the world the policy was
// trained on, its held-out evaluation by `npm run eval` (per tier and family), the learning signal a GRPO
// step gets from it (`npm run signal`), and the sweeps run to choose the recipe. Every figure is read from
// a record file in the model folder; the prose only explains them.
import type { AttentionRecord } from './attention-probe';
import type { RehearsalProbe, RehearsalProbeGroup } from './rehearsal-probe';
import type { RehearseDecoding } from '../../src/rollout/rehearse-prompt';

export interface WorldRecord {
  name: string;
  description: string;
  heldOut: 'users' | 'tasks';
  summary: { users: number; orders: number; products: number; items: number; fingerprint: string };
}

interface Fidelity {
  steps: number;
  exact: number;
  f1: number;
  errorAgree: number;
  invalid: number;
}

/** What the card reads of `npm run eval`'s JSON (src/cli/eval.ts EvalResult). */
export interface HeldOutRecord {
  tasks: number;
  success: number;
  meanReward: number;
  callsWithoutError: number;
  toolPrecision: number;
  toolRecall: number;
  meanTurns: number;
  ends: Record<string, number>;
  fidelity: Fidelity | null;
  /** Grounded as rollouts ground (records before it existed lack it). */
  fidelityGrounded?: Fidelity | null;
  byTier: Record<string, { tasks: number; success: number }>;
  byFamily: Record<string, { tasks: number; success: number }>;
  wallS: number;
  /** How rehearsals were decoded (records before it existed: free). */
  rehearseDecoding?: RehearseDecoding;
}

/**
 * snapshot.json: the kept weights are one of the last stage's snapshots (`--snapshot-every`), not its end,
 * chosen by a rule written before the stage ran, from each snapshot's `npm run eval` on the held-out tasks.
 */
export interface SnapshotRecord {
  step: number;
  sha256: string;
  rule: string;
  /** How each candidate was evaluated (STEP stands for the snapshot's step). */
  command: string;
  candidates: { step: number; success: number; exact: number }[];
  /** A later rerun of the stage's command from the same starting weights, and whether its snapshot is these weights. */
  reproduced?: { date: string; commit: string; init: string; sha256: string; record: string };
}

export function snapshotSection(s: SnapshotRecord, stageSteps: number, lossAtStep: number | undefined): string[] {
  const out = [`- **The kept weights are this stage's snapshot at step ${s.step} of ${stageSteps}**, not its end (\`--snapshot-every\` writes OUT/snapshots/step-N as a model folder; model.safetensors sha256 \`${s.sha256}\`${lossAtStep !== undefined ? `; loss at step ${s.step}: ${lossAtStep.toFixed(3)}` : ''}). The stage ran on to step ${stageSteps}: the figures above describe the whole stage, the policy is its step-${s.step} weights. The rule, fixed before the stage ran: ${s.rule}. Each snapshot evaluated, latest first (\`${s.command}\`):`, ''];
  out.push('  | step | held-out success | rehearsal exact |\n  |---|---|---|');
  for (const c of s.candidates) out.push(`  | ${c.step}${c.step === s.step ? ' (kept)' : ''} | ${pct(c.success)} | ${pct(c.exact)} |`);
  out.push('');
  const r = s.reproduced;
  if (r) {
    const same = r.sha256 === s.sha256;
    out.push(
      `- **${same ? 'Reproduced bit for bit' : 'Not reproduced'}** (${r.date}, code at commit ${r.commit}): the stage's command, rerun from ${r.init}, wrote a step-${s.step} snapshot whose model.safetensors has sha256 \`${r.sha256}\`${same ? ', the kept weights\' own' : `, not the kept weights' \`${s.sha256}\``} (record: ${r.record}).`,
      '',
    );
  }
  return out;
}

/** research/scripts/structured-rehearsal.ts: free vs structured rehearsal decoding on the held-out reference calls. */
export interface StructuredRecord {
  command: string;
  heldOutTasks: number;
  /** Records before it existed used the held-out seed 1. */
  taskSeed?: number;
  /** What the record measured when it is not the folder's policy (e.g. an earlier stage). */
  note?: string;
  maxRehearseTokens: number;
  defaults: { ngram: number; margin: number };
  results: { label: string; ngram: number | null; margin: number | null; calls: number; parsed: number; exact: number; loops: number; f1: number; failures: Record<string, number> }[];
}

interface SignalMode {
  mixedShare: number;
  mixedCi95: [number, number];
  meanReward: number;
  successRate: number;
  passAtK: number;
  wallS: number;
}

/** `npm run signal`'s JSON (research/scripts/signal.ts). */
export interface SignalRecord {
  prompts: number;
  k: number;
  temperature: number;
  real?: SignalMode;
  rehearse?: SignalMode;
}

/** One run of the recipe search, with the held-out figures of what it produced. */
export interface SweepRecord {
  label: string;
  command: string;
  /** What this run changed and why, in a sentence. */
  change: string;
  minutes: number;
  finalLoss: number;
  /** null: the run was stopped before it finished (said in `change`), so nothing was evaluated. */
  heldOut: Pick<HeldOutRecord, 'tasks' | 'success' | 'callsWithoutError' | 'toolPrecision' | 'fidelity' | 'fidelityGrounded' | 'byTier'> | null;
  kept: boolean;
}

const pct = (x: number | undefined) => (x !== undefined && Number.isFinite(x) ? `${(100 * x).toFixed(1)}%` : 'n/a');
const f = (x: number, d = 2) => (Number.isFinite(x) ? x.toFixed(d) : 'n/a');

export function worldSection(w: WorldRecord): string[] {
  const s = w.summary;
  const out = ['## World', ''];
  out.push(`Trained and evaluated on the **${w.name}** world (src/env/retail/worlds.ts): ${w.description}. ${s.users} users, ${s.orders} orders, ${s.products} products with ${s.items} variants (fingerprint \`${s.fingerprint}\`).`);
  if (w.heldOut === 'tasks') {
    out.push('');
    out.push('How it is built: users with at least two orders are ranked by a seeded hash of their id; the first one starts the world and each next user is the one whose orders add the fewest products not yet in it, so the catalogue stays small (a product record is the longest observation). Every order of a chosen user and every product those orders contain come with them, as the real records, so observations are byte-identical to the full world\'s. The tools, rules, expert, judge and reward are the full retail domain\'s, unchanged.');
    out.push('');
    out.push('**Limits, plainly: held-out *tasks*, not held-out users.** Every user, order and product of the test split is also in training; what is held out is the request: a hash of the task family and its structured intent (who, which orders, items, options, addresses, payment) puts one intent in five in the test split only, and the test split has no duplicate intents. So a test task is a combination the policy never trained on, over records it has seen many times. This measures whether the policy acts on *this* request in a world it knows — not whether it generalises to unseen users (the full `retail` world measures that, with held-out users).');
  }
  out.push('');
  return out;
}

export function heldOutSection(e: HeldOutRecord, command: string): string[] {
  const out = ['## Held-out evaluation (`npm run eval`)', ''];
  out.push('```\n' + command + '\n```');
  out.push('');
  const g = e.fidelityGrounded ?? null;
  out.push(`${e.tasks} held-out tasks, one greedy episode each in the real environment (at most 12 turns), then rehearsal fidelity on every reference call: the reference calls are played as the Act turns and the policy rehearses each from the real history${g ? ', twice: grounded as a rollout grounds it (on the task\'s reference trajectory, so the call\'s own real result is among the examples when it fits the grounding budget), and with the call\'s own example left out (the answer must come from what the policy learned of the environment)' : ', grounded on the task\'s other reference calls but never on the call itself'}.`);
  out.push('');
  out.push('| metric | value |\n|---|---|');
  out.push(`| **success** (reward 1: final database equals the reference's, every required fact stated) | **${pct(e.success)}** |`);
  out.push(`| calls run without an error | ${pct(e.callsWithoutError)} |`);
  out.push(`| tool-call precision / recall against the reference actions | ${pct(e.toolPrecision)} / ${pct(e.toolRecall)} |`);
  const rows = (fid: Fidelity, how: string) => {
    out.push(`| rehearsals that parse${how} (of ${fid.steps} reference calls) | ${pct(1 - fid.invalid)} |`);
    out.push(`| rehearsal exact match with the real observation${how} | ${pct(fid.exact)} |`);
    out.push(`| rehearsal field F1 / error agreement${how} | ${f(fid.f1, 3)} / ${pct(fid.errorAgree)} |`);
  };
  const structured = (e.rehearseDecoding ?? 'free') === 'structured';
  out.push(`| rehearsal decoding | ${structured ? '**structured** (only tokens that keep the text a well-formed observation, with a loop guard: src/rollout/rehearse-constraint.ts; the policy alone is measured in the next section)' : 'free (the policy alone)'} |`);
  if (g) rows(g, ', grounded as in rollouts');
  if (e.fidelity) rows(e.fidelity, g ? ", without the call's own example" : '');
  out.push(`| episode ends | ${Object.entries(e.ends).map(([k, v]) => `${k}: ${v}`).join(', ')} |`);
  out.push(`| mean turns | ${f(e.meanTurns, 1)} |`);
  out.push('');
  out.push('Per tier (src/env/retail/tiers.ts: 1 = read-only lookups and refusals, 2 = one write, 3 = item matching by options and two-intent requests) and per family:');
  out.push('');
  out.push('| group | tasks | success |\n|---|---|---|');
  for (const [k, g] of Object.entries(e.byTier)) out.push(`| ${k} | ${g.tasks} | ${pct(g.success)} |`);
  for (const [k, g] of Object.entries(e.byFamily)) out.push(`| ${k} | ${g.tasks} | ${pct(g.success)} |`);
  out.push('');
  out.push(`Wall-clock: ${f(e.wallS, 0)} s on cpu-fast.`);
  out.push('');
  return out;
}

export function signalSection(s: SignalRecord, command: string): string[] {
  const out = ['## Learning signal for RL (`npm run signal`)', ''];
  out.push('```\n' + command + '\n```');
  out.push('');
  out.push(`GRPO learns only from prompts whose rollouts score differently (every advantage of a group of equal rewards is 0). ${s.prompts} *training* prompts, ${s.k} rollouts each at temperature ${s.temperature}, as a training step samples them:`);
  out.push('');
  out.push('| mode | prompts with mixed rewards (95% CI) | mean reward | rollouts that succeed | pass@K |\n|---|---|---|---|---|');
  for (const [name, m] of [['real environment (0/1 reward)', s.real], ['rehearse (checklist judge)', s.rehearse]] as const) {
    if (!m) continue;
    out.push(`| ${name} | **${pct(m.mixedShare)}** (${pct(m.mixedCi95[0])}–${pct(m.mixedCi95[1])}) | ${f(m.meanReward, 3)} | ${pct(m.successRate)} | ${pct(m.passAtK)} |`);
  }
  out.push('');
  return out;
}

export function sweepSection(sweeps: readonly SweepRecord[]): string[] {
  const out = ['## The recipe search: every run, kept or not', ''];
  out.push('Each row is a pretraining run and the held-out evaluation of what it produced (same evaluation as above; commands exactly as run). Runs that did not help are kept here on purpose.');
  out.push('');
  out.push('| run | change | command | train min | final loss | success | calls w/o error | tool precision | rehearsal exact (grounded / without own example) | parse (grounded / without) | tier 1 / 2 / 3 |\n|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of sweeps) {
    const h = r.heldOut;
    const name = r.kept ? `**${r.label}** (kept)` : r.label;
    if (!h) {
      out.push(`| ${name} | ${r.change} | \`${r.command}\` | ${f(r.minutes, 1)} | ${f(r.finalLoss, 3)} | – | – | – | – | – | – |`);
      continue;
    }
    const tiers = ['tier 1', 'tier 2', 'tier 3'].map((t) => pct(h.byTier[t]?.success)).join(' / ');
    out.push(`| ${name} | ${r.change} | \`${r.command}\` | ${f(r.minutes, 1)} | ${f(r.finalLoss, 3)} | ${pct(h.success)} | ${pct(h.callsWithoutError)} | ${pct(h.toolPrecision)} | ${pct(h.fidelityGrounded?.exact)} / ${pct(h.fidelity?.exact)} | ${h.fidelityGrounded ? pct(1 - h.fidelityGrounded.invalid) : 'n/a'} / ${h.fidelity ? pct(1 - h.fidelity.invalid) : 'n/a'} | ${tiers} |`);
  }
  out.push('');
  return out;
}

/** The copy probe (`npm run pretrain -- --probe-copy`): does the policy copy values from its context? */
export function copySection(c: { firstCalls: { n: number; exact: number }; firstCallsHeldOut?: { n: number; exact: number }; drills: { n: number; exact: number }; drillValues?: Record<string, { n: number; exact: number }>; inContext?: Record<string, { n: number; exact: number }> }, title?: string, intro?: string): string[] {
  const out = [title ?? '## Copy probe (`npm run pretrain -- --probe-copy`)', ''];
  if (intro) out.push(intro, '');
  else out.push('Greedy, exact match: the first Act turn (an identity lookup whose arguments come from the request) of training tasks and of held-out tasks, and fresh copy drills (a user lists 1-4 random ids, emails, names or numbers after 0-5 sentences of other requests; the policy must repeat them; the probe drills also list user ids and amounts, kinds a training drill lists only with --drill-all-kinds).');
  out.push('');
  out.push('| probe | exact |\n|---|---|');
  out.push(`| first calls, training tasks | ${c.firstCalls.exact}/${c.firstCalls.n} (${pct(c.firstCalls.exact / c.firstCalls.n)}) |`);
  if (c.firstCallsHeldOut) out.push(`| first calls, held-out tasks | ${c.firstCallsHeldOut.exact}/${c.firstCallsHeldOut.n} (${pct(c.firstCallsHeldOut.exact / c.firstCallsHeldOut.n)}) |`);
  out.push(`| whole drills | ${c.drills.exact}/${c.drills.n} (${pct(c.drills.exact / c.drills.n)}) |`);
  for (const [k, g] of Object.entries(c.drillValues ?? {})) out.push(`| drill values: ${k} | ${g.exact}/${g.n} (${pct(g.exact / g.n)}) |`);
  out.push('');
  if (c.inContext) {
    out.push("In context: every Act turn of the held-out tasks' reference trajectories, greedy, given the real history (teacher-forced); each value the reference turn copies from that history (a call argument, or an amount its reply states) is exact when the policy's turn writes it in the same place:");
    out.push('');
    out.push('| value kind | exact |\n|---|---|');
    for (const [k, g] of Object.entries(c.inContext).sort((a, b) => b[1].n - a[1].n)) out.push(`| ${k} | ${g.exact}/${g.n} (${pct(g.exact / g.n)}) |`);
    out.push('');
  }
  return out;
}

/** Per layer and head, each model's attention on the copy source (research/pretrain/attention-probe.ts). */
export function attentionSection(r: AttentionRecord): string[] {
  const out = ['## Attention diagnostics: where the policy looks when it copies', ''];
  out.push('```\n' + r.command + '\n```');
  out.push('');
  out.push(`On ${r.drills} fresh copy drills (seed ${r.seed}), at every answer position whose next token is a value token that also stands in the request, each head's attention is compared with the *source*: the request position holding that token (after a copy of the token just written, when there is one: the induction pattern). **mass**: mean attention probability on the source (uniform attention would give ${r.models.map((m) => f(m.probe.chance, 3)).join(' / ')}); **top-1**: how often the head's most attended position is the source; **H**: mean attention entropy in nats; **max**: mean largest pre-softmax score q·k/√d. The probe's forward pass is a plain Qwen3 over the checkpoint's weights whose log-probabilities are tested against the engine's.${r.models.some((m) => m.dir.startsWith('runs/')) ? ' Folders under runs/ are runs of the recipe search (their commands are in the sweeps table); they are not committed, their figures are kept in attention-probe.json.' : ''}`);
  out.push('');
  out.push(`| head | ${r.models.map((m) => `${m.label}: mass / top-1 / H / max`).join(' | ')} |`);
  out.push(`|---|${r.models.map(() => '---|').join('')}`);
  const heads = r.models[0].probe.heads;
  heads.forEach((h, i) => {
    out.push(`| L${h.layer}.H${h.head} | ${r.models.map((m) => { const x = m.probe.heads[i]; const cell = `${f(x.sourceMass)} / ${pct(x.top1)} / ${f(x.entropy)} / ${f(x.maxLogit, 1)}`; return x.sourceMass >= 0.5 ? `**${cell}**` : cell; }).join(' | ')} |`);
  });
  out.push('');
  for (const m of r.models) {
    const best = m.probe.heads.reduce((a, b) => (b.sourceMass > a.sourceMass ? b : a));
    const copiers = m.probe.heads.filter((h) => h.sourceMass >= 0.5);
    out.push(`- **${m.label}** (\`${m.dir}\`, ${m.probe.positions} positions): ${copiers.length > 0 ? `${copiers.length} copy head${copiers.length > 1 ? 's' : ''} (mass >= 0.5: ${copiers.map((h) => `L${h.layer}.H${h.head}`).join(', ')})` : 'no copy head'}; the best head, L${best.layer}.H${best.head}, puts ${f(best.sourceMass)} of its attention on the source (top choice ${pct(best.top1)}).`);
  }
  out.push('');
  return out;
}

/** Where greedy rehearsals leave the real observation (research/pretrain/rehearsal-probe.ts). */
export function rehearsalSection(r: RehearsalProbe & { command: string }): string[] {
  const out = ['## Where rehearsals break (`npm run pretrain -- --probe-rehearsal`)', '', '```\n' + r.command + '\n```', ''];
  out.push(`Every reference call of the ${r.tasks} held-out tasks of \`npm run eval\`, rehearsed greedily from the real history as a rollout grounds it (the call's own real result among the examples when it fits the grounding budget), at most ${r.maxRehearseTokens} tokens, decoded ${r.rehearsePrompt?.decoding ?? 'free'}${(r.rehearsePrompt?.decoding ?? 'free') === 'free' ? ' (the policy alone: what structured decoding has to repair)' : ''}. For each rehearsal that is not exact: the first character where it leaves the real observation, and whether the next 24 characters it wrote stand elsewhere in its prompt (**copied from elsewhere**: a copy that resumed at another occurrence of a repeated key, such as another item's options) or nowhere in it (**not in the prompt**: written from what the policy learned of the world). A rehearsal cut by the budget that repeats a stretch of 120 characters is a **loop**.`);
  out.push('');
  out.push('| real result | calls | parse | exact | not exact: copied from elsewhere | not exact: not in the prompt | loops |\n|---|---|---|---|---|---|---|');
  const row = (label: string, g: RehearsalProbeGroup) =>
    `| ${label} | ${g.calls} | ${g.parsed} (${pct(g.parsed / g.calls)}) | ${g.exact} (${pct(g.exact / g.calls)}) | ${g.copiedFromElsewhere} | ${g.notInPrompt} | ${g.loops} |`;
  out.push(row('in the prompt', r.resultInPrompt), row('not in the prompt', r.resultNotInPrompt));
  out.push('');
  out.push('| tool | real result in the prompt: calls / parse / exact | not in the prompt: calls / parse / exact |\n|---|---|---|');
  const cell = (g: RehearsalProbeGroup) => (g.calls ? `${g.calls} / ${g.parsed} / ${g.exact}` : '–');
  for (const [tool, g] of Object.entries(r.byTool)) out.push(`| ${tool} | ${cell(g.inPrompt)} | ${cell(g.notInPrompt)} |`);
  out.push('');
  const failIn = r.resultInPrompt.calls - r.resultInPrompt.parsed;
  const failOut = r.resultNotInPrompt.calls - r.resultNotInPrompt.parsed;
  out.push(`Of the ${failIn + failOut} rehearsals that did not parse, ${failIn} had the real result in their prompt (the copy broke) and ${failOut} did not; ${r.resultInPrompt.loops + r.resultNotInPrompt.loops} were loops.`);
  out.push('');
  return out;
}

/** Free against structured rehearsal decoding: the sweep that chose its settings, then any checks on other tasks. */
export function structuredSection(records: readonly StructuredRecord[]): string[] {
  const out = ['## Structured rehearsal decoding', ''];
  const d = records[0].defaults;
  out.push(
    '*Free* is the policy alone. *Structured* (the default of rollouts, `npm run eval` and the lab) lets the Rehearse role draw only tokens that keep its text a possible `<execution_result>` block ' +
      '(`{"result": …}` or `{"error": "…"}`, src/rollout/observation-grammar.ts), no result string longer than the margin times the longest one that tool returns in 1,000 training tasks\' real observations, ' +
      'and no n-gram more often than the prompt holds it (a faithful copy of anything in the context is never forbidden; a copy that starts over is). ' +
      `The defaults are n = ${d.ngram}, margin ${d.margin}. Log-probabilities stay the model's own, so RL on structured rehearsals trains the policy to write them unaided. ` +
      'Each table: every reference call of the held-out tasks, rehearsed greedily as a rollout grounds it.',
  );
  out.push('');
  // The folder's own policy first, then records of earlier stages; a sweep before the checks of what it chose.
  const order = (r: StructuredRecord) => (r.note ? 2 : 0) + (r.results.length > 2 ? 0 : 1);
  for (const r of [...records].sort((a, b) => order(a) - order(b))) {
    out.push('```\n' + r.command + '\n```');
    out.push('');
    out.push(`${r.note ? `${r.note} ` : ''}${r.heldOutTasks} held-out tasks${r.taskSeed === undefined ? '' : ` (task seed ${r.taskSeed})`}, budget ${r.maxRehearseTokens} tokens:`);
    out.push('');
    out.push('| decoding | parse | exact | field F1 | loops | failures |\n|---|---|---|---|---|---|');
    for (const x of r.results)
      out.push(`| ${x.label} | ${x.parsed} / ${x.calls} (${pct(x.parsed / x.calls)}) | ${x.exact} (${pct(x.exact / x.calls)}) | ${f(x.f1, 3)} | ${x.loops} | ${Object.entries(x.failures).map(([k, n]) => `${k} ${n}`).join(', ') || '–'} |`);
    out.push('');
  }
  return out;
}
