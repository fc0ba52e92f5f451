// Axis tick labels readable at any magnitude: as many decimals as the spacing of the ticks needs (so
// 0.0001, 0.0002 … never all read "0"), thousands and millions shortened, and very small or very large
// values in exponent form.

/** Labels for one axis' ticks (uPlot's `values` hook gets the tick values, in order). */
export function tickLabels(ticks: readonly number[]): string[] {
  const finite = ticks.filter((t) => Number.isFinite(t));
  if (finite.length === 0) return ticks.map(() => '');
  let step = Infinity;
  for (let i = 1; i < finite.length; i++) {
    const d = Math.abs(finite[i] - finite[i - 1]);
    if (d > 0) step = Math.min(step, d);
  }
  const big = Math.max(...finite.map(Math.abs));
  if (!Number.isFinite(step)) step = big || 1;
  return ticks.map((t) => formatTick(t, step, big));
}

function formatTick(v: number, step: number, big: number): string {
  if (!Number.isFinite(v)) return '';
  if (Math.abs(v) < step * 1e-6) return '0';
  // Tiny or huge: exponent form with the digits the spacing needs.
  if (big < 1e-3 || big >= 1e7) {
    const digits = Math.max(0, Math.min(6, Math.ceil(Math.log10(big / step) - 1e-9)));
    return v.toExponential(digits).replace('e+', 'e');
  }
  if (big >= 1e4) {
    const [div, unit] = big >= 1e6 ? [1e6, 'M'] : [1e3, 'k'];
    const d = Math.max(0, Math.min(6, Math.ceil(-Math.log10(step / div) - 1e-9)));
    return `${(v / div).toFixed(d)}${unit}`;
  }
  const d = Math.max(0, Math.min(8, Math.ceil(-Math.log10(step) - 1e-9)));
  return v.toFixed(d);
}
