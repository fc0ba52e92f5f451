// npm run pretrain -- [--seed S] [--steps N] [--out DIR] [--write-committed] [--backend cpu-fast|cpu-ref|webgpu] [--threads T]
//                     [--quick] [--eval N] [--init DIR] [--lr LR] [--review-tasks N] [--swap-share X] [--copy-drills N]
//        npm run pretrain -- --time-grpo [--out DIR] [--backend ...]   (times one GRPO step of a trained folder,
//                                                                     writes grpo-timing-<backend>.json)
//        npm run pretrain -- --probe-copy [--out DIR]   (does the folder's policy copy values? copy-probe.json)
//        npm run pretrain -- --probe-rehearsal [--out DIR]   (where do its rehearsals break? rehearsal-probe.json)
//        npm run pretrain -- --card [--out DIR] [--commit C] [--date D] [--notebook DIR]  (writes README.md and its full record under research/notebook/ from the folder's records)
// Trains the bundled default policy from scratch on the retail expert's Act and Rehearse rows and writes a
// Hugging Face folder (config.json, model.safetensors, tokenizer.json, tokenizer_config.json,
// generation_config.json, pretrain.json), by default under runs/ (git-ignored); a folder the repository commits
// (the bundled models/default, models/retail) is written only with --write-committed. With --eval N > 0 it then reloads the folder from disk and
// evaluates N held-out test-split tasks in the real environment (eval.json). Progress on stderr, the
// result JSON on stdout; exit 0 ok, 1 failure, 2 usage error, 74 I/O error naming the file (--help lists flags).
import { mkdir, readdir, readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { CARELESS_HABITS, DEFAULT_CARELESS_ABOUT, HELD_OUT_TASK_SEED, type CarelessHabit } from '../../src/env/domain';
import { isWorldName, WORLD_NAMES, WORLDS, worldBase, worldSummary } from '../../src/env/retail/index';
import { loadRetailBase, loadWorldDomain } from '../../src/env/retail/node';
import { PRE_TOKENIZER_NAMES } from '../../src/model/bpe';
import { DirSource } from '../../src/model/source-node';
import { Tokenizer } from '../../src/model/tokenizer';
import { loadQwen3, readHostWeights } from '../../src/model/weights';
import { CONFIG_FILE, parseQwen3ConfigText } from '../../src/model/config';
import { conversationCard, type ConversationCardInputs } from './card-conversation';
import { modelCard, modelRecord, recordName, type CardInputs } from './card';
import type { HeldOutRecord } from './card-world';
import { evaluatePolicy, type EvalReport } from './evaluate';
import { copyProbe, type CopyProbe } from './copy-probe';
import { probeRehearsals } from './rehearsal-probe';
import { tokenBudgets } from '../../src/rollout/budget';
import { attentionProbe, PlainQwen3, type AttentionRecord } from './attention-probe';
import { timeGrpoStep, type GrpoTiming } from './grpo-timing';
import { FULL_SPEC, machineDescription, MINI_SPEC, pretrain, QUICK_SPEC, type PretrainSpec } from './pipeline';
import { widenShape } from './grow';
import { ensureDir, IoError, writeFileAtomic } from '../../src/util/atomic-file';
import { recordCommand, recordPath } from '../../src/util/record-path';
import {
  ArgError, BACKEND_FLAG, BACKEND_NAMES, enumFlag, HELP_FLAG, helpText, intFlag, checkOutput, committedFiles, isEntry, REPO_ROOT, numFlag, openBackend, parseFlags, processIo, progress, runCli, runsPath, strFlag, THREADS_FLAG, threadsFlag, WORLD_FLAG, WRITE_COMMITTED_FLAG, type CliIo, type FlagSpec,
} from '../../src/cli/args';

/** A comma-separated list of the careless demonstrator's habits, each named once. */
function habitsFlag(v: Parameters<typeof numFlag>[0], name: string): CarelessHabit[] {
  const parts = String(v[name]).split(',').map((x) => x.trim());
  const bad = parts.find((x) => !(CARELESS_HABITS as readonly string[]).includes(x));
  if (bad !== undefined || new Set(parts).size !== parts.length) {
    throw new ArgError(`--${name} wants a comma-separated list of ${CARELESS_HABITS.join(', ')}, each once, got ${JSON.stringify(v[name])}`);
  }
  return parts as CarelessHabit[];
}

/** A rate flag in [0, 1]. */
function unitFlag(v: Parameters<typeof numFlag>[0], name: string): number {
  const x = numFlag(v, name, 0, 0, true);
  if (x > 1) throw new ArgError(`--${name} must be a number in [0, 1], got ${x}`);
  return x;
}

export const PRETRAIN_USAGE = `usage: npm run pretrain -- [--world mini|retail] [--seed S] [--steps N] [--out DIR] [--write-committed] [--backend B] [--quick] [--eval N] [...]
       npm run pretrain -- --time-grpo [--out DIR] [--backend B]   (times one GRPO step: grpo-timing-<backend>.json)
       npm run pretrain -- --probe-copy [--out DIR]                (does the policy copy values? copy-probe.json)
       npm run pretrain -- --probe-rehearsal [--out DIR] [--grounding-chars N]  (where rehearsals leave the real observation: rehearsal-probe.json)
       npm run pretrain -- --probe-attention [--out DIR] [--before 'LABEL=DIR;...']  (attention on the copy source: attention-probe.json)
       npm run pretrain -- --card [--out DIR] [--commit C] [--date D] (writes README.md and its full record, research/notebook/D-WORLD-policy.md, from the folder's records)
       (without --out: runs/pretrain-<world>/, git-ignored; models/… only with --write-committed)`;

export const PRETRAIN_FLAGS: FlagSpec = {
  world: WORLD_FLAG,
  seed: { type: 'string', arg: 'S', help: 'seed of data, initialisation and evaluation, 0..2^32-1', default: '0' },
  steps: { type: 'string', arg: 'N', help: 'optimizer steps, 1..1000000', default: `${MINI_SPEC.steps} (mini), ${FULL_SPEC.steps} (retail), ${QUICK_SPEC.steps} (--quick)` },
  out: { type: 'string', arg: 'DIR', help: 'model folder to write (or to read and add records to, with --time-grpo, --probe-*, --card); a folder the repository commits (models/default, models/retail) needs --write-committed', default: 'runs/pretrain-<world>; runs/pretrain-quick with --quick (git-ignored)' },
  'write-committed': WRITE_COMMITTED_FLAG,
  backend: BACKEND_FLAG,
  threads: THREADS_FLAG,
  quick: { type: 'boolean', help: 'a seconds-long tiny configuration for smoke runs' },
  eval: { type: 'string', arg: 'N', help: 'held-out test tasks to evaluate after training (eval.json); 0 = skip, at most 10000', default: '40; 0 with --quick' },
  init: { type: 'string', arg: 'DIR', help: 'start from this model folder\'s weights and tokenizer (stage 2)' },
  'snapshot-every': { type: 'string', arg: 'N', help: 'also write the weights every N steps as a model folder of their own, OUT/snapshots/step-N (intermediate policies to evaluate), 1..1000000', default: 'none' },
  'value-weight': { type: 'string', arg: 'W', help: 'with --pre-tokenizer stated-values: loss weight factor on Act response tokens that spell a stated value, >= 1', default: '1' },
  retokenize: { type: 'boolean', help: 'with --init: keep its vocabulary and merges but cut text with --pre-tokenizer (a checkpoint moves to a new split on the same token ids)' },
  lr: { type: 'string', arg: 'LR', help: 'peak learning rate, in (0, 1)', default: `${MINI_SPEC.lr}` },
  'review-tasks': { type: 'string', arg: 'N', help: 'tasks replayed for review rows, >= 0', default: `${MINI_SPEC.reviewTasks}` },
  'swap-share': { type: 'string', arg: 'X', help: 'share of tasks with swapped identities, in [0, 1]', default: `${MINI_SPEC.swapShare} (mini), ${FULL_SPEC.swapShare} (retail)` },
  'pre-tokenizer': { type: 'string', arg: 'P', help: 'tokenizer pre-tokenizer: none, long-numbers (every digit of a 4+ digit number alone) values (every span a call copies alone: digits, capitalised words, email parts, id prefixes) or stated-values (long numbers, and every value the world lists as stated in words: cancellation reasons, product names, option values)', default: `${MINI_SPEC.preTokenizer}` },
  layers: { type: 'string', arg: 'N', help: 'decoder layers, 1..64; more than the --init model has grows it: its layers are kept and the new ones appended as identities (output projections zero), so training starts from the same function', default: `the --init model's, else ${MINI_SPEC.model.numLayers}` },
  'width-factor': { type: 'string', arg: 'F', help: 'hidden size, MLP width, heads and KV heads F times the base shape (head_dim kept), 1..8; wider than the --init model widens it: every unit copied F times with split inputs, so training starts from the same function (research/pretrain/grow.ts)', default: "the --init model's, else 1" },
  context: { type: 'string', arg: 'N', help: 'context length: the longest training row and the config\'s max_position_embeddings, 64..32768 (a stage may extend its --init model\'s)', default: `${MINI_SPEC.maxLen} (mini), ${FULL_SPEC.maxLen} (retail)` },
  'copy-drills': { type: 'string', arg: 'N', help: 'copy drills added to the data, >= 0', default: `${MINI_SPEC.copyDrills}` },
  'span-steps': { type: 'string', arg: 'N', help: 'span-copy induction warm-up steps before the task rows, >= 0', default: `${MINI_SPEC.spanSteps}` },
  'span-source': { type: 'string', arg: 'S', help: 'where span copies are cut: shuffled-data (any row, shuffled) or drills (the copy drills, in order)', default: `${MINI_SPEC.spanSource}` },
  'drill-steps': { type: 'string', arg: 'N', help: 'steps on the copy drills alone, after the span steps, >= 0', default: `${MINI_SPEC.drillSteps}` },
  'act-weight': { type: 'string', arg: 'W', help: 'loss weight of Act response tokens relative to other responses (1 = equal), in (0, 100]', default: `${MINI_SPEC.actLossWeight}` },
  'act-only-tasks': { type: 'string', arg: 'N', help: 'extra generated tasks contributing only their Act rows, >= 0', default: `${MINI_SPEC.actOnlyTasks}` },
  'rehearse-only-tasks': { type: 'string', arg: 'N', help: 'extra generated tasks contributing only their Rehearse rows, grounded as rollouts ground them (the call\'s own reference result included), >= 0', default: `${MINI_SPEC.rehearseOnlyTasks}` },
  'rehearse-weight': { type: 'string', arg: 'W', help: 'loss weight of Rehearse response tokens relative to other responses (1 = equal), in (0, 100]', default: `${MINI_SPEC.rehearseLossWeight}` },
  'grounding-chars': { type: 'string', arg: 'N', help: 'character budget of the grounding examples in the Rehearse rows, 0..100000 (evaluate and train with the same --grounding-chars)', default: '1600 (the Rehearse prompt\'s)' },
  'no-expert-rehearse': { type: 'boolean', help: 'leave out the training tasks\' own Rehearse rows (they never show the call being simulated): every Rehearse row is then a --rehearse-only-tasks row, grounded as in rollouts' },
  'careless-replies': { type: 'string', arg: 'X', help: 'share of the expert\'s replies that leave out what the user was owed (the kinds --careless-about names): a careless demonstrator, in [0, 1]', default: '0' },
  'careless-about': { type: 'string', arg: 'LIST', help: `what the careless demonstrator leaves out, comma-separated: ${CARELESS_HABITS.join(', ')}`, default: DEFAULT_CARELESS_ABOUT.join(',') },
  'rehearse-write-repeat': { type: 'string', arg: 'N', help: 'times each --rehearse-only-tasks row of a write call appears (1 = once), in [1, 20]', default: '1' },
  'rehearse-swap-share': { type: 'string', arg: 'X', help: 'share of the --rehearse-only-tasks rows whose record values (long numbers, prices) are swapped for random ones, in [0, 1]', default: '0' },
  'drill-all-kinds': { type: 'boolean', help: 'copy drills also list user ids and amounts (the copy probe\'s seven kinds)' },
  'value-swaps': { type: 'string', arg: 'N', help: 'with --pre-tokenizer stated-values: twins of Act rows whose call spells a value the user stated (a cancellation reason), that value swapped for another of the lexicon, >= 0', default: '0' },
  'change-tasks': { type: 'string', arg: 'N', help: 'extra train tasks of which only the Act rows around an item-changing call (the call, the reply after it) are used, >= 0', default: '0' },
  'change-call-drills': { type: 'string', arg: 'N', help: 'item-changing calls cut to the request and the call (the variant lookup without the distance), >= 0', default: '0' },
  'amount-swaps': { type: 'string', arg: 'N', help: 'twins of reply rows stating an amount of the last observation, that amount random in both, >= 0', default: '0' },
  'amount-swap-drills': { type: 'string', arg: 'N', help: 'the same twins cut to the request, the last call, its result and the reply, >= 0', default: '0' },
  'value-swap-drills': { type: 'string', arg: 'N', help: 'with --pre-tokenizer stated-values: the same swaps as short drills (the request and the call alone), >= 0', default: '0' },
  'record-copies': { type: 'string', arg: 'N', help: 'record-copy drills (repeat one of 2-3 long records of one kind, values swapped) from the grounded Rehearse rows\' observations, >= 0', default: '0' },
  'user-tasks': { type: 'string', arg: 'N', help: 'user-role rows: every scripted-user turn of the conversation expert\'s conversations on N more train tasks, with the user-role prompt (the policy learns to play the user), >= 0', default: '0' },
  'conversation-tasks': { type: 'string', arg: 'N', help: 'conversation rows for the agent: the Act and Rehearse rows of the conversation expert\'s conversations with the scripted user on N more train tasks, rendered as a conversation rollout renders them (the policy learns to ask for identity and for a yes), >= 0', default: '0' },
  'user-weight': { type: 'string', arg: 'W', help: 'loss weight of the user-role response tokens (--user-tasks rows) relative to other responses, >= 1', default: '1' },
  'conversation-write-repeat': { type: 'string', arg: 'N', help: 'times each --conversation-tasks Act row of the write chain (the proposal a yes answered, the write call) appears, in [1, 20]', default: '1' },
  'conversation-swap-share': { type: 'string', arg: 'P', help: 'share in [0, 1] of the --conversation-tasks tasks whose Act and Rehearse rows are identity-swapped: one fresh user id, names, zip, email digits and stated order numbers in every message, call and observation of the task (held-out users are ids the model never saw)' },
  'conversation-wrong-proposals': { type: 'string', arg: 'P', help: 'share in [0, 1] of the --conversation-tasks write requests whose first proposal is wrong, corrected by the user, then made right (the wrong one never a target)' },
  'user-identity-repeat': { type: 'string', arg: 'N', help: 'times each user-role row that states the user\'s identity appears (each copy with its own --user-swap-share draw), in [1, 20]', default: '1' },
  'user-swap-share': { type: 'string', arg: 'X', help: 'share of the user-role rows (--user-tasks) whose user identity (names, email, zip) is swapped for random values in the scenario, the conversation and the target alike (only copying the scenario predicts it), in [0, 1]', default: '0' },
  'prompt-loss': { type: 'string', arg: 'X', help: 'auxiliary loss weight of prompt tokens, in [0, 1]; 0 = responses only', default: `${MINI_SPEC.promptLossWeight} (${QUICK_SPEC.promptLossWeight} with --quick)` },
  'train-tasks': { type: 'string', arg: 'N', help: 'generated training tasks whose expert rows make the data, >= 1', default: `${MINI_SPEC.trainTasks} (mini), ${FULL_SPEC.trainTasks} (retail), ${QUICK_SPEC.trainTasks} (--quick)` },
  'time-grpo': { type: 'boolean', help: 'time one GRPO step of the folder\'s policy instead of training' },
  'probe-copy': { type: 'boolean', help: 'run the copy probe on the folder\'s policy instead of training' },
  'probe-rehearsal': { type: 'boolean', help: 'rehearse every reference call of 100 held-out tasks as rollouts ground them and record where each inexact rehearsal leaves the real observation (rehearsal-probe.json)' },
  'probe-attention': { type: 'boolean', help: 'measure each head\'s attention on the copy source over fresh drills, for the folder\'s policy and every --before folder (attention-probe.json)' },
  before: { type: 'string', arg: 'DIRS', help: 'with --probe-attention: folders to compare with, each as LABEL=DIR, separated by semicolons' },
  card: { type: 'boolean', help: 'write the folder\'s README.md (model card) from its records instead of training' },
  commit: { type: 'string', arg: 'C', help: 'commit named in the model card (with --card)', default: 'unknown' },
  date: { type: 'string', arg: 'YYYY-MM-DD', help: 'date of the card\'s full record in the research notebook (with --card)', default: 'today' },
  notebook: { type: 'string', arg: 'DIR', help: 'folder the card\'s full record is written to (with --card)', default: 'research/notebook for a committed model folder, else --out' },
  help: HELP_FLAG,
};

const PRETRAIN_NOTES = 'exit status: 0 ok, 1 failure, 2 usage error, 74 I/O error (the message names the file).';

/** The world a pretrain.json's command trained on (commands before worlds existed: the full world). */
function cardWorld(command: string): CardInputs['world'] {
  const name = /--world (\w+)/.exec(command)?.[1] ?? 'retail';
  if (!isWorldName(name)) return undefined;
  const spec = WORLDS[name];
  return { name, description: spec.description, heldOut: spec.heldOut, summary: worldSummary(worldBase(loadRetailBase(), spec)) };
}

/** What a run was given, to write the command that reproduces it. */
export interface CommandInputs {
  world: string;
  seed: number;
  backend: string;
  quick: boolean;
  init: string | undefined;
  /** --lr as typed (the spec's lr is the parsed number). */
  lr: string | undefined;
  snapshotEvery: number | undefined;
  spec: PretrainSpec;
  /** The spec the world (or --quick) starts from: only settings that differ from it are written. */
  base: PretrainSpec;
}

/** The `npm run pretrain` command of a run: the world, seed, steps and backend, then every setting off its base. */
export function pretrainCommand(c: CommandInputs): string {
  const { spec, base } = c;
  const changed = <K extends keyof PretrainSpec>(k: K): PretrainSpec[K] | undefined => (spec[k] !== base[k] ? spec[k] : undefined);
  const given = <T>(x: T | undefined | null | false | 0): T | undefined => (x ? x : undefined);
  const habits = spec.carelessAbout?.join(',');
  // [flag, value]: a value of true writes the bare flag, undefined leaves the flag out.
  const flags: [string, unknown][] = [
    ['--quick', given(c.quick)],
    ['--init', given(c.init)],
    ['--lr', given(c.lr)],
    ['--review-tasks', changed('reviewTasks')],
    ['--swap-share', changed('swapShare')],
    ['--context', changed('maxLen')],
    ['--layers', spec.model.numLayers !== base.model.numLayers ? spec.model.numLayers : undefined],
    ['--width-factor', spec.model.hiddenSize !== base.model.hiddenSize ? spec.model.hiddenSize / base.model.hiddenSize : undefined],
    ['--copy-drills', changed('copyDrills')],
    ['--pre-tokenizer', changed('preTokenizer')],
    ['--retokenize', given(spec.retokenize)],
    ['--value-weight', spec.valueLossWeight],
    ['--span-steps', changed('spanSteps')],
    ['--span-source', changed('spanSource')],
    ['--drill-steps', changed('drillSteps')],
    ['--train-tasks', changed('trainTasks')],
    ['--act-weight', changed('actLossWeight')],
    ['--act-only-tasks', changed('actOnlyTasks')],
    ['--rehearse-only-tasks', changed('rehearseOnlyTasks')],
    ['--rehearse-weight', changed('rehearseLossWeight')],
    ['--prompt-loss', changed('promptLossWeight')],
    ['--grounding-chars', spec.groundingChars],
    ['--no-expert-rehearse', spec.expertRehearse === false || undefined],
    ['--rehearse-write-repeat', spec.rehearseWriteRepeat],
    ['--rehearse-swap-share', spec.rehearseSwapShare],
    ['--record-copies', spec.recordCopies],
    ['--user-tasks', spec.userTasks],
    ['--conversation-tasks', spec.conversationTasks],
    ['--conversation-write-repeat', spec.conversationWriteRepeat],
    ['--conversation-wrong-proposals', given(spec.conversationWrongProposals)],
    ['--conversation-swap-share', given(spec.conversationSwapShare)],
    ['--user-weight', spec.userLossWeight],
    ['--user-swap-share', given(spec.userSwapShare)],
    ['--user-identity-repeat', spec.userIdentityRepeat],
    ['--value-swaps', spec.valueSwaps],
    ['--value-swap-drills', spec.valueSwapDrills],
    ['--drill-all-kinds', given(spec.drillAllKinds)],
    ['--change-tasks', given(spec.changeTasks)],
    ['--change-call-drills', given(spec.changeCallDrills)],
    ['--amount-swaps', given(spec.amountSwaps)],
    ['--amount-swap-drills', given(spec.amountSwapDrills)],
    ['--careless-replies', given(spec.carelessRate)],
    ['--careless-about', habits && habits !== DEFAULT_CARELESS_ABOUT.join(',') ? habits : undefined],
    ['--snapshot-every', given(c.snapshotEvery)],
  ];
  const rest = flags.filter(([, x]) => x !== undefined).map(([f, x]) => (x === true ? ` ${f}` : ` ${f} ${x}`));
  return `npm run pretrain -- --world ${c.world} --seed ${c.seed} --steps ${spec.steps} --backend ${c.backend}${rest.join('')}`;
}

/** The --init folder's layer count and its width as a multiple of the base shape's hidden size (--width-factor). */
async function initModelShape(dir: string, baseHidden: number): Promise<{ numLayers: number; widthFactor: number }> {
  const file = join(resolve(dir), CONFIG_FILE);
  const text = await readFile(file, 'utf8').catch((e: NodeJS.ErrnoException) => Promise.reject(new IoError(file, 'read', e.code, e.message)));
  const c = parseQwen3ConfigText(text, file);
  const f = c.hiddenSize / baseHidden;
  return { numLayers: c.numLayers, widthFactor: Number.isInteger(f) && f >= 1 && f <= 8 ? f : 1 };
}

export async function pretrainCli(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  return runCli(io, PRETRAIN_USAGE, async () => {
    const v = parseFlags(argv, PRETRAIN_FLAGS);
    if (v.help) {
      io.out(helpText(PRETRAIN_USAGE, PRETRAIN_FLAGS, PRETRAIN_NOTES));
      return;
    }
    const modes = (['time-grpo', 'probe-copy', 'probe-rehearsal', 'probe-attention', 'card'] as const).filter((k) => v[k]);
    if (modes.length > 1) throw new ArgError(`--${modes.join(' and --')} cannot be combined`);
    const backendName = enumFlag(v, 'backend', BACKEND_NAMES, 'cpu-fast');
    const seed = intFlag(v, 'seed', 0, 0, 0xffffffff);
    const world = enumFlag(v, 'world', WORLD_NAMES, 'mini');
    const quick = v.quick === true;
    const base = quick ? QUICK_SPEC : world === 'mini' ? MINI_SPEC : FULL_SPEC;
    const lr = v.lr === undefined ? undefined : numFlag(v, 'lr', base.lr);
    if (lr !== undefined && !(lr < 1)) throw new ArgError(`--lr must be a number in (0,1), got ${JSON.stringify(v.lr)}`);
    const swapShare = v['swap-share'] === undefined ? base.swapShare : numFlag(v, 'swap-share', base.swapShare, 0, true);
    if (swapShare > 1) throw new ArgError(`--swap-share must be a number in [0,1], got ${JSON.stringify(v['swap-share'])}`);
    const context = intFlag(v, 'context', base.maxLen, 64, 32768);
    // A stage continues the model it starts from: unnamed, its layers and width are the --init folder's (a
    // default of 4 layers would refuse an 8-layer start, and only after minutes of encoding).
    const initFlag = strFlag(v, 'init');
    const initShape = initFlag === undefined ? undefined : await initModelShape(initFlag, base.model.hiddenSize);
    const spec = {
      ...base,
      model: widenShape(
        { ...base.model, maxPositionEmbeddings: context, numLayers: intFlag(v, 'layers', initShape?.numLayers ?? base.model.numLayers, 1, 64) },
        intFlag(v, 'width-factor', initShape?.widthFactor ?? 1, 1, 8),
      ),
      maxLen: context,
      steps: intFlag(v, 'steps', base.steps, 1, 1_000_000),
      lr: lr ?? base.lr,
      reviewTasks: intFlag(v, 'review-tasks', base.reviewTasks, 0, 1_000_000),
      swapShare,
      copyDrills: intFlag(v, 'copy-drills', base.copyDrills, 0, 10_000_000),
      preTokenizer: enumFlag(v, 'pre-tokenizer', PRE_TOKENIZER_NAMES, base.preTokenizer),
      ...(v.retokenize ? { retokenize: true } : {}),
      ...(v['value-weight'] !== undefined ? { valueLossWeight: numFlag(v, 'value-weight', 1, 1, true) } : {}),
      spanSteps: intFlag(v, 'span-steps', base.spanSteps, 0, 1_000_000),
      spanSource: enumFlag(v, 'span-source', ['shuffled-data', 'drills'] as const, base.spanSource),
      drillSteps: intFlag(v, 'drill-steps', base.drillSteps, 0, 1_000_000),
      trainTasks: intFlag(v, 'train-tasks', base.trainTasks, 1, 1_000_000),
      actOnlyTasks: intFlag(v, 'act-only-tasks', base.actOnlyTasks, 0, 1_000_000),
      actLossWeight: v['act-weight'] === undefined ? base.actLossWeight : numFlag(v, 'act-weight', base.actLossWeight),
      rehearseOnlyTasks: intFlag(v, 'rehearse-only-tasks', base.rehearseOnlyTasks, 0, 1_000_000),
      rehearseLossWeight: v['rehearse-weight'] === undefined ? base.rehearseLossWeight : numFlag(v, 'rehearse-weight', base.rehearseLossWeight),
      ...(v['no-expert-rehearse'] ? { expertRehearse: false } : {}),
      ...(v['record-copies'] !== undefined ? { recordCopies: intFlag(v, 'record-copies', 0, 0, 1_000_000) } : {}),
      ...(v['user-tasks'] !== undefined ? { userTasks: intFlag(v, 'user-tasks', 0, 0, 1_000_000) } : {}),
      ...(v['user-weight'] !== undefined ? { userLossWeight: numFlag(v, 'user-weight', 1, 1, true) } : {}),
      ...(v['user-swap-share'] !== undefined ? { userSwapShare: unitFlag(v, 'user-swap-share') } : {}),
      ...(v['user-identity-repeat'] !== undefined ? { userIdentityRepeat: intFlag(v, 'user-identity-repeat', 1, 1, 20) } : {}),
      ...(v['conversation-tasks'] !== undefined ? { conversationTasks: intFlag(v, 'conversation-tasks', 0, 0, 1_000_000) } : {}),
      ...(v['conversation-wrong-proposals'] !== undefined ? { conversationWrongProposals: unitFlag(v, 'conversation-wrong-proposals') } : {}),
      ...(v['conversation-swap-share'] !== undefined ? { conversationSwapShare: unitFlag(v, 'conversation-swap-share') } : {}),
      ...(v['conversation-write-repeat'] !== undefined ? { conversationWriteRepeat: intFlag(v, 'conversation-write-repeat', 1, 1, 20) } : {}),
      ...(v['value-swaps'] !== undefined ? { valueSwaps: intFlag(v, 'value-swaps', 0, 0, 1_000_000) } : {}),
      ...(v['value-swap-drills'] !== undefined ? { valueSwapDrills: intFlag(v, 'value-swap-drills', 0, 0, 1_000_000) } : {}),
      changeTasks: intFlag(v, 'change-tasks', 0, 0, 1_000_000),
      changeCallDrills: intFlag(v, 'change-call-drills', 0, 0, 1_000_000),
      amountSwaps: intFlag(v, 'amount-swaps', 0, 0, 1_000_000),
      amountSwapDrills: intFlag(v, 'amount-swap-drills', 0, 0, 1_000_000),
      ...(v['drill-all-kinds'] ? { drillAllKinds: true } : {}),
      ...(v['careless-replies'] !== undefined ? { carelessRate: unitFlag(v, 'careless-replies') } : {}),
      ...(v['careless-about'] !== undefined ? { carelessAbout: habitsFlag(v, 'careless-about') } : {}),
      ...(v['rehearse-write-repeat'] !== undefined ? { rehearseWriteRepeat: intFlag(v, 'rehearse-write-repeat', 1, 1, 20) } : {}),
      ...(v['rehearse-swap-share'] !== undefined ? { rehearseSwapShare: unitFlag(v, 'rehearse-swap-share') } : {}),
      ...(v['grounding-chars'] !== undefined ? { groundingChars: intFlag(v, 'grounding-chars', 1600, 0, 100_000) } : {}),
      promptLossWeight: v['prompt-loss'] === undefined ? base.promptLossWeight : numFlag(v, 'prompt-loss', base.promptLossWeight, 0, true),
    };
    if (spec.actLossWeight > 100) throw new ArgError(`--act-weight must be a number in (0, 100], got ${JSON.stringify(v['act-weight'])}`);
    if (spec.rehearseLossWeight > 100) throw new ArgError(`--rehearse-weight must be a number in (0, 100], got ${JSON.stringify(v['rehearse-weight'])}`);
    if (spec.promptLossWeight > 1) throw new ArgError(`--prompt-loss must be a number in [0, 1], got ${JSON.stringify(v['prompt-loss'])}`);
    const evalTasks = intFlag(v, 'eval', quick ? 0 : 40, 0, 10_000);
    const threads = threadsFlag(v);
    const snapshotEvery = v['snapshot-every'] === undefined ? undefined : intFlag(v, 'snapshot-every', 1, 1, 1_000_000);
    // Unnamed, the folder is under runs/ (git-ignored): a first try never replaces the bundled policy or its card.
    const out = resolve(strFlag(v, 'out') ?? runsPath(quick ? 'pretrain-quick' : `pretrain-${world}`));
    const guardOut = () => checkOutput(strFlag(v, 'out') ?? out, '--out', v);
    const log = progress(io, 'pretrain');
    const write = (name: string, text: string) => writeFileAtomic(join(out, name), text);

    if (v.card) {
      guardOut();
      const read = async (name: string) => {
        const file = join(out, name);
        const text = await readFile(file, 'utf8').catch((e: NodeJS.ErrnoException) => Promise.reject(new IoError(file, 'read', e.code, e.message)));
        try {
          return JSON.parse(text) as unknown;
        } catch (e) {
          throw new Error(`${file} is not valid JSON (${(e as Error).message})`);
        }
      };
      const names = await readdir(out).catch((e: NodeJS.ErrnoException) => Promise.reject(new IoError(out, 'list', e.code, e.message)));
      const run = (await read('pretrain.json')) as CardInputs['run'];
      const cardDate = () => {
        const d = strFlag(v, 'date') ?? new Date().toISOString().slice(0, 10);
        if (!/^\d{4}-\d\d-\d\d$/.test(d)) throw new ArgError(`--date wants YYYY-MM-DD, got ${JSON.stringify(d)}`);
        return d;
      };
      if (names.includes('conversation.json')) {
        // A conversation policy: its card names its lineage and its research record; no notebook entry of its own.
        if (!names.includes('lineage.json')) throw new ArgError(`${out} holds conversation.json but no lineage.json (the earlier stages' commands and records)`);
        const opt = async <T>(name: string) => (names.includes(name) ? ((await read(name)) as T) : undefined);
        const card = conversationCard(
          {
            run,
            lineage: (await read('lineage.json')) as ConversationCardInputs['lineage'],
            greedy: (await read('conversation.json')) as ConversationCardInputs['greedy'],
            sampled: await opt<ConversationCardInputs['sampled']>('conversation-k4.json'),
            fidelity: await opt<ConversationCardInputs['fidelity']>('user-fidelity.json'),
            oneMessage: await opt<ConversationCardInputs['oneMessage']>('onemsg.json'),
            commit: strFlag(v, 'commit', 'unknown')!,
            machine: run.machine ?? machineDescription(),
          },
          cardDate(),
        );
        await write('README.md', card);
        log(`wrote ${join(out, 'README.md')}`);
        return;
      }
      const inputs: CardInputs = {
        run,
        evaluation: names.includes('eval.json') ? ((await read('eval.json')) as EvalReport) : null,
        grpo: await Promise.all(names.filter((n) => /^grpo-timing-.*\.json$/.test(n)).sort().map(async (n) => (await read(n)) as GrpoTiming)),
        sizing: names.includes('sizing.json') ? ((await read('sizing.json')) as CardInputs['sizing']) : [],
        stage1: names.includes('pretrain-stage1.json') ? ((await read('pretrain-stage1.json')) as CardInputs['run']) : undefined,
        laterStages: await Promise.all(names.filter((n) => /^pretrain-stage([2-9]|\d\d+)\.json$/.test(n)).sort((a, b) => Number(/\d+/.exec(a)![0]) - Number(/\d+/.exec(b)![0])).map(async (n) => (await read(n)) as CardInputs['run'])),
        copy: names.includes('copy-probe.json') ? ((await read('copy-probe.json')) as CopyProbe) : undefined,
        attention: names.includes('attention-probe.json') ? ((await read('attention-probe.json')) as AttentionRecord) : undefined,
        rehearsal: names.includes('rehearsal-probe.json') ? ((await read('rehearsal-probe.json')) as CardInputs['rehearsal']) : undefined,
        structured: (await Promise.all(names.filter((n) => /^structured-rehearsal.*\.json$/.test(n)).sort((a, b) => a.length - b.length || a.localeCompare(b)).map((n) => read(n)))) as NonNullable<CardInputs['structured']>,
        copyRetail: names.includes('copy-probe-retail.json') ? ((await read('copy-probe-retail.json')) as CopyProbe) : undefined,
        attempts: names.includes('attempts.json') ? ((await read('attempts.json')) as CardInputs['attempts']) : [],
        world: cardWorld(run.command),
        heldOut: names.includes('heldout.json') ? ((await read('heldout.json')) as CardInputs['heldOut']) : undefined,
        snapshot: names.includes('snapshot.json') ? ((await read('snapshot.json')) as CardInputs['snapshot']) : undefined,
        before: await (async () => {
          // The latest earlier stage's evaluation (heldout-stage<N>.json), if the folder keeps one.
          const stage = Math.max(...names.map((x) => Number(/^heldout-stage(\d+)\.json$/.exec(x)?.[1] ?? -1)));
          return stage < 0 ? undefined : { stage, ...((await read(`heldout-stage${stage}.json`)) as { command: string; result: HeldOutRecord }) };
        })(),
        signal: names.includes('signal.json') ? ((await read('signal.json')) as CardInputs['signal']) : undefined,
        sweeps: names.includes('sweeps.json') ? ((await read('sweeps.json')) as CardInputs['sweeps']) : undefined,
        commit: strFlag(v, 'commit', 'unknown')!,
        machine: run.machine ?? machineDescription(),
      };
      const date = cardDate();
      await write('README.md', modelCard(inputs, date));
      log(`wrote ${join(out, 'README.md')}`);
      // The full record: a dated entry of the research notebook, linked from the card (for a folder the
      // repository does not commit, beside its card: a try never writes into research/).
      const notebook = resolve(strFlag(v, 'notebook') ?? (committedFiles(out).length ? join(REPO_ROOT, 'research/notebook') : out));
      const entry = join(notebook, recordName(inputs, date));
      checkOutput(entry, '--notebook', v);
      await mkdir(notebook, { recursive: true });
      await writeFileAtomic(entry, modelRecord(inputs, date));
      log(`wrote ${entry}`);
      return;
    }
    if (v['probe-attention']) {
      // A plain TypeScript forward over the host weights: no --backend.
      const domain = loadWorldDomain(world);
      const filler = domain.tasks.generate({ split: 'train', count: 40, seed: 5 }).flatMap((t) => t.userMessages);
      const before = (strFlag(v, 'before') ?? '').split(';').filter(Boolean).map((s) => {
        const m = /^([^=]+)=(.+)$/.exec(s);
        if (!m) throw new ArgError(`--before wants LABEL=DIR[;LABEL=DIR...], got ${JSON.stringify(s)}`);
        return { label: m[1], dir: m[2] };
      });
      guardOut();
      const drills = { drills: 40, seed: 5 };
      const models = [];
      const outArg = strFlag(v, 'out') ?? out;
      for (const { label, dir } of [{ label: 'this policy', dir: outArg }, ...before]) {
        // The engine's reader validates the folder (shapes, shards, non-finite values) without a backend.
        const src = new DirSource(resolve(dir));
        const { config, host } = await readHostWeights(src);
        const probe = attentionProbe(new PlainQwen3(config, host), await Tokenizer.load(src), { ...drills, filler });
        log(`${label} (${dir}): best head source mass ${Math.max(...probe.heads.map((h) => h.sourceMass)).toFixed(2)} over ${probe.positions} positions`);
        models.push({ label, dir: recordPath(dir), probe });
      }
      const command = `npm run pretrain -- --probe-attention --world ${world} --out ${outArg}${before.length ? ` --before '${strFlag(v, 'before')}'` : ''}`;
      const record: AttentionRecord = { command: recordCommand(command), ...drills, models };
      await write('attention-probe.json', JSON.stringify(record, null, 1) + '\n');
      return;
    }
    guardOut();
    // The output folder must be writable before minutes of training start.
    if (!v['time-grpo'] && !v['probe-copy'] && !v['probe-rehearsal']) await ensureDir(out);
    const domain = loadWorldDomain(world);
    const b = await openBackend(backendName, threads);
    try {
      if (v['probe-copy']) {
        const src = new DirSource(out);
        const { model } = await loadQwen3(src, b, { format: 'f32' });
        const tokenizer = await Tokenizer.load(src);
        const probe = await copyProbe({ model, tokenizer }, domain, { tasks: 40, drills: 200, seed: 5 });
        await write('copy-probe.json', JSON.stringify(probe, null, 1) + '\n');
        io.out(JSON.stringify(probe) + '\n');
        return;
      }
      if (v['probe-rehearsal']) {
        const src = new DirSource(out);
        const { model } = await loadQwen3(src, b, { format: 'f32' });
        const tokenizer = await Tokenizer.load(src);
        // The held-out tasks and the Rehearse budget of `npm run eval -- --tasks test --count 100`.
        const tasks = domain.tasks.generate({ split: 'test', count: 100, seed: HELD_OUT_TASK_SEED });
        const rehearsePrompt = spec.groundingChars !== undefined ? { maxGroundingChars: spec.groundingChars } : {};
        const probe = await probeRehearsals(model, tokenizer, domain, tasks, { maxRehearseTokens: tokenBudgets(domain, tokenizer).rehearse, rehearsePrompt });
        const command = `npm run pretrain -- --probe-rehearsal --world ${world} --out ${strFlag(v, 'out') ?? out}${spec.groundingChars !== undefined ? ` --grounding-chars ${spec.groundingChars}` : ''}`;
        await write('rehearsal-probe.json', JSON.stringify({ command: recordCommand(command), ...probe }, null, 1) + '\n');
        const { calls: _calls, byTool: _byTool, ...summary } = probe;
        io.out(JSON.stringify(summary) + '\n');
        return;
      }
      if (v['time-grpo']) {
        const src = new DirSource(out);
        const { model } = await loadQwen3(src, b, { format: 'f32' });
        const tokenizer = await Tokenizer.load(src);
        const tasks = domain.tasks.generate({ split: 'train', count: 16, seed: 99 });
        const timing = await timeGrpoStep(model, tokenizer, domain, tasks, { promptsPerStep: 2, k: 4, seed });
        await write(`grpo-timing-${b.name}.json`, JSON.stringify(timing, null, 1) + '\n');
        io.out(JSON.stringify(timing) + '\n');
        return;
      }
      const t0 = performance.now();
      const init = initFlag ? resolve(initFlag) : undefined;
      // Stage 2 reads the init folder before anything is written (it may be the output folder itself).
      const result = await pretrain(b, domain, spec, { seed, out, log, init, snapshotEvery });
      const command = pretrainCommand({ world, seed, backend: backendName, quick, init: initFlag, lr: v.lr === undefined ? undefined : String(v.lr), snapshotEvery, spec, base });
      const record = { command: recordCommand(command), ...result, out: recordPath(result.out) };
      await write('pretrain.json', JSON.stringify(record, null, 1) + '\n');
      let evaluation = null;
      if (evalTasks > 0) {
        // Evaluate what was written, through the same loader and tokenizer the lab uses.
        const src = new DirSource(out);
        const { model } = await loadQwen3(src, b, { format: 'f32' });
        const tokenizer = await Tokenizer.load(src);
        const tasks = domain.tasks.generate({ split: 'test', count: evalTasks, seed: HELD_OUT_TASK_SEED });
        evaluation = await evaluatePolicy({ model, tokenizer }, domain, tasks, { seed, log });
        model.free();
        await write('eval.json', JSON.stringify(evaluation, null, 1) + '\n');
      }
      const { losses, ...summary } = record;
      void losses;
      io.out(JSON.stringify({ ...summary, wallSeconds: (performance.now() - t0) / 1000, eval: evaluation && { tasks: evaluation.tasks, real: evaluation.real, rehearsal: evaluation.rehearsal } }, null, 1) + '\n');
    } finally {
      b.dispose();
    }
  });
}

if (isEntry(import.meta.url)) process.exitCode = await pretrainCli(process.argv.slice(2));
