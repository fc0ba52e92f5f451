// The loaded policy's pass@k ceiling (workers/lab/ceiling.ts): read from ceiling.json in the model's folder, as
// `npm run signal -- --split test --task-seed 1 --modes real --out <folder>/ceiling.json` writes it; a folder without
// one has none, and a file that is not that measurement of the lab's held-out tasks is refused with its reason.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { episodesThatFit, signalCli } from '../../research/scripts/signal';
import { MemorySource } from '../../src/model/source';
import { CEILING_FILE, parseCeiling, readCeiling } from '../../workers/lab/ceiling';

const dir = mkdtempSync(join(tmpdir(), 'envace-ceiling-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const folder = (files: Record<string, string>) => new MemorySource(new Map(Object.entries(files).map(([k, v]) => [k, new TextEncoder().encode(v)])));

describe('the ceiling of a model folder', () => {
  it("reads what npm run signal writes: pass@k of the bundled mini policy on the lab's held-out tasks", async () => {
    // The smallest real measurement (2 held-out tasks × 2 episodes), by the script itself into a temp folder.
    const out = join(dir, CEILING_FILE);
    const io = { out: () => undefined, err: () => undefined };
    expect(await signalCli(['--world', 'mini', '--split', 'test', '--task-seed', '1', '--count', '2', '--k', '2', '--modes', 'real', '--threads', '1', '--out', out], io)).toBe(0);
    const text = readFileSync(out, 'utf8');
    const json = JSON.parse(text) as { real: { passAtK: number } };
    const { ceiling, ceilingProblem } = await readCeiling(folder({ [CEILING_FILE]: text }));
    expect(ceilingProblem).toBeNull();
    expect(ceiling).toEqual({ passAtK: json.real.passAtK, k: 2, tasks: 2, world: 'mini', temperature: 1 });
  }, 120_000);

  it('a folder without ceiling.json has none, and no problem', async () => {
    expect(await readCeiling(folder({ 'config.json': '{}' }))).toEqual({ ceiling: null, ceilingProblem: null });
  });

  it("refuses, with its reason, a file that is not pass@k measured on the lab's held-out tasks", async () => {
    const good = { world: 'mini', split: 'test', taskSeed: 1, prompts: 100, k: 8, temperature: 1, real: { passAtK: 0.62 } };
    expect(parseCeiling(good)).toEqual({ passAtK: 0.62, k: 8, tasks: 100, world: 'mini', temperature: 1 });
    const bad: [unknown, RegExp][] = [
      [[], /not a JSON object/],
      [{ ...good, real: undefined }, /no "real" result/],
      [{ ...good, real: { passAtK: 1.5 } }, /not a rate in \[0, 1\]/],
      [{ ...good, real: { passAtK: '0.6' } }, /not a rate/],
      [{ ...good, split: 'train' }, /"train" split, not the held-out tasks/],
      [{ ...good, taskSeed: 7 }, /task seed 7; the lab's is 1/],
      [{ ...good, k: 1 }, /k is not an integer >= 2/],
      [{ ...good, prompts: 0 }, /task count/],
      [{ ...good, world: '' }, /does not name its world/],
      [{ ...good, temperature: 0 }, /temperature/],
    ];
    for (const [json, why] of bad) expect(parseCeiling(json), JSON.stringify(json)).toMatch(why);
    expect(await readCeiling(folder({ [CEILING_FILE]: 'not json' }))).toEqual({ ceiling: null, ceilingProblem: 'ceiling.json is not JSON' });
    expect((await readCeiling(folder({ [CEILING_FILE]: JSON.stringify({ ...good, split: 'train' }) }))).ceilingProblem).toMatch(/^ceiling.json is not used: it was measured on the "train" split/);
  });
});

describe("npm run signal's KV budget", () => {
  it('decodes every episode at once while their KV caches fit in 3.25 GiB, and as many as fit otherwise', () => {
    const shape = (numLayers: number) => ({ numLayers, numKvHeads: 2, headDim: 32, maxPositionEmbeddings: 2048 });
    // 4 layers: 4 MiB a slot, 800 slots = 3.1 GiB; 8 layers: 8 MiB a slot.
    expect(episodesThatFit(shape(4), 800)).toBeNull();
    expect(episodesThatFit(shape(4), 1000)).toEqual({ slots: 832, bytes: 1000 * 4 * 2 ** 20 });
    expect(episodesThatFit(shape(8), 800)).toEqual({ slots: 416, bytes: 800 * 8 * 2 ** 20 });
    expect(episodesThatFit({ ...shape(8), maxPositionEmbeddings: 2 ** 24 }, 2)?.slots).toBe(1);
  });
});
