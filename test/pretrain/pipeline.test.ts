// The whole pretraining pipeline on the quick configuration: a Hugging Face folder that the lab's loader
// and tokenizer read back, a falling loss, byte-identical weights from the same seed, and a CLI that fails
// loudly on bad input.
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { createBackend } from '../../src/engine/index';
import { loadRetailBase } from '../../src/env/retail/node';
import { retailDomain } from '../../src/env/retail/index';
import { DirSource } from '../../src/model/source-node';
import { Tokenizer } from '../../src/model/tokenizer';
import { loadQwen3 } from '../../src/model/weights';
import { fromTokenizerJson } from '../../src/model/hf-tokenizer';
import { widenShape } from '../../research/pretrain/grow';
import { pretrain, QUICK_SPEC } from '../../research/pretrain/pipeline';
import { pretrainCli } from '../../research/pretrain/cli';
import { captureIo } from '../helpers/cli';

const domain = retailDomain(loadRetailBase());
const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

async function quickRun(seed: number, steps: number, o: { init?: string; layers?: number; widthFactor?: number; groundingChars?: number; expertRehearse?: boolean; rehearseOnlyTasks?: number; statedValues?: boolean; snapshotEvery?: number } = {}) {
  const out = await mkdtemp(join(tmpdir(), 'pretrain-'));
  dirs.push(out);
  const b = await createBackend('cpu-fast', { threads: 2 });
  try {
    const spec = { ...QUICK_SPEC, steps, model: widenShape({ ...QUICK_SPEC.model, numLayers: o.layers ?? QUICK_SPEC.model.numLayers }, o.widthFactor ?? 1), ...(o.groundingChars !== undefined ? { groundingChars: o.groundingChars } : {}), ...(o.expertRehearse !== undefined ? { expertRehearse: o.expertRehearse } : {}), ...(o.rehearseOnlyTasks !== undefined ? { rehearseOnlyTasks: o.rehearseOnlyTasks } : {}), ...(o.statedValues ? { preTokenizer: 'stated-values' as const, retokenize: true } : {}) };
    const r = await pretrain(b, domain, spec, { seed, out, log: () => {}, ...(o.init ? { init: o.init } : {}), ...(o.snapshotEvery ? { snapshotEvery: o.snapshotEvery } : {}) });
    return { r, out, weights: await readFile(join(out, 'model.safetensors')) };
  } finally {
    b.dispose();
  }
}

describe('pretrain (quick)', () => {
  it('writes a folder the lab loads, with both roles in the data and a falling loss', async () => {
    const { r, out } = await quickRun(3, 10);
    expect(r.data.rows.act).toBeGreaterThan(0);
    expect(r.data.rows.rehearse).toBeGreaterThan(0);
    const first = r.losses.slice(0, 2).reduce((a, x) => a + x.loss, 0) / 2;
    const last = r.losses.slice(-2).reduce((a, x) => a + x.loss, 0) / 2;
    expect(last).toBeLessThan(first - 0.3);

    const src = new DirSource(out);
    const b = await createBackend('cpu-ref');
    const { model } = await loadQwen3(src, b, { format: 'f32' });
    expect(model.config.vocabSize).toBe(r.config.vocabSize);
    const tok = await Tokenizer.load(src);
    const bpe = fromTokenizerJson(JSON.parse(await readFile(join(out, 'tokenizer.json'), 'utf8')));
    const text = '<|im_start|>user\nCancel order #W1234567 please.<|im_end|>\n';
    expect(tok.encode(text)).toEqual(bpe.encode(text));
    expect(tok.hasChatTemplate).toBe(true);
    const gen = JSON.parse(await readFile(join(out, 'generation_config.json'), 'utf8')) as { eos_token_id: number[] };
    expect(gen.eos_token_id).toContain(tok.tokenId('<|im_end|>'));
  }, 120_000);

  it('is reproducible: the same seed gives the same model.safetensors bytes, with or without snapshots on the way', async () => {
    const a = await quickRun(5, 3);
    const b = await quickRun(5, 3, { snapshotEvery: 2 });
    expect(Buffer.compare(a.weights, b.weights)).toBe(0);
    // The snapshot is a loadable folder of the step-2 weights; the last step is the run's own folder, not a snapshot.
    const snap = join(b.out, 'snapshots', 'step-2');
    expect((await readdir(join(b.out, 'snapshots'))).sort()).toEqual(['step-2']);
    const snapWeights = await readFile(join(snap, 'model.safetensors'));
    expect(snapWeights.length).toBe(a.weights.length);
    expect(Buffer.compare(snapWeights, a.weights)).not.toBe(0);
    const { model } = await loadQwen3(new DirSource(snap), await createBackend('cpu-ref'), { format: 'f32' });
    expect(model.config.vocabSize).toBe(a.r.config.vocabSize);
    expect(await readFile(join(snap, 'tokenizer.json'), 'utf8')).toBe(await readFile(join(a.out, 'tokenizer.json'), 'utf8'));
  }, 120_000);

  it('a stage may grow the layer count: it starts from the same function and writes the larger config', async () => {
    const first = await quickRun(5, 3);
    const same = await quickRun(5, 2, { init: first.out });
    const grown = await quickRun(5, 2, { init: first.out, layers: QUICK_SPEC.model.numLayers + 2 });
    // Same data order and identity layers: the first step's loss is the init model's on the same batch.
    expect(grown.r.losses[0].loss).toBe(same.r.losses[0].loss);
    expect(grown.r.losses[1].loss).not.toBe(same.r.losses[1].loss);
    const cfg = JSON.parse(await readFile(join(grown.out, 'config.json'), 'utf8')) as { num_hidden_layers: number };
    expect(cfg.num_hidden_layers).toBe(QUICK_SPEC.model.numLayers + 2);
    // Twice as wide: the same function up to float rounding (the first step's loss), then its own path.
    const wide = await quickRun(5, 2, { init: first.out, widthFactor: 2 });
    expect(Math.abs(wide.r.losses[0].loss - same.r.losses[0].loss)).toBeLessThan(1e-4 * same.r.losses[0].loss);
    const wcfg = JSON.parse(await readFile(join(wide.out, 'config.json'), 'utf8')) as { hidden_size: number; num_attention_heads: number; num_key_value_heads: number; intermediate_size: number };
    expect(wcfg).toMatchObject({ hidden_size: QUICK_SPEC.model.hiddenSize * 2, num_attention_heads: QUICK_SPEC.model.numHeads * 2, num_key_value_heads: QUICK_SPEC.model.numKvHeads * 2, intermediate_size: QUICK_SPEC.model.intermediateSize * 2 });
    // The CLI's stage keeps its --init model's shape when --layers and --width-factor are not given, and
    // records them in its command (a default of 4 layers refused an 8-layer start).
    for (const [init, shape] of [[grown.out, { num_hidden_layers: QUICK_SPEC.model.numLayers + 2, hidden_size: QUICK_SPEC.model.hiddenSize }], [wide.out, { num_hidden_layers: QUICK_SPEC.model.numLayers, hidden_size: QUICK_SPEC.model.hiddenSize * 2 }]] as const) {
      const out = await mkdtemp(join(tmpdir(), 'pretrain-cli-'));
      dirs.push(out);
      const io = captureIo();
      expect(await pretrainCli(['--quick', '--world', 'retail', '--seed', '5', '--steps', '1', '--eval', '0', '--threads', '2', '--init', init, '--out', out], io), io.stderr()).toBe(0);
      expect(JSON.parse(await readFile(join(out, 'config.json'), 'utf8'))).toMatchObject(shape);
      const { command } = JSON.parse(await readFile(join(out, 'pretrain.json'), 'utf8')) as { command: string };
      expect(command).toContain(init === grown.out ? `--layers ${QUICK_SPEC.model.numLayers + 2}` : '--width-factor 2');
    }
    // Another grounding budget changes the Rehearse rows, not the tokenizer, so the stage may continue.
    const wider = await quickRun(5, 2, { init: first.out, groundingChars: 6000 });
    expect(await readFile(join(wider.out, 'tokenizer.json'), 'utf8')).toBe(await readFile(join(first.out, 'tokenizer.json'), 'utf8'));
    expect(wider.r.data.tokens.total).toBeGreaterThan(same.r.data.tokens.total);
  }, 120_000);

  it('a stage may re-cut its --init tokenizer with stated values: same token ids, values kept apart, transformers.js agrees', async () => {
    const first = await quickRun(5, 2);
    const recut = await quickRun(5, 2, { init: first.out, statedValues: true });
    const before = fromTokenizerJson(JSON.parse(await readFile(join(first.out, 'tokenizer.json'), 'utf8')));
    const after = fromTokenizerJson(JSON.parse(await readFile(join(recut.out, 'tokenizer.json'), 'utf8')));
    expect(after.merges).toEqual(before.merges);
    expect(after.preTokenizer).toBe('stated-values');
    expect(after.lexicon).toContain('ordered by mistake');
    const text = 'Cancel order #W1234567, the reason is: ordered by mistake.';
    const tok = await Tokenizer.load(new DirSource(recut.out));
    expect(tok.encode(text)).toEqual(after.encode(text));
    expect(after.decode(after.encode(text))).toBe(text);
    expect(after.encode(text)).toEqual(expect.arrayContaining(after.encode('ordered by mistake')));
    // Re-cutting needs a vocabulary to keep.
    const b = await createBackend('cpu-ref');
    await expect(pretrain(b, domain, { ...QUICK_SPEC, steps: 1, preTokenizer: 'stated-values', retokenize: true }, { seed: 5, out: first.out, log: () => {} })).rejects.toThrow(/needs --init/);
  }, 120_000);

  it('without the expert Rehearse rows, the only Rehearse rows are the grounded extra ones', async () => {
    const none = await quickRun(5, 1, { expertRehearse: false });
    expect(none.r.data.rows.rehearse).toBe(0);
    expect(none.r.data.rows.act).toBeGreaterThan(0);
    const grounded = await quickRun(5, 1, { expertRehearse: false, rehearseOnlyTasks: 2 });
    expect(grounded.r.data.rows.rehearse).toBeGreaterThan(0);
  }, 120_000);

  it('--rehearse-write-repeat repeats the grounded Rehearse rows of write calls, and only those', async () => {
    const b = await createBackend('cpu-fast', { threads: 2 });
    const out = join(tmpdir(), 'pretrain-write-repeat');
    try {
      const run = (extra: object) => pretrain(b, domain, { ...QUICK_SPEC, steps: 1, expertRehearse: false, rehearseOnlyTasks: 30, ...extra }, { seed: 5, out, log: () => {} });
      const once = await run({});
      const thrice = await run({ rehearseWriteRepeat: 3 });
      // Every other row is the same, so the extra rows are two more copies of each write call's row (kept or dropped as too long).
      const extra = thrice.data.rows.rehearse + thrice.data.dropped - (once.data.rows.rehearse + once.data.dropped);
      expect(extra).toBeGreaterThan(0);
      expect(extra % 2).toBe(0);
      expect(thrice.data.rows.act).toBe(once.data.rows.act);
      expect(extra / 2).toBeLessThan(once.data.rows.rehearse + once.data.dropped); // reads are not repeated
    } finally {
      b.dispose();
      await rm(out, { recursive: true, force: true });
    }
  }, 120_000);

  it('item-change rows and drills join the data: the calls and replies as Act rows, the drills as copies', async () => {
    const b = await createBackend('cpu-fast', { threads: 2 });
    try {
      const run = (extra: object) => pretrain(b, domain, { ...QUICK_SPEC, steps: 1, ...extra }, { seed: 5, out: join(tmpdir(), 'pretrain-change'), log: () => {} });
      const plain = await run({});
      const more = await run({ changeTasks: 80, changeCallDrills: 7, amountSwaps: 3, amountSwapDrills: 5 });
      expect(more.data.rows.act + more.data.dropped).toBeGreaterThan(plain.data.rows.act + 3 + 8); // 80 tasks give a dozen item changes
      expect((more.data.rows.copy ?? 0) + more.data.dropped).toBeGreaterThanOrEqual((plain.data.rows.copy ?? 0) + 7 + 5);
    } finally {
      b.dispose();
      await rm(join(tmpdir(), 'pretrain-change'), { recursive: true, force: true });
    }
  }, 120_000);

  it('the CLI exits non-zero with a clear message on bad options', async () => {
    // One run as a process, for the exit status the shell sees (src/cli/args.ts runCli sets it)...
    const err = await promisify(execFile)('node', ['--import', 'tsx', 'research/pretrain/cli.ts', '--backend', 'tpu'], { cwd: process.cwd() }).then(
      () => null,
      (e: { code: number; stderr: string }) => e,
    );
    expect(err?.code).toBe(2); // a usage error
    expect(err?.stderr).toContain('--backend must be one of');
    // ...the rest in this process (a process start costs seconds on a loaded machine): status and stderr, null on success.
    const fails = async (args: string[]) => {
      const io = captureIo();
      const code = await pretrainCli(args, io);
      return code === 0 ? null : { code, stderr: io.stderr() };
    };
    const before = await fails(['--probe-attention', '--out', 'models/retail', '--before', 'models/default']);
    expect(before?.code).toBe(2);
    expect(before?.stderr).toContain('--before wants LABEL=DIR[;LABEL=DIR...], got "models/default"');
    const change = await fails(['--change-call-drills', 'many']);
    expect(change?.code).toBe(2);
    expect(change?.stderr).toContain('--change-call-drills must be an integer');
    const snap = await fails(['--snapshot-every', '0']);
    expect(snap?.code).toBe(2);
    expect(snap?.stderr).toContain('--snapshot-every must be an integer');
    for (const bad of ['1.5', 'often']) {
      for (const flag of ['--careless-replies', '--rehearse-swap-share']) {
        const share = await fails([flag, bad]);
        expect(share?.code).toBe(2);
        expect(share?.stderr).toMatch(new RegExp(`${flag} must be a number`));
      }
    }
    const about = await fails(['--careless-about', 'figures,typos']);
    expect(about?.code).toBe(2);
    expect(about?.stderr).toContain('--careless-about wants a comma-separated list of figures, refusals, lookups, each once, got "figures,typos"');
  }, 60_000);
});
