// research/scripts/lesson-table.ts --summary: one row per lesson records folder, read from the committed records
// (research/records/lesson-records), so the table docs/lesson.md quotes is the one these files give.
import { describe, expect, it } from 'vitest';
import { LESSON_STEPS, lessonTableCli } from '../../research/scripts/lesson-table';
import { DEFAULTS } from '../../src/ui/settings.svelte';
import { captureIo } from '../helpers/cli';

describe('lesson-table --summary', () => {
  it('gives each folder its settings off the lesson\'s, base, per-seed finals and mean change with its interval', async () => {
    const io = captureIo();
    const dirs = ['research/records/lesson-records/session20/default', 'research/records/lesson-records/session21/token-mean', 'research/records/lesson-records/session20/rank32', 'research/records/lesson-records/session13/default', 'research/records/lesson-records/session24/careless7'];
    expect(await lessonTableCli(['--summary', ...dirs], io)).toBe(0);
    const rows = io.stdout().trim().split('\n');
    expect(rows).toHaveLength(2 + dirs.length);
    // Commit 9cf1efe's five default seeds: 50, 52, 55, 51, 53 % from 45 % (docs/lesson.md).
    expect(rows[2]).toContain("| research/records/lesson-records/session20/default | 40 steps | 45.0% | 1, 2, 3, 4, 5 | 50.0%, 52.0%, 55.0%, 51.0%, 53.0% | **+7.2** (+4.8 to +9.6) |");
    expect(rows[3]).toContain('| 40 steps, loss aggregation token-mean | 45.0% | 1, 2, 3 | 53.0%, 51.0%, 54.0% | **+7.7** (+3.9 to +11.5) |');
    // One seed has no interval.
    expect(rows[4]).toContain('| 40 steps, rank 32 | 45.0% | 1 | 52.0% | **+7.0** (one seed) |');
    // Runs before commit de6fbd8 are 40 steps, the lesson's length then (100 since).
    // A base other than the bundled policy is named by its folder (the bundled one's earlier name, runs/sv1, is not).
    expect(rows[5]).toContain("| 40 steps | 45.0% | 1, 2, 3, 4, 5 |");
    expect(rows[6]).toContain("| 40 steps | 45.0% (runs/careless7) | 1, 2, 3 | 45.0%, 47.0%, 46.0% | **+1.0** (-1.5 to +3.5) |");
    expect(io.stderr()).toBe('');
  });

  it("measures runs against the lab's own default length", () => {
    expect(LESSON_STEPS).toBe(DEFAULTS.steps);
  });

  it("a folder that is not a lesson run's records is an error that names it", async () => {
    const io = captureIo();
    expect(await lessonTableCli(['--summary', 'research/records/lesson-records/session21'], io)).toBe(1);
    expect(io.stderr()).toContain("research/records/lesson-records/session21: not a lesson run's records");
  });
});
