// Folds a LoRA adapter into its base model and writes a model folder that computes alone what base + adapter
// computes (W' = W + (alpha/r) B A, src/model/lora.ts mergeLora): how a policy trained by GRPO on an adapter
// becomes a bundled policy. Every file of the base folder but model.safetensors is copied as it is (config,
// tokenizer); the merged weights are F32.
//
//   node --import tsx research/scripts/merge-adapter.ts --model DIR --adapter DIR|RUN --out DIR
//
// --adapter takes a PEFT folder or a training run folder (its last checkpoint's Act adapter). --out must not exist.
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { CpuRefBackend } from '../../src/engine/cpu/ref';
import { parseQwen3ConfigText } from '../../src/model/config';
import { LORA_MODULE, mergeLora } from '../../src/model/lora';
import { parseSafetensors, writeSafetensors, type TensorToWrite } from '../../src/model/safetensors';
import { loadAdapters } from '../../src/rl/checkpoint';
import { DirStore } from '../../src/rl/store-node';

const { values: a } = parseArgs({ options: { model: { type: 'string' }, adapter: { type: 'string' }, out: { type: 'string' } } });
if (!a.model || !a.adapter || !a.out) {
  console.error('usage: node --import tsx research/scripts/merge-adapter.ts --model DIR --adapter DIR|RUN --out DIR');
  process.exit(2);
}
if (existsSync(a.out)) {
  console.error(`${a.out} exists: give a new folder`);
  process.exit(2);
}
const config = parseQwen3ConfigText(readFileSync(join(a.model, 'config.json'), 'utf8'), join(a.model, 'config.json'));
const file = join(a.model, 'model.safetensors');
const st = parseSafetensors(new Uint8Array(readFileSync(file)), file);
const backend = new CpuRefBackend();
const { act, rehearse, mode, step } = await loadAdapters(new DirStore(a.adapter), backend, config);
if (rehearse) console.error(`the ${mode} run also has a Rehearse adapter; only the Act adapter is merged`);
const merged = await mergeLora(backend, act, (l, t) => st.float32(`model.layers.${l}.${LORA_MODULE[t]}.weight`), config);
const tensors: Record<string, TensorToWrite> = {};
for (const name of st.tensors.keys()) {
  const info = st.info(name);
  tensors[name] = { dtype: 'F32', shape: info.shape, data: merged.get(name) ?? st.float32(name) };
}
mkdirSync(a.out, { recursive: true });
for (const f of readdirSync(a.model)) if (f !== 'model.safetensors') copyFileSync(join(a.model, f), join(a.out, f));
writeFileSync(join(a.out, 'model.safetensors'), writeSafetensors(tensors, { ...st.metadata, merged_adapter: `${a.adapter}${step !== null ? ` (step ${step})` : ''}` }));
console.error(`${a.out}: ${merged.size} matrices merged (rank ${act.rank}, alpha ${act.alpha}${mode ? `, ${mode} run step ${step}` : ''})`);
