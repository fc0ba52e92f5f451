// npm run plots -- <records dir> [--out FILE.png] [--write-committed] [--configs id,id,..] [--title "..."]
// (without --out: runs/plots/ablation-curves.png; the README's docs/figures/… are rewritten only with --write-committed)
// Learning curves of an ablation (or pilot) from its run records (research/scripts/ablation.ts: <dir>/<config>-s<seed>/
// metrics.jsonl per training step, curve.jsonl per held-out evaluation): six panels, per step and configuration,
// the mean over seeds (line) and the 95 % t-band over seeds (shaded; research/ablation/stats.ts):
//   held-out success, training reward, rehearsal fidelity exact / F1 / error agreement, and the fraction of
//   advantage groups with a non-zero reward spread.
// Run folders: <dir>/<config>-s<seed>/ of the ablation, or any `npm run train --out` folder under <dir> (its
// eval.jsonl). Held-out success and fidelity come from the curve evaluations (step 0: the base policy's run, shared by every
// configuration); where a run has no curve evaluations with fidelity, the fidelity panels use the training
// rollouts' own (rehearsed vs real observation, rehearsed modes only) and say so.
// Writes an SVG (plain, diffable) and rasterises it to PNG in headless Chromium (playwright-core, Debian's
// /usr/bin/chromium; no native Node dependencies). Prints {png, svg, panels} as JSON.
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { ArgError, checkOutput, HELP_FLAG, helpText, isEntry, parseFlags, processIo, progress, runCli, runsPath, strFlag, WRITE_COMMITTED_FLAG, type CliIo, type FlagSpec } from '../../src/cli/args';
import { ABLATION_CONFIGS, type CurvePoint } from '../ablation/grpo-ablation';
import type { StepMetrics } from '../../src/rl/run';
import { meanCI } from '../ablation/stats';

export const PLOTS_USAGE = 'usage: npm run plots -- <records dir> [--out FILE.png] [--write-committed] [--configs id,id,..] [--title "..."] [--chromium PATH]';
export const CHROMIUM = '/usr/bin/chromium';
export const PLOTS_FLAGS: FlagSpec = {
  out: { type: 'string', arg: 'FILE.png', help: 'the figure; an .svg of the same name is written beside it; a committed one (docs/figures/…) needs --write-committed', default: 'runs/plots/ablation-curves.png (git-ignored)' },
  'write-committed': WRITE_COMMITTED_FLAG,
  configs: { type: 'string', arg: 'IDS', help: 'only these configurations (run-folder prefixes), comma-separated', default: 'all found' },
  title: { type: 'string', arg: 'TEXT', help: "the figure's title", default: 'Learning curves: mean over seeds, 95 % band' },
  chromium: { type: 'string', arg: 'PATH', help: 'the Chromium that rasterizes the SVG', default: CHROMIUM },
  help: HELP_FLAG,
};

export type PanelId = 'success' | 'train-reward' | 'fidelity-exact' | 'fidelity-f1' | 'fidelity-error' | 'spread';
export const PANELS: readonly { id: PanelId; title: string }[] = [
  { id: 'success', title: 'held-out success' },
  { id: 'train-reward', title: 'training reward (rollouts)' },
  { id: 'spread', title: 'groups with non-zero reward spread' },
  { id: 'fidelity-exact', title: 'rehearsal fidelity: exact match' },
  { id: 'fidelity-f1', title: 'rehearsal fidelity: field F1' },
  { id: 'fidelity-error', title: 'rehearsal fidelity: error agreement' },
];

/** One run's series: step → value, per panel. */
type RunSeries = Partial<Record<PanelId, Map<number, number>>>;

export interface SeriesPoint {
  step: number;
  mean: number;
  lo: number;
  hi: number;
  seeds: number;
}

export interface PlotSeries {
  panel: PanelId;
  config: string;
  label: string;
  color: string;
  points: SeriesPoint[];
}

export interface PlotData {
  series: PlotSeries[];
  /** Where the fidelity panels' figures come from. */
  fidelitySource: 'held-out' | 'training rollouts' | 'none';
}

const COLORS: Record<string, string> = {
  base: '#555555', real: '#1f77b4', 'frozen-simulator': '#ff7f0e', 'per-role': '#2ca02c', envace: '#d62728',
  'envace-pooled': '#9467bd', 'envace-rollout-mean': '#8c564b', 'envace-kl': '#e377c2', 'real-checklist': '#17becf',
  'envace-strict': '#bcbd22', 'frozen-strict': '#ffbb78',
};
const FALLBACK = ['#bcbd22', '#7f7f7f', '#aec7e8'];

const readJsonl = <T>(path: string): T[] => (existsSync(path) ? readFileSync(path, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as T) : []);
const lastPerStep = <T extends { step: number }>(xs: readonly T[]): T[] => [...new Map(xs.map((x) => [x.step, x])).values()].sort((a, b) => a.step - b.step);
const finite = (x: unknown): x is number => typeof x === 'number' && Number.isFinite(x);

/** Reads every <config>-s<seed>/ folder under `dir` and aggregates per configuration, step and panel. */
export function collectCurves(dir: string, only?: readonly string[]): PlotData {
  if (!existsSync(dir)) throw new ArgError(`${dir}: no such records folder`);
  const runs: { config: string; seed: number; s: RunSeries; trainFid: RunSeries }[] = [];
  for (const d of readdirSync(dir).sort()) {
    // <config>-s<seed> (the ablation's folders); any other run folder (npm run train --out) counts as seed 0 of itself.
    const m = /^(.+)-s(\d+)$/.exec(d) ?? [d, d, '0'];
    const folder = join(dir, d);
    if (!existsSync(join(folder, 'metrics.jsonl')) && !existsSync(join(folder, 'curve.jsonl'))) continue;
    // npm run train writes its held-out evaluations to eval.jsonl (same fields); the ablation to curve.jsonl.
    const curveFile = existsSync(join(folder, 'curve.jsonl')) ? 'curve.jsonl' : 'eval.jsonl';
    const s: RunSeries = {};
    const trainFid: RunSeries = {};
    const put = (into: RunSeries, p: PanelId, step: number, v: unknown) => {
      if (finite(v)) (into[p] ??= new Map()).set(step, v);
    };
    for (const x of lastPerStep(readJsonl<StepMetrics>(join(folder, 'metrics.jsonl')))) {
      put(s, 'train-reward', x.step, x.rollouts?.meanReward);
      put(s, 'spread', x.step, x.advantage?.spread);
      put(trainFid, 'fidelity-exact', x.step, x.rollouts?.fidelity?.exact);
      put(trainFid, 'fidelity-f1', x.step, x.rollouts?.fidelity?.f1);
      put(trainFid, 'fidelity-error', x.step, x.rollouts?.fidelity?.errorAgree);
    }
    for (const p of lastPerStep(readJsonl<CurvePoint>(join(folder, curveFile)))) {
      put(s, 'success', p.step, p.success);
      put(s, 'fidelity-exact', p.step, p.fidelity?.exact);
      put(s, 'fidelity-f1', p.step, p.fidelity?.f1);
      put(s, 'fidelity-error', p.step, p.fidelity?.errorAgree);
    }
    runs.push({ config: m[1], seed: Number(m[2]), s, trainFid });
  }
  // The base policy's evaluation is every configuration's step 0.
  const base = runs.find((r) => r.config === 'base');
  const heldOutFid = runs.some((r) => r.config !== 'base' && (r.s['fidelity-exact']?.size ?? 0) > 0);
  const trainFid = runs.some((r) => (r.trainFid['fidelity-exact']?.size ?? 0) > 0);
  const fidelitySource: PlotData['fidelitySource'] = heldOutFid ? 'held-out' : trainFid ? 'training rollouts' : 'none';
  const known = ABLATION_CONFIGS.map((c) => c.id);
  const configs = [...new Set(runs.map((r) => r.config))]
    .filter((c) => !only || only.includes(c))
    .sort((a, b) => (known.indexOf(a) < 0 ? 99 : known.indexOf(a)) - (known.indexOf(b) < 0 ? 99 : known.indexOf(b)) || a.localeCompare(b));
  const series: PlotSeries[] = [];
  configs.forEach((config, ci) => {
    const rs = runs.filter((r) => r.config === config);
    const label = ABLATION_CONFIGS.find((c) => c.id === config)?.label ?? config;
    const color = COLORS[config] ?? FALLBACK[ci % FALLBACK.length];
    for (const { id } of PANELS) {
      const fromTraining = id.startsWith('fidelity') && fidelitySource === 'training rollouts';
      const perRun = rs.map((r) => {
        const m = new Map((fromTraining ? r.trainFid : r.s)[id] ?? []);
        const b0 = base?.s[id]?.get(0);
        if (config !== 'base' && !fromTraining && (id === 'success' || id.startsWith('fidelity')) && m.size > 0 && !m.has(0) && finite(b0)) m.set(0, b0);
        return m;
      });
      const steps = [...new Set(perRun.flatMap((m) => [...m.keys()]))].sort((a, b) => a - b);
      if (steps.length === 0) continue;
      const points = steps.map((step) => {
        const ci95 = meanCI(perRun.map((m) => m.get(step) ?? NaN));
        return { step, mean: ci95.mean, lo: Number.isFinite(ci95.lo) ? ci95.lo : ci95.mean, hi: Number.isFinite(ci95.hi) ? ci95.hi : ci95.mean, seeds: ci95.n };
      });
      series.push({ panel: id, config, label, color, points });
    }
  });
  return { series, fidelitySource };
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const r1 = (x: number) => Math.round(x * 10) / 10;

/** Six panels (3 × 2) and a legend, as an SVG document. */
export function renderSvg(data: PlotData, title: string): { svg: string; width: number; height: number } {
  const PW = 400;
  const PH = 240;
  const M = { l: 46, r: 14, t: 28, b: 34 };
  const cols = 3;
  const rows = 2;
  const head = 40;
  const configs = [...new Map(data.series.map((s) => [s.config, s])).values()];
  // Three entries a row: the longest labels ("GRPO, real environment, checklist reward (4 seeds)") fill a third.
  const perRow = 3;
  const legendRows = Math.ceil(configs.length / perRow);
  const width = cols * PW;
  const height = head + rows * PH + 16 + legendRows * 22;
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="DejaVu Sans, Arial, sans-serif" font-size="11">`);
  out.push(`<rect width="${width}" height="${height}" fill="#ffffff"/>`);
  out.push(`<text x="${width / 2}" y="24" text-anchor="middle" font-size="15" font-weight="bold">${esc(title)}</text>`);
  const maxStep = Math.max(1, ...data.series.flatMap((s) => s.points.map((p) => p.step)));
  PANELS.forEach((panel, i) => {
    const ox = (i % cols) * PW;
    const oy = head + Math.floor(i / cols) * PH;
    const w = PW - M.l - M.r;
    const h = PH - M.t - M.b;
    const ss = data.series.filter((s) => s.panel === panel.id);
    let y0 = 0;
    let y1 = 1;
    if (panel.id === 'train-reward') {
      // Rewards lie in [-0.1, 1] (an empty response scores -0.1): bands of few seeds are clipped to that.
      const vals = ss.flatMap((s) => s.points.flatMap((p) => [p.lo, p.hi]));
      y0 = Math.max(-0.1, Math.min(0, ...vals));
      y1 = Math.min(1, Math.max(0.1, ...vals));
    }
    const X = (step: number) => ox + M.l + (step / maxStep) * w;
    const Y = (v: number) => oy + M.t + h - ((Math.min(y1, Math.max(y0, v)) - y0) / (y1 - y0)) * h;
    const sub = panel.id.startsWith('fidelity') && data.fidelitySource === 'training rollouts' ? ' (training rollouts)' : '';
    out.push(`<g class="panel" data-panel="${panel.id}">`);
    out.push(`<text x="${ox + M.l + w / 2}" y="${oy + 16}" text-anchor="middle" font-size="12" font-weight="bold">${esc(panel.title + sub)}</text>`);
    out.push(`<rect x="${ox + M.l}" y="${oy + M.t}" width="${w}" height="${h}" fill="none" stroke="#999"/>`);
    for (let k = 0; k <= 4; k++) {
      const v = y0 + ((y1 - y0) * k) / 4;
      out.push(`<line x1="${ox + M.l}" x2="${ox + M.l + w}" y1="${r1(Y(v))}" y2="${r1(Y(v))}" stroke="#eee"/>`);
      out.push(`<text x="${ox + M.l - 4}" y="${r1(Y(v)) + 4}" text-anchor="end">${panel.id === 'train-reward' ? v.toFixed(2) : `${Math.round(v * 100)}%`}</text>`);
    }
    const xt = Math.max(1, Math.ceil(maxStep / 6));
    for (let s = 0; s <= maxStep; s += xt) out.push(`<text x="${r1(X(s))}" y="${oy + M.t + h + 14}" text-anchor="middle">${s}</text>`);
    out.push(`<text x="${ox + M.l + w / 2}" y="${oy + M.t + h + 28}" text-anchor="middle" fill="#555">step</text>`);
    if (ss.length === 0) out.push(`<text x="${ox + M.l + w / 2}" y="${oy + M.t + h / 2}" text-anchor="middle" fill="#999">no data</text>`);
    for (const s of ss) {
      const pts = s.points;
      if (pts.some((p) => p.hi > p.lo)) {
        const band = [...pts.map((p) => `${r1(X(p.step))},${r1(Y(p.hi))}`), ...[...pts].reverse().map((p) => `${r1(X(p.step))},${r1(Y(p.lo))}`)];
        out.push(`<path class="band" data-config="${esc(s.config)}" d="M${band.join('L')}Z" fill="${s.color}" fill-opacity="0.15" stroke="none"/>`);
      }
      const line = pts.map((p) => `${r1(X(p.step))},${r1(Y(p.mean))}`);
      out.push(`<path class="series" data-config="${esc(s.config)}" data-points="${pts.length}" d="M${line.join('L')}" fill="none" stroke="${s.color}" stroke-width="2"/>`);
      for (const p of pts) out.push(`<circle cx="${r1(X(p.step))}" cy="${r1(Y(p.mean))}" r="2.5" fill="${s.color}"/>`);
    }
    out.push('</g>');
  });
  configs.forEach((s, i) => {
    const x = 20 + (i % perRow) * (width / perRow);
    const y = head + rows * PH + 16 + Math.floor(i / perRow) * 22;
    const seeds = Math.max(...data.series.filter((t) => t.config === s.config).flatMap((t) => t.points.map((p) => p.seeds)));
    out.push(`<g class="legend" data-config="${esc(s.config)}"><line x1="${x}" x2="${x + 24}" y1="${y}" y2="${y}" stroke="${s.color}" stroke-width="3"/><text x="${x + 30}" y="${y + 4}">${esc(s.label)} (${seeds} seed${seeds === 1 ? '' : 's'})</text></g>`);
  });
  out.push('</svg>');
  return { svg: out.join('\n'), width, height };
}

/** The SVG as a PNG, rendered by headless Chromium. */
export async function rasterize(svg: string, width: number, height: number, png: string, executablePath = CHROMIUM): Promise<void> {
  if (!existsSync(executablePath)) throw new Error(`${executablePath} not found: the PNG needs Chromium (scripts/setup-system.sh installs it); the SVG is written`);
  const { chromium } = await import('playwright-core');
  const browser = await chromium.launch({
    executablePath,
    ignoreDefaultArgs: ['--headless'],
    args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
    handleSIGTERM: false,
  });
  try {
    const page = await browser.newPage({ viewport: { width, height }, deviceScaleFactor: 1 });
    await page.setContent(`<!doctype html><html><body style="margin:0;background:#fff">${svg}</body></html>`);
    await page.screenshot({ path: png, type: 'png', clip: { x: 0, y: 0, width, height } });
  } finally {
    await browser.close();
  }
}

export async function plotsCli(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  return runCli(io, PLOTS_USAGE, async () => {
    const { values: v, positionals } = parseFlags(argv, PLOTS_FLAGS, true);
    if (v.help) return void io.out(helpText(PLOTS_USAGE, PLOTS_FLAGS));
    const log = progress(io, 'plots');
    if (positionals.length !== 1) throw new ArgError('give one records folder (the --out of npm run ablation)');
    const dir = resolve(positionals[0]);
    const png = resolve(strFlag(v, 'out') ?? runsPath('plots/ablation-curves.png'));
    if (!png.endsWith('.png')) throw new ArgError(`--out must name a .png file, got ${png}`);
    // The figure and the .svg beside it: the README's committed figures are regenerated only on purpose.
    checkOutput(png, '--out', v);
    checkOutput(png.replace(/\.png$/, '.svg'), '--out', v);
    const only = strFlag(v, 'configs')?.split(',').filter(Boolean);
    const data = collectCurves(dir, only);
    if (data.series.length === 0) throw new ArgError(`${dir}: no run records (<config>-s<seed>/metrics.jsonl or curve.jsonl)`);
    const title = strFlag(v, 'title') ?? 'Learning curves: mean over seeds, 95 % band';
    const { svg, width, height } = renderSvg(data, title);
    mkdirSync(dirname(png), { recursive: true });
    const svgPath = png.replace(/\.png$/, '.svg');
    writeFileSync(svgPath, svg + '\n');
    await rasterize(svg, width, height, png, strFlag(v, 'chromium') ?? CHROMIUM);
    log(`wrote ${png} and ${svgPath} (${data.series.length} series, fidelity from ${data.fidelitySource})`);
    io.out(JSON.stringify({ png, svg: svgPath, fidelitySource: data.fidelitySource, panels: data.series.map((s) => ({ panel: s.panel, config: s.config, steps: s.points.map((p) => p.step), mean: s.points.map((p) => p.mean) })) }) + '\n');
  });
}

if (isEntry(import.meta.url)) process.exitCode = await plotsCli(process.argv.slice(2));
