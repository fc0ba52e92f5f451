// Hostile but fair inputs (issue 16): task files, nested JSON, think spans, model and adapter files, and
// the env CLI's numbers and paths. Each case is the defect's trigger; the assertion is the new behaviour
// (an error naming the file, task, tensor or field, the right exit status, or a bounded running time).
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { envCli } from '../../src/cli/env';
import { evalCli } from '../../src/cli/eval';
import { CpuRefBackend } from '../../src/engine/cpu/ref';
import { canonicalJson } from '../../src/env/json';
import { loadTaskFile, MAX_ARG_DEPTH } from '../../src/env/tau2';
import { stripThink } from '../../src/env/toolcall';
import { toHfConfig } from '../../src/model/config';
import { createLoraAdapter } from '../../src/model/lora';
import { adapterToPeftFiles, loadPeftAdapter } from '../../src/model/peft';
import { randomWeights } from '../../src/model/random';
import { MemorySource } from '../../src/model/source';
import { buildQwen3, loadQwen3, toSafetensors } from '../../src/model/weights';
import { EXIT_IO } from '../../src/util/atomic-file';
import { tinyConfig, tinyModelFiles } from '../fixtures/tiny-model';
import { calculateOnlyDomain, captureIo } from '../helpers/cli';

const work = mkdtempSync(join(tmpdir(), 'inputs-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const labTask = (over: Record<string, unknown> = {}) => ({
  id: 't1', userMessages: ['hi'], referenceActions: [{ name: 'calculate', arguments: { expression: '1+1' } }], facts: [],
  checklist: [{ kind: 'call', name: 'calculate', args: { expression: '1+1' }, weight: 1 }, { kind: 'no_forbidden_writes', weight: 2 }],
  ...over,
});
const DEEP = '"@deep@"';
/** A task file's text with DEEP replaced by a value nested `depth` levels (JSON.stringify cannot write one). */
const withDeep = (tasks: unknown[], depth: number) => JSON.stringify(tasks).replace(DEEP, '{"a":'.repeat(depth) + '1' + '}'.repeat(depth));

describe('task files', () => {
  const bad: [string, string, RegExp][] = [
    ['a null checklist item (crashed eval --tts in the judge)', JSON.stringify([labTask({ checklist: [null] })]), /task t1: checklist\.0: /],
    ['a checklist weight "x"', JSON.stringify([labTask({ checklist: [{ kind: 'fact', text: 'x', weight: 'x' }] })]), /task t1: checklist\.0\.weight: /],
    ['an unknown checklist kind', JSON.stringify([labTask({ checklist: [{ kind: 'vibes', weight: 1 }] })]), /checklist\.0\.kind/],
    [
      'reference arguments nested 10,000 deep (every rollout ran, then eval overflowed the stack)',
      withDeep([labTask({ referenceActions: [{ name: 'calculate', arguments: { x: JSON.parse(DEEP) } }] })], 10_000),
      new RegExp(`task t1: referenceActions\\.0\\.arguments: arguments are nested more than ${MAX_ARG_DEPTH} levels deep`),
    ],
    ['duplicate ids', JSON.stringify([labTask(), labTask()]), /task t1: id: duplicate \(tasks #0 and #1 share it\)/],
  ];
  for (const [what, text, msg] of bad) {
    it(`${what}: refused, naming the task and field`, () => {
      expect(() => loadTaskFile(text)).toThrow(msg);
    });
  }
  it('the τ² format gets the same depth and duplicate-id checks', () => {
    const t = (id: string, args: unknown) => ({ id, user_scenario: { instructions: 'x' }, evaluation_criteria: { actions: [{ name: 'calculate', arguments: args }] } });
    expect(() => loadTaskFile(withDeep([t('a', { x: JSON.parse(DEEP) })], 5000))).toThrow(/task a: evaluation_criteria\.actions\.0\.arguments: arguments are nested/);
    expect(() => loadTaskFile(JSON.stringify([t('a', {}), t('a', {})]))).toThrow(/id: duplicate/);
  });
  it('a valid lab file loads unchanged (extra fields kept)', () => {
    const t = { ...labTask(), family: 'calc', extra: { note: 1 } };
    expect(loadTaskFile(JSON.stringify([t]))).toEqual([t]);
  });
  it('eval --tasks FILE with a null checklist item exits 1 naming the task, before any rollout', async () => {
    const f = join(work, 'null-item.json');
    writeFileSync(f, JSON.stringify([labTask({ checklist: [null] })]));
    const io = captureIo();
    expect(await evalCli(['--tasks', f, '--tts', 'parallel', '--n', '1', '--model', join(work, 'no-model')], io, { domain: calculateOnlyDomain })).toBe(1);
    expect(io.stderr()).toMatch(/TaskFileError: task t1: checklist\.0/);
  });
});

describe('canonical JSON and think spans', () => {
  it('canonicalJson of a value nested 100,000 deep (recursion overflowed the stack)', () => {
    let v: unknown = 0;
    for (let i = 0; i < 100_000; i++) v = i % 2 ? [v] : { k: v };
    const s = canonicalJson(v);
    expect(s.length).toBe(1 + 100_000 + 50_000 * 4 + 50_000 * 2);
  });
  it('canonicalJson gives what the recursive version gave, on random values', () => {
    const recursive = (v: unknown): string => {
      if (v === null || v === undefined) return 'null';
      if (typeof v === 'number') return Number.isFinite(v) ? String(v === 0 ? 0 : v) : 'null';
      if (typeof v === 'boolean') return v ? 'true' : 'false';
      if (typeof v === 'string') return JSON.stringify(v);
      if (Array.isArray(v)) return '[' + v.map(recursive).join(',') + ']';
      const o = v as Record<string, unknown>;
      return '{' + Object.keys(o).sort().map((k) => JSON.stringify(k) + ':' + recursive(o[k])).join(',') + '}';
    };
    fc.assert(fc.property(fc.anything({ maxDepth: 5, withNullPrototype: true }), (v) => {
      expect(canonicalJson(v)).toBe(recursive(v));
    }), { numRuns: 500, seed: 16 });
  });
  it('stripThink is linear: 2 MB of unclosed <think> tags in well under a second (the regex was quadratic)', () => {
    const text = '<think>'.repeat(300_000);
    const t0 = performance.now();
    expect(stripThink('a' + text)).toBe('a');
    expect(stripThink('x<think>y</think>z' + text.slice(0, 70))).toBe('xz');
    expect(performance.now() - t0).toBeLessThan(500);
  });
  it('stripThink agrees with the old regex rule on random text', () => {
    const old = (text: string) => {
      const out = text.replace(/<think>[\s\S]*?<\/think>/g, '');
      const open = out.indexOf('<think>');
      return open >= 0 ? out.slice(0, open) : out;
    };
    const piece = fc.oneof(fc.constantFrom('<think>', '</think>', '<thi', 'nk>', '</th', 'ink>', '\n'), fc.string({ maxLength: 4 }));
    fc.assert(fc.property(fc.array(piece, { maxLength: 12 }).map((p) => p.join('')), (s) => {
      expect(stripThink(s)).toBe(old(s));
    }), { numRuns: 2000, seed: 3 });
  });
});

describe('model and adapter files', () => {
  const c = tinyConfig();
  it('a NaN or Inf weight is refused on load, naming the file and tensor (it surfaced only at generation)', async () => {
    const { host } = await buildQwen3(new CpuRefBackend(), c, randomWeights(c, 1, 'f32'), { format: 'f32', keepHost: true });
    const w = host!.get('model.layers.1.mlp.up_proj.weight')!;
    if (w.kind !== 'f32') throw new Error('f32 expected');
    w.data[7] = NaN;
    w.data[9] = -Infinity;
    const files = await tinyModelFiles(c, 1);
    files.set('model.safetensors', toSafetensors(c, host!));
    await expect(loadQwen3(new MemorySource(files), new CpuRefBackend(), { format: 'f32' })).rejects.toThrow(
      /model\.safetensors.*tensor 'model\.layers\.1\.mlp\.up_proj\.weight' holds 2 non-finite values \(NaN or ±Inf; first at index 7\)/,
    );
  });
  it('num_hidden_layers 1e9 fails at once (it ran V8 out of memory after 52 s)', async () => {
    const files = await tinyModelFiles(c, 1);
    files.set('config.json', new TextEncoder().encode(JSON.stringify({ ...toHfConfig(c), num_hidden_layers: 1e9 })));
    const t0 = performance.now();
    await expect(loadQwen3(new MemorySource(files), new CpuRefBackend(), { format: 'f32' })).rejects.toThrow(/num_hidden_layers|model\.layers\.2\.\S+' is missing/);
    expect(performance.now() - t0).toBeLessThan(5000);
  });
  it('PEFT fields the engine does not implement are refused by name (layers_to_transform was ignored)', async () => {
    const b = new CpuRefBackend();
    const files = await adapterToPeftFiles(b, createLoraAdapter(b, c, { name: 'a', rank: 2, alpha: 4, seed: 1 }));
    const cfg = JSON.parse(new TextDecoder().decode(files.get('adapter_config.json')));
    for (const [k, v] of [['layers_to_transform', [0]], ['layers_pattern', 'layers'], ['modules_to_save', ['lm_head']], ['exclude_modules', ['q_proj']]] as const) {
      files.set('adapter_config.json', new TextEncoder().encode(JSON.stringify({ ...cfg, [k]: v })));
      await expect(loadPeftAdapter(b, c, new MemorySource(files))).rejects.toThrow(new RegExp(`adapter_config\\.json.*${k}=.* is not supported`));
    }
    files.set('adapter_config.json', new TextEncoder().encode(JSON.stringify(cfg)));
    expect((await loadPeftAdapter(b, c, new MemorySource(files))).rank).toBe(2);
  });
});

describe('npm run env: numbers, paths, empty files', () => {
  it('generate --count 1e9 is a usage error (it ran without bound)', async () => {
    const io = captureIo();
    expect(await envCli(['generate', '--count', '1e9'], io)).toBe(2);
    expect(io.stderr()).toMatch(/--count must be an integer in \[1, 100000\], got "1e9"/);
  });
  it('generate --out to an unwritable place exits 74 naming it, before generating, and leaves nothing', async () => {
    const dir = join(work, 'is-a-dir');
    mkdirSync(dir);
    const io = captureIo();
    expect(await envCli(['generate', '--count', '2', '--out', dir], io)).toBe(EXIT_IO);
    expect(io.stderr()).toMatch(/--out: cannot write .*is-a-dir: it is a folder/);
    expect(readdirSync(dir)).toEqual([]);
    const io2 = captureIo();
    expect(await envCli(['generate', '--count', '2', '--out', '/proc/h16/x.json'], io2)).toBe(EXIT_IO);
  });
  it('generate --out writes the whole file, with no temp file beside it', async () => {
    const f = join(work, 'gen', 'tasks.json');
    const io = captureIo();
    expect(await envCli(['generate', '--count', '2', '--out', f], io)).toBe(0);
    expect(loadTaskFile(readFileSync(f, 'utf8'))).toHaveLength(2);
    expect(readdirSync(join(work, 'gen'))).toEqual(['tasks.json']);
  });
  it('replay [] fails (it exited 0 having replayed nothing); a missing file is an I/O error naming it', async () => {
    const f = join(work, 'empty.json');
    writeFileSync(f, '[]');
    const io = captureIo();
    expect(await envCli(['replay', f], io)).toBe(1);
    expect(io.stderr()).toMatch(/empty\.json: the task file holds no tasks/);
    const io2 = captureIo();
    expect(await envCli(['replay', join(work, 'missing.json')], io2)).toBe(EXIT_IO);
    expect(io2.stderr()).toMatch(/cannot read .*missing\.json/);
    expect(existsSync(join(work, 'missing.json'))).toBe(false);
  });
});
