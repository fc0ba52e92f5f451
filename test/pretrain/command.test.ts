// The command a pretraining run records (pretrain.json, the model card's "reproduce" line): the world, seed,
// steps and backend always, then exactly the settings that differ from the world's base spec, in one order.
import { describe, expect, it } from 'vitest';
import { pretrainCommand, type CommandInputs } from '../../research/pretrain/cli';
import { MINI_SPEC } from '../../research/pretrain/pipeline';

const at = (over: Partial<CommandInputs> = {}): string =>
  pretrainCommand({ world: 'mini', seed: 0, backend: 'cpu-fast', quick: false, init: undefined, lr: undefined, snapshotEvery: undefined, spec: MINI_SPEC, base: MINI_SPEC, ...over });

describe('pretrainCommand', () => {
  it('writes only the fixed flags for the base spec', () => {
    expect(at()).toBe(`npm run pretrain -- --world mini --seed 0 --steps ${MINI_SPEC.steps} --backend cpu-fast`);
  });

  it('writes a changed setting with its value, a switch bare, and a zero when zero differs from the base', () => {
    const spec = { ...MINI_SPEC, copyDrills: 0, retokenize: true, model: { ...MINI_SPEC.model, hiddenSize: 2 * MINI_SPEC.model.hiddenSize }, carelessRate: 0.7, carelessAbout: ['lookups'] as const };
    expect(at({ spec, init: 'runs/a', snapshotEvery: 200 })).toBe(
      `npm run pretrain -- --world mini --seed 0 --steps ${MINI_SPEC.steps} --backend cpu-fast --init runs/a --width-factor 2 --copy-drills 0 --retokenize --careless-replies 0.7 --careless-about lookups --snapshot-every 200`,
    );
  });

  it('leaves out what is off: no snapshots, no careless replies, the default habits', () => {
    const spec = { ...MINI_SPEC, carelessRate: 0, expertRehearse: true };
    expect(at({ spec, snapshotEvery: 0 })).toBe(at());
  });
});
