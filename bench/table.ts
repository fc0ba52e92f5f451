// The benchmark tables of docs/benchmarks.md, generated from the committed records in bench/results/*.json (never
// typed by hand). `npm run bench -- --table` (or `node --import tsx bench/table.ts`) rewrites
// every block between `<!-- bench:NAME -->` and `<!-- /bench:NAME -->` in docs/benchmarks.md; `--check` only
// reports whether docs/benchmarks.md is up to date (exit 1 if not).
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BenchRecord } from './lib';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

function load(suite: string): BenchRecord[] {
  const p = join(ROOT, 'bench/results', `${suite}.json`);
  return existsSync(p) ? (JSON.parse(readFileSync(p, 'utf8')) as BenchRecord[]) : [];
}

const uniq = <T>(xs: T[]) => [...new Set(xs)];

/** "bench/results/x.json: 2026-12-01, commit abc, machine …" */
function provenance(suite: string, rs: BenchRecord[]): string {
  if (!rs.length) return `<sub>No records in \`bench/results/${suite}.json\` yet.</sub>`;
  const dates = uniq(rs.map((r) => r.date.slice(0, 10)));
  const commits = uniq(rs.map((r) => r.commit ?? 'not recorded'));
  const machines = uniq(rs.map((r) => r.machine));
  const adapters = uniq(rs.map((r) => r.adapter).filter((a): a is string => !!a));
  return (
    `<sub>Records: \`bench/results/${suite}.json\` — ${dates.join(', ')}, commit ${commits.map((c) => `\`${c}\``).join(', ')}, ${machines.join('; ')}` +
    (adapters.length ? `; adapters: ${adapters.join('; ')}` : '') +
    '.</sub>'
  );
}

function fmt(v: number | undefined, digits = 3): string {
  if (v === undefined || !Number.isFinite(v)) return '–';
  if (Math.abs(v) >= 1000) return Math.round(v).toLocaleString('en-US');
  return v.toPrecision(digits);
}

function find(rs: BenchRecord[], p: Partial<BenchRecord>): BenchRecord | undefined {
  return rs.find((r) => Object.entries(p).every(([k, v]) => (r as unknown as Record<string, unknown>)[k] === v));
}

/**
 * "43 % of fma x2" for a record measured against a limit (bench/limits.ts), else "–"; where the record has a
 * quiet-moment fraction (its best sample over the run's best probe), "43 % of fma x2 (best 38 %)".
 */
function ofLimit(r?: BenchRecord): string {
  if (r?.fraction_of_limit === undefined) return '–';
  const best = r.fraction_of_best_limit === undefined ? '' : ` (best ${(100 * r.fraction_of_best_limit).toFixed(0)} %)`;
  return `${(100 * r.fraction_of_limit).toFixed(0)} % of ${(r.limit ?? '').replace(/ = .*/, '')}${best}`;
}

/** The limits a suite measured beside its figures (the limit_* records). */
function limitsLine(rs: BenchRecord[]): string {
  const ls = rs.filter((r) => r.metric.startsWith('limit_'));
  if (!ls.length) return '';
  return `Limits measured in the same run (bench/limits.ts; median of the probes, their range): ${ls.map((r) => `${r.case.replace('limit: ', '')} ${fmt(r.value)} ${r.unit} (${r.shape?.replace(/^median of /, '')})`).join('; ')}.\n\n`;
}

function attentionTable(): string | null {
  const rs = load('attention');
  if (!rs.length) return null;
  const relaxed = rs.some((r) => r.case.startsWith('attention v2 relaxed'));
  const v3 = rs.some((r) => r.case.startsWith('attention v3'));
  // a variant's cell: GFLOP/s (or tok/s) and its fraction of the limit measured beside it
  const cell = (r?: BenchRecord) => (r ? `${fmt(r.value)}${r.fraction_of_limit === undefined ? '' : `, ${ofLimit(r)}`}` : '–');
  const x = (r?: BenchRecord) => (r ? `**${r.value.toFixed(2)}×**` : '–');
  const cols = ['v1 (simple)', 'v2 (tiled)', 'v2 / v1', ...(v3 ? ['v3', 'v3 / v2'] : []), ...(relaxed ? ['v2 relaxed', 'relaxed / strict v2'] : []), ...(relaxed && v3 ? ['v3 relaxed', 'v3 / v2 relaxed'] : [])];
  const rows = [`| case | pass | threads | ${cols.join(' | ')} |`, `|---|---|---|${cols.map(() => '---|').join('')}`];
  const line = (label: string, pass: string, threads: number, g: (v: string) => BenchRecord | undefined, sp: (what: string) => BenchRecord | undefined) =>
    rows.push(
      `| ${label} | ${pass} | ${threads} | ${cell(g('v1'))} | ${cell(g('v2'))} | ${x(sp('v2 / v1'))} |` +
        (v3 ? ` ${cell(g('v3'))} | ${x(sp('v3 / v2'))} |` : '') +
        (relaxed ? ` ${cell(g('v2 relaxed'))} | ${x(sp('v2 relaxed / v2'))} |` : '') +
        (relaxed && v3 ? ` ${cell(g('v3 relaxed'))} | ${x(sp('v3 relaxed / v2 relaxed'))} |` : ''),
    );
  for (const sp of rs.filter((r) => r.metric === 'speedup')) {
    const m = /^attention v2 \/ v1 ([\w+]+), (.*)$/.exec(sp.case);
    if (!m) continue;
    const [, pass, name] = m;
    const g = (v: string) => find(rs, { case: `attention ${v} ${pass}, ${name}`, metric: 'gflops', threads: sp.threads });
    line(`${name} (${sp.shape})`, pass, sp.threads, g, (what) => find(rs, { case: `attention ${what} ${pass}, ${name}`, metric: 'speedup', threads: sp.threads }));
  }
  for (const sp of rs.filter((r) => r.metric === 'speedup' && r.case.endsWith(', attention v2 / v1'))) {
    const name = sp.case.slice(0, -', attention v2 / v1'.length);
    const g = (v: string) => find(rs, { case: `${name}, attention ${v}`, metric: 'train_tok_s', threads: sp.threads });
    line(`${name}, whole step (${sp.model})`, 'tok/s', sp.threads, g, (what) => find(rs, { case: `${name}, attention ${what}`, metric: 'speedup', threads: sp.threads }));
  }
  const legend = 'Each cell: GFLOP/s (tokens/s in the whole-step rows), then the fraction of the limit measured beside it; forward+backward = the two passes together (14 flops per query row, key and head value over the sum of the two medians).';
  return `${rows.join('\n')}\n\n${legend}\n\n${limitsLine(rs)}${provenance('attention', rs)}`;
}

function matmulTable(): string | null {
  const rs = load('matmul');
  if (!rs.length) return null;
  const rows: string[] = ['| weights | M | threads | ort-wasm | cpu-fast | cpu-fast / ort | cpu-fast, of limit | cpu-ref | webgpu |', '|---|---|---|---|---|---|---|---|---|'];
  let low = { ratio: Infinity, at: '' };
  for (const threads of uniq(rs.map((r) => r.threads)).sort())
    for (const shape of uniq(rs.filter((r) => r.shape?.startsWith('M=')).map((r) => r.shape!)))
      for (const kind of ['f32', 'q8', 'q4']) {
        const cs = rs.filter((r) => r.shape === shape && r.case === `matmul-${kind}`);
        if (!cs.length) continue;
        const get = (b: string, t = threads) => cs.find((r) => r.backend === b && r.threads === t)?.value;
        const fastRec = cs.find((r) => r.backend === 'cpu-fast' && r.threads === threads);
        const ort = get('ort-wasm');
        const fast = get('cpu-fast');
        if (ort === undefined && fast === undefined) continue;
        const ratio = ort && fast ? fast / ort : undefined;
        if (ratio !== undefined && ratio < low.ratio) low = { ratio, at: `${kind}, ${shape}, ${threads} thread(s)` };
        const M = /M=?(\d+)/.exec(shape)?.[1] ?? shape;
        rows.push(
          `| ${kind} | ${M} | ${threads} | ${fmt(ort)} | ${fmt(fast)} | ${ratio ? `**${ratio.toFixed(2)}×**` : '–'} | ${ofLimit(fastRec)} | ${threads === 1 ? fmt(get('cpu-ref', 1)) : '–'} | ${threads === 1 ? fmt(get('webgpu', 1)) : '–'} |`,
        );
      }
  return `${rows.join('\n')}\n\nLowest cpu-fast / ort ratio: ${low.ratio.toFixed(2)}× (${low.at}).\n\n${limitsLine(rs)}${provenance('matmul', rs)}`;
}

/** cpu-fast's matmul kernel versions side by side (bench/suites/matmul.ts kernelVersions). */
function matmulVersionsTable(): string | null {
  const rs = load('matmul').filter((r) => / kernel /.test(r.case));
  if (!rs.length) return null;
  const rows = [
    '| weights | M | threads | v1 strict | v2 strict | v2 / v1 | v2 relaxed | v2 relaxed / v1 strict | v2 packed relaxed | packed / per call | v1 strict, of limit | v2 strict, of limit | v2 relaxed, of limit | v2 packed relaxed, of limit |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const threads of uniq(rs.map((r) => r.threads)).sort())
    for (const shape of uniq(rs.map((r) => r.shape!)))
      for (const kind of ['f32', 'q8', 'q4']) {
        const g = (v: string) => find(rs, { case: `matmul-${kind} kernel ${v}`, shape, threads, metric: 'gflops' });
        const sp = (v: string) => find(rs, { case: `matmul-${kind} kernel ${v}`, shape, threads, metric: 'speedup' })?.value;
        if (!g('v1 strict')) continue;
        const M = /M=?(\d+)/.exec(shape)?.[1] ?? shape;
        const x = (v?: number) => (v === undefined ? '–' : `**${v.toFixed(2)}×**`);
        rows.push(`| ${kind} | ${M} | ${threads} | ${fmt(g('v1 strict')?.value)} | ${fmt(g('v2 strict')?.value)} | ${x(sp('v2 / v1 strict'))} | ${fmt(g('v2 relaxed')?.value)} | ${x(sp('v2 relaxed / v1 strict'))} | ${fmt(g('v2 packed relaxed')?.value)} | ${x(sp('v2 packed relaxed / v2 relaxed'))} | ${ofLimit(g('v1 strict'))} | ${ofLimit(g('v2 strict'))} | ${ofLimit(g('v2 relaxed'))} | ${ofLimit(g('v2 packed relaxed'))} |`);
      }
  return `${rows.join('\n')}\n\n${provenance('matmul', rs)}`;
}

/** Our full-parameter training step against PyTorch's (bench/suites/peer.ts). */
function peerTable(): string | null {
  const rs = load('peer');
  if (!rs.length) return null;
  const rows = [
    '| threads | shape | PyTorch (eager, CPU; of fma: what ours would need) | PyTorch held to 128-bit SIMD | cpu-fast strict | strict / PyTorch | strict / PyTorch 128-bit | cpu-fast relaxed | relaxed / PyTorch | relaxed / PyTorch 128-bit | first-step loss: PyTorch / 128-bit / strict / relaxed |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const threads of uniq(rs.map((r) => r.threads)).sort()) {
    const at = (metric: string, b: string, end: RegExp) => rs.find((r) => r.threads === threads && r.backend === b && r.metric === metric && end.test(r.case));
    const tok = (b: string, end: RegExp) => at('train_tok_s', b, end);
    const loss = (b: string, end: RegExp) => at('loss_first_step', b, end)?.value;
    const sp = (end: RegExp) => at('speedup', 'cpu-fast', end)?.value;
    const [wide, narrow, strict, relaxed] = [/eager$/, /128-bit SIMD$/, /strict$/, /relaxed$/];
    const pt = tok('pytorch', wide);
    if (!pt) continue;
    const cell = (r?: BenchRecord) => (r ? `${fmt(r.value)} tok/s${r.fraction_of_limit === undefined ? '' : `, ${ofLimit(r)}`}` : '–');
    const x = (v?: number) => (v === undefined ? '–' : `**${v.toFixed(2)}×**`);
    const l = (v?: number) => (v === undefined ? '–' : v.toFixed(6));
    rows.push(
      `| ${threads} | ${pt.shape} | ${cell(pt)} | ${cell(tok('pytorch', narrow))} | ${cell(tok('cpu-fast', strict))} | ${x(sp(/strict \/ pytorch$/))} | ${x(sp(/strict \/ pytorch 128-bit$/))} | ${cell(tok('cpu-fast', relaxed))} | ${x(sp(/relaxed \/ pytorch$/))} | ${x(sp(/relaxed \/ pytorch 128-bit$/))} | ${l(loss('pytorch', wide))} / ${l(loss('pytorch', narrow))} / ${l(loss('cpu-fast', strict))} / ${l(loss('cpu-fast', relaxed))} |`,
    );
  }
  const torch = rs.find((r) => r.backend === 'pytorch')?.case.replace(/^.*, (pytorch [^,]*).*$/, '$1');
  return `${rows.join('\n')}\n\n${torch ? `PyTorch: ${torch}. ` : ''}${limitsLine(rs)}${provenance('peer', rs)}`;
}

function tinyTable(): string | null {
  const inf = load('inference').filter((r) => r.model?.startsWith('tiny'));
  const tr = load('training');
  if (!inf.length && !tr.length) return null;
  const backends = ['cpu-ref', 'cpu-fast', 'ort-wasm', 'webgpu'] as const;
  const rows = ['| | cpu-ref | cpu-fast | onnxruntime-web wasm | webgpu (lavapipe) |', '|---|---|---|---|---|'];
  const line = (label: string, pick: (b: string) => BenchRecord | undefined) => {
    const v = (b: string) => pick(b)?.value;
    const ref = v('cpu-ref');
    const cell = (b: string) => {
      const x = v(b);
      if (x === undefined) return '–';
      return `${fmt(x)} tok/s${b === 'cpu-fast' && ref ? ` (${(x / ref).toFixed(x / ref < 10 ? 1 : 0)}×)` : ''}`;
    };
    const shape = backends.map((b) => pick(b)?.shape).find(Boolean);
    rows.push(`| ${label}${shape ? ` <sub>${shape}</sub>` : ''} | ${backends.map(cell).join(' | ')} |`);
  };
  const m = inf[0]?.model;
  line('prefill', (b) => find(inf, { backend: b as never, metric: 'prefill_tok_s', case: `prefill ${m}` }));
  line('decode, 1 sequence', (b) => find(inf, { backend: b as never, metric: 'decode_tok_s', case: `decode ${m}` }));
  line('decode, 8 sequences together', (b) => find(inf, { backend: b as never, metric: 'decode_tok_s', case: `decode x8 ${m}` }));
  line('train step, LoRA on q4', (b) => find(tr, { backend: b as never, case: 'train step lora q4' }));
  line('train step, full-parameter f32', (b) => find(tr, { backend: b as never, case: 'train step full f32' }));
  return `${rows.join('\n')}\n\n${provenance('inference', inf)}\n${provenance('training', tr.filter((r) => r.metric === 'train_tok_s'))}`;
}

function q06Table(): string | null {
  const rs = load('inference').filter((r) => r.model?.includes('0.6b'));
  if (!rs.length) return null;
  const m = rs[0].model!;
  const rows = ['| | cpu-ref | cpu-fast | onnxruntime-web wasm | webgpu (lavapipe) |', '|---|---|---|---|---|'];
  const line = (label: string, c: string, metric: string) => {
    const cell = (b: string) => {
      const r = find(rs, { backend: b as never, case: c, metric });
      return r ? `${fmt(r.value)} tok/s <sub>${r.shape}</sub>` : '–';
    };
    rows.push(`| ${label} | ${['cpu-ref', 'cpu-fast', 'ort-wasm', 'webgpu'].map(cell).join(' | ')} |`);
  };
  line('prefill', `prefill ${m}`, 'prefill_tok_s');
  line('decode, 1 sequence', `decode ${m}`, 'decode_tok_s');
  line('decode, 8 sequences together', `decode x8 ${m}`, 'decode_tok_s');
  return `${rows.join('\n')}\n\n${provenance('inference', rs)}`;
}

function memoryTable(): string | null {
  const rs = load('training').filter((r) => r.metric.startsWith('gpu_bytes'));
  if (!rs.length) return null;
  const rows = ['| model | step | predicted | measured on WebGPU |', '|---|---|---|---|'];
  for (const m of uniq(rs.map((r) => r.model!))) {
    const p = find(rs, { model: m, metric: 'gpu_bytes_predicted' });
    const q = find(rs, { model: m, metric: 'gpu_bytes_measured' });
    const gib = (r?: BenchRecord) => (r ? `${(r.value / 2 ** 30).toFixed(3)} GiB` : 'not measured');
    rows.push(`| ${m} | ${p?.shape ?? q?.shape ?? ''} | ${gib(p)} | ${gib(q)} |`);
  }
  return `${rows.join('\n')}\n\n${provenance('training', rs)}`;
}

function quantTable(): string | null {
  const rs = load('quant');
  if (!rs.length) return null;
  const models = uniq(rs.map((r) => r.model!));
  const head = `| scheme | ${models.map((m) => `${m}: logits rel. L2 error | argmax = f32 | weights`).join(' | ')} |`;
  const rows = [head, `|---|${models.map(() => '---|---|---|').join('')}`];
  for (const s of uniq(rs.map((r) => r.case))) {
    const cells = models.map((m) => {
      const e = find(rs, { case: s, model: m, metric: 'logit_rel_l2' });
      const a = find(rs, { case: s, model: m, metric: 'argmax_agree' });
      const w = find(rs, { case: s, model: m, metric: 'weight_bytes' });
      const T = Number(/tokens=(\d+)/.exec(e?.shape ?? '')?.[1] ?? 0);
      return `${e ? e.value.toFixed(4) : '–'} | ${a ? `${Math.round(a.value * T)}/${T}` : '–'} | ${w ? `${(w.value / 2 ** 20).toFixed(w.value > 2 ** 30 ? 0 : 2)} MiB` : '–'}`;
    });
    rows.push(`| ${s.includes('(default)') ? `**${s}**` : s} | ${cells.join(' | ')} |`);
  }
  return `${rows.join('\n')}\n\n${provenance('quant', rs)}`;
}

/** A short adapter name for a table cell (the provenance line keeps the full one). */
function shortAdapter(a = ''): string {
  if (/llvmpipe/i.test(a)) return 'lavapipe (software)';
  if (/swiftshader/i.test(a)) return 'SwiftShader (software)';
  return a.length > 48 ? `${a.slice(0, 45)}…` : a;
}

function gpuTable(): string | null {
  const rs = load('gpu');
  if (!rs.length) return null;
  const rows = ['| where | model | prompt / decode | our prefill | ORT prefill | our decode | ORT decode | our decode: weight GB/s (fraction of bound) | ORT decode: weight GB/s (fraction) |', '|---|---|---|---|---|---|---|---|---|'];
  const wheres = uniq(rs.map((r) => /\((\w+)\)$/.exec(r.case)?.[1] ?? ''));
  for (const w of wheres) {
    const mine = rs.filter((r) => r.case.endsWith(`(${w})`));
    const copy = find(mine, { metric: 'copy_gb_s' });
    for (const m of uniq(mine.filter((r) => r.metric === 'decode_tok_s').map((r) => r.model!))) {
      const g = (b: string, metric: string, what: string) => find(mine, { backend: b as never, metric, case: `${what} ${m} (${w})` });
      const tok = (r?: BenchRecord) => (r ? `${fmt(r.value)} tok/s` : '–');
      const bw = (b: string) => {
        const gbs = g(b, 'weight_gb_s', 'decode');
        const f = g(b, 'bandwidth_fraction', 'decode');
        return gbs && f ? `${fmt(gbs.value)} (${(100 * f.value).toPrecision(2)} %)` : '–';
      };
      const shape = g('webgpu', 'decode_tok_s', 'decode')?.shape ?? g('ort-webgpu', 'decode_tok_s', 'decode')?.shape ?? '';
      rows.push(
        `| ${w}, ${shortAdapter(copy?.adapter)}, copy ${fmt(copy?.value)} GB/s | ${m} | ${shape.replace('prompt=', '').replace(',decode=', ' / ')} | ${tok(g('webgpu', 'prefill_tok_s', 'prefill'))} | ${tok(g('ort-webgpu', 'prefill_tok_s', 'prefill'))} | ${tok(g('webgpu', 'decode_tok_s', 'decode'))} | ${tok(g('ort-webgpu', 'decode_tok_s', 'decode'))} | ${bw('webgpu')} | ${bw('ort-webgpu')} |`,
      );
    }
  }
  // Steady decode steps side by side (bench/gpu/common.ts compareDecode): host work per step under each
  // buffer-reuse order, and the decode GEMV versions.
  const steady = rs.filter((r) => r.shape?.startsWith('steady decode step, '));
  const copy = (w: string) => find(rs, { metric: 'copy_gb_s', case: `buffer copy (${w})` });
  const steps = ['| where | model | variant (steps) | dispatches / token | createBindGroup / step | submits / step | decode | decode, of limit |', '|---|---|---|---|---|---|---|---|'];
  for (const shape of uniq(steady.map((r) => `${r.case}\u0000${r.shape}`))) {
    const [c, sh] = shape.split('\u0000');
    const at = (metric: string) => steady.find((r) => r.case === c && r.shape === sh && r.metric === metric);
    const where = /\((\w+)\)$/.exec(c)?.[1] ?? '';
    const label = sh.replace('steady decode step, ', '').replace(/, steps=(\d+)$/, ' ($1)');
    const tok = at('decode_tok_s');
    // the runner's gpu-copy limit where its probe ran, else the copy bandwidth the suite measured itself
    const bf = at('bandwidth_fraction');
    const lim = tok?.fraction_of_limit !== undefined ? ofLimit(tok) : bf ? `${(100 * bf.value).toPrecision(2)} % of copy ${fmt(copy(where)?.value)} GB/s` : '–';
    steps.push(`| ${where} | ${at('dispatches_per_token')?.model ?? at('decode_tok_s')?.model ?? ''} | ${label} | ${fmt(at('dispatches_per_token')?.value)} | ${fmt(at('bind_groups_per_step')?.value)} | ${fmt(at('submits_per_step')?.value)} | ${tok ? `${fmt(tok.value)} tok/s` : '–'} | ${lim} |`);
  }
  const stepTable = steady.length ? `\n\n${steps.join('\n')}` : '';
  // our decode against the CPU fast path's on the same weights, side by side in one run (bench/gpu/common.ts compareModels)
  const vsCpu = rs
    .filter((r) => r.metric === 'decode_vs_cpu_fast')
    .map((r) => `Decode of ${r.model} in ${/\((\w+)\)$/.exec(r.case)?.[1] ?? ''}, WebGPU against cpu-fast on the same weights (steady steps side by side): **${r.value.toFixed(2)}×**.`);
  const vsTable = vsCpu.length ? `\n\n${vsCpu.join('\n')}` : '';
  // prefill at several prompt lengths, both engines side by side (bench/gpu/prefill.ts)
  const side = rs.filter((r) => r.metric === 'prefill_tok_s' && r.shape?.includes('side by side'));
  const pre = ['| where | model | prompt | our prefill | ORT prefill | ours / ORT |', '|---|---|---|---|---|---|'];
  for (const key of uniq(side.map((r) => `${r.case}\u0000${r.shape}`))) {
    const [c, sh] = key.split('\u0000');
    const at = (b: string, metric = 'prefill_tok_s') => rs.find((r) => r.case === c && r.shape === sh && r.backend === b && r.metric === metric);
    const ratio = at('webgpu', 'prefill_vs_ort');
    const tok = (r?: BenchRecord) => (r ? `${fmt(r.value)} tok/s` : '–');
    pre.push(`| ${/\((\w+)\)$/.exec(c)?.[1] ?? ''} | ${at('webgpu')?.model ?? at('ort-webgpu')?.model ?? ''} | ${/prompt=(\d+)/.exec(sh)?.[1] ?? ''} | ${tok(at('webgpu'))} | ${tok(at('ort-webgpu'))} | ${ratio ? `**${ratio.value.toFixed(2)}×**` : '–'} |`);
  }
  const preTable = side.length ? `\n\n${pre.join('\n')}` : '';
  return `${rows.join('\n')}${stepTable}${vsTable}${preTable}\n\n${provenance('gpu', rs)}`;
}

function decodingTable(): string | null {
  const rs = load('decoding');
  if (!rs.length) return null;
  const rows = ['| rehearsal decoding | rehearsals | generated tok/s | ms per rehearsal | ratio to free (tok/s) | parse |', '|---|---|---|---|---|---|'];
  const get = (d: string, metric: string) => rs.find((r) => r.case.startsWith(`rehearse ${d} `) && r.metric === metric);
  const free = get('free', 'rehearse_tok_s');
  for (const d of ['free', 'structured']) {
    const tps = get(d, 'rehearse_tok_s');
    if (!tps) continue;
    const calls = /calls=(\d+)/.exec(tps.shape ?? '')?.[1] ?? '–';
    rows.push(`| ${d} | ${calls} | ${fmt(tps.value)} | ${fmt(get(d, 'ms_per_rehearsal')?.value)} | ${free ? (tps.value / free.value).toFixed(2) : '–'} | ${(100 * (get(d, 'parsed_share')?.value ?? NaN)).toFixed(1)} % |`);
  }
  return `${rows.join('\n')}\n\n${provenance('decoding', rs)}`;
}

function grpoTable(): string | null {
  const rs = load('grpo');
  if (!rs.length) return null;
  const rows = ['| step part | batch | whole rows | prefix-shared / memoized | speed-up |', '|---|---|---|---|---|'];
  for (const shape of uniq(rs.filter((r) => r.metric === 'update_s').map((r) => r.shape!))) {
    const get = (layout: string, metric: string) => find(rs, { case: `grpo update, ${layout}`, metric, shape })?.value;
    const [a, b] = [get('whole rows', 'update_s'), get('shared prefixes', 'update_s')];
    const [fa, fb] = [get('whole rows', 'fed_tokens'), get('shared prefixes', 'fed_tokens')];
    rows.push(`| GRPO update | ${shape} | ${fmt(a)} s (${fmt(fa)} tokens) | ${fmt(b)} s (${fmt(fb)} tokens) | ${a && b ? (a / b).toFixed(1) : '–'}× |`);
  }
  const enc = (name: string) => rs.find((r) => r.metric === 'encode_s' && r.case.endsWith(name));
  const [plain, memo] = [enc('transformers.js'), enc('memoized segments')];
  if (plain && memo) rows.push(`| encode Act prompts | ${plain.shape} | ${fmt(plain.value)} s | ${fmt(memo.value)} s | ${(plain.value / memo.value).toFixed(1)}× |`);
  return `${rows.join('\n')}\n\n${provenance('grpo', rs)}`;
}

/** The training loop's parts at 1 and 2 cpu-fast threads (bench/suites/threads.ts). */
function threadsTable(): string | null {
  const rs = load('threads');
  if (!rs.length) return null;
  const rows = ['| part | shape | 1 thread | 2 threads | 2 threads / 1 thread | in kernels, 1 / 2 threads |', '|---|---|---|---|---|---|'];
  for (const sp of rs.filter((r) => r.metric === 'speedup')) {
    const part = sp.case.replace(/: 2 threads \/ 1 thread$/, '');
    const at = (metric: string, threads: number) => rs.find((r) => r.case === part && r.threads === threads && (metric === 'kernel_share' ? r.metric === metric : r.unit === 's'))?.value;
    const pct = (x: number | undefined) => (x === undefined ? '–' : `${(100 * x).toFixed(0)} %`);
    rows.push(`| ${part} | ${sp.shape} | ${fmt(at('s', 1))} s | ${fmt(at('s', 2))} s | ${sp.value.toFixed(2)}× | ${pct(at('kernel_share', 1))} / ${pct(at('kernel_share', 2))} |`);
  }
  return `${rows.join('\n')}\n\n${provenance('threads', rs)}`;
}

function cpuBrowserTable(): string | null {
  const rs = load('cpu-browser');
  if (!rs.length) return null;
  const rows = ['| kernel | shape | threads | Node | Chromium worker | Chromium / Node |', '|---|---|---|---|---|---|'];
  for (const r of rs.filter((x) => x.case.endsWith(' (node)'))) {
    const kernel = r.case.slice(0, -' (node)'.length);
    const web = find(rs, { case: `${kernel} (chromium worker)`, threads: r.threads });
    rows.push(`| ${kernel} | ${r.shape} | ${r.threads} | ${fmt(r.value)} ms | ${fmt(web?.value)} ms | ${web ? (web.value / r.value).toFixed(2) : '–'}× |`);
  }
  return `${rows.join('\n')}\n\n${provenance('cpu-browser', rs)}`;
}

export const TABLES: Record<string, () => string | null> = {
  matmul: matmulTable,
  'matmul-versions': matmulVersionsTable,
  peer: peerTable,
  attention: attentionTable,
  tiny: tinyTable,
  'qwen3-0.6b': q06Table,
  memory: memoryTable,
  quant: quantTable,
  gpu: gpuTable,
  decoding: decodingTable,
  grpo: grpoTable,
  threads: threadsTable,
  'cpu-browser': cpuBrowserTable,
};

/** The page's text with every bench block regenerated. */
export function renderReadme(text: string): string {
  return text.replace(/<!-- bench:([\w.-]+) -->[\s\S]*?<!-- \/bench:\1 -->/g, (whole, name: string) => {
    const make = TABLES[name];
    if (!make) throw new Error(`docs/benchmarks.md: unknown bench block '${name}' (have: ${Object.keys(TABLES).join(', ')})`);
    const body = make() ?? '_No records yet: run the suite, then `npm run bench -- --table`._';
    return `<!-- bench:${name} -->\n${body}\n<!-- /bench:${name} -->`;
  });
}

/** Where the tables live (moved out of README.md, which stays short: issue 49). */
export const PAGE = 'docs/benchmarks.md';

export function main(args: string[]): number {
  const path = join(ROOT, PAGE);
  const text = readFileSync(path, 'utf8');
  const next = renderReadme(text);
  if (args.includes('--check')) {
    if (next !== text) {
      console.error(`${PAGE} benchmark tables differ from bench/results/*.json: run npm run bench -- --table`);
      return 1;
    }
    console.error(`${PAGE} benchmark tables match the records`);
    return 0;
  }
  writeFileSync(path, next);
  console.error(next === text ? `${PAGE} tables already up to date` : `${PAGE} tables regenerated from bench/results/*.json`);
  return 0;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) process.exitCode = main(process.argv.slice(2));
