// Failure classes of a rehearsal probe (`npm run pretrain -- --probe-rehearsal`; a rehearsal-probe.json whose calls
// carry `field`, as the probe writes them from this record's first commit on): every inexact rehearsal is put in one
// class by its tool and the key path where it left the real observation. Prints a markdown table, one column a probe.
//   node research/records/2026-12-05-fidelity-stage/classes.mjs LABEL=runs/attentive/rehearsal-probe.json [LABEL=FILE ...]
import { readFileSync } from 'node:fs';

const ORDER_TOOLS = new Set(['get_order_details', 'cancel_pending_order', 'exchange_delivered_order_items', 'return_delivered_order_items', 'modify_pending_order_items', 'modify_pending_order_address', 'modify_pending_order_payment']);
const CLASSES = [
  ['order items (another order\'s items, ids, prices)', (c) => ORDER_TOOLS.has(c.tool) && c.field.startsWith('result.items')],
  ['status after a write (the state before it)', (c) => c.field === 'result.status'],
  ['address (after an address change)', (c) => c.field.startsWith('result.address')],
  ['product record (name, variants, options)', (c) => c.tool === 'get_product_details'],
  ['which record / error or result', (c) => c.field === '(key)' || c.field === 'result.(key)' || c.field === '(outside)'],
  ['calculate result', (c) => c.tool === 'calculate'],
  ['other', () => true],
];

const probes = process.argv.slice(2).map((a) => {
  const [label, file] = a.includes('=') ? a.split('=') : [a, a];
  return { label, p: JSON.parse(readFileSync(file, 'utf8')) };
});
const row = (cells) => `| ${cells.join(' | ')} |`;
console.log(row(['class of the inexact rehearsals (result in the prompt / not)', ...probes.map((x) => x.label)]));
console.log(row(['---', ...probes.map(() => '---')]));
const counts = probes.map(({ p }) => {
  const n = new Map(CLASSES.map(([k]) => [k, [0, 0]]));
  for (const c of p.calls) {
    if (c.exact) continue;
    if (c.field === undefined) throw new Error('a probe written before the field was recorded');
    const f = { ...c, field: c.field ?? '(outside)' };
    const [k] = CLASSES.find(([, test]) => test(f));
    n.get(k)[c.resultInPrompt ? 0 : 1]++;
  }
  return n;
});
for (const [k] of CLASSES) console.log(row([k, ...counts.map((n) => `${n.get(k)[0]} / ${n.get(k)[1]}`)]));
const tot = (p, f) => p.calls.filter(f).length;
console.log(row(['**inexact in all**', ...probes.map(({ p }) => `${tot(p, (c) => !c.exact && c.resultInPrompt)} / ${tot(p, (c) => !c.exact && !c.resultInPrompt)}`)]));
console.log(row(['exact (free decoding)', ...probes.map(({ p }) => `${tot(p, (c) => c.exact)} of ${p.calls.length} (${(100 * tot(p, (c) => c.exact) / p.calls.length).toFixed(1)}%)`)]));
console.log(row(['not exact: copied from elsewhere / not in the prompt / loops', ...probes.map(({ p }) => `${tot(p, (c) => c.divergence === 'copied from elsewhere')} / ${tot(p, (c) => c.divergence === 'not in the prompt')} / ${tot(p, (c) => c.loop)}`)]));
