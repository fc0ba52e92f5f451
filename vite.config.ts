import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { svelte } from '@sveltejs/vite-plugin-svelte';

// Cross-origin isolation lets the CPU fast path share memory between Web Workers (SharedArrayBuffer). The dev
// and preview servers send the headers; on a static host that cannot, the build's service worker adds them
// (public/coi-sw.js, registered by src/ui/isolation.ts).
const isolation = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
};

const ROOT = dirname(fileURLToPath(import.meta.url));

/**
 * The version of the files the service worker caches (the bundled models and the retail data under public/):
 * a hash of their paths and contents, so a build with other files starts a fresh cache in every visitor's
 * browser and a rebuild of the same files keeps it.
 */
function cachedFilesVersion(): string {
  const h = createHash('sha256');
  const walk = (dir: string): void => {
    for (const n of readdirSync(dir).sort()) {
      const p = join(dir, n);
      if (statSync(p).isDirectory()) walk(p);
      else h.update(relative(ROOT, p)).update('\0').update(readFileSync(p));
    }
  };
  for (const d of ['public/models', 'public/data']) if (existsSync(join(ROOT, d))) walk(join(ROOT, d));
  return h.digest('hex').slice(0, 16);
}

// The base path comes from `vite build --base=/repo/` (GitHub Pages serves a project under /<repo>/).
export default defineConfig(({ command }) => ({
  plugins: [svelte()],
  // Decided by the command, not by import.meta.env.DEV, which a build run under vitest (NODE_ENV=test) has true.
  define: { __LAB_FILES_VERSION__: JSON.stringify(command === 'build' ? cachedFilesVersion() : null) },
  server: { headers: isolation },
  preview: { headers: isolation },
  worker: { format: 'es' },
  optimizeDeps: { exclude: ['onnxruntime-web'] },
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: 'forks',
    env: { XDG_RUNTIME_DIR: '/tmp' },
  },
}));
