// The whole `npm run pretrain`: expert data -> BPE tokenizer -> encoded, length-filtered examples ->
// seeded from-scratch training -> Hugging Face folder. A pure function of (options, seed, backend).
import { mkdir, writeFile } from 'node:fs/promises';
import { cpus } from 'node:os';
import { join } from 'node:path';
import type { Backend } from '../../src/engine/backend';
import type { CarelessHabit, Domain } from '../../src/env/domain';
import { paramCount, toHfConfig, type Qwen3Config } from '../../src/model/config';
import type { ModelSource } from '../../src/model/source';
import { DirSource } from '../../src/model/source-node';
import { buildQwen3, loadQwen3, readHostWeights, toSafetensors } from '../../src/model/weights';
import { hostWeights } from '../../src/train/params';
import type { StepReport } from '../../src/train/trainer';
import type { Qwen3Model } from '../../src/model/qwen3';
import type { ToolDefinition } from '../../src/rollout/chat';
import { Bpe, trainBpe, type PreTokenizerName } from '../../src/model/bpe';
import { recordPath } from '../../src/util/record-path';
import { Rng } from '../../src/util/rng';
import { DEFAULT_MEMORY_TOKENS } from '../../src/eval/private-rehearsal';
import { copyDrills, recordCopies, spanCopies, statedValueSwaps, swapRecordValues, swapTaskShare, valueSwapSource } from './augment';
import { reviewRows } from './review-rows';
import { amountSwapSource, amountSwaps, changeCallDrills, changeRows } from './change-drills';
import { conversationAgentExamples, conversationRows, userRowToExample } from './user-rows';
import { encodeExample, expertRows, lengthStats, packBatches, rolloutGroundedRehearseRows, rowToExample, type Encoded, type Example } from './data';
import { fromTokenizerJson, qwen3ChatTemplate, SPECIAL_STRINGS, toTokenizerConfig, toTokenizerJson } from '../../src/model/hf-tokenizer';
import { DEFAULT_HYPER, initWeights, pretrainBatch, pretrainer } from './trainer';
import { grownWeights } from './grow';

export interface PretrainSpec {
  model: Omit<Qwen3Config, 'vocabSize'>;
  vocabSize: number;
  /**
   * Tokenizer pre-tokenizer (src/model/bpe.ts): 'long-numbers' isolates every digit of a 4+ digit number,
   * 'values' every span a call copies (digits, capitalised words, email parts, id prefixes).
   * Records written before the field existed carry `splitLongNumbers: true` instead.
   */
  preTokenizer: PreTokenizerName;
  /**
   * Keep the --init folder's vocabulary and merges and cut the text with this spec's pre-tokenizer instead
   * of training a new BPE: a checkpoint continues on the same token ids while the new split keeps apart
   * what its old tokens fused (tokens that only a fusion built are no longer produced).
   */
  retokenize?: boolean;
  /** Train-split tasks whose expert episodes are the training data. */
  trainTasks: number;
  /** The first this-many of them also train the tokenizer (BPE cost grows with the text). */
  tokenizerTasks: number;
  mistakeRate: number;
  /**
   * The first this-many train tasks also give a review row and memory-conditioned Act rows for test-time
   * private rehearsal (research/pretrain/review-rows.ts); 0 = none. Not part of the tokenizer's texts.
   */
  reviewTasks: number;
  /**
   * Share of the tasks whose expert rows are used with their copy targets swapped for random values
   * (research/pretrain/augment.ts), in place of the originals; 0 = none. Not part of the tokenizer's texts.
   */
  swapShare: number;
  /** Synthetic copy drills added to the data (research/pretrain/augment.ts copyDrills); 0 = none. */
  copyDrills: number;
  /** The drills also list user ids and amounts (the copy probe's two extra kinds); default off. */
  drillAllKinds?: boolean;
  /**
   * Induction warm-up: the first this-many steps train only on text-span copies (augment.ts spanCopies:
   * `<|endoftext|> span <|endoftext|> span`, spans cut from the encoded data, loss on the second copy), so
   * that copy heads form before the task rows arrive (an induction curriculum); 0 = none.
   */
  spanSteps: number;
  /**
   * Where the span copies are cut: 'shuffled-data' (any row, tokens shuffled) or 'drills' (the copy drills,
   * in order: their values are random, so only copying predicts them).
   */
  spanSource: 'shuffled-data' | 'drills';
  /** After the span steps, this many steps train on the copy drills alone (I2's second phase); 0 = none. */
  drillSteps: number;
  /** Examples longer than this (prompt + response tokens) are dropped, never cut. */
  maxLen: number;
  /** Tokens per optimizer step (whole sequences). */
  batchTokens: number;
  steps: number;
  lr: number;
  warmupSteps: number;
  /** Auxiliary loss weight of prompt tokens (see TrainHyper.promptLossWeight); 0 = responses only. */
  promptLossWeight: number;
  /** Loss weight of Act response tokens relative to other responses (1 = equal). */
  actLossWeight: number;
  /**
   * With the stated-values pre-tokenizer: a further factor on the Act response tokens that spell a stated
   * value (a reason, a product name, an option value: one token of a call among dozens); absent = 1.
   */
  valueLossWeight?: number;
  /**
   * Extra train-split tasks (another seed stream) of which only the Act rows are used: more of the few
   * decisive tokens an Act turn carries (which user, which order, which item) per step; 0 = none.
   */
  actOnlyTasks: number;
  /**
   * Extra train-split tasks (a third seed stream) of which only the Rehearse rows are used, each grounded
   * the way rollouts ground it: on the task's whole reference trajectory, the very call included when it is
   * a reference call (src/rollout/rollout.ts referenceGrounding). The expert rows never show the call being
   * simulated, so without these the rehearser never learns to reproduce a grounding example; 0 = none.
   */
  rehearseOnlyTasks: number;
  /** Loss weight of Rehearse response tokens relative to other responses (1 = equal). */
  rehearseLossWeight: number;
  /**
   * Character budget of a Rehearse prompt's grounding examples in the training rows (absent: the prompt's
   * default, src/rollout/rehearse-prompt.ts). Rollouts and evaluations must use the same budget.
   */
  groundingChars?: number;
  /**
   * false: the training tasks' Rehearse rows (prompts that never show the call being simulated) are left
   * out, so every Rehearse row is one grounded as in rollouts (rehearseOnlyTasks); absent or true: kept.
   */
  expertRehearse?: boolean;
  /**
   * Share of the grounded Rehearse rows (rehearseOnlyTasks) whose record values are swapped for random ones
   * (augment.ts swapRecordValues), so that only copying the grounding example predicts them; absent: 0.
   */
  rehearseSwapShare?: number;
  /**
   * How many times each grounded Rehearse row (rehearseOnlyTasks) of a write call appears (absent: once).
   * A write's result differs from the read of the same record only where the write acts (a status, an
   * address), so a rehearser that copies the read example gets everything else right: these rows are the
   * ones that teach which example to follow (issue 46's fidelity probe: the class that did not move).
   */
  rehearseWriteRepeat?: number;
  /**
   * Record-copy drills added to the data (augment.ts recordCopies), from the long observations (400+
   * characters) of the grounded Rehearse rows; absent: none.
   */
  recordCopies?: number;
  /**
   * User-role rows (research/pretrain/user-rows.ts): every scripted-user turn of the conversation expert's
   * conversations on this many more train tasks, with the user-role prompt; absent or 0: none (issue 47).
   */
  userTasks?: number;
  /**
   * Conversation rows for the agent (issue 47): the Act and Rehearse rows of the conversation expert's
   * conversations with the scripted user (src/env/retail/expert-conversation.ts) on this many more train
   * tasks (a sixth seed stream), rendered as a conversation rollout renders them (src/rollout/conversation.ts:
   * the greeting, then user and agent turns), so the policy learns to ask for identity and for a yes before a
   * write; absent or 0: none.
   */
  conversationTasks?: number;
  /**
   * Times each conversation Act row of the write chain (the proposal a yes answered, the write call) appears
   * (user-rows.ts writeChainRepeat); absent: 1.
   */
  conversationWriteRepeat?: number;
  /**
   * Share of the conversation expert's write requests whose first proposal is wrong, corrected by the user, then
   * proposed right (user-rows.ts wrongProposalRate; the wrong proposal is never a target); absent: 0.
   */
  conversationWrongProposals?: number;
  /**
   * Share of the --conversation-tasks tasks whose agent rows are identity-swapped, every row of a task with the
   * same fresh user id, names, zip, email digits and stated order numbers (user-rows.ts agentSwap); a seeded
   * draw per task; absent or 0: none.
   */
  conversationSwapShare?: number;
  /** Loss weight of user-role response tokens (the --user-tasks rows) relative to other responses; absent = 1. */
  userLossWeight?: number;
  /**
   * Share of the user-role rows (--user-tasks) whose user identity (names, email, zip, the wrong zip given
   * first) is swapped for fresh random values, consistently in the scenario, the conversation and the target
   * (user-rows.ts userSwap, augment.ts identitySwapper), so that only copying the scenario predicts the
   * identity turns; a seeded draw per row; absent or 0: none.
   */
  userSwapShare?: number;
  /**
   * Times each user-role row that states the user's identity appears (each copy with its own swap draw:
   * user-rows.ts identityRepeat), so a stage meets more identity turns to copy; absent: 1.
   */
  userIdentityRepeat?: number;
  /**
   * Twins of Act rows (the training and act-only tasks') whose call spells a value the user stated, with that
   * value swapped for another of the stated-values lexicon (augment.ts statedValueSwaps); absent: none.
   */
  valueSwaps?: number;
  /** The same twins cut to the request and the call (short drills, augment.ts statedValueSwaps short); absent: none. */
  valueSwapDrills?: number;
  /**
   * Extra train-split tasks (a fourth seed stream) of which only the Act rows around an item-changing call
   * are used (the call and the reply after its result, change-drills.ts changeRows); absent: none.
   */
  changeTasks?: number;
  /** Item-changing calls (of all the data's tasks) cut to the request and the call (changeCallDrills); absent: none. */
  changeCallDrills?: number;
  /** Twins of reply rows stating an amount of the last observation, the amount random (amountSwaps); absent: none. */
  amountSwaps?: number;
  /** The same twins cut to the request, the last call, its result and the reply; absent: none. */
  amountSwapDrills?: number;
  /**
   * The expert as a careless demonstrator (ExpertOptions.carelessRate): the share of its replies that leave
   * out what the user was owed (of the kinds carelessAbout names); absent: 0.
   */
  carelessRate?: number;
  /** What the careless demonstrator leaves out (ExpertOptions.carelessAbout); absent: figures. */
  carelessAbout?: readonly CarelessHabit[];
}

/** Rows per step at most (each is its own KV slot). */
const MAX_ROWS = 32;

/** The bundled default policy (sized from measured throughput: see models/default/README.md). */
export const FULL_SPEC: PretrainSpec = {
  model: { hiddenSize: 128, intermediateSize: 384, numLayers: 4, numHeads: 4, numKvHeads: 2, headDim: 32, rmsNormEps: 1e-6, ropeTheta: 10000, tieWordEmbeddings: true, maxPositionEmbeddings: 1024 },
  vocabSize: 4096,
  preTokenizer: 'long-numbers',
  trainTasks: 600,
  tokenizerTasks: 120,
  mistakeRate: 0.15,
  reviewTasks: 300,
  swapShare: 0.5,
  copyDrills: 3000,
  spanSteps: 0,
  spanSource: 'shuffled-data',
  drillSteps: 0,
  maxLen: 1024,
  batchTokens: 2048,
  steps: 1500,
  lr: 5e-3,
  warmupSteps: 50,
  promptLossWeight: 0.25,
  actLossWeight: 1,
  actOnlyTasks: 0,
  rehearseOnlyTasks: 0,
  rehearseLossWeight: 1,
};

/**
 * The bundled policy of the compact world ('mini', src/env/retail/worlds.ts): the same shape, more tasks
 * (every intent family over 16 users recurs many times) and no identity swap (in a compact world, recalling
 * its own users, orders and products is the skill, not a shortcut; copy drills keep the copy signal).
 */
export const MINI_SPEC: PretrainSpec = {
  ...FULL_SPEC,
  // Two product records and an order in one history pass 1024 tokens (exchanges, item modifications).
  model: { ...FULL_SPEC.model, maxPositionEmbeddings: 2048 },
  maxLen: 2048,
  trainTasks: 1200,
  swapShare: 0,
  steps: 2000,
};

/** A seconds-long configuration for tests and smoke runs. */
export const QUICK_SPEC: PretrainSpec = {
  model: { hiddenSize: 32, intermediateSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 8, rmsNormEps: 1e-6, ropeTheta: 10000, tieWordEmbeddings: true, maxPositionEmbeddings: 1024 },
  vocabSize: 1200,
  preTokenizer: 'long-numbers',
  trainTasks: 4,
  tokenizerTasks: 4,
  mistakeRate: 0.15,
  reviewTasks: 2,
  swapShare: 0.5,
  copyDrills: 8,
  spanSteps: 0,
  spanSource: 'shuffled-data',
  drillSteps: 0,
  maxLen: 1024,
  batchTokens: 1024,
  steps: 4,
  lr: 1e-2,
  warmupSteps: 2,
  promptLossWeight: 0,
  actLossWeight: 1,
  actOnlyTasks: 0,
  rehearseOnlyTasks: 0,
  rehearseLossWeight: 1,
};

export interface PretrainResult {
  out: string;
  seed: number;
  backend: string;
  params: number;
  config: Qwen3Config;
  spec: PretrainSpec;
  data: {
    rows: { act: number; rehearse: number; review?: number; memoryAct?: number; copy?: number; user?: number; conversationAct?: number; conversationRehearse?: number };
    dropped: number;
    tokens: { total: number; response: number };
    length: { act: ReturnType<typeof lengthStats>; rehearse: ReturnType<typeof lengthStats>; response: ReturnType<typeof lengthStats> };
    actPrefixTokens: number;
  };
  tokenizerSeconds: number;
  trainSeconds: number;
  tokensPerSecond: number;
  losses: { step: number; loss: number }[];
  finalLoss: number;
  /** Where it trained (records before it existed lack it; their card keeps the machine it named). */
  machine?: string;
}

/** The stated values a `stated-values` tokenizer isolates: the domain's own list. */
export function statedLexicon(domain: Domain): string[] {
  const values = domain.statedValues?.();
  if (!values?.length) throw new Error(`the ${domain.name} domain lists no stated values for the stated-values pre-tokenizer`);
  return [...values];
}

/** The machine a run trains on, as the card names it. */
export function machineDescription(): string {
  return `${cpus().length} CPU cores (${cpus()[0]?.model ?? 'unknown CPU'}), Node ${process.version}`;
}

export async function pretrain(
  b: Backend,
  domain: Domain,
  spec: PretrainSpec,
  o: {
    seed: number;
    out: string;
    log: (s: string) => void;
    onStep?: (s: StepReport) => void;
    init?: string;
    /** Every this many steps (before the last) the weights are also written as a model folder of their own,
     *  OUT/snapshots/step-N: a run's intermediate policies, for choosing a stopping point by measurement. */
    snapshotEvery?: number;
  },
): Promise<PretrainResult> {
  const { seed, log } = o;
  const tools = domain.definitions() as unknown as ToolDefinition[];
  // How the expert behaves is the same in every stream of expert rows below; only the tasks differ.
  const demonstrator = { mistakeRate: spec.mistakeRate, carelessRate: spec.carelessRate, carelessAbout: spec.carelessAbout };
  const { rows, tasks } = expertRows(domain, { split: 'train', tasks: spec.trainTasks, seed, ...demonstrator });
  const rp = spec.groundingChars !== undefined ? { maxGroundingChars: spec.groundingChars } : {};
  const examples = rows.map((r) => rowToExample(r, domain.policy, tools, rp));
  log(`data: ${spec.trainTasks} train tasks -> ${examples.length} rows`);

  let t0 = performance.now();
  const order = taskOrder(rows);
  // The tokenizer learns from the default prompts, so a stage that changes the grounding budget keeps its
  // --init model's tokenizer.
  const forTokenizer = (taskId: string) => order.get(taskId)! < spec.tokenizerTasks;
  const tokExamples = spec.groundingChars !== undefined ? rows.filter((r) => forTokenizer(r.taskId)).map((r) => rowToExample(r, domain.policy, tools)) : examples.filter((e) => forTokenizer(e.taskId));
  const tokTexts = tokExamples.flatMap((e) => [e.prompt, e.response]);
  const lexicon = spec.preTokenizer === 'stated-values' ? statedLexicon(domain) : [];
  let bpe: Bpe;
  if (spec.retokenize) {
    if (!o.init) throw new Error('retokenize keeps the --init folder\'s vocabulary: it needs --init');
    const theirs = fromTokenizerJson(JSON.parse(new TextDecoder().decode(await new DirSource(o.init).read('tokenizer.json'))));
    if (theirs.size !== spec.vocabSize) throw new Error(`--init ${o.init}: its tokenizer has ${theirs.size} tokens, the spec ${spec.vocabSize}`);
    bpe = new Bpe(theirs.tokens, theirs.merges, theirs.specials, { preTokenizer: spec.preTokenizer, lexicon });
  } else bpe = trainBpe(tokTexts, { vocabSize: spec.vocabSize, specials: SPECIAL_STRINGS, maxTokenBytes: 100_000, preTokenizer: spec.preTokenizer, lexicon });
  const tokenizerSeconds = (performance.now() - t0) / 1000;
  log(`tokenizer: ${bpe.size} tokens, ${bpe.merges.length} merges ${spec.retokenize ? `kept from ${o.init && recordPath(o.init)}, cut by the ${spec.preTokenizer} pre-tokenizer` : `in ${tokenizerSeconds.toFixed(1)} s`}${lexicon.length ? ` (lexicon of ${lexicon.length} stated values)` : ''}`);

  // Swapped identities replace the rows of a seeded share of the tasks; review and memory-conditioned rows
  // and the drills come after the expert rows. With all of them off the data is the expert rows alone.
  if (spec.swapShare > 0) log(`identity swap: ${swapTaskShare(tasks, examples, spec.swapShare, new Rng(seed * 31337 + 1))} of ${tasks.length} tasks`);
  const rv = spec.reviewTasks > 0 ? reviewRows(domain, tasks, { tasks: spec.reviewTasks, seed, memoryTokens: DEFAULT_MEMORY_TOKENS, countTokens: (t) => bpe.encode(t).length }) : { reviews: [], memoryActs: [] };
  // Filler for the drills: user requests of the data (distance to copy over, in the domain's words).
  const drills = copyDrills(spec.copyDrills, new Rng(seed * 7 + 3), tasks.slice(0, 200).flatMap((t) => t.userMessages), { probeKinds: spec.drillAllKinds });
  const extraActs = spec.actOnlyTasks > 0
    ? expertRows(domain, { split: 'train', tasks: spec.actOnlyTasks, seed: seed + 1_000_003, ...demonstrator }).rows.filter((r) => r.role === 'act').map((r) => rowToExample(r, domain.policy, tools, rp))
    : [];
  if (extraActs.length) log(`act-only rows: ${extraActs.length} from ${spec.actOnlyTasks} more tasks`);
  if ((spec.valueSwaps ?? 0) + (spec.valueSwapDrills ?? 0) > 0 && spec.preTokenizer !== 'stated-values') throw new Error('stated-value swaps need the stated-values pre-tokenizer');
  const swapSource = (spec.valueSwaps ?? 0) + (spec.valueSwapDrills ?? 0) > 0 ? valueSwapSource([...examples, ...extraActs], lexicon) : null;
  const valueSwaps = swapSource
    ? [
        ...statedValueSwaps(swapSource, spec.valueSwaps ?? 0, new Rng(seed * 4441 + 7)),
        ...statedValueSwaps(swapSource, spec.valueSwapDrills ?? 0, new Rng(seed * 4441 + 8), { short: true }),
      ]
    : [];
  if (valueSwaps.length) log(`stated-value swaps: ${spec.valueSwaps ?? 0} Act rows, ${spec.valueSwapDrills ?? 0} short drills`);
  const changeExtra = (spec.changeTasks ?? 0) > 0
    ? changeRows(expertRows(domain, { split: 'train', tasks: spec.changeTasks!, seed: seed + 3_000_003, ...demonstrator }).rows.filter((r) => r.role === 'act').map((r) => rowToExample(r, domain.policy, tools, rp)))
    : { calls: [], replies: [] };
  const changeActs = [...changeExtra.calls, ...changeExtra.replies];
  if (changeActs.length) log(`item-change rows: ${changeExtra.calls.length} calls, ${changeExtra.replies.length} replies from ${spec.changeTasks} more tasks`);
  const actRows = [...examples, ...extraActs, ...changeActs];
  const amountSource = (spec.amountSwaps ?? 0) + (spec.amountSwapDrills ?? 0) > 0 ? amountSwapSource(actRows) : [];
  const changeDrills = [
    ...((spec.changeCallDrills ?? 0) > 0 ? changeCallDrills(changeRows(actRows).calls, spec.changeCallDrills!, new Rng(seed * 5501 + 1)) : []),
    ...amountSwaps(amountSource, spec.amountSwaps ?? 0, new Rng(seed * 5501 + 2)),
    ...amountSwaps(amountSource, spec.amountSwapDrills ?? 0, new Rng(seed * 5501 + 3), { short: true }),
  ];
  if (changeDrills.length) log(`item-change drills: ${spec.changeCallDrills ?? 0} calls; amount swaps: ${spec.amountSwaps ?? 0} rows, ${spec.amountSwapDrills ?? 0} short`);
  const writes = new Set(domain.tools.filter((t) => t.kind === 'write').map((t) => t.name));
  const repeatWrites = spec.rehearseWriteRepeat ?? 1;
  const groundedRows = spec.rehearseOnlyTasks > 0 ? rolloutGroundedRehearseRows(domain, { split: 'train', tasks: spec.rehearseOnlyTasks, seed: seed + 2_000_003, ...demonstrator }) : [];
  const extraRehearse = groundedRows.flatMap((r) => Array<Example>(r.role === 'rehearse' && writes.has(r.call.name) ? repeatWrites : 1).fill(rowToExample(r, domain.policy, tools, rp)));
  if (extraRehearse.length) log(`rehearse-only rows (grounded as in rollouts): ${extraRehearse.length} from ${spec.rehearseOnlyTasks} more tasks${repeatWrites !== 1 ? ` (each write call's row ${repeatWrites} times)` : ''}`);
  if ((spec.rehearseSwapShare ?? 0) > 0) {
    const rng = new Rng(seed * 7717 + 5);
    let n = 0;
    for (let i = 0; i < extraRehearse.length; i++) {
      if (rng.next() >= spec.rehearseSwapShare!) continue;
      extraRehearse[i] = swapRecordValues(extraRehearse[i], rng);
      n++;
    }
    log(`record values swapped in ${n} of them`);
  }
  const userData = (spec.userTasks ?? 0) > 0 ? conversationRows(domain, { split: 'train', tasks: spec.userTasks!, seed: seed + 4_000_003, ...((spec.userSwapShare ?? 0) > 0 ? { userSwap: { share: spec.userSwapShare!, seed: seed * 6151 + 9 } } : {}), ...((spec.userIdentityRepeat ?? 1) > 1 ? { identityRepeat: spec.userIdentityRepeat } : {}) }) : null;
  const userRows = userData ? userData.user.map(userRowToExample) : [];
  if (userRows.length) log(`user-role rows: ${userRows.length} scripted-user turns of ${spec.userTasks} more tasks' conversations${userData!.swapped ? `; identity swapped in ${userData!.swapped} of them` : ''}`);
  // The expert's mistakes in a conversation are the recoverable ones that never break the confirmation rule.
  const convData = (spec.conversationTasks ?? 0) > 0 ? conversationAgentExamples(domain, { tasks: spec.conversationTasks!, seed: seed + 5_000_003, mistakeRate: spec.mistakeRate, writeChainRepeat: spec.conversationWriteRepeat, wrongProposalRate: spec.conversationWrongProposals, ...((spec.conversationSwapShare ?? 0) > 0 ? { agentSwap: { share: spec.conversationSwapShare!, seed: seed * 7919 + 13 } } : {}) }, tools, rp) : { examples: [], agentSwapped: 0 };
  const convRows = convData.examples;
  if (convRows.length) log(`conversation rows: ${convRows.filter((e) => e.role === 'act').length} Act, ${convRows.filter((e) => e.role === 'rehearse').length} Rehearse of ${spec.conversationTasks} more tasks' conversations${(spec.conversationWriteRepeat ?? 1) > 1 ? ` (each write-chain Act row ${spec.conversationWriteRepeat} times)` : ''}${(spec.conversationWrongProposals ?? 0) > 0 ? ` (a wrong first proposal, corrected, for ${spec.conversationWrongProposals} of the write requests)` : ''}${convData.agentSwapped ? `; identity swapped in ${convData.agentSwapped} of the tasks` : ''}`);
  const records = new Map<string, Set<string>>();
  if ((spec.recordCopies ?? 0) > 0) {
    for (const e of extraRehearse) {
      const body = /^<execution_result>\n(\{"result":\{[\s\S]*\})\n<\/execution_result>/.exec(e.response)?.[1];
      if (!body || body.length < 400) continue;
      const kind = /^\{"result":\{"(\w+)"/.exec(body)![1];
      records.set(kind, (records.get(kind) ?? new Set()).add(body));
    }
  }
  const recordDrills = recordCopies(spec.recordCopies ?? 0, new Rng(seed * 3571 + 9), [...records.values()].map((g) => [...g]));
  if (recordDrills.length) log(`record-copy drills: ${recordDrills.length} from ${[...records].map(([k, g]) => `${g.size} ${k}`).join(', ')} records`);
  // Without the expert's own Rehearse rows, every Rehearse row is grounded as in rollouts (the extra ones).
  const expert = spec.expertRehearse === false ? examples.filter((e) => e.role !== 'rehearse') : examples;
  const sources = [...expert.map(() => 'expert'), ...extraActs.map(() => 'expert'), ...changeActs.map(() => 'expert'), ...changeDrills.map((e) => (e.role === 'copy' ? 'copy' : 'expert')), ...valueSwaps.map((e) => (e.role === 'copy' ? 'copy' : 'expert')), ...extraRehearse.map(() => 'expert'), ...rv.reviews.map(() => 'review'), ...rv.memoryActs.map(() => 'memoryAct'), ...drills.map(() => 'copy'), ...recordDrills.map(() => 'copy'), ...userRows.map(() => 'user'), ...convRows.map(() => 'conversation')];
  const markValues = (spec.valueLossWeight ?? 1) !== 1;
  if (markValues && spec.preTokenizer !== 'stated-values') throw new Error('a stated-value loss weight needs the stated-values pre-tokenizer');
  const all = [...expert, ...extraActs, ...changeActs, ...changeDrills, ...valueSwaps, ...extraRehearse, ...rv.reviews, ...rv.memoryActs, ...drills, ...recordDrills, ...userRows, ...convRows].map((e) => encodeExample(bpe, e, { markValues: markValues && e.role === 'act' }));
  if (markValues) log(`stated-value tokens weighted ${spec.valueLossWeight}x: ${all.reduce((a, e) => a + (e.valueMask?.reduce((x, v) => x + v, 0) ?? 0), 0)} in ${all.filter((e) => e.valueMask).length} Act responses`);
  const keep = all.map((e) => e.ids.length <= spec.maxLen);
  const kept: Encoded[] = all.filter((_, i) => keep[i]);
  const count = (f: (e: Encoded, src: string) => boolean) => all.filter((e, i) => keep[i] && f(e, sources[i])).length;
  const lens = (r: string) => kept.filter((e) => e.role === r).map((e) => e.ids.length);
  const data: PretrainResult['data'] = {
    rows: {
      act: count((e, src) => e.role === 'act' && src === 'expert'),
      rehearse: count((e, src) => e.role === 'rehearse' && src !== 'conversation'),
      review: count((e) => e.role === 'review'),
      memoryAct: count((_, src) => src === 'memoryAct'),
      copy: count((e) => e.role === 'copy'),
      ...(userRows.length ? { user: count((e) => e.role === 'user') } : {}),
      ...(convRows.length ? { conversationAct: count((e, src) => src === 'conversation' && e.role === 'act'), conversationRehearse: count((e, src) => src === 'conversation' && e.role === 'rehearse') } : {}),
    },
    dropped: all.length - kept.length,
    tokens: { total: kept.reduce((a, e) => a + e.ids.length, 0), response: kept.reduce((a, e) => a + e.ids.length - e.promptLen, 0) },
    length: { act: lengthStats(lens('act')), rehearse: lengthStats(lens('rehearse')), response: lengthStats(kept.map((e) => e.ids.length - e.promptLen)) },
    actPrefixTokens: bpe.encode(examples.find((e) => e.role === 'act')?.prompt.split('<|im_end|>')[0] ?? '').length,
  };
  log(`encoded: ${JSON.stringify(data)}`);

  const config: Qwen3Config = { ...spec.model, vocabSize: bpe.size };
  const eot = bpe.tokenId('<|endoftext|>');
  const hyper = { ...DEFAULT_HYPER, promptLossWeight: spec.promptLossWeight, schedule: { kind: 'warmup-cosine' as const, lr: spec.lr, warmupSteps: spec.warmupSteps, totalSteps: spec.steps, minLr: spec.lr / 10 } };
  let model: Qwen3Model;
  if (o.init) {
    // Second stage: same seed -> same data and the same tokenizer, which must equal the folder's.
    const src = new DirSource(o.init);
    const theirs = new TextDecoder().decode(await src.read('tokenizer.json'));
    if (!spec.retokenize && theirs !== JSON.stringify(toTokenizerJson(bpe)) + '\n') throw new Error(`--init ${o.init}: its tokenizer.json differs from the one this seed trains`);
    // The context length is a config field only (RoPE has no learned positions): a stage may extend it.
    const cfgText = JSON.parse(new TextDecoder().decode(await src.read('config.json'))) as Record<string, unknown>;
    const from = cfgText.max_position_embeddings;
    cfgText.max_position_embeddings = config.maxPositionEmbeddings;
    const patched: ModelSource = { label: src.label, has: (n) => src.has(n), read: async (n) => (n === 'config.json' ? new TextEncoder().encode(JSON.stringify(cfgText)) : src.read(n)) };
    let grownFrom = config;
    if (config.numLayers !== cfgText.num_hidden_layers || config.hiddenSize !== cfgText.hidden_size) {
      // A stage may add layers on top or widen the model (research/pretrain/grow.ts): same function at the start, more capacity.
      const read = await readHostWeights(patched);
      grownFrom = read.config;
      ({ model } = await buildQwen3(b, config, grownWeights(read.config, read.host, config, seed), { format: 'f32' }));
    } else ({ model } = await loadQwen3(patched, b, { format: 'f32' }));
    const same = (Object.keys(config) as (keyof Qwen3Config)[]).every((k) => model.config[k] === config[k]);
    if (!same) throw new Error(`--init ${o.init}: config differs from the spec`);
    log(`continuing from ${o.init && recordPath(o.init)}${from !== config.maxPositionEmbeddings ? ` (context ${String(from)} -> ${config.maxPositionEmbeddings})` : ''}${grownFrom.numLayers !== config.numLayers ? ` (grown from ${grownFrom.numLayers} to ${config.numLayers} layers)` : ''}${grownFrom.hiddenSize !== config.hiddenSize ? ` (widened from hidden ${grownFrom.hiddenSize} to ${config.hiddenSize})` : ''}`);
  } else ({ model } = await buildQwen3(b, config, initWeights(config, seed), { format: 'f32' }));
  const tr = pretrainer(model, hyper);
  log(`model: ${paramCount(config)} parameters, ${JSON.stringify(config)}`);
  const imEnd = bpe.tokenId('<|im_end|>');
  // A Hugging Face folder of the weights as they stand: the run's result, or a snapshot on the way.
  const writeModelFolder = async (dir: string) => {
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'model.safetensors'), toSafetensors(config, await hostWeights(tr.params)));
    await writeFile(join(dir, 'config.json'), JSON.stringify({ ...toHfConfig(config), bos_token_id: null, eos_token_id: imEnd, pad_token_id: eot }, null, 2) + '\n');
    await writeFile(join(dir, 'generation_config.json'), JSON.stringify({ eos_token_id: [imEnd, eot], pad_token_id: eot, do_sample: true, temperature: 1.0, top_p: 1.0 }, null, 2) + '\n');
    await writeFile(join(dir, 'tokenizer.json'), JSON.stringify(toTokenizerJson(bpe)) + '\n');
    await writeFile(join(dir, 'tokenizer_config.json'), JSON.stringify(toTokenizerConfig(bpe, await qwen3ChatTemplate(), config.maxPositionEmbeddings), null, 2) + '\n');
  };

  t0 = performance.now();
  const losses: { step: number; loss: number }[] = [];
  // A second stage shuffles differently from the first.
  let epoch = o.init ? 1000 : 0;
  let queue: number[][] = [];
  let tokens = 0;
  let ema = NaN;
  const spanRng = new Rng(seed * 7919 + 11);
  const drillRows = kept.filter((e) => e.role === 'copy');
  let drillQueue: number[][] = [];
  let drillEpoch = 0;
  if ((spec.drillSteps > 0 || spec.spanSource === 'drills') && drillRows.length === 0) throw new Error('drill steps or drill spans need copy drills (--copy-drills > 0)');
  while (tr.step < spec.steps) {
    let seqs: Encoded[];
    let promptLoss = spec.promptLossWeight;
    if (tr.step < spec.spanSteps) {
      seqs = spec.spanSource === 'drills' ? spanCopies(drillRows, spec.batchTokens, MAX_ROWS, eot, spanRng, false) : spanCopies(kept, spec.batchTokens, MAX_ROWS, eot, spanRng, true);
      promptLoss = 0;
    } else if (tr.step < spec.spanSteps + spec.drillSteps) {
      if (drillQueue.length === 0) drillQueue = packBatches(drillRows.map((e) => e.ids.length), spec.batchTokens, seed * 613 + drillEpoch++, MAX_ROWS);
      seqs = drillQueue.shift()!.map((i) => drillRows[i]);
      promptLoss = 0;
    } else {
      if (queue.length === 0) queue = packBatches(kept.map((e) => e.ids.length), spec.batchTokens, seed * 1009 + epoch++, MAX_ROWS);
      seqs = queue.shift()!.map((i) => kept[i]);
    }
    const st = await tr.trainStep([pretrainBatch(seqs, promptLoss, { act: spec.actLossWeight, rehearse: spec.rehearseLossWeight, user: spec.userLossWeight ?? 1 }, spec.valueLossWeight ?? 1)]);
    if (!st.applied) throw new Error(`step ${st.step + 1} refused: ${st.refused}`);
    tokens += seqs.reduce((a, e) => a + e.ids.length, 0);
    losses.push({ step: st.step, loss: st.loss });
    ema = Number.isNaN(ema) ? st.loss : 0.9 * ema + 0.1 * st.loss;
    o.onStep?.(st);
    if (o.snapshotEvery && st.step % o.snapshotEvery === 0 && st.step < spec.steps) {
      const dir = join(o.out, 'snapshots', `step-${st.step}`);
      await writeModelFolder(dir);
      log(`snapshot: ${recordPath(dir)}`);
    }
    const el = (performance.now() - t0) / 1000;
    if (st.step % 5 === 0 || st.step === spec.steps)
      log(`step ${st.step}/${spec.steps} epoch ${epoch} loss ${st.loss.toFixed(4)} (ema ${ema.toFixed(4)}) lr ${st.lr.toExponential(2)} |g| ${st.gradNorm.toFixed(2)} ${(tokens / el).toFixed(0)} tok/s, ${el.toFixed(0)} s, eta ${((el / st.step) * (spec.steps - st.step)).toFixed(0)} s`);
  }
  const trainSeconds = (performance.now() - t0) / 1000;

  await writeModelFolder(o.out);
  const tail = losses.slice(-20);
  return {
    out: o.out,
    seed,
    backend: b.name,
    params: paramCount(config),
    config,
    spec,
    data,
    tokenizerSeconds,
    trainSeconds,
    tokensPerSecond: tokens / trainSeconds,
    losses,
    finalLoss: tail.reduce((a, x) => a + x.loss, 0) / Math.max(1, tail.length),
    machine: machineDescription(),
  };
}

/** Index of each task in generation order (rows come task by task). */
function taskOrder(rows: readonly { taskId: string }[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const r of rows) if (!m.has(r.taskId)) m.set(r.taskId, m.size);
  return m;
}
