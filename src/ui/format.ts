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
    const d = decimals(step / div, 6);
    return `${(v / div).toFixed(d)}${unit}`;
  }
  return v.toFixed(decimals(step, 8));
}

/**
 * The decimals that write a multiple of `step` exactly: at least those of its order of magnitude, more when the step
 * needs them (a spacing of 0.25 needs two: with one, 0.25 and 0.75 would read 0.3 and 0.8).
 */
function decimals(step: number, max: number): number {
  let d = Math.max(0, Math.min(max, Math.ceil(-Math.log10(step) - 1e-9)));
  while (d < max && Math.abs(step * 10 ** d - Math.round(step * 10 ** d)) > 1e-6 * step * 10 ** d) d++;
  return d;
}
