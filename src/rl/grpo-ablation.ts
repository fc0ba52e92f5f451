// The miniature of the paper's ablation (DESIGN §1): the configurations, the per-run record, the
// aggregation over seeds (mean ± sample sd) and the Markdown table that docs/results.md carries, with the
// paper's τ²-Bench figures beside ours. Pure functions; scripts/ablation.ts runs the experiments.
import type { RolloutMode } from '../rollout/episode';

export interface AblationConfig {
  id: string;
  label: string;
  /** null: the base policy, evaluated without training. */
  mode: RolloutMode | null;
  advantage: 'role-wise' | 'pooled';
  /** The paper's τ²-Bench overall success (%) for the matching configuration, where it reports one. */
  paper: { b8: number | null; b1_7: number | null };
}

/**
 * The paper's standard GRPO trains Act against a frozen LLM simulator: our `frozen-simulator`. `real` (GRPO
 * against the executable environment) is the upper reference the paper could not run.
 */
export const ABLATION_CONFIGS: readonly AblationConfig[] = [
  { id: 'base', label: 'base policy', mode: null, advantage: 'role-wise', paper: { b8: 30.0, b1_7: null } },
  { id: 'real', label: 'GRPO, real environment', mode: 'real', advantage: 'role-wise', paper: { b8: null, b1_7: null } },
  { id: 'frozen-simulator', label: 'GRPO, frozen simulator (paper: GRPO)', mode: 'frozen-simulator', advantage: 'role-wise', paper: { b8: 31.2, b1_7: 14.7 } },
  { id: 'per-role', label: 'per-role policies', mode: 'per-role', advantage: 'role-wise', paper: { b8: 35.5, b1_7: 14.0 } },
  { id: 'envace', label: 'EnvACE, role-wise', mode: 'rehearse', advantage: 'role-wise', paper: { b8: 36.7, b1_7: 15.3 } },
  { id: 'envace-pooled', label: 'EnvACE, pooled groups', mode: 'rehearse', advantage: 'pooled', paper: { b8: null, b1_7: null } },
];

export interface AblationRun {
  config: string;
  seed: number;
  steps: number;
  success: number;
  meanReward: number;
  toolPrecision: number;
  toolRecall: number;
  fidelity: { exact: number; f1: number; errorAgree: number; invalid: number; steps: number } | null;
  /** Mean reward of the training rollouts, first and last step (rehearsed modes: the judge's reward). */
  trainReward: { first: number; last: number } | null;
  trainS: number;
  evalS: number;
}

interface LimitsLike {
  maxTurns: number;
  maxActTokens: number;
  maxRehearseTokens: number;
}

export interface AblationMeta {
  date: string;
  model: string;
  /** First hex digits of the weights file's sha256. */
  modelHash?: string;
  modelParams: number | null;
  backend: string;
  machine: string;
  command: string;
  budget: { steps: number; seeds: number; evalTasks: number; trainTasks: number; k: number; prompts: number; lr: number; rank: number; baseline: string };
  /** Episode limits of the training rollouts and of the evaluation. */
  limits?: { train: LimitsLike; eval: LimitsLike };
  /** Set when the budget is below the intended one: printed above the table. */
  reduced: string | null;
  /** What came out, in words, printed under the table. */
  note?: string | null;
  measuredStepS: Record<string, number> | null;
}

export interface Stat {
  mean: number;
  sd: number;
  n: number;
}

/** Mean and sample sd (n - 1) of the finite values; NaN when there are none (sd 0 for one value). */
export function stat(xs: readonly number[]): Stat {
  const v = xs.filter((x) => Number.isFinite(x));
  const n = v.length;
  if (n === 0) return { mean: NaN, sd: NaN, n: 0 };
  const mean = v.reduce((s, x) => s + x, 0) / n;
  const sd = n > 1 ? Math.sqrt(v.reduce((s, x) => s + (x - mean) ** 2, 0) / (n - 1)) : 0;
  return { mean, sd, n };
}

export interface AblationRow {
  config: AblationConfig;
  runs: number;
  success: Stat;
  reward: Stat;
  precision: Stat;
  recall: Stat;
  fidelityExact: Stat;
  fidelityF1: Stat;
  fidelityErr: Stat;
  fidelityInvalid: Stat;
  trainS: Stat;
  evalS: Stat;
  trainFirst: Stat;
  trainLast: Stat;
}

export function aggregate(runs: readonly AblationRun[], configs: readonly AblationConfig[] = ABLATION_CONFIGS): AblationRow[] {
  return configs
    .map((config) => {
      const rs = runs.filter((r) => r.config === config.id);
      return {
        config,
        runs: rs.length,
        success: stat(rs.map((r) => r.success)),
        reward: stat(rs.map((r) => r.meanReward)),
        precision: stat(rs.map((r) => r.toolPrecision)),
        recall: stat(rs.map((r) => r.toolRecall)),
        fidelityExact: stat(rs.map((r) => r.fidelity?.exact ?? NaN)),
        fidelityF1: stat(rs.map((r) => r.fidelity?.f1 ?? NaN)),
        fidelityErr: stat(rs.map((r) => r.fidelity?.errorAgree ?? NaN)),
        fidelityInvalid: stat(rs.map((r) => r.fidelity?.invalid ?? NaN)),
        trainS: stat(rs.map((r) => r.trainS)),
        evalS: stat(rs.map((r) => r.evalS)),
        trainFirst: stat(rs.map((r) => r.trainReward?.first ?? NaN)),
        trainLast: stat(rs.map((r) => r.trainReward?.last ?? NaN)),
      };
    })
    .filter((r) => r.runs > 0);
}

const pct = (s: Stat) => (s.n === 0 || !Number.isFinite(s.mean) ? '–' : s.n > 1 ? `${(100 * s.mean).toFixed(1)} ± ${(100 * s.sd).toFixed(1)}` : (100 * s.mean).toFixed(1));
const num = (x: number | null) => (x === null ? '–' : x.toFixed(1));
const r2 = (s: Stat) => (s.n === 0 || !Number.isFinite(s.mean) ? '–' : s.mean.toFixed(2));
const params = (n: number | null) => (n === null ? '?' : n >= 1e6 ? `${(n / 1e6).toFixed(1)} M` : `${Math.round(n / 1e3)} K`);
const lim = (l: LimitsLike) => `${l.maxTurns} turns, ${l.maxActTokens} Act / ${l.maxRehearseTokens} Rehearse tokens`;
const secs = (s: Stat) => (s.n === 0 || !Number.isFinite(s.mean) ? '–' : s.mean >= 100 ? s.mean.toFixed(0) : s.mean.toFixed(1));

/** The Markdown of the ablation section (without the markers). */
export function renderAblation(rows: readonly AblationRow[], meta: AblationMeta): string {
  const b = meta.budget;
  const base = rows.find((r) => r.config.mode === null);
  const fid3 = (r: AblationRow) => `${pct(r.fidelityExact)} / ${pct(r.fidelityF1)} / ${pct(r.fidelityErr)}`;
  const fidBefore = base ? fid3(base) : '–';
  const invBefore = base ? pct(base.fidelityInvalid) : '–';
  const out: string[] = [];
  out.push('## Ablation: world rehearsal in miniature');
  out.push('');
  if (meta.reduced) out.push(`> **Reduced budget.** ${meta.reduced}`, '');
  out.push(
    `Held-out real-environment evaluation on ${b.evalTasks} test-split retail tasks (users never seen in training), one greedy episode per task; ` +
      `training: ${b.steps} GRPO steps × ${b.prompts} prompts × ${b.k} rollouts from ${b.trainTasks} train-split tasks, LoRA r ${b.rank}, lr ${b.lr}, ` +
      `baseline ${b.baseline}${meta.limits ? `, rollouts of at most ${lim(meta.limits.train)} (evaluation: ${lim(meta.limits.eval)})` : ''}; ${b.seeds} seed(s) per configuration (mean ± sample sd over seeds; the base policy is deterministic under greedy evaluation). ` +
      `Success = reward 1 (final database equals the reference one and every required fact stated). Tool P/R: calls matching the reference actions ` +
      `(name and arguments). Fidelity: the policy rehearses every reference call from the real history before it; exact JSON match / field-level F1 / ` +
      `error-or-not agreement with the real observation (an unparseable rehearsal counts as a miss in all three); "before" is the base policy's, "after" the trained rehearser's ` +
      `(per-role: its Rehearse adapter; real and frozen-simulator: the Act-trained adapter playing the environment). The training reward is the ` +
      `rollouts' own (real environment for real; the checklist judge on imagined trajectories otherwise), so it compares within a row, not across rows.`,
  );
  out.push('');
  out.push('| configuration | runs | success % | reward | tool P % | tool R % | fidelity exact / F1 / error-agree % (before → after) | unparseable rehearsals % (before → after) | training reward, step 1 → last | train s / run | eval s / run | paper τ²-Bench 8B | paper 1.7B |');
  out.push('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    const rw = r.reward.n === 0 || !Number.isFinite(r.reward.mean) ? '–' : r.reward.n > 1 ? `${r.reward.mean.toFixed(3)} ± ${r.reward.sd.toFixed(3)}` : r.reward.mean.toFixed(3);
    const fid = r.config.mode === null ? fidBefore : `${fidBefore} → ${fid3(r)}`;
    const inv = r.config.mode === null ? invBefore : `${invBefore} → ${pct(r.fidelityInvalid)}`;
    out.push(`| ${r.config.label} | ${r.runs} | ${pct(r.success)} | ${rw} | ${pct(r.precision)} | ${pct(r.recall)} | ${fid} | ${inv} | ${r.config.mode === null ? '–' : `${r2(r.trainFirst)} → ${r2(r.trainLast)}`} | ${secs(r.trainS)} | ${secs(r.evalS)} | ${num(r.config.paper.b8)} | ${num(r.config.paper.b1_7)} |`);
  }
  out.push('');
  if (meta.note) out.push(`**What came out.** ${meta.note}`, '');
  out.push(
    `Paper figures: EnvACE (arXiv 2608.06197), τ²-Bench overall success, Qwen3-8B and Qwen3-1.7B; its "GRPO" trains Act against a frozen LLM simulator ` +
      `(our frozen-simulator row); it has no real-environment GRPO and no pooled-group run. Our policy is a ${params(meta.modelParams)}-parameter ` +
      `model on one domain, so only the direction of the differences, not their size, is comparable.`,
  );
  out.push('');
  out.push(`Model: \`${meta.model}\`${meta.modelHash ? ` (model.safetensors sha256 ${meta.modelHash}…)` : ''}. Machine: ${meta.machine}; backend ${meta.backend}. Date: ${meta.date}.`);
  if (meta.measuredStepS) out.push(`Measured cost of one GRPO step (s): ${Object.entries(meta.measuredStepS).map(([k, v]) => `${k} ${v.toFixed(1)}`).join(', ')}.`);
  out.push('');
  out.push(`Command: \`${meta.command}\``);
  return out.join('\n');
}

export const ABLATION_START = '<!-- ablation:start -->';
export const ABLATION_END = '<!-- ablation:end -->';
export const TTS_START = '<!-- tts:start -->';
export const TTS_END = '<!-- tts:end -->';

/** A fresh docs/results.md: the ablation section and the (empty) test-time section another script fills. */
export function emptyResultsDoc(): string {
  return `# Results\n\nProduced by scripts; edit the scripts, not the sections between the markers.\n\n${ABLATION_START}\n${ABLATION_END}\n\n${TTS_START}${TTS_END}\n`;
}

/** Replaces what lies between `start` and `end` (markers kept); refuses a document without both, in order. */
export function replaceSection(doc: string, start: string, end: string, body: string): string {
  const i = doc.indexOf(start);
  const j = doc.indexOf(end, i < 0 ? 0 : i + start.length);
  if (i < 0 || j < 0) throw new Error(`the document has no ${start} … ${end} section`);
  return doc.slice(0, i + start.length) + '\n' + body.trim() + '\n' + doc.slice(j);
}
