// Issue 46's figure: held-out success against the real-interaction budget, one line per way of spending it
// (real-only GRPO; rehearsed episodes beside the real ones; the same with recall), each point a configuration's
// mean over seeds with its 95 % bootstrap interval. Plain SVG text, deterministic, so `npm run results -- --check`
// can compare it byte for byte; the table beside it in docs/results.md carries the same numbers.
import { fmtDiff, type PairedInterval } from './stats';

export interface BudgetPoint {
  config: string;
  label: string;
  realEpisodes: number;
  seeds: number;
  /** Success in [0, 1], mean over seeds, and its 95 % interval. */
  mean: number;
  lo: number;
  hi: number;
  /** Paired against real-only GRPO at the same number of real episodes (null: it is that, or none ran there). */
  vsReal: PairedInterval | null;
}

export interface BudgetSeries {
  label: string;
  colour: string;
  points: BudgetPoint[];
}

/** How each series is made: the configurations of its points, in order of budget. */
export const BUDGET_SERIES: readonly { label: string; colour: string; configs: readonly string[] }[] = [
  { label: 'real-only GRPO (the base at 0)', colour: '#1f5fa8', configs: ['base', 'real-q', 'real-h', 'real'] },
  { label: 'rehearsed episodes beside the real ones', colour: '#c2571a', configs: ['envace-strict', 'dyna-q', 'dyna-h'] },
  { label: 'the same, rehearsal with recall', colour: '#2e8b57', configs: ['envace-recall', 'dyna-q-recall', 'dyna-h-recall'] },
];

const W = 720;
const H = 420;
const M = { l: 64, r: 24, t: 40, b: 118 };
const f1 = (x: number) => x.toFixed(1);

/** The SVG of the figure. `base`: the base policy's success (a dashed line); `full`: the budget's maximum (all real). */
export function renderBudgetSvg(series: readonly BudgetSeries[], base: number | null, full: number, title: string): string {
  const pts = series.flatMap((s) => s.points);
  const lo = Math.floor((Math.min(...pts.map((p) => p.lo), base ?? 1) * 100) / 5) * 5;
  const hi = Math.ceil((Math.max(...pts.map((p) => p.hi), base ?? 0) * 100) / 5) * 5;
  const x = (e: number) => M.l + (e / full) * (W - M.l - M.r);
  const y = (s: number) => M.t + (1 - (s * 100 - lo) / Math.max(hi - lo, 5)) * (H - M.t - M.b);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="20" text-anchor="middle" font-size="14">${esc(title)}</text>`,
  ];
  // Axes and grid.
  for (let v = lo; v <= hi; v += 5) {
    out.push(`<line x1="${M.l}" x2="${W - M.r}" y1="${f1(y(v / 100))}" y2="${f1(y(v / 100))}" stroke="#e4e4e4"/>`);
    out.push(`<text x="${M.l - 6}" y="${f1(y(v / 100) + 4)}" text-anchor="end">${v} %</text>`);
  }
  for (let q = 0; q <= 4; q++) {
    const e = (full * q) / 4;
    out.push(`<line x1="${f1(x(e))}" x2="${f1(x(e))}" y1="${M.t}" y2="${H - M.b}" stroke="#f0f0f0"/>`);
    out.push(`<text x="${f1(x(e))}" y="${H - M.b + 16}" text-anchor="middle">${e}${q === 0 ? '' : ` (${['', '¼', '½', '¾', 'all'][q]})`}</text>`);
  }
  out.push(`<line x1="${M.l}" x2="${W - M.r}" y1="${H - M.b}" y2="${H - M.b}" stroke="black"/>`, `<line x1="${M.l}" x2="${M.l}" y1="${M.t}" y2="${H - M.b}" stroke="black"/>`);
  out.push(`<text x="${(M.l + W - M.r) / 2}" y="${H - M.b + 34}" text-anchor="middle">real episodes per run (training steps and rollouts fixed; the rest rehearsed)</text>`);
  out.push(`<text transform="translate(16 ${(M.t + H - M.b) / 2}) rotate(-90)" text-anchor="middle">held-out success</text>`);
  if (base !== null) {
    out.push(`<line x1="${M.l}" x2="${W - M.r}" y1="${f1(y(base))}" y2="${f1(y(base))}" stroke="#777" stroke-dasharray="5 4"/>`);
    out.push(`<text x="${W - M.r - 4}" y="${f1(y(base) - 5)}" text-anchor="end" fill="#555">base policy ${f1(base * 100)} %</text>`);
  }
  // Each series: a line through its means, a bar for each interval; points of one budget are nudged apart.
  series.forEach((s, i) => {
    const dx = (i - (series.length - 1) / 2) * 7;
    const ps = s.points.map((p) => ({ p, px: x(p.realEpisodes) + dx }));
    if (ps.length > 1) out.push(`<polyline fill="none" stroke="${s.colour}" stroke-width="2" points="${ps.map(({ p, px }) => `${f1(px)},${f1(y(p.mean))}`).join(' ')}"/>`);
    for (const { p, px } of ps) {
      out.push(`<line x1="${f1(px)}" x2="${f1(px)}" y1="${f1(y(p.lo))}" y2="${f1(y(p.hi))}" stroke="${s.colour}" stroke-width="1.5"/>`);
      out.push(`<circle cx="${f1(px)}" cy="${f1(y(p.mean))}" r="4" fill="${s.colour}"><title>${esc(`${p.label}: ${f1(p.mean * 100)} % [${f1(p.lo * 100)}, ${f1(p.hi * 100)}], ${p.seeds} seed${p.seeds === 1 ? '' : 's'}${p.vsReal ? `; vs real-only at the same budget ${fmtDiff(p.vsReal)} pts` : ''}`)}</title></circle>`);
    }
  });
  // Legend under the axis.
  series.forEach((s, i) => {
    const ly = H - M.b + 56 + i * 18;
    out.push(`<line x1="${M.l}" x2="${M.l + 24}" y1="${ly - 4}" y2="${ly - 4}" stroke="${s.colour}" stroke-width="2"/><circle cx="${M.l + 12}" cy="${ly - 4}" r="4" fill="${s.colour}"/>`);
    out.push(`<text x="${M.l + 32}" y="${ly}">${esc(s.label)}</text>`);
  });
  out.push('</svg>');
  return out.join('\n') + '\n';
}

/** The same numbers as a Markdown table: one row per budget, one column per series. */
export function renderBudgetTable(series: readonly BudgetSeries[], full: number): string {
  const budgets = [...new Set(series.flatMap((s) => s.points.map((p) => p.realEpisodes)))].sort((a, b) => a - b);
  const out = [`| real episodes / run | ${series.map((s) => s.label).join(' | ')} |`, `|---|${series.map(() => '---|').join('')}`];
  for (const e of budgets) {
    const cells = series.map((s) => {
      const p = s.points.find((q) => q.realEpisodes === e);
      if (!p) return '–';
      const vs = p.vsReal ? `; vs real-only ${fmtDiff(p.vsReal)}${p.vsReal.significant ? ' **yes**' : ''}` : '';
      return `${p.config}: ${f1(p.mean * 100)} [${f1(p.lo * 100)}, ${f1(p.hi * 100)}] (${p.seeds} seed${p.seeds === 1 ? '' : 's'}${vs})`;
    });
    out.push(`| ${e}${e === full ? ' (all)' : e === 0 ? '' : ` (${e / full === 0.25 ? '¼' : e / full === 0.5 ? '½' : `${e}/${full}`})`} | ${cells.join(' | ')} |`);
  }
  return out.join('\n');
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
