// The benchmark tables of docs/benchmarks.md are generated from the committed records (bench/table.ts): a
// record changed without `npm run bench -- --table`, or a table edited by hand, fails here.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { PAGE, renderReadme, TABLES } from '../../bench/table';

describe('benchmark tables', () => {
  it('equal what bench/results/*.json generate', () => {
    const text = readFileSync(new URL(`../../${PAGE}`, import.meta.url), 'utf8');
    const blocks = [...text.matchAll(/<!-- bench:([\w.-]+) -->/g)].map((m) => m[1]);
    expect(blocks.sort()).toEqual(Object.keys(TABLES).sort());
    expect(renderReadme(text)).toBe(text);
  });

  it('live in docs/benchmarks.md, not in the README', () => {
    expect(readFileSync(new URL('../../README.md', import.meta.url), 'utf8')).not.toMatch(/<!-- bench:/);
  });
});
