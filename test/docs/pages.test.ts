// docs/ is for people: pages and the images they show. Records, scripts and weights live in research/ (issue
// 49), and every relative link of the pages a reader opens first resolves to a file of the checkout. History is
// told by date and commit, which a reader can resolve (git show), never by the project's internal session numbers.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(new URL(import.meta.url).pathname), '../..');
const PAGE_OR_IMAGE = /\.(md|png|svg|jpe?g|gif|webp)$/;
/** Published artefacts a reader (or a program) takes from the pages: the results' figures as data (npm run results). */
const PUBLISHED = ['docs/results/summary.json'];

function walk(dir: string): string[] {
  return readdirSync(join(ROOT, dir)).flatMap((n) => {
    const p = join(dir, n);
    return statSync(join(ROOT, p)).isDirectory() ? walk(p) : [p];
  });
}

/** The relative link targets of a Markdown text (links and images), outside code. */
function relativeLinks(markdown: string): string[] {
  const prose = markdown.replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '');
  return [...prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)]
    .map((m) => m[1])
    .filter((u) => !/^[a-z][a-z0-9+.-]*:/i.test(u) && !u.startsWith('#'));
}

/** The links of a page (repository path) that name no file or folder of the checkout. */
function brokenLinks(page: string): string[] {
  return relativeLinks(readFileSync(join(ROOT, page), 'utf8'))
    .filter((u) => !existsSync(join(ROOT, dirname(page), decodeURIComponent(u.split('#')[0]))))
    .map((u) => `${page}: ${u}`);
}

const PAGES = ['README.md', 'CONTRIBUTING.md', 'research/README.md', ...walk('docs').filter((f) => f.endsWith('.md'))].filter((f) => existsSync(join(ROOT, f)));

describe('docs', () => {
  it('holds only pages and their images: no records, scripts or weights', () => {
    const other = walk('docs').filter((f) => !PAGE_OR_IMAGE.test(f) && !PUBLISHED.includes(f));
    expect(other).toEqual([]);
  });

  it('README.md is a front door: at most 200 lines, the two Quick-start commands, the lab\'s screenshot', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    expect(readme.split('\n').length).toBeLessThanOrEqual(200);
    expect(readme).toMatch(/^npm run lab {5}# /m);
    expect(readme).toMatch(/^npm test {8}# /m);
    expect(readme).toContain('](docs/screenshots/lab-1280x800.png)');
    for (const page of ['CONTRIBUTING.md', 'docs/architecture.md', 'docs/benchmarks.md']) expect(readme, page).toContain(`](${page})`);
  });

  it('every relative link of README.md and the docs pages resolves', () => {
    expect(PAGES).toContain('README.md');
    expect(PAGES).toContain('docs/architecture.md');
    expect(PAGES.flatMap(brokenLinks)).toEqual([]);
  });

  it('dates history by date and commit, never by session numbers, in the pages, the code, the UI and the model cards', () => {
    const models = readdirSync(join(ROOT, 'models')).map((m) => `models/${m}/README.md`).filter((f) => existsSync(join(ROOT, f)));
    const texts = ['README.md', ...walk('docs'), ...walk('src'), ...walk('workers'), ...models].filter((f) => /\.(md|ts|svelte|js|json|html|css)$/.test(f));
    expect(texts.length).toBeGreaterThan(100);
    // \s: a number on the next line of a wrapped paragraph counts too.
    const numbered = texts.filter((f) => /[Ss]essions?\s+[0-9]/.test(readFileSync(join(ROOT, f), 'utf8')));
    expect(numbered).toEqual([]);
  });

  it('reads links the way a Markdown viewer does (a check on the reader)', () => {
    const md = 'See [a](docs/a.md#x), ![img](figures/b.png "title"), [web](https://x.org), [top](#here),\n`[code](not/a/link)`\n```\n[fenced](nope)\n```\n[dir](../research/)';
    expect(relativeLinks(md)).toEqual(['docs/a.md#x', 'figures/b.png', '../research/']);
  });
});
