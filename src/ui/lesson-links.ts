// Where the lesson strip's steps link: the section of the student guide, docs/lesson/README.md, for each step.
// The lab is a static site (dist/) without the docs in it, so a relative docs path would 404 on a static host;
// the link goes to the page as the repository's forge renders it (section anchors work there, images show).
// Which repository: the one the site was built from when the build names it (VITE_LESSON_URL, e.g. set by the
// Pages workflow to the page at the built commit), else the one a GitHub Pages address implies
// (owner.github.io/repo/), else none: the strip then names the file and section to open in the checkout.

export const LESSON_PAGE = 'docs/lesson/README.md';

/** The guide's section of each step, as GitHub anchors its "## n. …" headings (test/ui/lesson-links.test.ts checks them). */
export const LESSON_ANCHORS: Record<1 | 2 | 3 | 4 | 5, string> = {
  1: '1-step-through-a-rollout',
  2: '2-open-a-group-whose-rollouts-differ',
  3: '3-train-and-watch-held-out-success-and-fidelity',
  4: '4-compare-envace-with-the-frozen-simulator',
  5: '5-private-rehearsal-think-before-you-act',
};

/** GitHub's anchor for a heading: lower case, punctuation dropped (hyphens and underscores kept), spaces to hyphens. */
export function githubSlug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The rendered guide's address for this page's location, or null when it cannot be known. */
export function lessonPageUrl(loc: { hostname: string; pathname: string }, configured?: string | null): string | null {
  if (configured) return configured.replace(/#.*$/, '');
  const m = /^([a-z0-9-]+)\.github\.io$/i.exec(loc.hostname);
  if (!m) return null;
  const owner = m[1];
  const repo = loc.pathname.split('/').filter(Boolean)[0] ?? `${owner}.github.io`;
  return `https://github.com/${owner}/${repo}/blob/HEAD/${LESSON_PAGE}`;
}

/** A step's link (null: no rendered page known) and the file and section to open in a checkout instead. */
export function lessonLink(n: 1 | 2 | 3 | 4 | 5, page: string | null): { href: string | null; where: string } {
  const anchor = LESSON_ANCHORS[n];
  return { href: page ? `${page}#${anchor}` : null, where: `${LESSON_PAGE}#${anchor}` };
}
