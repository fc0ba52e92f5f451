// Loading Hugging Face folders, and every kind of bad folder giving one ModelFormatError naming the file.
import { describe, expect, it } from 'vitest';
import { rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CpuRefBackend } from '../../src/engine/cpu/ref';
import { ModelFormatError } from '../../src/engine/errors';
import { parseQwen3ConfigText } from '../../src/model/config';
import { DirSource } from '../../src/model/source-node';
import { MemorySource, FileMapSource } from '../../src/model/source';
import { loadQwen3, INDEX_FILE, readHostWeights } from '../../src/model/weights';
import { Tokenizer, checkTokenizerFits } from '../../src/model/tokenizer';
import { writeSafetensors, parseSafetensors } from '../../src/model/safetensors';
import { tinyConfig, tinyModelFiles, writeTinyModel } from '../fixtures/tiny-model';
import { dequantize } from '../../src/engine/quant';

async function formatError(p: Promise<unknown>): Promise<ModelFormatError> {
  const e = await p.then(
    () => null,
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(ModelFormatError);
  return e as ModelFormatError;
}

const enc = (o: unknown) => new TextEncoder().encode(typeof o === 'string' ? o : JSON.stringify(o));

describe('loading a Hugging Face folder', () => {
  it('loads a tiny model from disk with its tokenizer; q8/q4 keep quantized host weights close to f32', async () => {
    const dir = await writeTinyModel(tinyConfig(), 3);
    try {
      const src = new DirSource(dir);
      const b = new CpuRefBackend();
      const f32 = await loadQwen3(src, b, { format: 'f32', keepHost: true });
      expect(f32.model.config.numLayers).toBe(2);
      expect(f32.model.weights.lmHead).toBe(f32.model.weights.embed);
      const q4 = await loadQwen3(src, b, { format: 'q4', keepHost: true });
      const name = 'model.layers.1.mlp.down_proj.weight';
      const w = f32.host!.get(name)!;
      const q = q4.host!.get(name)!;
      expect(w.kind).toBe('f32');
      expect(q.kind).toBe('q4');
      const deq = dequantize(q as never);
      const dense = (w as { data: Float32Array }).data;
      let maxErr = 0;
      let maxAbs = 0;
      for (let i = 0; i < dense.length; i++) ((maxErr = Math.max(maxErr, Math.abs(deq[i] - dense[i]))), (maxAbs = Math.max(maxAbs, Math.abs(dense[i]))));
      // Symmetric int4: error at most half a step, step = absmax(group)/7.
      expect(maxErr).toBeLessThanOrEqual(maxAbs / 14 + 1e-7);
      expect(maxErr).toBeGreaterThan(0);
      const tok = await Tokenizer.load(src);
      expect(tok.decode(tok.encode('hello <|im_end|>'))).toBe('hello <|im_end|>');
    } finally {
      rmSync(dir, { recursive: true });
    }
  });

  it('loads a sharded checkpoint through model.safetensors.index.json', async () => {
    const files = await tinyModelFiles(tinyConfig(), 5);
    const whole = parseSafetensors(files.get('model.safetensors')!, 'model.safetensors');
    const names = [...whole.tensors.keys()];
    const half = Math.floor(names.length / 2);
    const shard = (ns: string[]) => writeSafetensors(Object.fromEntries(ns.map((n) => [n, { dtype: 'F32' as const, shape: whole.info(n).shape, data: whole.float32(n) }])));
    const sharded = new Map(files);
    sharded.delete('model.safetensors');
    sharded.set('model-00001-of-00002.safetensors', shard(names.slice(0, half)));
    sharded.set('model-00002-of-00002.safetensors', shard(names.slice(half)));
    const weightMap = Object.fromEntries(names.map((n, i) => [n, i < half ? 'model-00001-of-00002.safetensors' : 'model-00002-of-00002.safetensors']));
    sharded.set(INDEX_FILE, enc({ metadata: {}, weight_map: weightMap }));
    const b = new CpuRefBackend();
    const a = await loadQwen3(new MemorySource(files), b, { format: 'f32', keepHost: true });
    const s = await loadQwen3(new MemorySource(sharded), b, { format: 'f32', keepHost: true });
    for (const n of names) expect((s.host!.get(n) as { data: Float32Array }).data).toEqual((a.host!.get(n) as { data: Float32Array }).data);
    // The host-only reader gives the same tensors without a backend, from either layout.
    const h = await readHostWeights(new MemorySource(sharded));
    expect(h.config).toEqual(a.model.config);
    expect([...h.host.keys()].sort()).toEqual([...a.host!.keys()].sort());
    for (const n of names) expect((h.host.get(n) as { data: Float32Array }).data).toEqual((a.host!.get(n) as { data: Float32Array }).data);
  });

  it('the host-only reader validates like the loader: a non-finite weight is a ModelFormatError naming the file', async () => {
    const files = await tinyModelFiles(tinyConfig(), 6);
    const whole = parseSafetensors(files.get('model.safetensors')!, 'model.safetensors');
    const tensors = Object.fromEntries([...whole.tensors.keys()].map((n) => [n, { dtype: 'F32' as const, shape: whole.info(n).shape, data: Float32Array.from(whole.float32(n)) }]));
    tensors['model.norm.weight'].data[1] = NaN;
    const e = await formatError(readHostWeights(new MemorySource(new Map(files).set('model.safetensors', writeSafetensors(tensors)))));
    expect(e.message).toMatch(/model\.safetensors.*model\.norm\.weight.*non-finite/s);
  });

  it('loads a BF16 checkpoint (what real Qwen3 folders ship) as the exact f32 values', async () => {
    const files = await tinyModelFiles(tinyConfig(), 6);
    const whole = parseSafetensors(files.get('model.safetensors')!, 'model.safetensors');
    const bf16 = (x: Float32Array) => Uint16Array.from(new Uint32Array(x.buffer), (u) => u >>> 16); // truncation
    const tensors = Object.fromEntries([...whole.tensors.keys()].map((n) => [n, { dtype: 'BF16' as const, shape: whole.info(n).shape, data: bf16(whole.float32(n)) }]));
    const bfFiles = new Map(files).set('model.safetensors', writeSafetensors(tensors));
    const got = await loadQwen3(new MemorySource(bfFiles), new CpuRefBackend(), { format: 'f32', keepHost: true });
    for (const n of whole.tensors.keys()) {
      const want = new Float32Array(Uint32Array.from(bf16(whole.float32(n)), (h) => h << 16).buffer);
      expect((got.host!.get(n) as { data: Float32Array }).data).toEqual(want);
    }
  });

  it('FileMapSource serves picked files by base name', async () => {
    const files = await tinyModelFiles(tinyConfig(), 5);
    const picked = [...files].map(([n, bytes]) => new File([bytes as Uint8Array<ArrayBuffer>], `folder/${n}`));
    // File.name has no directory part in Node; keep the name and rely on base-name lookup either way.
    const src = new FileMapSource(picked);
    const m = await loadQwen3(src, new CpuRefBackend(), { format: 'q8' });
    expect(m.model.format).toBe('q8');
    const e = await formatError(new FileMapSource([]).read('config.json'));
    expect(e.message).toBe('config.json: file is missing from the selected files');
  });
});

describe('bad model folders give one ModelFormatError naming the file', () => {
  async function folderWith(change: (files: Map<string, Uint8Array>) => void): Promise<MemorySource> {
    const files = await tinyModelFiles(tinyConfig(), 7);
    change(files);
    return new MemorySource(files);
  }
  const load = (src: MemorySource) => loadQwen3(src, new CpuRefBackend(), { format: 'f32' });

  it('malformed config.json (not JSON)', async () => {
    const e = await formatError(load(await folderWith((f) => f.set('config.json', enc('{"hidden_size": 32,')))));
    expect(e.file).toBe('config.json');
    expect(e.problem).toMatch(/not valid JSON/);
  });

  it('config.json with a wrong field type', async () => {
    const cfg = JSON.parse(new TextDecoder().decode((await tinyModelFiles(tinyConfig(), 7)).get('config.json')));
    const e = await formatError(load(await folderWith((f) => f.set('config.json', enc({ ...cfg, num_hidden_layers: 'two' })))));
    expect(e.file).toBe('config.json');
    expect(e.problem).toMatch(/num_hidden_layers/);
  });

  it('unsupported architecture', () => {
    const text = JSON.stringify({ architectures: ['LlamaForCausalLM'], hidden_size: 32 });
    expect(() => parseQwen3ConfigText(text)).toThrow(ModelFormatError);
    expect(() => parseQwen3ConfigText(text)).toThrow(/^config\.json: unsupported architecture \["LlamaForCausalLM"\]/);
  });

  it('a truncated model.safetensors', async () => {
    const e = await formatError(load(await folderWith((f) => f.set('model.safetensors', f.get('model.safetensors')!.subarray(0, 1000)))));
    expect(e.file).toBe('model.safetensors');
    expect(e.problem).toMatch(/out of range|beyond the end/);
  });

  it('a tensor whose shape disagrees with config.json', async () => {
    const src = await folderWith((f) => {
      const cfg = JSON.parse(new TextDecoder().decode(f.get('config.json')));
      f.set('config.json', enc({ ...cfg, intermediate_size: 40 }));
    });
    const e = await formatError(load(src));
    expect(e.file).toBe('model.safetensors');
    expect(e.problem).toMatch(/'model\.layers\.0\.mlp\.gate_proj\.weight' has shape \[48,32\] but config\.json implies \[40,32\]/);
  });

  it('a tensor missing from the checkpoint', async () => {
    const src = await folderWith((f) => {
      const cfg = JSON.parse(new TextDecoder().decode(f.get('config.json')));
      f.set('config.json', enc({ ...cfg, num_hidden_layers: 3 }));
    });
    const e = await formatError(load(src));
    expect(e.message).toBe("model.safetensors: tensor 'model.layers.2.input_layernorm.weight' is missing");
  });

  it('missing model.safetensors', async () => {
    const e = await formatError(load(await folderWith((f) => f.delete('model.safetensors'))));
    expect(e.message).toBe('model.safetensors: file is missing from memory');
  });

  it('missing tokenizer.json / tokenizer_config.json, or a broken one', async () => {
    let e = await formatError(Tokenizer.load(await folderWith((f) => f.delete('tokenizer.json'))));
    expect(e.message).toBe('tokenizer.json: file is missing from memory');
    e = await formatError(Tokenizer.load(await folderWith((f) => f.delete('tokenizer_config.json'))));
    expect(e.file).toBe('tokenizer_config.json');
    e = await formatError(Tokenizer.load(await folderWith((f) => f.set('tokenizer.json', enc({ version: '1.0' })))));
    expect(e.file).toBe('tokenizer.json');
    expect(e.problem).toMatch(/not a tokenizers JSON file/);
  });

  it('a tokenizer with more ids than the model has embeddings', async () => {
    const tok = await Tokenizer.load(await folderWith(() => {}));
    expect(() => checkTokenizerFits(tok, tinyConfig().vocabSize)).not.toThrow();
    expect(() => checkTokenizerFits(tok, 100)).toThrow(/^tokenizer\.json: has token ids up to 264 but config\.json vocab_size is 100$/);
  });

  it('a missing tokenizer file on disk', async () => {
    const dir = await writeTinyModel(tinyConfig(), 2);
    try {
      unlinkSync(join(dir, 'tokenizer.json'));
      writeFileSync(join(dir, 'extra.txt'), 'x');
      const e = await formatError(Tokenizer.load(new DirSource(dir)));
      expect(e.message).toBe(`tokenizer.json: file is missing from ${dir}`);
    } finally {
      rmSync(dir, { recursive: true });
    }
  });
});
