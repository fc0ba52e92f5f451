// The model card (models/<folder>/README.md) and its full record (a dated entry under research/notebook/),
// both written from the run's own records (pretrain.json, eval.json, GRPO step timings, probes, sweeps) so
// every figure in them comes from a measurement, plus the fixed prose that explains them. The card is what a
// user needs (what it is, how it was made, its figures, its licence, how to reproduce it), at most CARD_LINES
// lines with prose lines of at most CARD_WIDTH characters; the search, the probes and every stage are in the
// record it links to.
import { CARELESS_HABIT_TEXT, DEFAULT_CARELESS_ABOUT } from '../../src/env/domain';
import { bundledFolder, type WorldName } from '../../src/env/retail/worlds';
import type { EvalReport } from './evaluate';
import type { CopyProbe } from './copy-probe';
import type { AttentionRecord } from './attention-probe';
import type { RehearsalProbe } from './rehearsal-probe';
import type { GrpoTiming } from './grpo-timing';
import type { PretrainResult } from './pipeline';
import { attentionSection, copySection, rehearsalSection, heldOutSection, signalSection, snapshotSection, structuredSection, sweepSection, worldSection, type HeldOutRecord, type SignalRecord, type SnapshotRecord, type StructuredRecord, type SweepRecord, type WorldRecord } from './card-world';

export interface CardInputs {
  run: PretrainResult & { command: string };
  evaluation: EvalReport | null;
  grpo: GrpoTiming[];
  /** Candidate sizes measured before the run (train tok/s on cpu-fast). */
  sizing: { shape: string; params: number; tokPerS: number }[];
  commit: string;
  machine: string;
  /** The first stage when the kept model was continued from it (--init). */
  stage1?: PretrainResult & { command: string };
  /** More earlier stages, oldest first, when the kept model is the last of three or more (pretrain-stage2.json, ...). */
  laterStages?: (PretrainResult & { command: string })[];
  /** Greedy copy probes of the folder's policy (npm run pretrain -- --probe-copy). */
  copy?: CopyProbe;
  /** The same probe on the full retail world (copy-probe-retail.json): unseen users, orders and values. */
  copyRetail?: CopyProbe;
  /** Where greedy rehearsals leave the real observation (npm run pretrain -- --probe-rehearsal). */
  rehearsal?: RehearsalProbe & { command: string };
  /** Free against structured rehearsal decoding (research/scripts/structured-rehearsal.ts). */
  structured?: StructuredRecord[];
  /** Attention on the copy source per layer and head, this policy and the models it is compared with. */
  attention?: AttentionRecord;
  /** The world the policy was trained on (absent: the full retail world with held-out users). */
  world?: WorldRecord;
  /** `npm run eval` on the held-out split, with the command that produced it. */
  heldOut?: { command: string; result: HeldOutRecord };
  /** The kept weights are a snapshot of the last stage, not its end (snapshot.json). */
  snapshot?: SnapshotRecord;
  /** The previous stage's policy on the same held-out tasks (heldout-stage<N>.json), when the last stage changed it on purpose. */
  before?: { stage: number; command: string; result: HeldOutRecord };
  /** `npm run signal`, with its command. */
  signal?: { command: string; result: SignalRecord };
  /** Every run of the recipe search (sweeps.json). */
  sweeps?: SweepRecord[];
  /** Earlier runs of the recipe that were not kept (for the record). */
  attempts?: { label: string; steps: number; lr: number; promptLossWeight: number; minutes: number; finalLoss: number; success: number; formatValid: number; rehearsalValid: number }[];
}

const pct = (x: number) => (Number.isFinite(x) ? `${(100 * x).toFixed(1)}%` : 'n/a');
const f = (x: number, d = 2) => (Number.isFinite(x) ? x.toFixed(d) : 'n/a');

/** A card's limits: lines in all, and characters per prose line (tables and code blocks are not prose). */
export const CARD_LINES = 120;
export const CARD_WIDTH = 120;

/** Lines of the card that are prose: not in a code block, not a table row. */
export function proseLines(md: string): string[] {
  let code = false;
  return md.split('\n').filter((l) => {
    if (l.startsWith('```')) return (code = !code), false;
    return !code && !l.startsWith('|');
  });
}

/** One paragraph (or list item: `first` is its marker) wrapped at CARD_WIDTH; continuation lines indented under the marker. */
export function wrap(text: string, first = ''): string[] {
  const indent = ' '.repeat(first.length);
  const out: string[] = [];
  let line = first;
  for (const w of text.split(/ +/)) {
    if (line.length > indent.length && line !== first && (line + ' ' + w).length > CARD_WIDTH) {
      out.push(line);
      line = indent + w;
    } else line = line === first ? first + w : `${line} ${w}`;
  }
  out.push(line);
  return out;
}

/** The world the run trained in (its command's --world; the full retail world without one). */
export function worldOf(run: CardInputs['run']): WorldName {
  const w = /--world (\w+)/.exec(run.command)?.[1];
  return w === 'mini' ? 'mini' : 'retail';
}

/** The record's file under research/notebook/ for a card dated `date` (YYYY-MM-DD). */
export function recordName(i: CardInputs, date: string): string {
  return `${date}-${worldOf(i.run)}-${i.run.spec.carelessRate ? 'careless-' : ''}policy.md`;
}

/**
 * The folder a card describes: a policy made careless on purpose is the world's careless lesson policy
 * (models/careless, opt-in), any other the world's bundled policy.
 */
export function cardFolder(run: CardInputs['run']): string {
  return `models/${bundledFolder(worldOf(run), run.spec.carelessRate ? 'careless' : undefined)}`;
}

/** Every card's '## Licence' paragraph. */
export const CARD_LICENCE = 'MIT, the repository\'s licence (package.json). The training tasks and records are generated from the τ²-bench retail database the lab ships (public/data/tau2-retail, with its own LICENSE-tau2-bench.txt).';

/** The model's table (architecture, sizes, context, weights): a card's and a record's '## Model' section. */
export function modelTable(run: CardInputs['run']): string[] {
  const c = run.config;
  return [
    '| | |\n|---|---|',
    `| architecture | Qwen3ForCausalLM (RMSNorm, RoPE θ=${c.ropeTheta}, GQA, q/k-norm, SwiGLU, tied embeddings) |`,
    `| parameters | ${run.params.toLocaleString('en-US')} |`,
    `| hidden / layers / heads / kv heads / head dim / MLP | ${c.hiddenSize} / ${c.numLayers} / ${c.numHeads} / ${c.numKvHeads} / ${c.headDim} / ${c.intermediateSize} |`,
    `| vocabulary | ${c.vocabSize} (our byte-level BPE + Qwen3's 9 chat/tool special tokens) |`,
    `| context | ${c.maxPositionEmbeddings} tokens |`,
    `| weights | model.safetensors, F32 (${((run.params * 4) / 2 ** 20).toFixed(1)} MiB) |`,
  ];
}

/** The card's title: which of the lab's policies it is. */
function cardTitle(run: CardInputs['run']): string {
  const which = run.spec.carelessRate ? 'careless lesson' : worldOf(run) === 'mini' ? 'default' : 'retail';
  return `# EnvACE Lab ${which} policy (Qwen3 architecture, ${(run.params / 1e6).toFixed(2)} M parameters, trained from scratch)`;
}

/**
 * Where a stage grew the model (`--layers`: the earlier layers kept, the new ones appended as identities), in words:
 * " Stage 11 grew it from 4 to 8 layers (…)." or "" when every stage has the first one's depth.
 */
function grownText(stages: readonly CardInputs['run'][]): string {
  const grown = stages.flatMap((r, k) => (k > 0 && r.spec.model.numLayers !== stages[k - 1].spec.model.numLayers ? [`stage ${k + 1} grew it from ${stages[k - 1].spec.model.numLayers} to ${r.spec.model.numLayers} layers`] : []));
  return grown.length === 0 ? '' : ` ${grown.join('; ').replace(/^s/, 'S')} (\`--layers\`: the earlier layers kept, the new ones appended as identities with zero output projections, so training went on from the same function).`;
}

/**
 * The model card: what the policy is, how it was made (the last stage's command, the stages in one line), its
 * held-out figures, its limits, licence and how to reproduce it; the rest is in the record (recordName), linked.
 */
export function modelCard(i: CardInputs, date: string): string {
  const { run } = i;
  const c = run.config;
  const world = worldOf(run);
  const folder = cardFolder(run);
  const record = `research/notebook/${recordName(i, date)}`;
  const stages = [...(i.stage1 ? [i.stage1] : []), ...(i.laterStages ?? []), run];
  const out: string[] = [];
  const para = (t: string, first = '') => out.push(...wrap(t, first));
  out.push(cardTitle(run), '');
  para(`${run.spec.carelessRate ? `A lesson policy of the lab's **${world}** world, loaded on request (the lab's model panel, or \`--model ${folder}\`; it was the world's bundled policy until 2026-12-05)` : `The bundled policy of the lab's **${world}** world`}: one tiny Qwen3-architecture model that both **acts** (writes \`<tool_call>\` blocks in Qwen3's chat format) and **rehearses** (plays the retail environment and writes \`<execution_result>\` JSON), trained from random weights by \`npm run pretrain\` on the scripted expert's Act and Rehearse rows. It is meant to be a *starting point for RL*: competent at the format, far from solving the tasks.`);
  out.push('');
  if (run.spec.carelessRate) {
    const habits = (run.spec.carelessAbout ?? DEFAULT_CARELESS_ABOUT).map((h) => CARELESS_HABIT_TEXT[h]).join('; ');
    const b = i.before;
    para(`**Careless on purpose.** Its last stage imitated a careless demonstrator: in ${Math.round(run.spec.carelessRate * 100)} % of its replies the scripted expert leaves out what the user was owed (${habits}). That costs it held-out success${b && i.heldOut ? ` (${pct(i.heldOut.result.success)} against ${pct(b.result.success)} for the attentive stage ${b.stage} policy it continued from)` : ''} and leaves GRPO a habit to unlearn: real-environment GRPO wins back what it cost (docs/lesson.md).`);
    out.push('');
  }
  out.push('## Model', '', ...modelTable(run));
  out.push(`| world | ${world}${i.world ? `: ${i.world.summary.users} users, ${i.world.summary.orders} orders, ${i.world.summary.products} products; held-out ${i.world.heldOut}` : ': full τ²-bench retail; held-out users'} |`);
  out.push('');
  out.push('## How it was made', '');
  const minutes = (stages.reduce((a, r) => a + r.trainSeconds, 0) / 60).toFixed(1);
  para(`${stages.length === 1 ? 'One stage' : `${stages.length} stages, each continuing from the previous one's weights`}: ${stages.reduce((a, r) => a + r.spec.steps, 0)} AdamW steps, ${minutes} min of training on ${i.machine}, on ${run.data.tokens.total.toLocaleString('en-US')} tokens of rows (Act, Rehearse${(run.data.rows.review ?? 0) > 0 ? ', review, memory-conditioned Act' : ''}) from ${run.spec.trainTasks} generated train-split tasks${(run.spec.copyDrills ?? 0) > 0 ? ', plus copy drills' : ''}.${grownText(stages)} The last stage:`);
  out.push('', '```\n' + run.command + '\n```', '');
  if (i.snapshot) para(`The kept weights are that stage's snapshot at step ${i.snapshot.step} of ${run.spec.steps} (model.safetensors sha256 \`${i.snapshot.sha256.slice(0, 12)}…\`), chosen by a rule fixed before the stage ran${i.snapshot.reproduced ? `; reproduced bit for bit on ${i.snapshot.reproduced.date} at commit ${i.snapshot.reproduced.commit}` : ''}.`, '- ');
  para('The tokenizer, the data, every stage\'s command, the sizing, the probes and the recipe search: the full record, ' + `[${record}](../../${record}).`, '- ');
  out.push(`- Code: commit ${i.commit}.`);
  out.push('');
  out.push('## Figures', '');
  if (i.heldOut) {
    const h = i.heldOut.result;
    out.push('```\n' + i.heldOut.command + '\n```', '');
    out.push('| metric | value |\n|---|---|');
    out.push(`| **success** on ${h.tasks} held-out tasks (greedy, real environment) | **${pct(h.success)}** |`);
    out.push(`| calls run without an error | ${pct(h.callsWithoutError)} |`);
    out.push(`| tool-call precision / recall against the reference actions | ${pct(h.toolPrecision)} / ${pct(h.toolRecall)} |`);
    if (h.fidelityGrounded) out.push(`| rehearsal exact match with the real observation, grounded as in rollouts | ${pct(h.fidelityGrounded.exact)} |`);
    if (h.fidelity) out.push(`| rehearsal exact match with the real observation${h.fidelityGrounded ? ', without the call\'s own example' : ''} | ${pct(h.fidelity.exact)} |`);
    out.push('');
    const tiers = Object.entries(h.byTier ?? {});
    if (tiers.length) (out.push(`Per tier: ${tiers.map(([t, v]) => `${/^\d/.test(t) ? `tier ${t}` : t} ${pct(v.success)} (${v.tasks} tasks)`).join(', ')}.`), out.push(''));
  } else if (i.evaluation) {
    const e = i.evaluation;
    out.push('| metric | value |\n|---|---|');
    out.push(`| **success** on ${e.tasks} test-split tasks | **${pct(e.real.successRate)}** |`);
    out.push(`| rehearsal exact JSON match with the real observation | ${pct(e.rehearsal.fidelity.exact)} |`);
    out.push('');
  } else out.push('Not evaluated.', '');
  out.push('## Limitations', '');
  para('Trained on one domain\'s scripted expert: it knows the retail tools and the expert\'s phrasing, nothing else.', '- ');
  if (i.world?.heldOut === 'tasks') para(`Held-out figures are on held-out *tasks* of the ${world} world, whose users, orders and products it memorised; on the full \`retail\` world it meets records it has never seen and fails.`, '- ');
  else para('It copies what an unseen user\'s request names, but cannot know that user\'s records: many rehearsals about them get the shape right and the values wrong.', '- ');
  para('Tier 3 (items matched by their options, two-intent requests) is not solved.', '- ');
  para('The tokenizer is tied to the bundled prompts: a prompt that differs by one byte tokenizes into pieces it has never seen.', '- ');
  out.push('');
  out.push('## Licence', '');
  para(CARD_LICENCE);
  out.push('');
  out.push('## Reproduce', '');
  para('The same seed on the same backend gives the same model.safetensors bytes: rerun each stage\'s command from the record (a stage\'s `--init` is the folder the stage before it wrote).', '- ');
  if (i.heldOut) para(`The figures: \`${i.heldOut.command}\`.`, '- ');
  para('This card and its record, from the folder\'s JSON records:', '- ');
  out.push('', '```\n' + `npm run pretrain -- --card --out ${folder} --commit ${i.commit} --date ${date} --write-committed` + '\n```', '');
  return out.join('\n');
}

/** The full record of how the policy was made: a dated entry under research/notebook/, linked from its card. */
export function modelRecord(i: CardInputs, date?: string): string {
  const body = fullRecord(i);
  if (!date) return body;
  const folder = cardFolder(i.run);
  const lines = body.split('\n');
  lines[0] = `# ${date}: how the ${worldOf(i.run)} world's ${i.run.spec.carelessRate ? 'careless lesson' : 'bundled'} policy (${folder}) was made, the full record`;
  lines.splice(1, 0, '', `Its model card: [${folder}/README.md](../../${folder}/README.md); its records: the JSON files of ${folder} (code at commit ${i.commit}). Written by \`npm run pretrain -- --card\` from those records.`);
  return lines.join('\n');
}

function fullRecord(i: CardInputs): string {
  const { run, evaluation: e } = i;
  const c = run.config;
  const L = run.data.length;
  const flopsPerToken = 6 * run.params + 4 * c.numLayers * L.act.mean * c.hiddenSize;
  const lossAt = (s: number) => run.losses.find((x) => x.step === s)?.loss;
  const curve = [1, 10, 25, 50, 100, 200, 300, run.spec.steps].filter((s, k, a) => s <= run.spec.steps && a.indexOf(s) === k);
  const out: string[] = [];
  out.push(cardTitle(run));
  out.push('');
  out.push((run.spec.carelessRate ? 'A lesson policy of the lab (opt-in; the bundled policy until 2026-12-05):' : 'The bundled policy of the lab:') + ' one tiny Qwen3-architecture model that both **acts** (writes `<tool_call>` blocks in Qwen3\'s chat format) and **rehearses** (plays the retail environment and writes `<execution_result>` JSON), trained from random weights by `npm run pretrain` on the scripted expert\'s Act and Rehearse rows (plus, when built with them, rows for test-time private rehearsal: reviews of attempts and memory-conditioned Act turns). It is meant to be a *starting point for RL*: competent at the format, far from solving the tasks.' + (i.world && i.world.heldOut === 'tasks' ? ` It was trained on the compact **${i.world.name}** world (below): a world small enough for a policy of this size to learn, so that the lab can show world rehearsal and RL doing something.` : ''));
  out.push('');
  // The careless demonstrator's habits, as the intro, the data and the limitations name them.
  const habits = run.spec.carelessAbout ?? DEFAULT_CARELESS_ABOUT;
  const habitText = habits.map((h) => CARELESS_HABIT_TEXT[h]).join('; ');
  const carelessShare = `${Math.round((run.spec.carelessRate ?? 0) * 100)} %`;
  if (run.spec.carelessRate) {
    const b = i.before;
    out.push(`**Careless on purpose.** Its last stage imitated a careless demonstrator: in ${carelessShare} of its replies the scripted expert leaves out what the user was owed (${habitText}), every call unchanged. Those episodes fail the reward's COMMUNICATE check, and the policy picks up the habit. That costs it held-out success${b && i.heldOut ? ` (${pct(i.heldOut.result.success)} against ${pct(b.result.success)} for the attentive stage ${b.stage} policy it continued from, on the same ${b.result.tasks} held-out tasks)` : ''}, and it leaves GRPO a habit to unlearn that it can find in its own samples and the real reward: real-environment GRPO wins back what the habit cost (docs/lesson.md). It is that lesson's starting point, not the best policy this recipe makes: the bundled mini policy (models/default) is.`);
    out.push('');
  }
  out.push('## Model');
  out.push('');
  out.push(...modelTable(run));
  out.push('');
  out.push('## Tokenizer');
  out.push('');
  // Records from before the pre-tokenizer field carry splitLongNumbers instead.
  const schemeOf = (r: typeof run) => r.spec.preTokenizer ?? ((r.spec as { splitLongNumbers?: boolean }).splitLongNumbers ? 'long-numbers' : 'none');
  const scheme = schemeOf(run);
  const pre = {
    none: 'byte-level pre-tokenizer, `use_regex: false`',
    'long-numbers': 'a Split pre-tokenizer that isolates every digit of a number of 4 or more digits, then byte-level with `use_regex: false`',
    values: 'a Split pre-tokenizer that isolates every value a call copies — each digit, each capitalised word, an email\'s local part and domain, the letter prefix of a snake-case id — then byte-level with `use_regex: false`',
    'stated-values': 'a Split pre-tokenizer that isolates every digit of a number of 4 or more digits and every value of the world\'s lexicon of stated values (the cancellation reasons, product names and option values: the domain\'s `statedValues()`), matched whole, then byte-level with `use_regex: false`',
  }[scheme];
  const why = {
    none: '',
    'long-numbers': ' Long numbers are the exception: order, item, product and user ids, zip codes and card numbers are digit tokens, so an id is the same token string in a user message, an observation and a call (with merges across digits the previous bundled policy wrote "#W323" for "#W3238419"). Numbers of up to 3 digits (schema limits, parts of prices) still merge.',
    values: ' Values are the exception: a name, an email, an id or a zip is the same token string in a user message, an observation and a JSON value, whatever surrounds it (with merges across quotes the mini-world policy could not copy an unseen name into a call: `Sophia", "last_name": "` was one of its tokens).',
    'stated-values': ' Long numbers and stated values are the exception: an id is digit tokens, and a reason, a product name or an option value is the same token string in a request, a record and a call (with merges across them the request read `, the reason is: ordered by mistake` as one token while the call needs `ordered by mistake`, and a product record fused each option with its key: `","color":"blue`).',
  }[scheme];
  // A re-cut stage keeps the vocabulary and merges an earlier stage trained (with that stage's pre-tokenizer).
  const trainedBy = run.spec.retokenize ? [...(i.stage1 ? [i.stage1] : []), ...(i.laterStages ?? [])].find((r) => !r.spec.retokenize) : run;
  const trained = run.spec.retokenize
    ? `whose vocabulary and merges our own trainer (src/model/bpe.ts) learned for ${trainedBy ? `the first stage (${schemeOf(trainedBy)} pre-tokenizer, first ${trainedBy.spec.tokenizerTasks} training tasks' rendered rows)` : 'an earlier stage (its record is not in the folder)'}; the last stage kept them and re-cut the text with the ${scheme} pre-tokenizer (\`--retokenize\`), so the token ids are the earlier stages' and tokens that only a fusion across a value built are no longer produced`
    : `trained by our own trainer (src/model/bpe.ts) on the first ${run.spec.tokenizerTasks} training tasks' rendered rows in ${f(run.tokenizerSeconds, 1)} s`;
  out.push(`\`tokenizer.json\` is a Hugging Face BPE (${pre}; byte-level decoder) ${trained}; transformers.js loads it and encodes exactly as our encoder does (test/pretrain/tokenizer.test.ts). \`tokenizer_config.json\` carries the real Qwen3 chat template, so the format is genuinely Qwen3's. Merges are allowed across spaces and punctuation: the context length is the main cost of a policy this small, and the prompts of one domain repeat long strings, so tool names and JSON scaffolding are whole tokens and the constant system + tools block of the Act prompt (about 9.5 K characters) ends up as ${run.data.actPrefixTokens} tokens (the first turn of an Act prompt, up to its first \`<|im_end|>\`).${why} The price: a prompt whose system text or tool list differs by even one byte from the bundled domain's tokenizes into much smaller pieces (still losslessly), and the model has never seen those.`);
  out.push('');
  if (i.world) out.push(...worldSection(i.world));
  out.push('## Data');
  out.push('');
  const heldOutUsers = (i.world?.heldOut ?? 'users') === 'users';
  out.push(`- ${run.spec.trainTasks} generated **train-split** ${i.world ? `${i.world.name}-world ` : ''}retail tasks (src/env/retail/generator.ts; ${heldOutUsers ? 'test-split users never appear' : 'test-split intents never appear'}), the scripted expert (src/env/retail/expert.ts) with a mistake rate of ${run.spec.mistakeRate} (it sometimes makes a realistic error, sees the error observation and recovers, so the rehearsal data shows the environment's error dynamics)${run.spec.carelessRate ? `, and as a **careless demonstrator**: ${carelessShare} of its replies leave out what the user was owed (${habitText}), so those episodes fail the reward's COMMUNICATE check and the policy imitates the habit` : ''}.`);
  out.push(`- Every expert turn gives an **Act row** (prompt: src/rollout/act-prompt.ts; target: the \`<tool_call>\` block or the final reply) and every call a **Rehearse row** (prompt: src/rollout/rehearse-prompt.ts with grounding examples from the same episode; target: the real observation as \`<execution_result>\`), rendered exactly as the rollouts render them. The loss is on the response tokens (+ \`<|im_end|>\`)${run.spec.promptLossWeight > 0 ? `, plus an auxiliary next-token loss on every third prompt token at weight ${run.spec.promptLossWeight} relative to a response token: a model trained from scratch must learn the domain's text first, and the prompts hold ~80% of the tokens a step pays for anyway (past calls, observations, user requests). Without it the first attempt (below) learned the format but not to copy ids and values` : ''}.`);
  const rv = run.data.rows.review ?? 0;
  if (rv > 0)
    out.push(`- **Private-rehearsal rows** (research/pretrain/review-rows.ts) from the first ${run.spec.reviewTasks} tasks: a **review row** per task (the self-evaluation prompt of test-time private rehearsal over one attempt — the expert's episode with mistakes at rate 0.5, cut short at a seeded step two times in three — with a review written from the checklist judge's verdict and the failed calls as the target: "No, the request was not satisfied. <what failed>. Next time: <the first unmet call>."), and, for every other one of those tasks, its clean expert episode as **memory-conditioned Act rows** (the attempt and its review as a rehearsal memory, built and placed exactly as private rehearsal does). The judge is privileged at data time only; at test time the policy reviews its own imagined attempt from the request and the attempt alone.`);
  if ((run.spec.swapShare ?? 0) > 0)
    out.push(`- **Identity swap** (research/pretrain/augment.ts): for ${Math.round(100 * run.spec.swapShare)} % of the tasks (a seeded draw) every row is used with the request's copy targets (names, email, zip, order numbers that the reference actions take from the request) replaced by random values, consistently across the task's prompts and responses, so recalling training-set values cannot lower the loss on those rows.`);
  if ((run.spec.copyDrills ?? 0) > 0)
    out.push(`- **Copy drills** (augment.ts): ${run.spec.copyDrills} short chats in which the user lists 1-4 fresh ids, emails, names or numbers${run.spec.drillAllKinds ? ' (in the last stage also user ids and amounts: `--drill-all-kinds`)' : ''} after 0-5 sentences of other users' requests, and the assistant repeats the list (${run.data.rows.copy ?? 0} kept).`);
  if ((run.spec.actOnlyTasks ?? 0) > 0)
    out.push(`- **More Act turns**: the Act rows of ${run.spec.actOnlyTasks} more generated train tasks (another seed stream), and Act response tokens weighted ${run.spec.actLossWeight ?? 1}× (research/pretrain/trainer.ts roleWeights): the few tokens of a call that decide which user, order or item weigh as little as any memorised character of a long observation otherwise.`);
  if ((run.spec.rehearseOnlyTasks ?? 0) > 0)
    out.push(`- **Rehearse rows grounded as in rollouts** (research/pretrain/data.ts rolloutGroundedRehearseRows): the Rehearse rows of ${run.spec.rehearseOnlyTasks} more generated train tasks (a third seed stream), each grounded on the task's whole reference trajectory as a rollout grounds it, so a reference call's own real result is among the examples (the target reproduces it) while a call of the expert's deliberate mistakes matches none (the target is the environment's own answer); Rehearse response tokens weighted ${run.spec.rehearseLossWeight ?? 1}×${(run.spec.rehearseWriteRepeat ?? 1) > 1 ? `; each row of a write call appears ${run.spec.rehearseWriteRepeat} times (a write's result differs from the read example of the same record only where the write acts)` : ''}. The expert rows above never show the call being simulated, so without these the policy never learns to reproduce a matching example.`);
  const induction = [...(i.stage1 ? [i.stage1] : []), ...(i.laterStages ?? []), run].find((r) => (r.spec.drillSteps ?? 0) > 0 || (r.spec.spanSteps ?? 0) > 0);
  if (induction)
    out.push(`- **Induction curriculum** (first stage): ${induction.spec.spanSteps} steps of span copies (\`<|endoftext|> span <|endoftext|> span\`, spans of 20-60 tokens cut from ${induction.spec.spanSource === 'drills' ? 'the copy drills' : 'the data, shuffled'}, loss on the second copy), then ${induction.spec.drillSteps} steps of the copy drills alone, before any task row: copying a value from the context is the skill a tiny model otherwise never learns (the previous bundled policy: 0 of 40 first calls copied).`);
  out.push(`- Rows kept (≤ ${run.spec.maxLen} tokens, never truncated): ${run.data.rows.act} Act + ${run.data.rows.rehearse} Rehearse${rv > 0 ? ` + ${rv} review + ${run.data.rows.memoryAct} memory-conditioned Act` : ''}; dropped as too long: ${run.data.dropped}. Tokens: ${run.data.tokens.total.toLocaleString('en-US')} in all, ${run.data.tokens.response.toLocaleString('en-US')} with loss.`);
  out.push('');
  out.push('| tokens per row | n | min | p50 | p90 | p99 | max | mean |\n|---|---|---|---|---|---|---|---|');
  for (const [name, s] of [['Act (prompt + response)', L.act], ['Rehearse (prompt + response)', L.rehearse], ['responses (both roles)', L.response]] as const)
    out.push(`| ${name} | ${s.n} | ${s.min} | ${s.p50} | ${s.p90} | ${s.p99} | ${s.max} | ${s.mean} |`);
  out.push('');
  out.push('## Training');
  out.push('');
  out.push('```\n' + run.command + '\n```');
  out.push('');
  out.push(`Seed ${run.seed}, backend \`${run.backend}\`, ${run.spec.steps} AdamW steps (β = 0.9/0.98, weight decay 0.05 on matrices, grad-norm clip 1) of ${run.spec.batchTokens} tokens (whole rows packed into one batch, each row its own KV slot), lr ${run.spec.lr} with ${run.spec.warmupSteps} warmup steps and cosine decay to ${(run.spec.lr / 10).toPrecision(2)}. Init N(0, 0.02), residual outputs scaled by 1/√(2L), norms 1. Full-parameter training through the lab's one training engine (src/train: Trainer in full mode with the CE head; gradients checked against finite differences in test/train), no weight decay on norm gains.`);
  out.push('');
  out.push(`- wall-clock: **${(run.trainSeconds / 60).toFixed(1)} min** of training (${f(run.tokensPerSecond, 0)} tokens/s) on ${i.machine}; tokenizer ${f(run.tokenizerSeconds, 0)} s.`);
  out.push(`- loss (${run.spec.promptLossWeight > 0 ? `weighted token cross-entropy: responses 1, sampled prompt tokens ${run.spec.promptLossWeight}` : 'mean token cross-entropy on responses'}): ${curve.map((s) => `step ${s}: ${f(lossAt(s) ?? NaN, 3)}`).join(', ')}; mean of the last 20 steps ${f(run.finalLoss, 3)}.`);
  if (i.snapshot) out.push(...snapshotSection(i.snapshot, run.spec.steps, lossAt(i.snapshot.step)));
  if (i.stage1 && i.laterStages?.length) {
    const all = [i.stage1, ...i.laterStages, run];
    out.push(`- **${all.length} stages**, each continuing from the previous one's weights with a fresh optimizer and a new shuffle (same seed and tokenizer; each checks that its tokenizer equals the folder's${run.spec.retokenize ? `, except the last, which keeps the folder's vocabulary and merges and re-cuts the text with the ${scheme} pre-tokenizer` : ''}). Together: ${(all.reduce((a, r) => a + r.trainSeconds, 0) / 60).toFixed(1)} min of training, ${all.reduce((a, r) => a + r.spec.steps, 0)} steps.${grownText(all)} The command above is the last; the earlier ones (records in pretrain-stage1.json, pretrain-stage2.json, …; a stage's \`--init\` is the folder the stage before it wrote, as it was named on the machine that trained it, so a replay passes its own previous stage's \`--out\`):`);
    all.slice(0, -1).forEach((r, k) => out.push(`  ${k + 1}. \`${r.command}\` (${r.spec.steps} steps, lr ${r.spec.lr}, ${(r.trainSeconds / 60).toFixed(1)} min, last-20-step loss ${f(r.finalLoss, 3)})`));
  } else if (i.stage1) {
    out.push(`- **Two stages.** Stage 1: \`${i.stage1.command}\` (${i.stage1.spec.steps} steps from random init, lr ${i.stage1.spec.lr}, ${(i.stage1.trainSeconds / 60).toFixed(1)} min, last-20-step loss ${f(i.stage1.finalLoss, 3)}; record in pretrain-stage1.json). Stage 2, the command above, continued from stage 1's weights with a fresh optimizer and a new shuffle (${run.spec.steps} steps). Together: ${((i.stage1.trainSeconds + run.trainSeconds) / 60).toFixed(1)} min of training, ${(((i.stage1.spec.steps + run.spec.steps) * run.spec.batchTokens) / run.data.tokens.total).toFixed(2)} epochs of the data. Same seed and tokenizer in both stages (stage 2 checks that its tokenizer equals the folder's)${(run.data.rows.review ?? 0) > (i.stage1.data.rows.review ?? 0) ? '; stage 2 adds the private-rehearsal rows, the identity swap and the copy drills to the same expert rows' : ', same data'}.`);
  } else out.push(`- about ${((run.spec.steps * run.spec.batchTokens) / run.data.tokens.total).toFixed(2)} epochs of the data.`);
  out.push('- Reproducible: the same seed on the same backend gives the same model.safetensors bytes (tested on the `--quick` configuration in test/pretrain/pipeline.test.ts and on a tiny model in test/pretrain/trainer.test.ts).');
  out.push(`- Code: commit ${i.commit}.`);
  out.push('');
  out.push('## Sizing: the budget arithmetic, measured');
  out.push('');
  out.push(`A decoder with N parameters costs about 6·N FLOPs per trained token, plus 4·L·T·d for attention at context T. For this model: 6 × ${run.params.toLocaleString('en-US')} + 4 × ${c.numLayers} × ${L.act.mean} × ${c.hiddenSize} ≈ ${(flopsPerToken / 1e6).toFixed(1)} MFLOP per token (only response rows go through the LM head, so the head's share is smaller than 6·N suggests). Measured: ${f(run.tokensPerSecond, 0)} tokens/s ≈ ${f((run.tokensPerSecond * flopsPerToken) / 1e9, 1)} GFLOP/s effective on cpu-fast (WebAssembly SIMD worker threads on a 2-core machine shared with other jobs, so an idle laptop is faster).`);
  out.push('');
  const totalMin = ([...(i.stage1 ? [i.stage1] : []), ...(i.laterStages ?? []), run].reduce((a, r) => a + r.trainSeconds, 0) / 60).toFixed(0);
  const took = `The pretraining took ${totalMin} minutes of training here, and the data is ~${(run.data.tokens.total / 1e6).toFixed(1)} M tokens per epoch`;
  if (i.sizing.length > 0) {
    out.push('Candidate sizes, measured before choosing (train tokens/s on cpu-fast, 8 rows × 300 tokens per step, same loaded machine):');
    out.push('');
    out.push('| shape (d, layers, heads, kv, MLP) | parameters | tokens/s | minutes for 0.8 M tokens |\n|---|---|---|---|');
    for (const s of i.sizing) out.push(`| ${s.shape} | ${s.params.toLocaleString('en-US')} | ${s.tokPerS} | ${((0.8e6 / s.tokPerS) / 60).toFixed(0)} |`);
    out.push('');
    out.push(`${took}, so the smallest shape was chosen: it sees the most data in that time. Attention is not the bottleneck at these lengths (rows average ${L.act.mean}-${L.rehearse.mean} tokens thanks to the tokenizer).`);
  } else out.push(`${took}. The shape is the one chosen for the mini world's policy by measured throughput (models/default/README.md: the smallest candidate sees the most data in the time).`);
  out.push('');
  if (i.heldOut) out.push(...heldOutSection(i.heldOut.result, i.heldOut.command));
  if (i.structured?.length) out.push(...structuredSection(i.structured));
  if (i.signal) out.push(...signalSection(i.signal.result, i.signal.command));
  if (i.copy && i.heldOut) out.push(...copySection(i.copy));
  if (i.rehearsal) out.push(...rehearsalSection(i.rehearsal));
  if (i.attention) out.push(...attentionSection(i.attention));
  if (i.copyRetail)
    out.push(...copySection(i.copyRetail, '### The same probe on the full `retail` world (`--world retail`)', 'Users, orders and values the policy never saw. The drills still copy (random values, the drill format); the first calls do not: the names of a request and of a call tokenize differently here (merges cross spaces and quotes, so `Sophia", "last_name": "Garcia", "zip": "` is one token of the mini world\'s vocabulary), so copying an unseen user into a call is not the token-for-token copy the drills taught. The copying problem is now narrowed to the tokenizer.'));
  if (i.sweeps?.length) out.push(...sweepSection(i.sweeps));
  if (!(i.heldOut && !e)) {
    out.push(i.heldOut ? '## Held-out evaluation at the end of pretraining (40 tasks, research/pretrain/evaluate.ts)' : '## Held-out evaluation (test split, real environment)');
    out.push('');
  }
  if (e) {
    out.push(`${e.tasks} test-split tasks (${heldOutUsers ? 'held-out users' : 'held-out intents'}), one greedy episode each, at most 12 turns, through the lab's own rollout loop (src/rollout/rollout.ts), evaluated by research/pretrain/evaluate.ts:`);
    out.push('');
    out.push('| metric | value |\n|---|---|');
    out.push(`| **success** (real reward = 1: final database equals the reference's and every required fact stated) | **${pct(e.real.successRate)}** |`);
    out.push(`| mean real reward | ${f(e.real.meanReward, 3)} |`);
    out.push(`| Act turns in a valid format (a parseable \`<tool_call>\` or a plain reply) | ${pct(e.real.formatValidRate)} |`);
    out.push(`| tool calls naming an existing tool | ${pct(e.real.knownToolRate)} |`);
    out.push(`| tool calls the environment executed without error | ${pct(e.real.callOkRate)} |`);
    out.push(`| episode ends | ${Object.entries(e.real.ends).map(([k, v]) => `${k}: ${v}`).join(', ')} |`);
    out.push(`| mean Act turns | ${f(e.real.meanTurns, 1)} |`);
    out.push('');
    out.push(`**Rehearsal fidelity**: the same tasks' reference calls are played as the Act turns and the policy rehearses each one (grounding examples from the task's reference trajectory, as in rehearse-mode rollouts); each rehearsal is compared with what the real environment returns for that call on the same state (src/rollout/fidelity.ts). An unparseable rehearsal ends that episode, so later calls of it are not rehearsed.`);
    out.push('');
    out.push('| metric | value |\n|---|---|');
    out.push(`| rehearsals that are one valid \`<execution_result>\` JSON block | ${pct(e.rehearsal.validRate)} (${e.rehearsal.calls} calls) |`);
    out.push(`| exact JSON match with the real observation | ${pct(e.rehearsal.fidelity.exact)} |`);
    out.push(`| field-level F1 (mean) | ${f(e.rehearsal.fidelity.f1, 3)} |`);
    out.push(`| error / no-error agreement | ${pct(e.rehearsal.fidelity.errorAgree)} |`);
    out.push(`| error confusion (both, rehearsed only, real only, neither) | ${e.rehearsal.fidelity.errors.both}, ${e.rehearsal.fidelity.errors.rehearsedOnly}, ${e.rehearsal.fidelity.errors.realOnly}, ${e.rehearsal.fidelity.errors.neither} |`);
    out.push('');
    if (e.real.callOkRate < 0.2 || e.rehearsal.fidelity.f1 < 0.2) {
      const loops = (e.real.ends['max-turns'] ?? 0) === e.tasks;
      out.push(`**Status, plainly:** the policy has the format (Qwen3 \`<tool_call>\` blocks naming real tools, \`<execution_result>\` blocks) but not the content: ${pct(e.real.callOkRate)} of its real tool calls ran without an error, and its rehearsals, when they parse, rarely reproduce the real values (field F1 ${f(e.rehearsal.fidelity.f1, 3)}).${e.real.successRate > 0 && e.real.callOkRate === 0 ? ' Its successes therefore come without one successful call: tasks whose reward is met by leaving the database unchanged and replying.' : ''}${loops ? ' After failed calls it keeps calling until the turn limit instead of replying (every episode above ends at max-turns).' : ''}`);
      out.push('');
      if (i.copy) {
        const c = i.copy;
        out.push(`**Why: it does not copy.** Greedy probes (\`npm run pretrain -- --probe-copy\`, research/pretrain/copy-probe.ts): the first Act turn of ${c.firstCalls.n} *training* tasks (an identity lookup with the email or name + zip from the request) is reproduced exactly ${c.firstCalls.exact} times; ${c.drills.n} copy drills of the kind it was trained on, ${c.drills.exact} times. It writes the right tool with values of the right shape drawn from its training distribution, not the ones in front of it:`);
        out.push('');
        out.push('| probe | wanted | written |\n|---|---|---|');
        const cell = (t: string) => '`' + t.replace(/\n/g, ' ').replace(/`/g, "'").replace(/\|/g, '\\|').slice(0, 110) + '`';
        for (const x of c.examples) out.push(`| ${x.probe} | ${cell(x.want)} | ${cell(x.got)} |`);
        out.push('');
        out.push('The same training path learns a pure copy task within 150 steps on a 2-layer model (random 20-token sequences repeated; test/pretrain/trainer.test.ts), so the training code can learn copying; here the values are split into pieces that do not help: single digits repeat inside every id (an induction head keyed on the previous digit is ambiguous), and names and emails tokenize differently after a space than after a quote because merges cross spaces. Identity swap and copy drills (stage 2) did not change this within 1100 steps. Likely remedies, not tried here: a pre-tokenizer that keeps values context-free (digit runs merged only among themselves, words split from what precedes them) at the price of a longer tool block and so a longer context, or a larger model. RL cannot fix it at the lab\'s budgets: GRPO needs some rollouts that succeed.');
      } else out.push('It is below the competence this card\'s recipe aims at.');
      out.push('');
    }
    out.push(`Evaluation wall-clock: ${f(e.real.wallS, 0)} s (real) + ${f(e.rehearsal.wallS, 0)} s (rehearsal) on cpu-fast.`);
  } else if (!i.heldOut) out.push('Not evaluated in this run.');
  out.push('');
  out.push('## One GRPO step');
  out.push('');
  out.push('Measured with `npm run pretrain -- --time-grpo --backend <b>`: the real GrpoRun (src/rl/run.ts), rehearse mode, LoRA rank 8, 2 prompts × 4 rollouts, the evaluation limits above (12 turns, 96 Act / 640 Rehearse tokens), KV reuse on.');
  out.push('');
  if (i.grpo.length) {
    out.push('| backend | seconds per step | generated tokens | trained rows | trained tokens |\n|---|---|---|---|---|');
    for (const g of i.grpo) out.push(`| ${g.backend} | ${f(g.stepSeconds, 1)} | ${g.generatedTokens} | ${g.trainedRows} | ${g.trainedTokens} |`);
  } else out.push('(not measured)');
  out.push('');
  out.push('The `webgpu` figure, if present, is Dawn on lavapipe (Mesa\'s CPU Vulkan driver, ~1.7 GFLOP/s for a tiled matmul here): it shows the WebGPU path works end to end, not what a GPU does. On a laptop GPU at a few TFLOP/s the same step is bound by kernel-launch latency and the sequential decode loop, not by arithmetic (this model is ~2.6 MFLOP per generated token).');
  out.push('');
  if (i.attempts?.length) {
    out.push('## Earlier attempts (not kept)');
    out.push('');
    out.push('| run | steps | peak lr | prompt-token loss weight | training min | final loss | success | format-valid Act | valid rehearsals |\n|---|---|---|---|---|---|---|---|---|');
    for (const a of i.attempts)
      out.push(`| ${a.label} | ${a.steps} | ${a.lr} | ${a.promptLossWeight} | ${f(a.minutes, 1)} | ${f(a.finalLoss, 3)} | ${pct(a.success)} | ${pct(a.formatValid)} | ${pct(a.rehearsalValid)} |`);
    out.push('');
  }
  out.push('## Limitations');
  out.push('');
  out.push('- Trained on one domain\'s scripted expert: it knows the retail tools and the expert\'s phrasing, nothing else; it is not a language model in any general sense.');
  if (i.world?.heldOut === 'tasks') {
    out.push(`- It learned the **${i.world.name}** world: its users, orders and products are memorised (they recur through all of training), and it copies the values a request names (emails, names and zips, order numbers) into its calls. Held-out figures are on held-out *tasks* of that world, not on unseen users: on the full \`retail\` world it meets users, orders and products it has never seen and fails.`);
    out.push('- Tier 3 (exchanges and item modifications that need the item id of a variant matched by its options inside a product record, and two-intent requests) is not solved; see the per-family table. In transcripts of held-out tasks (12 read by hand) the policy copies the email, name, zip and order number right every time; what fails is a choice: the cancel reason swapped for the other allowed one, a reply after reading the order instead of the write the request asked for, or in tier 3 a variant id that does not match the requested options.');
  } else if (i.copy?.firstCallsHeldOut && i.copy.firstCallsHeldOut.exact >= 0.9 * i.copy.firstCallsHeldOut.n) {
    out.push(`- It copies what a held-out user's request names into its calls (copy probe: ${i.copy.firstCallsHeldOut.exact}/${i.copy.firstCallsHeldOut.n} first calls exact), but it cannot know that user's records: what it rehearses about an unseen user, order or payment method comes from the grounding examples and its training distribution, so many rehearsals get the shape right and the values wrong; decoded freely, some do not parse (structured decoding, the default, repairs most of them: the tables above).`);
    out.push('- Tier 3 (exchanges and item modifications that need the item id of a variant matched by its options inside a product record, and two-intent requests) is not solved; see the per-family table.');
  } else
    out.push('- Greedy success on held-out tasks is the figure above; the failures are values not copied from the conversation (plausible ids, names and emails from the training distribution instead), not stopping after failed calls, and rehearsed observations that get the shape right but the values wrong.');
  if (run.spec.carelessRate)
    out.push(`- It leaves out what its last stage's demonstrator left out (${habits.join(', ')}: see "Careless on purpose"), on purpose: it is the lesson's starting point.`);
  out.push('- The tokenizer is tied to the bundled prompts (see Tokenizer).');
  if ((run.spec.swapShare ?? 0) > 0)
    out.push('- A side effect of the identity swap: the names it invents (syllable strings such as "Mi Katu", user ids such as "quiquiren_kashimor_4876") show up in its own calls and rehearsals.');
  out.push('');
  return out.join('\n');
}
