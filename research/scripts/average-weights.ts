// The uniform average of two or more model folders' weights (a "model soup", Wortsman et al. 2022): stages
// trained from the same start with other seeds often average into a model better than each. The folders must
// share the architecture and the tokenizer byte for byte (the config and tokenizer files are compared); the
// first folder's config, tokenizer and generation files are copied, its training record (pretrain.json) and
// snapshots are not, and average.json names the sources with their weights' sha256. The averaged weights are F32.
//
//   npx tsx research/scripts/average-weights.ts --model DIR --model DIR [--model DIR …] --out DIR
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { parseSafetensors, writeSafetensors, type SafetensorsFile, type TensorToWrite } from '../../src/model/safetensors';

/** The files that make two folders the same model but for their weights. */
const SAME = ['config.json', 'tokenizer.json', 'tokenizer_config.json'];
const COPIED = [...SAME, 'generation_config.json'];

export function averageWeights(files: SafetensorsFile[]): Record<string, TensorToWrite> {
  const [first, ...rest] = files;
  const names = [...first.tensors.keys()];
  for (const f of rest) {
    const other = [...f.tensors.keys()];
    if (other.length !== names.length || other.some((n) => !first.has(n))) throw new Error(`${f.file} holds other tensors than ${first.file}`);
  }
  const out: Record<string, TensorToWrite> = {};
  for (const name of names) {
    const shape = first.info(name).shape;
    const sum = new Float64Array(first.float32(name));
    for (const f of rest) {
      const s = f.info(name).shape;
      if (s.join('x') !== shape.join('x')) throw new Error(`${name}: shape ${s.join('x')} in ${f.file}, ${shape.join('x')} in ${first.file}`);
      const x = f.float32(name);
      for (let i = 0; i < x.length; i++) sum[i] += x[i];
    }
    const avg = new Float32Array(sum.length);
    for (let i = 0; i < sum.length; i++) avg[i] = sum[i] / files.length;
    out[name] = { dtype: 'F32', shape, data: avg };
  }
  return out;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values: a } = parseArgs({ options: { model: { type: 'string', multiple: true }, out: { type: 'string' } } });
  const models = a.model ?? [];
  if (models.length < 2 || !a.out) {
    console.error('usage: npx tsx research/scripts/average-weights.ts --model DIR --model DIR [--model DIR …] --out DIR');
    process.exit(2);
  }
  if (existsSync(a.out)) {
    console.error(`${a.out} exists: give a new folder`);
    process.exit(2);
  }
  for (const m of models.slice(1)) {
    for (const f of SAME) {
      if (!readFileSync(join(m, f)).equals(readFileSync(join(models[0], f)))) {
        console.error(`${m}/${f} differs from ${models[0]}/${f}: only the same model's weights can be averaged`);
        process.exit(1);
      }
    }
  }
  const bytes = models.map((m) => readFileSync(join(m, 'model.safetensors')));
  const files = bytes.map((b, k) => parseSafetensors(new Uint8Array(b), join(models[k], 'model.safetensors')));
  const tensors = averageWeights(files);
  mkdirSync(a.out, { recursive: true });
  for (const f of COPIED) if (existsSync(join(models[0], f))) copyFileSync(join(models[0], f), join(a.out, f));
  const sources = models.map((m, k) => ({ folder: m, sha256: createHash('sha256').update(bytes[k]).digest('hex') }));
  writeFileSync(join(a.out, 'model.safetensors'), writeSafetensors(tensors, { averaged_from: sources.map((s) => s.folder).join(', ') }));
  writeFileSync(join(a.out, 'average.json'), JSON.stringify({ command: `npx tsx research/scripts/average-weights.ts ${models.map((m) => `--model ${m}`).join(' ')} --out ${a.out}`, sources }, null, 1) + '\n');
  console.error(`${a.out}: the average of ${models.length} models (${Object.keys(tensors).length} tensors)`);
}
