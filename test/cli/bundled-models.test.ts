// Each world ships its own bundled policy (models/<WORLDS[w].bundledModel>): present, trained on that world
// (its pretrain.json command names the world), and opened by default when a CLI is given only --world.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Backend } from '../../src/engine/backend';
import { WORLD_NAMES, WORLDS } from '../../src/env/retail/index';
import { bundledFolder } from '../../src/env/retail/worlds';
import { bundledModelDir, DEFAULT_MODEL_DIR, openBackend, openModel } from '../../src/cli/args';

const MODELS = dirname(DEFAULT_MODEL_DIR);

describe('bundled policy per world', () => {
  let b: Backend;
  beforeAll(async () => {
    b = await openBackend('cpu-ref');
  });
  afterAll(() => b.dispose());

  it('the mini world is the default folder; the two worlds have different folders', () => {
    expect(bundledModelDir('mini')).toBe(DEFAULT_MODEL_DIR);
    expect(new Set(WORLD_NAMES.map((w) => WORLDS[w].bundledModel)).size).toBe(WORLD_NAMES.length);
  });

  it.each(WORLD_NAMES)('%s: its folder was trained on that world and opens by --world alone', async (world) => {
    const dir = bundledModelDir(world);
    const run = JSON.parse(readFileSync(join(dir, 'pretrain.json'), 'utf8')) as { command: string };
    expect(run.command).toContain(`--world ${world}`);
    const policy = await openModel(undefined, b, { world });
    expect(policy.dir).toBe(dir);
    expect(policy.tokenizer.size).toBe(policy.model.config.vocabSize);
  });

  it.each(WORLD_NAMES.flatMap((w) => Object.keys(WORLDS[w].lessonPolicies ?? {}).map((name) => [w, name] as const)))('%s: the lesson policy %s is bundled, trained on that world, and is not the default', async (world, name) => {
    const dir = join(MODELS, bundledFolder(world, name));
    expect(dir).not.toBe(bundledModelDir(world));
    const run = JSON.parse(readFileSync(join(dir, 'pretrain.json'), 'utf8')) as { command: string };
    expect(run.command).toContain(`--world ${world}`);
    const policy = await openModel(dir, b, { world });
    expect(policy.tokenizer.size).toBe(policy.model.config.vocabSize);
  });

  it('names no lesson policy that is not there', () => {
    expect(() => bundledFolder('mini', 'sloppy')).toThrow(/bundles no policy named "sloppy" \(it has: careless, conversation\)/);
    expect(() => bundledFolder('retail', 'careless')).toThrow(/it has: conversation\)/);
  });
});
