// Issue 49: "no test back-channels in product code". Tests reach the lab only through what a user has: its
// pages, its controls and readouts, and the worker's protocol (src/worker-protocol.ts). The real-size E2E reads
// the policy's memory from the lab's "Memory now" readout (PolicyApi.memory), not from a hook on the worker's
// global scope. This test holds that no product file (src/, workers/) hangs anything on `self`, `window` or
// `globalThis` under a double-underscore name, the usual shape of such a hook.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(new URL(import.meta.url).pathname), '../..');

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? files(p) : /\.(ts|svelte)$/.test(n) ? [p] : [];
  });
}

describe('no test back-channels in product code', () => {
  it('no file under src/ or workers/ exposes a __name on self, window or globalThis', () => {
    const hooks: string[] = [];
    for (const f of [...files(join(ROOT, 'src')), ...files(join(ROOT, 'workers'))]) {
      readFileSync(f, 'utf8')
        .split('\n')
        .forEach((line, i) => {
          if (/\b(self|window|globalThis)\b[^;]*\.__[A-Za-z]/.test(line)) hooks.push(`${relative(ROOT, f)}:${i + 1}: ${line.trim()}`);
        });
    }
    expect(hooks).toEqual([]);
  });

  it("the policy's memory is a request of the worker's protocol", () => {
    const protocol = readFileSync(join(ROOT, 'src/worker-protocol.ts'), 'utf8');
    expect(protocol).toMatch(/\n\s+memory\(\): MemoryNow \| null;/);
  });
});
