// npm run tts-table -- [--world mini|retail] [--model DIR] [--adapter DIR|auto|none] [--tasks T] [--seeds S] [--ns 0,1,2,3]
//   [--modes parallel,sequential] [--memory-tokens M] [--memory-eval self|judge|both|none] [--memory-placement user|system] [--max-eval-tokens N]
//   [--max-turns N] [--max-act-tokens N] [--max-rehearse-tokens N] [--grounding-chars N] [--history-chars N]
//   [--backend B] [--threads T] [--out DIR] [--results FILE] [--budget-minutes M] [--estimate] [--reduced "why"] [--no-write] [--write-committed]
//   [--run base,envace] [--render-only] [--note "what came out"]
// The test-time private-rehearsal table (src/eval/private-rehearsal.ts): N = 0..3 imagined attempts,
// parallel and sequential, with the base policy and with an EnvACE-trained adapter, scored on held-out tasks in
// the real environment. Seed s draws its own held-out tasks (test split, task seed 1 + s; s = 0 are the tasks of
// `npm run eval` and the ablation) and samples the imagined attempts with seed s; every N of a seed sees the same
// tasks, so differences to N = 0 are paired. N = 0 is the plain evaluation and is shared by both modes.
// Each finished (policy, mode, N, seed) cell is its own record, <out>/cells/<policy>-<mode>-n<N>-s<seed>.json, with its
// per-task results; a rerun with the same budget skips finished cells (also on another machine with a copy of <out>)
// and the table aggregates every finished cell: success with a 95 % bootstrap interval over tasks and seeds, the paired
// difference to N = 0 and, for the EnvACE adapter, to the base policy on the same tasks (research/ablation/stats.ts).
// --estimate measures one task (N = 0, and N = 1 in each mode) and prints the projected wall-clock; a budget
// over --budget-minutes stops before the run. At the end the table goes into <out>/tts-table.md and, with
// --write-committed, into docs/results.md between the tts markers.
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { cpus, tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import {
  ArgError, BACKEND_FLAG, checkOutput, BACKEND_NAMES, enumFlag, GROUNDING_CHARS_FLAG, HELP_FLAG, helpText, HISTORY_CHARS_FLAG, intFlag, isEntry, numFlag, openBackend, openModel, parseFlags, processIo, progress, runCli, strFlag, THREADS_FLAG, threadsFlag, WORLD_FLAG, WRITE_COMMITTED_FLAG, type CliIo, type FlagSpec,
} from '../../src/cli/args';
import type { Domain, Task } from '../../src/env/domain';
import { WORLD_NAMES } from '../../src/env/retail/index';
import { loadWorldDomain } from '../../src/env/retail/node';
import { paramCount } from '../../src/model/config';
import type { LoraAdapter } from '../../src/model/lora';
import { loadAdapters } from '../../src/rl/checkpoint';
import { emptyResultsDoc, replaceSection, TTS_END, TTS_START } from '../ablation/grpo-ablation';
import { bootstrapMean, fmtDiff, fmtInterval, meanCI, pairedBootstrap, type Obs } from '../ablation/stats';
import { DEFAULT_LIMITS } from '../../src/rl/grpo-config';
import { DirStore } from '../../src/rl/store-node';
import { MEMORY_PLACEMENTS, privateRehearsal, TTS_MODES, type PrivateRehearsalOptions, type TtsMode } from '../../src/eval/private-rehearsal';
import { MEMORY_EVALUATIONS } from '../../src/rollout/rehearsal-memory';

export const TTS_USAGE = `usage: npm run tts-table -- [--world ${WORLD_NAMES.join('|')}] [--model DIR] [--adapter DIR|auto|none] [--tasks T] [--seeds S] [--ns 0,1,2,3]
  [--modes parallel,sequential] [--memory-tokens M] [--memory-eval ${MEMORY_EVALUATIONS.join('|')}] [--memory-placement user|system] [--max-eval-tokens N]
  [--max-turns N] [--max-act-tokens N] [--max-rehearse-tokens N] [--grounding-chars N] [--history-chars N]
  [--backend B] [--threads T] [--out DIR] [--results FILE] [--budget-minutes M] [--estimate] [--reduced "why"] [--no-write] [--write-committed]
  [--run base,envace] [--render-only] [--note "what came out"] [--boot-reps N]
  --run: which policies to compute now (e.g. the EnvACE cells in a second process); the table shows every finished cell.
  --render-only: compute nothing, write the table from the finished cells.`;

export const TTS_FLAGS: FlagSpec = {
  world: WORLD_FLAG,
  model: { type: 'string', arg: 'DIR', help: 'model folder (config.json, model.safetensors, tokenizer)', default: "the world's bundled policy" },
  adapter: { type: 'string', arg: 'DIR', help: 'the EnvACE run (or PEFT folder) of the table\'s second policy; auto: the first runs/*/envace-s* found; none: the base policy only', default: 'auto' },
  tasks: { type: 'string', arg: 'T', help: 'held-out test tasks per seed, 1..1000', default: '100' },
  seeds: { type: 'string', arg: 'S', help: 'seeds 0..S-1: seed s draws its tasks with task seed 1 + s and samples the attempts with seed s', default: '5' },
  ns: { type: 'string', arg: 'LIST', help: 'numbers of imagined attempts, comma-separated, each 0..16 (0 is always added: the paired baseline)', default: '0,1,2,3' },
  modes: { type: 'string', arg: 'LIST', help: `private-rehearsal modes, comma-separated: ${TTS_MODES.join(', ')}`, default: TTS_MODES.join(',') },
  'memory-tokens': { type: 'string', arg: 'M', help: 'hard cap of the rehearsal memory in policy tokens', default: '256' },
  'memory-eval': { type: 'string', arg: 'E', help: `what judges an imagined attempt in the memory: ${MEMORY_EVALUATIONS.join(', ')} (judge reads the reference checklist: privileged)`, default: 'self' },
  'memory-placement': { type: 'string', arg: 'P', help: `where the memory enters the committed episode: ${MEMORY_PLACEMENTS.join(' or ')}`, default: 'user' },
  'max-eval-tokens': { type: 'string', arg: 'N', help: 'tokens per self-evaluation', default: '48' },
  'max-turns': { type: 'string', arg: 'N', help: 'turns per episode, 1..100', default: String(DEFAULT_LIMITS.maxTurns) },
  'max-act-tokens': { type: 'string', arg: 'N', help: 'tokens per Act generation', default: String(DEFAULT_LIMITS.maxActTokens) },
  'max-rehearse-tokens': { type: 'string', arg: 'N', help: 'tokens per Rehearse generation', default: String(DEFAULT_LIMITS.maxRehearseTokens) },
  'grounding-chars': GROUNDING_CHARS_FLAG,
  'history-chars': HISTORY_CHARS_FLAG,
  backend: BACKEND_FLAG,
  threads: THREADS_FLAG,
  out: { type: 'string', arg: 'DIR', help: 'records folder: one cells/<policy>-<mode>-n<N>-s<seed>.json per finished cell; finished cells are skipped', default: '$TMPDIR/envace-tts' },
  results: { type: 'string', arg: 'FILE', help: 'the results file whose private-rehearsal section is replaced (named, it is written; a committed one needs --write-committed)', default: 'docs/results.md, written only with --write-committed' },
  'write-committed': WRITE_COMMITTED_FLAG,
  'budget-minutes': { type: 'string', arg: 'M', help: 'stop before running when the projected wall-clock exceeds M minutes', default: 'no limit' },
  estimate: { type: 'boolean', help: 'measure one task (N = 0, and N = 1 in each mode), print the projected wall-clock and stop' },
  run: { type: 'string', arg: 'LIST', help: 'which policies to compute now (base, envace), e.g. the EnvACE cells in a second process; the table shows every finished cell', default: 'base,envace' },
  'render-only': { type: 'boolean', help: 'compute nothing: write the table from the finished cells' },
  reduced: { type: 'string', arg: 'WHY', help: 'states why the budget is smaller than the full one, above the table', default: 'none' },
  note: { type: 'string', arg: 'TEXT', help: 'findings written under the table', default: 'none' },
  'no-write': { type: 'boolean', help: 'print the table and write <out>/tts-table.md only, not into the results file (what happens anyway without --results or --write-committed)' },
  'boot-reps': { type: 'string', arg: 'N', help: 'bootstrap replicates of the intervals, 100..100000', default: '2000' },
  help: HELP_FLAG,
};

const ROOT = resolve(import.meta.dirname, '../..');

/** Injected by tests: a smaller domain (fewer tools, a shorter policy). */
export interface TtsDeps {
  domain?: Domain;
}

/** One cell of one seed: <out>/cells/<policy>-<mode>-n<N>-s<seed>.json. */
export interface TtsRun {
  key: string;
  policy: 'base' | 'envace';
  mode: TtsMode | 'none';
  n: number;
  seed: number;
  tasks: number;
  success: number;
  meanReward: number;
  /** Committed episodes' calls matching the reference actions (name + arguments): a graded signal where success is rare. */
  toolPrecision: number;
  toolRecall: number;
  /** Mean per task: all tokens processed (prompt + generated) and generated only, over all phases. */
  tokensPerTask: number;
  generatedPerTask: number;
  memoryTokens: number;
  attemptJudge: number;
  contextEnds: number;
  wallS: number;
  /** Seconds in each phase (imagined attempts, self-evaluations, committed episodes). */
  phaseS: { imagine: number; evaluate: number; commit: number };
  /** The committed episode's reward per task (success = reward 1), for the bootstrap and the paired differences. */
  perTask: { taskId: string; reward: number }[];
}

/**
 * The paper's τ²-Bench average success (%), Qwen3-8B, Table 3 (its one no-rehearsal row, and N = 2 for both
 * policies); '–' where it reports none. The N sweep (peak at N = 2, fall at N = 3) is on BFCL multi-turn
 * only, so no τ² figure exists for N = 1 or 3.
 */
export function paperFigure(policy: TtsRun['policy'], mode: TtsMode, n: number): string {
  if (n === 0) return policy === 'envace' ? '31.4' : '–';
  if (n !== 2) return '–';
  if (policy === 'envace') return mode === 'parallel' ? '38.0 (+6.6)' : '34.8 (+3.4)';
  return mode === 'parallel' ? '32.2' : '31.0';
}

/** An EnvACE (role-wise) training run with a checkpoint: runs/ in the repo first, then the ablation's default out. */
function findEnvaceRun(): string | null {
  for (const base of [join(ROOT, 'runs'), join(ROOT, 'runs/ablation'), join(tmpdir(), 'envace-ablation')]) {
    if (!existsSync(base)) continue;
    const dirs = readdirSync(base).filter((d) => /^envace-s\d+$/.test(d)).sort();
    for (const d of dirs) {
      const run = join(base, d, 'run.json');
      if (existsSync(run) && /"checkpoint"\s*:\s*"/.test(readFileSync(run, 'utf8'))) return join(base, d);
    }
  }
  return null;
}

const successObs = (rs: readonly TtsRun[]): Obs[] => rs.flatMap((r) => r.perTask.map((t) => ({ seed: r.seed, task: t.taskId, value: t.reward >= 1 ? 1 : 0 })));
const rewardObs = (rs: readonly TtsRun[]): Obs[] => rs.flatMap((r) => r.perTask.map((t) => ({ seed: r.seed, task: t.taskId, value: t.reward })));
const sig = (d: { significant: boolean; n: number }) => (d.n === 0 ? '–' : d.significant ? '**yes**' : 'no');

export function renderTts(
  runs: readonly TtsRun[],
  meta: { header: string[]; seeds: number; ns: number[]; modes: TtsMode[]; policies: TtsRun['policy'][]; adapterNote: string | null; boot?: { reps: number; seed: number } },
): string {
  const boot = meta.boot ?? { reps: 2000, seed: 0 };
  const out = ['## Test-time private rehearsal', '', ...meta.header, ''];
  out.push('| policy | mode | N | seeds | success % [95 % CI] | Δ vs N = 0, pts [95 % CI] | significant | Δ vs base policy, pts [95 % CI] | significant | reward [95 % CI] | tool P / R % | tokens / task (all / generated) | memory tokens / task | imagined attempts: judge | context-limit ends | s / cell | paper τ² avg 8B |');
  out.push('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  const cellsOf = (policy: TtsRun['policy'], mode: TtsMode, n: number) => runs.filter((r) => r.policy === policy && r.n === n && (n === 0 || r.mode === mode));
  for (const policy of meta.policies) {
    const label = policy === 'base' ? 'base policy' : 'EnvACE adapter';
    if (policy === 'envace' && meta.adapterNote) {
      out.push(`| ${label} | – | – | – | ${meta.adapterNote} | | | | | | | | | | | | |`);
      continue;
    }
    // N = 0 (the plain evaluation) once, then each mode's N > 0 rows.
    for (const [mode, n] of [[meta.modes[0], 0] as const, ...meta.modes.flatMap((m) => meta.ns.filter((k) => k > 0).map((k) => [m, k] as const))]) {
      const rs = cellsOf(policy, mode, n);
      if (rs.length === 0) continue;
      const seedsNote = rs.length < meta.seeds ? `${rs.length} of ${meta.seeds}` : `${rs.length}`;
      const obs = successObs(rs);
      const vsZero = n === 0 ? null : pairedBootstrap(obs, successObs(cellsOf(policy, mode, 0)), boot);
      const baseCells = policy === 'envace' ? cellsOf('base', mode, n) : [];
      const vsBase = baseCells.length ? pairedBootstrap(obs, successObs(baseCells), boot) : null;
      const col = (f: (r: TtsRun) => number) => meanCI(rs.map(f));
      const mean = (f: (r: TtsRun) => number) => col(f).mean;
      out.push(
        `| ${label} | ${n === 0 ? 'none (plain)' : mode} | ${n} | ${seedsNote} | ${fmtInterval(bootstrapMean(obs, boot))} | ${vsZero ? fmtDiff(vsZero) : '–'} | ${vsZero ? sig(vsZero) : '–'} | ` +
          `${vsBase ? fmtDiff(vsBase) : '–'} | ${vsBase ? sig(vsBase) : '–'} | ${fmtInterval(bootstrapMean(rewardObs(rs), boot), 1, 3)} | ${fmtInterval(col((r) => r.toolPrecision))} / ${fmtInterval(col((r) => r.toolRecall))} | ` +
          `${mean((r) => r.tokensPerTask).toFixed(0)} / ${mean((r) => r.generatedPerTask).toFixed(0)} | ${n === 0 ? '0' : mean((r) => r.memoryTokens).toFixed(0)} | ${n === 0 ? '–' : mean((r) => r.attemptJudge).toFixed(2)} | ` +
          `${rs.reduce((a, r) => a + r.contextEnds, 0)} / ${rs.reduce((a, r) => a + r.tasks, 0)} | ${mean((r) => r.wallS).toFixed(0)} | ${paperFigure(policy, mode, n)} |`,
      );
    }
  }
  out.push('');
  out.push(
    `Columns: success = reward 1 on the one committed real episode per task, with a 95 % two-level bootstrap interval over seeds and tasks (${boot.reps} replicates, seed ${boot.seed}; research/ablation/stats.ts); ` +
      'Δ vs N = 0 = the paired difference to the same seed\'s plain evaluation on the same tasks, Δ vs base policy = the EnvACE adapter minus the base policy at the same mode and N on the same tasks and seeds, both in points with a paired bootstrap interval (**yes**: it excludes zero); ' +
      'reward = mean real reward [bootstrap interval]; tool P / R = the committed calls that match a reference action (name and arguments) / the reference actions matched, mean over seeds [t-interval]; tokens = every token the policy processed per task in all phases (imagined Act/Rehearse prompts and generations, self-evaluations, the committed episode; prompt tokens counted in full even where the KV cache served them) / generated only; ' +
      'memory = tokens of the rehearsal memory that conditioned the committed episode; judge = mean checklist-judge reward of the imagined attempts (privileged: it reads the reference checklist; shown, not used unless --memory-eval judge|both); ' +
      "context-limit ends = committed episodes ended by the context limit (the paper's N = 3 fall-back); s / cell = seconds per cell (one seed's tasks). Paper: EnvACE (arXiv 2608.06197) Table 3, τ²-Bench average, Qwen3-8B: no rehearsal 31.4; N = 2 parallel 32.2 (base) / 38.0 (EnvACE), sequential 31.0 / 34.8 (in brackets: EnvACE against its no-rehearsal 31.4; Table 3's Overall, the mean with BFCL multi-turn, reads 36.7 / 36.8 / 40.9 / 34.9 / 38.5). Its N sweep (peak at N = 2, fall at N = 3) is on BFCL multi-turn only: no τ² figure for N = 1 or 3.",
  );
  return out.join('\n');
}

/** What a private-rehearsal section says besides its cells: written by the run as <out>/meta.json (npm run results reads it). */
export interface TtsMeta {
  /** A section kept beside the current one: its own heading and a line saying what it is. */
  title?: string;
  intro?: string;
  world: string;
  tasks: number;
  seeds: number;
  ns: number[];
  modes: TtsMode[];
  memoryTokens: number;
  memoryEvaluation: string;
  memoryPlacement: string;
  maxEvalTokens: number;
  limits: { maxTurns: number; maxActTokens: number; maxRehearseTokens: number };
  model: string;
  params: number;
  context: number;
  weightsId: string;
  /** The EnvACE adapter's folder, or null with adapterNote saying why there is none. */
  adapter: string | null;
  adapterNote: string | null;
  machine: string;
  backend: string;
  date: string;
  command: string;
  reduced: string | null;
  note: string | null;
  boot: { reps: number; seed: number };
}

/** The lines above the table. */
export function ttsHeader(m: TtsMeta): string[] {
  return [
    ...(m.reduced ? [`> **Reduced budget.** ${m.reduced}`, ''] : []),
    `Held-out real-environment success of the one committed episode per task after N imagined attempts (src/eval/private-rehearsal.ts): ${m.tasks} test-split tasks of world \`${m.world}\` per seed, ${m.seeds} seeds (seed s: tasks drawn with task seed 1 + s, attempts sampled with seed s; the committed episode is greedy). ` +
      `Memory: the attempts (calls, rehearsed results, replies) and their ${m.memoryEvaluation === 'self' ? "policy's own self-evaluations" : `evaluations (${m.memoryEvaluation})`} (≤ ${m.maxEvalTokens} tokens each), oldest dropped first, hard cap ${m.memoryTokens} policy tokens and never more than the context leaves after the first Act prompt and one Act turn; it enters the committed episode ${m.memoryPlacement === 'user' ? 'as a user message after the request (the system prompt stays byte-identical)' : 'as a note in the system prompt'}. ` +
      `Limits: ${m.limits.maxTurns} turns, ${m.limits.maxActTokens} Act / ${m.limits.maxRehearseTokens} Rehearse tokens per generation.`,
    '',
    `Model: \`${m.model}\` (${m.params} parameters, context ${m.context}, model.safetensors sha256 ${m.weightsId}…). EnvACE adapter: ${m.adapter ? `\`${m.adapter}\`` : m.adapterNote}. Machine: ${m.machine}; backend ${m.backend}. Date: ${m.date}.`,
    '',
    `Command: \`${m.command}\``,
  ];
}

/** The whole section (without markers): heading, header, table, columns, what came out. */
export function renderTtsSection(runs: readonly TtsRun[], m: TtsMeta): string {
  const md = renderTts(runs, { header: ttsHeader(m), seeds: m.seeds, ns: m.ns, modes: m.modes, policies: ['base', 'envace'], adapterNote: m.adapter ? null : m.adapterNote, boot: m.boot });
  const titled = m.title ? md.replace(/^## Test-time private rehearsal\n/, `${m.title}\n${m.intro ? `\n${m.intro}\n` : ''}`) : md;
  return m.note ? `${titled}\n\n**What came out.** ${m.note}` : titled;
}

/** The finished cells under <out>/cells. */
export function readCells(out: string): TtsRun[] {
  const dir = join(out, 'cells');
  if (!existsSync(dir)) return [];
  return readdirSync(dir).filter((f) => f.endsWith('.json')).sort().map((f) => JSON.parse(readFileSync(join(dir, f), 'utf8')) as TtsRun);
}

export async function ttsCli(argv: readonly string[], io: CliIo = processIo, deps: TtsDeps = {}): Promise<number> {
  return runCli(io, TTS_USAGE, () => main(argv, io, deps));
}

async function main(argv: readonly string[], io: CliIo, deps: TtsDeps): Promise<void> {
  const v = parseFlags(argv, TTS_FLAGS);
  if (v.help) return void io.out(helpText(TTS_USAGE, TTS_FLAGS));
  const log = progress(io, 'tts-table');
  const list = (name: string, dflt: string) => (strFlag(v, name) ?? dflt).split(',').map((s) => s.trim()).filter(Boolean);
  const ns = [...new Set(list('ns', '0,1,2,3').map((s) => {
    const n = Number(s);
    if (!(Number.isInteger(n) && n >= 0 && n <= 16)) throw new ArgError(`--ns: ${JSON.stringify(s)} is not an integer in 0..16`);
    return n;
  }))].sort((a, b) => a - b);
  if (!ns.includes(0)) ns.unshift(0); // the paired baseline
  const modes = list('modes', 'parallel,sequential').map((m) => {
    if (!TTS_MODES.includes(m as TtsMode)) throw new ArgError(`--modes: unknown mode ${JSON.stringify(m)}`);
    return m as TtsMode;
  });
  const budget = {
    tasks: intFlag(v, 'tasks', 100, 1, 1000),
    seeds: intFlag(v, 'seeds', 5, 1, 100),
    memoryTokens: intFlag(v, 'memory-tokens', 256, 0),
    memoryEvaluation: enumFlag(v, 'memory-eval', MEMORY_EVALUATIONS, 'self'),
    memoryPlacement: enumFlag(v, 'memory-placement', MEMORY_PLACEMENTS, 'user'),
    maxEvalTokens: intFlag(v, 'max-eval-tokens', 48, 1),
  };
  const limits = {
    maxTurns: intFlag(v, 'max-turns', DEFAULT_LIMITS.maxTurns, 1, 100),
    maxActTokens: intFlag(v, 'max-act-tokens', DEFAULT_LIMITS.maxActTokens, 1),
    maxRehearseTokens: intFlag(v, 'max-rehearse-tokens', DEFAULT_LIMITS.maxRehearseTokens, 1),
  };
  const rehearsePrompt = {
    ...(v['grounding-chars'] !== undefined ? { maxGroundingChars: intFlag(v, 'grounding-chars', 0, 0) } : {}),
    ...(v['history-chars'] !== undefined ? { maxHistoryChars: intFlag(v, 'history-chars', 0, 0) } : {}),
  };
  const backendName = enumFlag(v, 'backend', BACKEND_NAMES, 'cpu-fast');
  const threads = threadsFlag(v);
  const out = resolve(strFlag(v, 'out') ?? join(tmpdir(), 'envace-tts'));
  const resultsPath = resolve(strFlag(v, 'results') ?? join(ROOT, 'docs/results.md'));
  // The committed results file changes only when asked for (a named --results, or --write-committed), and a
  // committed one only with --write-committed: checked now, not after hours of evaluation.
  const writeResults = !v['no-write'] && (v.results !== undefined || !!v['write-committed']);
  if (writeResults) checkOutput(resultsPath, '--results', v);
  const budgetMinutes = v['budget-minutes'] === undefined ? Infinity : numFlag(v, 'budget-minutes', 30);
  const adapterArg = strFlag(v, 'adapter') ?? 'auto';
  const adapterDir = adapterArg === 'none' ? null : adapterArg === 'auto' ? findEnvaceRun() : resolve(adapterArg);

  const world = enumFlag(v, 'world', WORLD_NAMES, 'mini');
  const boot = { reps: intFlag(v, 'boot-reps', 2000, 100, 100000), seed: 0 };
  const domain = deps.domain ?? loadWorldDomain(world);
  const tasksOf = (seed: number): Task[] => domain.tasks.generate({ split: 'test', count: budget.tasks, seed: 1 + seed });
  const backend = await openBackend(backendName, threads);
  try {
    const policy = await openModel(strFlag(v, 'model'), backend, { world });
    const { model, tokenizer } = policy;
    // Which weights, exactly: the bundled folder may be rebuilt while a table is being made.
    const weightsId = createHash('sha256').update(readFileSync(join(policy.dir, 'model.safetensors'))).digest('hex').slice(0, 12);
    const machine = `${cpus()[0]?.model.trim() ?? 'unknown CPU'} (${cpus().length} cores visible, shared), Node ${process.version}`;
    let envace: LoraAdapter | null = null;
    let adapterNote: string | null = null;
    if (adapterDir) {
      try {
        const a = await loadAdapters(new DirStore(adapterDir), backend, model.config);
        if (a.mode && a.mode !== 'rehearse') adapterNote = `not run: ${adapterDir} is a ${a.mode} run, not EnvACE`;
        else envace = a.act;
        log(`EnvACE adapter: ${adapterDir} (${a.mode ?? 'PEFT folder'}${a.step !== null ? `, step ${a.step}` : ''})`);
      } catch (e) {
        adapterNote = `not run: ${adapterDir} has no loadable adapter (${(e as Error).message})`;
      }
    } else adapterNote = 'not run: no EnvACE adapter found (runs/*/envace-s*, $TMPDIR/envace-ablation/envace-s*; pass --adapter DIR)';
    const policies: TtsRun['policy'][] = envace ? ['base', 'envace'] : ['base'];
    log(`model ${policy.dir} (${paramCount(model.config)} parameters, context ${model.config.maxPositionEmbeddings}) on ${backendName}; ${machine}`);

    const cell = async (pol: TtsRun['policy'], mode: TtsMode, n: number, seed: number, tasks: Task[]): Promise<TtsRun> => {
      const adapter = pol === 'envace' ? envace : null;
      const opts: PrivateRehearsalOptions = {
        mode, n, seed, limits, rehearsePrompt, memoryTokens: budget.memoryTokens, memoryEvaluation: budget.memoryEvaluation, memoryPlacement: budget.memoryPlacement, maxEvalTokens: budget.maxEvalTokens,
        log: (s) => log(`${pol} ${mode} N=${n} seed ${seed}: ${s}`),
      };
      const t0 = performance.now();
      const r = await privateRehearsal({ model, tokenizer, actAdapter: adapter }, domain, tasks, opts);
      const p = r.privateRehearsal.perTask;
      const mean = (f: (x: (typeof p)[number]) => number) => p.reduce((a, x) => a + f(x), 0) / p.length;
      return {
        key: '', policy: pol, mode: n === 0 ? 'none' : mode, n, seed, tasks: tasks.length, success: r.success, meanReward: r.meanReward,
        toolPrecision: r.toolPrecision, toolRecall: r.toolRecall,
        tokensPerTask: r.privateRehearsal.tokensPerTask,
        generatedPerTask: mean((x) => x.tokens.imagined.generated + x.tokens.evaluation.generated + x.tokens.committed.generated),
        memoryTokens: mean((x) => x.memory.tokens), attemptJudge: r.privateRehearsal.meanAttemptJudge, contextEnds: r.ends.context ?? 0,
        wallS: (performance.now() - t0) / 1000,
        phaseS: { imagine: r.privateRehearsal.wallMs.imagine / 1000, evaluate: r.privateRehearsal.wallMs.evaluate / 1000, commit: r.privateRehearsal.wallMs.commit / 1000 },
        perTask: r.perTask.map((t) => ({ taskId: t.taskId, reward: t.reward })),
      };
    };

    if (v.estimate || Number.isFinite(budgetMinutes)) {
      // A few tasks of seed 0 with the base policy, N = 2 per mode: per-task seconds of one committed episode
      // (mean over these runs) and of one imagined attempt with its evaluation, per mode. cost(N) = commit + N·attempt.
      const few = tasksOf(0).slice(0, Math.min(3, budget.tasks));
      const measured = [await cell('base', modes[0], 0, 0, few)];
      const per: Record<string, number> = {};
      for (const m of modes) {
        const r = await cell('base', m, 2, 0, few);
        measured.push(r);
        per[m] = (r.phaseS.imagine + r.phaseS.evaluate) / 2 / few.length;
      }
      const commit = measured.reduce((a, r) => a + r.phaseS.commit, 0) / measured.length / few.length;
      const perSeedTask = commit + modes.reduce((a, m) => a + ns.filter((n) => n > 0).reduce((b, n) => b + commit + n * per[m], 0), 0);
      const total = perSeedTask * budget.tasks * budget.seeds * policies.length;
      log(`measured on ${few.length} tasks: committed episode ${commit.toFixed(1)} s/task, one imagined attempt + evaluation ${modes.map((m) => `${m} ${per[m].toFixed(1)} s/task`).join(', ')}`);
      log(`projected: ${(total / 60).toFixed(1)} min for ${policies.length} policies × ${budget.seeds} seeds × ${budget.tasks} tasks × N ∈ {${ns.join(',')}} × {${modes.join(',')}}`);
      if (v.estimate) return;
      if (total / 60 > budgetMinutes) throw new ArgError(`projected ${(total / 60).toFixed(1)} min exceeds --budget-minutes ${budgetMinutes}: lower --tasks/--seeds/--ns`);
    }

    mkdirSync(out, { recursive: true });
    const cellsDir = join(out, 'cells');
    mkdirSync(cellsDir, { recursive: true });
    // What a cell's figures depend on (not paths: the records can move to another machine). The adapter is part
    // of the EnvACE cells' key only, so base cells are reused when an adapter appears later.
    const fingerprint = JSON.stringify({ world, weightsId, budget, limits, rehearsePrompt, backendName });
    const adapterId = adapterDir ? (adapterDir.startsWith(ROOT + '/') ? relative(ROOT, adapterDir) : adapterDir) : null;
    const keyOf = (pol: TtsRun['policy'], mode: TtsMode | 'none', n: number, seed: number) =>
      createHash('sha256').update(`${fingerprint}|${pol === 'envace' ? `envace:${adapterId}` : pol}|${mode}|${n}|${seed}`).digest('hex').slice(0, 16);
    const runs: TtsRun[] = [];
    const compute = new Set(v['render-only'] ? [] : list('run', 'base,envace'));
    // Seeds outermost: a stopped table has every cell at the same number of seeds.
    for (let seed = 0; seed < budget.seeds; seed++) {
      const tasks = tasksOf(seed);
      for (const pol of policies) for (const mode of modes) for (const n of ns) {
        if (n === 0 && mode !== modes[0]) continue; // N = 0 is the same plain evaluation in every mode
        const m = n === 0 ? 'none' : mode;
        const key = keyOf(pol, m, n, seed);
        const file = join(cellsDir, `${pol}-${m}-n${n}-s${seed}.json`);
        let r: TtsRun | undefined;
        if (existsSync(file)) {
          const old = JSON.parse(readFileSync(file, 'utf8')) as TtsRun;
          if (old.key === key) r = old;
          else if (compute.has(pol)) throw new ArgError(`${file} holds a cell of another budget, model or adapter: choose another --out`);
        }
        if (!r && !compute.has(pol)) continue;
        if (!r) {
          r = { ...(await cell(pol, mode, n, seed, tasks)), key };
          writeFileSync(file + '.tmp', JSON.stringify(r, null, 1) + '\n');
          renameSync(file + '.tmp', file);
        } else log(`${pol} ${m} N=${n} seed ${seed}: finished, skipped`);
        runs.push(r);
        log(`${pol} ${n === 0 ? 'plain' : mode} N=${n} seed ${seed}: success ${(r.success * 100).toFixed(1)}%, ${r.tokensPerTask.toFixed(0)} tokens/task, memory ${r.memoryTokens.toFixed(0)}, ${r.wallS.toFixed(0)} s`);
      }
    }

    const meta: TtsMeta = {
      world, tasks: budget.tasks, seeds: budget.seeds, ns, modes, memoryTokens: budget.memoryTokens, memoryEvaluation: budget.memoryEvaluation, memoryPlacement: budget.memoryPlacement,
      maxEvalTokens: budget.maxEvalTokens, limits, model: policy.dir.replace(ROOT + '/', ''), params: paramCount(model.config), context: model.config.maxPositionEmbeddings, weightsId,
      adapter: envace ? relative(ROOT, adapterDir!) : null, adapterNote: envace ? null : adapterNote, machine, backend: `${backendName}${threads ? ` (${threads} threads)` : ''}`,
      date: `${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC`,
      // The budget flags only: the prose flags are printed above and below the table already.
      command: `npm run tts-table -- ${argv.filter((a, i, all) => !['--reduced', '--note', '--render-only', '--no-write', '--write-committed'].includes(a) && !['--reduced', '--note'].includes(all[i - 1])).join(' ')}`,
      reduced: strFlag(v, 'reduced') ?? null, note: strFlag(v, 'note') ?? null, boot,
    };
    const full = renderTtsSection(runs, meta);
    // npm run results re-renders the section from the cells and this file alone.
    writeFileSync(join(out, 'meta.json'), JSON.stringify(meta, null, 1) + '\n');
    writeFileSync(join(out, 'tts-table.md'), full + '\n');
    io.out(full + '\n');
    if (!writeResults) log(`table written to ${join(out, 'tts-table.md')}; --write-committed puts it into ${resultsPath}`);
    else {
      mkdirSync(resolve(resultsPath, '..'), { recursive: true });
      const doc = existsSync(resultsPath) ? readFileSync(resultsPath, 'utf8') : emptyResultsDoc();
      writeFileSync(resultsPath, replaceSection(doc, TTS_START, TTS_END, full));
      log(`table written to ${resultsPath}`);
    }
  } finally {
    backend.dispose();
  }
}

if (isEntry(import.meta.url)) process.exitCode = await ttsCli(process.argv.slice(2));
