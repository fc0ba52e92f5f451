// Every derived seed pinned to the value the hand-written mixers gave before they became deriveSeed
// (computed from that code, verbatim, before the change): a saved run resumes on these seeds, so a
// refactor that changes one bit of them breaks bit-exact resume and must fail here.
import { describe, expect, it } from 'vitest';
import { mistakeSeed } from '../../src/env/retail/expert';
import { userSplit } from '../../src/env/retail/generator';
import { attemptSeed } from '../../src/eval/rehearsal-phases';
import { generationSeed } from '../../src/rollout/rollout';
import { runSeeds } from '../../src/rl/run';
import { deriveSeed, hash32 } from '../../src/util/rng';

const SEEDS = [0, 1, 7, 42, 0xffffffff, 0x80000000];

const PINNED = {
  generation: [442041846, 2964796572, 3103186822, 1151719362, 2279968240, 2610331056, 3414761133, 993511455, 1567961537, 1270822687, 2458625594, 4055049598, 639270547, 1038371129, 3395010727, 985259307, 4060927968, 2874371713, 3491563161, 2503018142, 2608586720, 3316929105, 1449708134, 3395805350],
  attempt: [3454933112, 2723637355, 1058724433, 409689625, 3855704025, 2905535280, 1846119409, 4174386883, 1684910252, 414901496, 2937033632, 654830899, 2420282319, 1896496000, 1103338112, 1790061901, 1244329995, 1899199644],
  step: [33350994, 83415710, 2838219214, 2767685996, 1136996714, 2930615852, 2803216774, 197629295, 1004624204, 2698982912, 3512831560, 2124772880, 903996321, 3101234265, 2024948725, 2189224271, 2836240306, 826372223],
  run: [611984374, 2157038356, 3016431223, 2344316546, 1079340260, 3907308089, 3393850354, 802039571, 4205304925, 2311828253, 740310714, 407143528, 2107588609, 2476003743, 2359310886, 3835976693, 657227410, 4051939152],
  mistake: [99099921, 603772102, 658884877, 2559894131, 3540294721, 53491429, 3579683286, 3087388501, 304563769, 2768879897, 4203000794, 2043364861],
};

describe('derived seeds (pinned: saved runs resume on them)', () => {
  it('rollout generation seeds (episode, turn, slot)', () => {
    expect(SEEDS.flatMap((s) => [generationSeed(s, 0, 0, 0), generationSeed(s, 3, 5, 0), generationSeed(s, 3, 5, 1), generationSeed(s, 15, 11, 4)])).toEqual(PINNED.generation);
  });

  it('private-rehearsal attempt seeds', () => {
    expect(SEEDS.flatMap((s) => [attemptSeed(s, 0, 0), attemptSeed(s, 1, 0), attemptSeed(s, 3, 7)])).toEqual(PINNED.attempt);
  });

  it('GRPO run seeds: step rollouts, task sampling, adapter initialisation', () => {
    expect(SEEDS.flatMap((s) => [runSeeds.step(s, 1), runSeeds.step(s, 2), runSeeds.step(s, 100)])).toEqual(PINNED.step);
    expect(SEEDS.flatMap((s) => [runSeeds.taskSampling(s), runSeeds.actAdapter(s), runSeeds.rehearseAdapter(s)])).toEqual(PINNED.run);
  });

  it("the retail expert's mistake seeds and the user split", () => {
    expect(SEEDS.flatMap((s) => [mistakeSeed(s, 'task_0'), mistakeSeed(s, 'mini:test:12')])).toEqual(PINNED.mistake);
    expect(['user_1', 'sara_doe_496', ''].map(userSplit)).toEqual(['train', 'test', 'test']);
  });

  it('deriveSeed is the old fold, index by index, and always a u32', () => {
    let h = hash32(9);
    for (const i of [0, 4, 2]) h = hash32(h ^ Math.imul(i + 1, 0x9e3779b9));
    expect(deriveSeed(hash32(9), 0, 4, 2)).toBe(h);
    expect(deriveSeed(-1)).toBe(0xffffffff);
  });
});
