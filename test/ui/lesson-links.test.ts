// The lesson strip's links (src/ui/lesson-links.ts): every step's anchor is a section of the student guide as
// GitHub anchors it, and the page address follows from how the site was built or where it is served.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { githubSlug, LESSON_ANCHORS, LESSON_PAGE, lessonLink, lessonPageUrl } from '../../src/ui/lesson-links';

describe('lesson links', () => {
  it("each step's anchor is the GitHub anchor of the guide's section for that step", () => {
    const headings = readFileSync(LESSON_PAGE, 'utf8').split('\n').filter((l) => /^## \d\. /.test(l)).map((l) => l.slice(3));
    expect(headings).toHaveLength(5);
    for (const n of [1, 2, 3, 4, 5] as const) {
      const h = headings.find((x) => x.startsWith(`${n}. `));
      expect(h, `a "## ${n}." section`).toBeDefined();
      expect(githubSlug(h!)).toBe(LESSON_ANCHORS[n]);
    }
  });

  it("GitHub's slug rule on headings like the guide's", () => {
    expect(githubSlug('3. Train, and watch held-out success and fidelity')).toBe('3-train-and-watch-held-out-success-and-fidelity');
    expect(githubSlug('5. Private rehearsal: think before you act')).toBe('5-private-rehearsal-think-before-you-act');
    expect(githubSlug('Where to go next')).toBe('where-to-go-next');
  });

  it('the page: the built-in address first, then a GitHub Pages address, else none (the file is named instead)', () => {
    const local = { hostname: '127.0.0.1', pathname: '/' };
    expect(lessonPageUrl(local)).toBeNull();
    expect(lessonPageUrl(local, 'https://example.org/lab/blob/abc/docs/lesson/README.md#x')).toBe('https://example.org/lab/blob/abc/docs/lesson/README.md');
    expect(lessonPageUrl({ hostname: 'ada.github.io', pathname: '/envace-lab/' })).toBe('https://github.com/ada/envace-lab/blob/HEAD/docs/lesson/README.md');
    expect(lessonPageUrl({ hostname: 'ada.github.io', pathname: '/' })).toBe('https://github.com/ada/ada.github.io/blob/HEAD/docs/lesson/README.md');
    expect(lessonLink(2, 'https://github.com/ada/envace-lab/blob/HEAD/docs/lesson/README.md').href).toBe('https://github.com/ada/envace-lab/blob/HEAD/docs/lesson/README.md#2-open-a-group-whose-rollouts-differ');
    expect(lessonLink(2, null)).toEqual({ href: null, where: 'docs/lesson/README.md#2-open-a-group-whose-rollouts-differ' });
  });
});
