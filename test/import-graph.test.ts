// The layering of docs/architecture.md, enforced on the import graph. Every .ts file under src/, workers/,
// bench/, scripts/ and research/ and every .svelte file's <script> blocks are read with TypeScript's own
// ts.preProcessFile (static, type-only, re-exported and dynamic imports all count); each relative import is
// an arrow between two layers. An arrow the layer table below does not allow fails: there are no exceptions.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(new URL(import.meta.url).pathname), '..');
const SCANNED = ['src', 'workers', 'bench', 'scripts', 'research'];

// The library layers, lowest first; each may import those listed (and itself). Everything not listed is a
// "never" arrow. docs/architecture.md gives the rule behind each row.
const LIBRARY = ['src/util', 'src/method', 'src/engine', 'src/env', 'src/model', 'src/train', 'src/rollout', 'src/rl', 'src/eval', 'src/server'];
const MAY_IMPORT: Record<string, string[]> = {
  'src/util': [],
  'src/method': [],
  'src/engine': ['src/util'],
  'src/env': ['src/util'],
  'src/model': ['src/util', 'src/engine'],
  'src/train': ['src/util', 'src/engine', 'src/model'],
  'src/rollout': ['src/util', 'src/method', 'src/engine', 'src/env', 'src/model'],
  'src/rl': ['src/util', 'src/method', 'src/engine', 'src/env', 'src/model', 'src/train', 'src/rollout'],
  'src/eval': ['src/util', 'src/method', 'src/engine', 'src/env', 'src/model', 'src/rollout'],
  'src/server': ['src/util', 'src/method', 'src/engine', 'src/env', 'src/model', 'src/rollout'],
  'src/cli': LIBRARY,
  'src/worker-protocol': ['src/method'],
  'src/ui': ['src/worker-protocol', 'src/method'],
  'src/main': ['src/ui'],
  workers: ['src/util', 'src/method', 'src/engine', 'src/env', 'src/model', 'src/train', 'src/rollout', 'src/rl', 'src/eval', 'src/worker-protocol'],
  bench: ['src/util', 'src/method', 'src/engine', 'src/env', 'src/model', 'src/train', 'src/rollout', 'src/rl', 'src/server'],
  scripts: [...LIBRARY, 'src/cli'],
  // Research stands beside the library at the top: it may use everything, and no row above lists it.
  research: [...LIBRARY, 'src/cli'],
};

function files(dir: string): string[] {
  return readdirSync(join(ROOT, dir)).flatMap((n) => {
    const p = join(dir, n);
    if (statSync(join(ROOT, p)).isDirectory()) return files(p);
    return /\.(ts|svelte)$/.test(n) && !n.endsWith('.d.ts') ? [p] : [];
  });
}

/** The layer of a repository path: src/<dir>, src/<file> for src's own files, else the top folder. */
function layerOf(path: string): string {
  const parts = path.split('/');
  if (parts[0] !== 'src') return parts[0];
  return parts.length > 2 ? `src/${parts[1]}` : `src/${parts[1].replace(/\.(ts|svelte)$/, '')}`;
}

interface Arrow {
  from: string;
  to: string;
  key: string;
}

/** Every relative import of a file (its source text), as `from -> to` with `to` resolved, extension as written. */
function importsOf(path: string, text: string): Arrow[] {
  const code = path.endsWith('.svelte') ? [...text.matchAll(/<script\b[^>]*>([\s\S]*?)<\/script>/g)].map((m) => m[1]).join('\n') : text;
  return ts
    .preProcessFile(code, true, true)
    .importedFiles.map((f) => f.fileName.replace(/\?.*$/, ''))
    .filter((spec) => spec.startsWith('.'))
    .map((spec) => {
      const to = relative(ROOT, resolve(ROOT, dirname(path), spec)).replace(/\.(ts|js)$/, '');
      return { from: path, to, key: `${path} -> ${to}` };
    });
}

/** The arrows that break the table, and layers the table does not know. */
function check(arrows: readonly Arrow[]): { violations: string[]; unknownLayers: Set<string> } {
  const violations: string[] = [];
  const unknownLayers = new Set<string>();
  for (const a of arrows) {
    const [from, to] = [layerOf(a.from), layerOf(a.to)];
    if (from === to) continue;
    if (!(from in MAY_IMPORT)) unknownLayers.add(from);
    if (SCANNED.includes(a.to.split('/')[0]) && !(to in MAY_IMPORT)) unknownLayers.add(to);
    if (MAY_IMPORT[from]?.includes(to)) continue;
    violations.push(`${a.key}   (${from} may import: ${MAY_IMPORT[from]?.join(', ') || 'nothing else'})`);
  }
  return { violations, unknownLayers };
}

const graph = SCANNED.flatMap(files).flatMap((f) => importsOf(f, readFileSync(join(ROOT, f), 'utf8')));

describe('import graph', () => {
  it('reads the graph (a sanity check on the reader)', () => {
    expect(graph.length).toBeGreaterThan(500);
    expect(graph.map((a) => a.key)).toContain('src/model/qwen3.ts -> src/engine/backend');
    expect(importsOf('src/ui/X.svelte', `<script lang="ts">\n  import type { A } from '../worker-protocol';\n</script>\n<p>{a}</p>`)).toEqual([
      { from: 'src/ui/X.svelte', to: 'src/worker-protocol', key: 'src/ui/X.svelte -> src/worker-protocol' },
    ]);
    const dyn = importsOf('src/env/x.ts', `export * from './y';\nconst m = await import('../rl/run');\nimport '../model/z.ts';`).map((a) => a.to);
    expect(dyn).toEqual(['src/env/y', 'src/rl/run', 'src/model/z']);
  });

  it('has no arrow the layering forbids', () => {
    const { violations, unknownLayers } = check(graph);
    expect([...unknownLayers], 'a layer missing from the table (and from docs/architecture.md)').toEqual([]);
    expect(violations, 'imports against the layering (docs/architecture.md)').toEqual([]);
  });

  it('every layer of the table is in docs/architecture.md', () => {
    const doc = readFileSync(join(ROOT, 'docs/architecture.md'), 'utf8');
    for (const layer of Object.keys(MAY_IMPORT)) expect(doc, layer).toContain(`\`${layer}\``);
  });

  it('flags a forbidden arrow', () => {
    expect(check(importsOf('src/engine/x.ts', `import { judge } from '../env/judge';`)).violations).toHaveLength(1);
    expect(check(importsOf('src/env/retail/expert.ts', `import { Rng } from '../../util/rng';`)).violations).toEqual([]);
    expect(check(importsOf('src/env/retail/tools.ts', `import { sample } from '../../engine/sampling';`)).violations).toHaveLength(1);
    expect(check(importsOf('src/ui/x.ts', `import { MODES } from '../method/modes';`)).violations).toEqual([]);
    expect(check(importsOf('src/ui/x.ts', `import { grpoUpdate } from '../rl/grpo';`)).violations).toHaveLength(1);
    expect(check(importsOf('src/rollout/x.ts', `import { evaluateHeldOut } from '../eval/evaluate';`)).violations).toHaveLength(1);
    expect(check(importsOf('bench/suites/x.ts', `import { nodeGpu } from '../../test/helpers/gpu';`)).violations).toHaveLength(1);
    expect(check(importsOf('src/newlayer/x.ts', `import { Rng } from '../util/rng';`)).unknownLayers).toEqual(new Set(['src/newlayer']));
  });

  it('keeps research beside the library: research may import it, nothing in the library imports research', () => {
    expect(graph.some((a) => a.from.startsWith('research/') && a.to.startsWith('src/')), 'the reader sees research/').toBe(true);
    expect(check(importsOf('research/pretrain/x.ts', `import { Rng } from '../../src/util/rng';\nimport { parseFlags } from '../../src/cli/args';`)).violations).toEqual([]);
    expect(check(importsOf('research/scripts/x.ts', `import { meanCI } from '../ablation/stats';`)).violations).toEqual([]);
    for (const [from, spec] of [
      ['src/rl/x.ts', '../../research/ablation/stats'],
      ['src/cli/x.ts', '../../research/pretrain/pipeline'],
      ['src/ui/x.svelte', '../../research/ablation/stats'],
      ['workers/lab/x.ts', '../../research/pretrain/data'],
      ['bench/suites/x.ts', '../../research/ablation/stats'],
      ['scripts/x.ts', '../research/scripts/plots'],
    ]) {
      const text = from.endsWith('.svelte') ? `<script lang="ts">\n  import { x } from '${spec}';\n</script>` : `import { x } from '${spec}';`;
      expect(check(importsOf(from, text)).violations, `${from} -> ${spec}`).toHaveLength(1);
    }
  });
});
