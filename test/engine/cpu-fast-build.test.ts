// The committed wasm (src/engine/cpu/fast/wasm.gen.ts) must be exactly what `npm run build:wasm` makes
// from the AssemblyScript sources: rebuild it in memory and compare byte for byte.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { buildWasmModule, OUTPUT } from '../../scripts/build-wasm';

describe('cpu-fast wasm build', () => {
  it('rebuilds the committed kernels byte-identically', async () => {
    const rebuilt = await buildWasmModule();
    const committed = readFileSync(OUTPUT, 'utf8');
    // Compare lengths first so a mismatch does not print 30 KB of base64.
    expect(rebuilt.length).toBe(committed.length);
    expect(rebuilt === committed, 'src/engine/cpu/fast/wasm.gen.ts is stale: run npm run build:wasm').toBe(true);
  });
});
