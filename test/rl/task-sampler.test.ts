// How a GRPO step draws its tasks: 'uniform' replays the run's original draw; 'signal' draws each task in
// proportion to the chance a group of its family carries a learning signal, from the run's own episodes.
import { describe, expect, it } from 'vitest';
import { Rng } from '../../src/util/rng';
import { addEpisodes, familyWeights, sampleTaskIndices, signalChance, SIGNAL_FLOOR, TaskSamplingError, type FamilyStats } from '../../src/rl/task-sampler';

const pool = (families: string[]) => families.map((family) => ({ family }));

describe('task sampling', () => {
  it('uniform: the same RNG calls and picks as the run always made', () => {
    const tasks = pool(Array(200).fill('x'));
    const rng = new Rng(1234);
    const ref = new Rng(1234);
    for (let step = 0; step < 50; step++) {
      // The original loop of GrpoRun.sampleTasks.
      const picked = new Set<number>();
      while (picked.size < 4) picked.add(ref.int(200));
      expect(sampleTaskIndices(rng, tasks, 4)).toEqual([...picked]);
    }
    expect(rng.state).toEqual(ref.state);
  });

  it('signal: distinct tasks, the whole pool when it is smaller than a step', () => {
    const rng = new Rng(5);
    const tasks = pool(['a', 'b', 'b', 'c']);
    for (let i = 0; i < 100; i++) {
      const got = sampleTaskIndices(rng, tasks, 3, 'signal', familyWeights({ a: { episodes: 40, reward: 40 } }, tasks, 4));
      expect(new Set(got).size).toBe(3);
      for (const j of got) expect(j >= 0 && j < 4).toBe(true);
    }
    expect(sampleTaskIndices(rng, tasks, 9, 'signal', familyWeights({}, tasks, 4)).sort()).toEqual([0, 1, 2, 3]);
    expect(() => sampleTaskIndices(rng, tasks, 2, 'greedy' as never)).toThrow(TaskSamplingError);
  });

  it('signal: tasks are drawn in proportion to their family weight, and no family starves', () => {
    // 'mixed' succeeds half the time, 'solved' always, 'never' never: weights 0.05 + P(rewards differ in a group of 4).
    const stats: FamilyStats = { mixed: { episodes: 100, reward: 50 }, solved: { episodes: 100, reward: 100 }, never: { episodes: 100, reward: 0 } };
    const tasks = pool(['mixed', 'solved', 'solved', 'never']);
    const w = familyWeights(stats, tasks, 4);
    expect(w.mixed).toBeCloseTo(SIGNAL_FLOOR + 1 - 2 * 0.5 ** 4, 9);
    expect(w.solved).toBeCloseTo(SIGNAL_FLOOR + signalChance({ episodes: 100, reward: 100 }, 4), 9);
    expect(w.solved).toBeLessThan(0.2);
    expect(w.never).toBeCloseTo(w.solved, 9);
    const rng = new Rng(99);
    const n = 40_000;
    const count = [0, 0, 0, 0];
    for (let i = 0; i < n; i++) count[sampleTaskIndices(rng, tasks, 1, 'signal', w)[0]]++;
    const tw = tasks.map((t) => w[t.family]);
    const total = tw.reduce((a, b) => a + b, 0);
    tw.forEach((x, i) => {
      const p = x / total;
      // Within 4.5 binomial standard deviations of the expected count.
      expect(Math.abs(count[i] - n * p)).toBeLessThan(4.5 * Math.sqrt(n * p * (1 - p)));
      expect(count[i]).toBeGreaterThan(0);
    });
  });

  it('signal: the same seed and estimates give the same tasks', () => {
    const tasks = pool(['a', 'b', 'c', 'a', 'b', 'c', 'd']);
    const stats: FamilyStats = { a: { episodes: 8, reward: 2 }, b: { episodes: 4, reward: 4 } };
    const draw = () => {
      const rng = new Rng(7);
      return Array.from({ length: 20 }, () => sampleTaskIndices(rng, tasks, 3, 'signal', familyWeights(stats, tasks, 4)));
    };
    expect(draw()).toEqual(draw());
  });

  it('addEpisodes counts per family, clamps rewards to [0, 1], leaves its input alone and refuses NaN', () => {
    const before: FamilyStats = { a: { episodes: 1, reward: 1 } };
    const fam = (id: string) => ({ t1: 'a', t2: 'b' })[id];
    const after = addEpisodes(before, [{ taskId: 't1', reward: 0 }, { taskId: 't2', reward: 1.5 }, { taskId: 't2', reward: -1 }, { taskId: 'gone', reward: 1 }], fam);
    expect(after).toEqual({ a: { episodes: 2, reward: 1 }, b: { episodes: 2, reward: 1 } });
    expect(before).toEqual({ a: { episodes: 1, reward: 1 } });
    expect(() => addEpisodes(before, [{ taskId: 't1', reward: NaN }], fam)).toThrow(TaskSamplingError);
  });
});
